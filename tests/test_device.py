"""Tensors follow the model's device: every explainer, the metrics and the training loops on
each device this machine has (CUDA tests are skipped, and say so, where there is none).
``make gpu-check`` runs these on a GPU machine."""
from __future__ import annotations

import copy

import pytest
import torch
from test_catalog import check_what_comes_back

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
    x, y = bars
    n = {k: copy.deepcopy(v).to(device) for k, v in nets.items()}
    data = dict(train=bars, pool=bars, autoencoder=n["ae"], generator=n["gan"].generator,
                discriminator=n["gan"].discriminator, encoder=n["enc"], cache=False,
                latent_autoencoder=n["lae"])
    ex = catalog.build(name, n["clf"], dataset="mnist", profile="smoke", seeds=0, pair=(0, 1),
                       **data)
    xq = x[y == 0][:4].to(device)
    cf = ex.explain(xq, 1, seed=0)
    assert cf.x_cf.device.type == device and cf.success.device.type == device
    # the same checks of the result as the catalog's test, on this device
    check_what_comes_back(name, cf, xq, n["clf"], 1, pool_x=x[y == 1])


@pytest.mark.parametrize("device", DEVICES)
def test_metrics_and_training_follow_the_device(device, bars):
    x, y = bars
    torch.manual_seed(0)
    clf = C3LTClassifier().to(device)
    train_classifier(clf, x, y, epochs=1, batch_size=64)
    acc = accuracy(clf, x, y)
    with torch.no_grad():                     # asked of the model on the CPU
        cpu = copy.deepcopy(clf).cpu()
        assert acc == pytest.approx((cpu(x).argmax(1) == y).float().mean().item())
    assert acc > 0.9                          # one epoch separates the bars
    ae = ConvAutoencoder().to(device)
    train_autoencoder(ae, x[:64], epochs=1, batch_size=32)
    xd = x[:8].to(device)
    same = im1(xd, ae, ae)                    # one autoencoder both ways: a ratio of 1
    assert same.device.type == device and torch.allclose(same, torch.ones_like(same), atol=1e-4)
    half = xd.clone()
    half[:, :, :, :14] = -half[:, :, :, :14]
    prox = proximity(xd, half)                # by hand: the mean of 2|x| on the left half
    want = (2 * xd[:, :, :, :14].abs()).flatten(1).sum(1) / 784
    assert prox.device.type == device and torch.allclose(prox, want, atol=1e-6)
    q, t = y[:8].to(device), (1 - y[:8]).to(device)
    x_cf = xd.flip(0)
    res = aupc(clf, xd, x_cf, q, t, steps=4)
    with torch.no_grad():                     # the path starts at the query, ends at the CF
        p0, p1 = torch.softmax(clf(xd), 1), torch.softmax(clf(x_cf), 1)
    start, end = res.target_curve[:, 0], res.target_curve[:, -1]
    assert torch.allclose(start, p0.gather(1, t[:, None]).squeeze(1).cpu(), atol=1e-5)
    assert torch.allclose(end, p1.gather(1, t[:, None]).squeeze(1).cpu(), atol=1e-5)
    # FID of a shifted copy in 4 features is the squared shift (equal covariances)
    g = torch.Generator().manual_seed(0)
    a = torch.randn(200, 1, 1, 4, generator=g).to(device)
    shift = torch.tensor([1.0, -2.0, 0.0, 0.5], device=device).view(1, 1, 1, 4)
    feat = FrozenFeatures(torch.nn.Flatten().to(device), num_features=4)
    fid, kid = fid_kid(a + shift, a, feat, kid_subset_size=50)
    assert fid == pytest.approx(5.25, rel=1e-3) and kid > 0.1
