"""Tensors follow the model's device: every explainer, the metrics and the training loops on
each device this machine has (CUDA tests are skipped, and say so, where there is none).
``make gpu-check`` runs these on a GPU machine."""
from __future__ import annotations

import pytest
import torch

from cflib.bench import catalog
from cflib.metrics import aupc, fid_kid, im1, proximity
from cflib.metrics.distribution import FrozenFeatures
from cflib.models import C3LTClassifier, ConvAutoencoder, LatentAutoencoder
from cflib.models.dcgan import DCGAN, EncoderDCGAN
from cflib.training import accuracy, train_autoencoder, train_classifier

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device on this machine"))]


@pytest.fixture(scope="module")
def nets(bars):
    torch.manual_seed(0)
    x, y = bars
    clf = C3LTClassifier()
    train_classifier(clf, x, y, epochs=1, batch_size=32)
    gan = DCGAN(ngf=8, ndf=8)
    return {"clf": clf.eval(), "ae": ConvAutoencoder().eval(), "gan": gan.eval(),
            "enc": EncoderDCGAN(ndf=8).eval(),
            "lae": LatentAutoencoder().fit_latent_stats(x).eval()}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(catalog.CATALOG))
def test_every_explainer_runs_on_the_models_device(name, device, nets, bars):
    import copy

    x, y = bars
    n = {k: copy.deepcopy(v).to(device) for k, v in nets.items()}
    data = dict(train=bars, pool=bars, autoencoder=n["ae"], generator=n["gan"].generator,
                discriminator=n["gan"].discriminator, encoder=n["enc"], cache=False,
                latent_autoencoder=n["lae"])
    ex = catalog.build(name, n["clf"], dataset="mnist", profile="smoke", seeds=0, pair=(0, 1),
                       **data)
    cf = ex.explain(x[y == 0][:4].to(device), 1, seed=0)
    assert cf.x_cf.device.type == device and cf.success.device.type == device
    assert torch.isfinite(cf.x_cf).all()


@pytest.mark.parametrize("device", DEVICES)
def test_metrics_and_training_follow_the_device(device, bars):
    x, y = bars
    torch.manual_seed(0)
    clf = C3LTClassifier().to(device)
    train_classifier(clf, x, y, epochs=1, batch_size=64)
    assert 0 <= accuracy(clf, x, y) <= 1
    ae = ConvAutoencoder().to(device)
    train_autoencoder(ae, x[:64], epochs=1, batch_size=32)
    xd = x[:8].to(device)
    assert im1(xd, ae, ae).device.type == device
    assert proximity(xd, xd.flip(0)).device.type == device
    res = aupc(clf, xd, xd.flip(0), y[:8].to(device), (1 - y[:8]).to(device), steps=4)
    assert res.aupc_target.shape == (8,)
    feat = FrozenFeatures(torch.nn.Flatten().to(device), num_features=784)
    fid, kid = fid_kid(xd, xd.flip(0), feat, kid_subset_size=4)
    assert fid == fid and kid == kid          # finite, not NaN
