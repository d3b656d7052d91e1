"""The trained networks of the book, each built through the cache.

Cache keys hold the dataset, the architecture, every hyperparameter, the seed and
the profile, so no weight is shared across datasets or profiles by accident (and
:func:`cflib.cache.cached` adds the device type and the CPU thread count).  Every
function that takes a ``device`` checks it first (:func:`cflib.tensors.check_device`):
``device="cuda"`` without CUDA is a ValueError before any data is read or any network
trained.
"""
from __future__ import annotations

import time
from dataclasses import replace

import torch

from cflib.bench.choices import ALL_CLASS_AE, IM_CLASS_AE
from cflib.bench.data import class_subset, holdout, load_split, subsample
from cflib.bench.profiles import Profile, normalised
from cflib.bench.seeds import Seeds, train_seed
from cflib.cache import cache_key, cached, fingerprint
from cflib.models import (
    C3LTClassifier,
    FeatureNet,
    LatentAutoencoder,
    MLPJudge,
    ResNetJudge,
    SmallCNN,
)
from cflib.models.autoencoder import make_autoencoder
from cflib.models.bayesian import (
    BayesByBackpropCNN,
    MCDropoutCNN,
    predictive_accuracy,
    train_bnn,
)
from cflib.models.dcgan import DCGAN, EncoderDCGAN, train_dcgan, train_encoder
from cflib.quantization.recipes import (
    Pool,
    build_quant_model,
    compress,
    train_kd_student,
)
from cflib.tensors import check_class
from cflib.training import accuracy, reconstruction_mse, train_autoencoder, train_classifier


def _base(kind, dataset, profile: Profile, seed, **hp):
    return {"kind": kind, "dataset": dataset, "profile": profile.name, "seed": seed, **hp}


def _trained_classifier(kind: str, arch: str, build, dataset: str, profile: Profile,
                        seed: int, epochs: int, device, use_cache: bool):
    """A classifier trained with Adam (lr 1e-3, batch 128) on ``profile.train_subset``
    training images, through the cache; ``info["test_accuracy"]`` on the full test split."""
    cfg = _base(kind, dataset, profile, seed, arch=arch, epochs=epochs, lr=1e-3,
                batch_size=128, train_subset=profile.nets.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.nets.train_subset, seed)
        train_classifier(model, x, y, epochs, lr=1e-3, seed=seed,
                         desc=f"{kind.replace('_', ' ')} {dataset}")
        return {"test_accuracy": accuracy(model, *load_split(dataset, "test"))}

    return cached(kind, cfg, build, train, device, use_cache)


@normalised
def classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
               use_cache: bool = True):
    """The C3LT CNN, trained with Adam (lr 1e-3, batch 128); returns (model, info).

    ``info["test_accuracy"]`` is the accuracy on the full test split, in [0, 1].
    """
    return _trained_classifier("classifier", "C3LTClassifier", C3LTClassifier, dataset,
                               profile, train_seed("classifier", seed),
                               profile.nets.clf_epochs, device, use_cache)


@normalised
def feature_net(dataset: str, profile="standard", seed: int = 0, device="cpu",
                use_cache: bool = True):
    """The FID/KID feature network (128-d), trained as a classifier on the dataset
    (its own seed: independent of the explained classifier)."""
    return _trained_classifier("feature_net", "FeatureNet-128", FeatureNet, dataset, profile,
                               train_seed("feature_net", seed), profile.nets.feat_epochs,
                               device, use_cache)


JUDGE_VAL_FRACTION = 0.1


@normalised
def judge_classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
                     use_cache: bool = True):
    """The independent classifier that judges ``Validity (independent classifier)``:
    another architecture than the explained C3LT CNN (the quantization chapter's SmallCNN:
    3x3 convolutions, 64 hidden units, no dropout) and another training seed, trained on
    the same training split less a seeded held-out tenth, Adam (lr 1e-3, batch 128), at
    most ``nets.judge_epochs`` epochs, the epoch with the best accuracy on the held-out
    tenth kept (no test image is used to train or choose it).  ``info["test_accuracy"]``
    on the full test split."""
    return _held_out_judge("judge_classifier", "SmallCNN-64", SmallCNN, "judge", dataset,
                           profile, seed, device, use_cache)


def _held_out_judge(kind: str, arch: str, build, purpose: str, dataset: str, profile: Profile,
                    seed: int, device, use_cache: bool):
    """A judge trained as :func:`judge_classifier` (the training split less a seeded
    held-out tenth, Adam lr 1e-3, batch 128, at most ``nets.judge_epochs`` epochs, the
    best held-out epoch kept), of architecture ``build`` and the seed of ``purpose``."""
    s = train_seed(purpose, seed)
    epochs = profile.nets.judge_epochs
    cfg = _base(kind, dataset, profile, s, arch=arch, epochs=epochs, lr=1e-3, batch_size=128,
                train_subset=profile.nets.train_subset, val_fraction=JUDGE_VAL_FRACTION,
                selection="held-out accuracy")

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.nets.train_subset, s)
        perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(s))
        n_val = max(1, round(JUDGE_VAL_FRACTION * len(x)))
        val, fit = perm[:n_val], perm[n_val:]
        out = train_classifier(model, x[fit], y[fit], epochs, lr=1e-3, seed=s,
                               x_val=x[val], y_val=y[val],
                               desc=f"{kind.replace('_', ' ')} {dataset}")
        return {**out, "test_accuracy": accuracy(model, *load_split(dataset, "test"))}

    return cached(kind, cfg, build, train, device, use_cache)


@normalised
def judge_resnet(dataset: str, profile="standard", seed: int = 0, device="cpu",
                 use_cache: bool = True):
    """The residual-network judge (:class:`~cflib.models.ResNetJudge`: batch norm, global
    average pooling), trained as :func:`judge_classifier` with its own seed."""
    return _held_out_judge("judge_resnet", "ResNet 16-32-64 BN GAP", ResNetJudge,
                           "judge_resnet", dataset, profile, seed, device, use_cache)


@normalised
def judge_mlp(dataset: str, profile="standard", seed: int = 0, device="cpu",
              use_cache: bool = True):
    """The multilayer-perceptron judge (:class:`~cflib.models.MLPJudge`, 784-512-256-10),
    trained as :func:`judge_classifier` with its own seed."""
    return _held_out_judge("judge_mlp", "MLP 784-512-256", MLPJudge, "judge_mlp", dataset,
                           profile, seed, device, use_cache)


#: the judges of transfer validity, by the name their metrics carry: three families
JUDGES = {"SmallCNN": judge_classifier, "ResNet": judge_resnet, "MLP": judge_mlp}
#: what each judge is, in words (the chapters' judges table)
JUDGE_ARCHITECTURES = {
    "SmallCNN": "convolutional, close to the explained CNN: two 3x3 convolutions with max "
                "pooling, 64 hidden units (the quantization chapter's SmallCNN)",
    "ResNet": "residual: a 3x3 stem and two residual blocks (16-32-64 channels) with batch "
              "norm, global average pooling, no hidden fully connected layer",
    "MLP": "not convolutional: a multilayer perceptron on the 784 pixels (512-256 hidden)",
}


def judges(dataset: str, profile="standard", seed: int = 0, device="cpu",
           use_cache: bool = True) -> dict[str, tuple]:
    """Every judge of :data:`JUDGES` of a dataset: ``{name: (model, info)}``."""
    return {name: fn(dataset, profile, seed, device, use_cache) for name, fn in JUDGES.items()}


AE_VAL_FRACTION = 0.1


@normalised
def autoencoder_split(dataset: str, cls: int | None, profile="standard", seed: int = 0):
    """The training images of an autoencoder and its held-out validation images: the
    train split (of class ``cls``, or all classes), ``profile.ae_subset`` of them, split
    by a seeded permutation into (1 - AE_VAL_FRACTION, AE_VAL_FRACTION)."""
    seed = train_seed("autoencoder", seed)
    x, y = load_split(dataset, "train")
    if cls is not None:
        x, y = class_subset(x, y, cls)
    x, _ = subsample(x, y, profile.nets.ae_subset, seed)
    return holdout(x, AE_VAL_FRACTION, seed)


@normalised
def autoencoder(dataset: str, cls: int | None, profile="standard", seed: int = 0,
                device="cpu", use_cache: bool = True, arch: str | None = None):
    """An autoencoder of one class (``cls``) or of all classes (``cls=None``).

    ``arch`` defaults to :data:`IM_CLASS_AE` for a class and :data:`ALL_CLASS_AE` for
    all classes (:func:`cflib.models.autoencoder.make_autoencoder`).  Adam (lr 1e-3,
    batch 128) on the MSE, at most ``ae_class_epochs`` / ``ae_all_epochs`` epochs with
    early stopping (``ae_patience``) on the held-out tenth of
    :func:`autoencoder_split`, whose best epoch is kept.  ``info`` holds the validation
    and test reconstruction errors per pixel and the epochs run.
    """
    arch = arch or (ALL_CLASS_AE if cls is None else IM_CLASS_AE)
    make_autoencoder(arch)  # an unknown architecture fails before any training
    if cls is not None:
        cls = check_class(cls, 10, "autoencoder class")
    epochs = profile.nets.ae_all_epochs if cls is None else profile.nets.ae_class_epochs
    s = train_seed("autoencoder", seed)
    cfg = _base("autoencoder", dataset, profile, s, arch=arch, cls=cls, max_epochs=epochs,
                patience=profile.nets.ae_patience, val_fraction=AE_VAL_FRACTION, lr=1e-3,
                batch_size=128, subset=profile.nets.ae_subset)

    def train(model):
        x, x_val = autoencoder_split(dataset, cls, profile, seed)
        info = train_autoencoder(model, x, epochs, seed=s, x_val=x_val,
                                 patience=profile.nets.ae_patience,
                                 desc=f"AE {arch} {dataset} {'all' if cls is None else cls}")
        xt, yt = load_split(dataset, "test")
        if cls is not None:
            xt, yt = class_subset(xt, yt, cls)
        return {**info, "test_mse": reconstruction_mse(model, xt)}

    return cached("autoencoder", cfg, lambda: make_autoencoder(arch), train, device, use_cache)


def _dcgan_config(dataset: str, profile: Profile, seed: int) -> dict:
    return _base("dcgan", dataset, profile, seed, arch="DCGAN-28 nz100 ngf64 ndf64",
                 epochs=profile.c3lt.dcgan_epochs, lr=2e-4, beta1=0.5, batch_size=64,
                 subset=profile.c3lt.dcgan_subset)


@normalised
def dcgan(dataset: str, profile="standard", seed: int = 0, device="cpu",
          use_cache: bool = True):
    """The DCGAN of the C3LT code (latent 100, ngf=ndf=64, 28x28, tanh), trained on TRAIN.

    PyTorch-examples DCGAN loop: Adam lr 2e-4, betas (0.5, 0.999), batch 64,
    ``dcgan_epochs`` epochs on ``dcgan_subset`` images of all classes.  Returns
    ``((generator, discriminator), info)``; both come from one cached module.
    """
    seed = train_seed("dcgan", seed)
    cfg = _dcgan_config(dataset, profile, seed)
    sizes = profile.c3lt

    def train(gan):
        x, y = subsample(*load_split(dataset, "train"), sizes.dcgan_subset, seed)
        return train_dcgan(gan, x, sizes.dcgan_epochs, lr=2e-4, beta1=0.5,
                           batch_size=64, seed=seed, desc=f"DCGAN {dataset}")

    gan, info = cached("dcgan", cfg, DCGAN, train, device, use_cache)
    return (gan.generator.eval(), gan.discriminator.eval()), info


@normalised
def c3lt_encoder(dataset: str, profile="standard", seed: int = 0, device="cpu",
                 use_cache: bool = True):
    """The C3LT image->latent encoder (``EncoderDCGAN``) that inverts :func:`dcgan`'s generator.

    Trained ``encoder_epochs`` epochs on the same ``dcgan_subset`` TRAIN images
    (Adam lr 1e-3, batch 128) with ``|G(E(x)) - x|_1 + |E(G(z)) - z|^2``; the cache
    key holds the generator's key, so a retrained GAN gets a new encoder.
    ``info["test_recon_l1"]`` is the mean |G(E(x)) - x| on 1000 test images.
    """
    s = train_seed("encoder", seed)
    sizes = profile.c3lt
    cfg = _base("c3lt_encoder", dataset, profile, s, arch="EncoderDCGAN-100",
                epochs=sizes.encoder_epochs, lr=1e-3, batch_size=128,
                latent_weight=1.0, subset=sizes.dcgan_subset,
                generator=cache_key(_dcgan_config(dataset, profile,
                                                  train_seed("dcgan", seed))))

    def train(enc):
        (G, _), _ = dcgan(dataset, profile, seed, next(enc.parameters()).device, use_cache)
        x, y = subsample(*load_split(dataset, "train"), sizes.dcgan_subset, s)
        info = train_encoder(enc, G, x, sizes.encoder_epochs, lr=1e-3, batch_size=128,
                             seed=s, desc=f"C3LT encoder {dataset}")
        xt, yt = subsample(*load_split(dataset, "test"), 1000, s)
        with torch.no_grad():
            dev = next(enc.parameters()).device
            err = sum((G(enc(xt[i:i + 250].to(dev))) - xt[i:i + 250].to(dev)).abs().sum().item()
                      for i in range(0, len(xt), 250)) / xt.numel()
        return {**info, "test_recon_l1": err}

    return cached("c3lt_encoder", cfg, EncoderDCGAN, train, device, use_cache)


PAIR_ENCODER_LR = 1e-4  # fine-tuning a trained encoder: a tenth of its training rate


@normalised
def c3lt_pair_encoder(dataset: str, pair, profile="standard", seed: int = 0, device="cpu",
                      use_cache: bool = True):
    """C3LT's encoder for one class pair: the all-class :func:`c3lt_encoder` fine-tuned
    ``c3lt.pair_encoder_epochs`` epochs on the training images of the pair's two classes
    (the public code ships one encoder's weights per pair; how they were trained is not
    published),
    with the same loss, Adam at :data:`PAIR_ENCODER_LR`.  With 0 epochs, the all-class
    encoder itself.  Returns ``(encoder, info)``; ``info["test_recon_l1"]`` is the mean
    |G(E(x)) - x| on the pair's test images."""
    import copy

    q, t = (check_class(c, 10, "pair class") for c in pair)
    base, base_info = c3lt_encoder(dataset, profile, seed, device, use_cache)
    epochs = profile.c3lt.pair_encoder_epochs
    if epochs == 0:
        return base, base_info
    s = train_seed("encoder", seed)
    cfg = _base("c3lt_pair_encoder", dataset, profile, s, pair=f"{q}->{t}", epochs=epochs,
                lr=PAIR_ENCODER_LR, batch_size=128, latent_weight=1.0,
                start=fingerprint(base))

    def train(enc):
        (G, _), _ = dcgan(dataset, profile, seed, next(enc.parameters()).device, use_cache)
        x, y = class_subset(*load_split(dataset, "train"), [q, t])
        info = train_encoder(enc, G, x, epochs, lr=PAIR_ENCODER_LR, batch_size=128, seed=s,
                             desc=f"C3LT encoder {dataset} {q}->{t}")
        xt, _ = class_subset(*load_split(dataset, "test"), [q, t])
        with torch.no_grad():
            dev = next(enc.parameters()).device
            err = sum((G(enc(xt[i:i + 250].to(dev))) - xt[i:i + 250].to(dev)).abs().sum().item()
                      for i in range(0, len(xt), 250)) / xt.numel()
        return {**info, "test_recon_l1": err}

    return cached("c3lt_pair_encoder", cfg, lambda: copy.deepcopy(base).cpu(), train, device,
                  use_cache)


# -- Bayesian classifiers of the Duell & Fan (2026) chapter ---------------------------------
BAYES_N_SAMPLES = 20  # posterior samples per prediction (MC-dropout masks / BNN weight draws)


@normalised
def mc_dropout_classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
                          use_cache: bool = True):
    """The C3LT CNN trained with dropout 0.5 and used with dropout on (MC dropout).

    Adam (lr 1e-3, batch 128) for ``bayes.epochs`` epochs on the train split;
    predictions average the softmax over ``BAYES_N_SAMPLES`` fixed dropout masks
    (``sample_seed = seed``).  Returns (model, info); ``info["test_accuracy"]`` is the
    accuracy of the posterior-mean prediction on the full test split,
    ``info["test_accuracy_deterministic"]`` that of the dropout-off network.
    """
    seed = train_seed("bayes_model", seed)
    epochs, subset = profile.bayes.epochs, profile.nets.train_subset
    cfg = _base("mc_dropout_classifier", dataset, profile, seed, arch="MCDropoutCNN",
                p=0.5, epochs=epochs, lr=1e-3, batch_size=128, train_subset=subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), subset, seed)
        train_classifier(model, x, y, epochs, lr=1e-3, seed=seed,
                         desc=f"MC-dropout CNN {dataset}")
        xt, yt = load_split(dataset, "test")
        return {"test_accuracy": predictive_accuracy(model, xt, yt),
                "test_accuracy_deterministic": accuracy(model, xt, yt)}

    return cached("mc_dropout_classifier", cfg,
                  lambda: MCDropoutCNN(p=0.5, n_samples=BAYES_N_SAMPLES, sample_seed=seed),
                  train, device, use_cache)


@normalised
def bnn_classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
                   use_cache: bool = True):
    """A Bayes-by-Backprop network (C3LT trunk, mean-field Gaussian FC layers).

    ELBO with Adam (lr 1e-3, batch 128, prior N(0, 0.1^2), sigma initialised at
    softplus(-5)) for ``bayes.epochs`` epochs on the train split; predictions
    average the softmax over ``BAYES_N_SAMPLES`` fixed weight draws.  Returns
    (model, info) as :func:`mc_dropout_classifier`.
    """
    seed = train_seed("bayes_model", seed)
    epochs, subset = profile.bayes.epochs, profile.nets.train_subset
    cfg = _base("bnn_classifier", dataset, profile, seed, arch="BayesByBackpropCNN",
                prior_sigma=0.1, rho_init=-5.0, epochs=epochs, lr=1e-3,
                batch_size=128, train_subset=subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), subset, seed)
        elbo = train_bnn(model, x, y, epochs, lr=1e-3, seed=seed, desc=f"BNN {dataset}")
        xt, yt = load_split(dataset, "test")
        return {"test_accuracy": predictive_accuracy(model, xt, yt),
                "test_accuracy_deterministic": accuracy(model, xt, yt), **elbo}

    return cached("bnn_classifier", cfg,
                  lambda: BayesByBackpropCNN(prior_sigma=0.1, rho_init=-5.0,
                                             n_samples=BAYES_N_SAMPLES, sample_seed=seed),
                  train, device, use_cache)


# -- the quantization chapter (Yahyati et al. 2026) ------------------------------------------
@normalised
def quant_pool(dataset: str, profile="standard", seed: int = 0) -> Pool:
    """The chapter's training pool: ``quant.train_subset`` training images drawn with the
    training seed, then a seeded permutation splits off ``quant.val_fraction`` of them for
    validation, calibration and initialisation (5,000 -> 4,500 / 500 at standard, as the
    public code).  An empty split is a ValueError naming the profile fields to raise."""
    seed = train_seed("quant_pool", seed)      # the pool's own seed from here on
    frac = float(profile.quant.val_fraction)
    if not 0 <= frac < 1:
        raise ValueError(f"quant.val_fraction must be in [0, 1), got {frac}")
    x, y = subsample(*load_split(dataset, "train"), profile.quant.train_subset, seed)
    n_val = int(round(frac * len(x)))
    if n_val < 1 or n_val >= len(x):
        raise ValueError(
            f"the calibration set is empty: quant.val_fraction={frac} of {len(x)} pool images "
            f"gives {n_val} validation images and {len(x) - n_val} training images; raise "
            "val_fraction (or train_subset) so that both are non-empty")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    val, train = perm[:n_val], perm[n_val:]
    return Pool(x[train], y[train], x[val], y[val])


def _pool_spec(profile: Profile, seed: int) -> dict:
    return {"train_subset": profile.quant.train_subset,
            "val_fraction": profile.quant.val_fraction, "seed": seed}


@normalised
def quant_test_split(dataset: str, profile="standard", seed: int = 0):
    """The images Accuracy is measured on: the full test split (the public code uses its
    ~115 queries), or ``quant.test_subset`` of them drawn with the seed of
    ``quant_test``."""
    return subsample(*load_split(dataset, "test"), profile.quant.test_subset,
                     Seeds(data=seed)("quant_test"))


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@normalised
def small_cnn(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
              use_cache: bool = True):
    """The chapter's FP32 SmallCNN: AdamW (lr 1e-3, weight decay 1e-4), batch 128,
    ``quant.clf_epochs`` epochs on the pool's training images, no selection (the code's
    ``_train_classifier``).  ``info``: ``train_seconds`` (T_fp, stored so a cached re-run
    reproduces it) and ``test_accuracy`` (:func:`quant_test_split`)."""
    s = train_seed("quant_model", seed)
    epochs, patience = profile.quant.clf_epochs, profile.quant.clf_patience
    cfg = _base("small_cnn", dataset, profile, s, arch="SmallCNN-64", epochs=epochs,
                optimizer="AdamW", lr=1e-3, weight_decay=1e-4, batch_size=128,
                data=_pool_spec(profile, seed), test_subset=profile.quant.test_subset,
                **({"patience": patience, "selection": "validation accuracy"}
                   if patience else {}))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        sel = {}
        if patience:
            sel = dict(x_val=pool.x_val, y_val=pool.y_val, patience=patience)
        out = {}
        secs = _timed(lambda: out.update(train_classifier(
            model, pool.x_train, pool.y_train, epochs, lr=1e-3, seed=s, weight_decay=1e-4,
            desc=f"SmallCNN {dataset}", **sel)))
        return {"train_seconds": secs, **out,
                "test_accuracy": accuracy(model, *quant_test_split(dataset, profile, seed))}

    return cached("small_cnn", cfg, SmallCNN, train, device, use_cache)


RETRAIN = "FP32 + retrain"


@normalised
def small_cnn_retrained(dataset: str = "fmnist", profile="standard", seed: int = 0,
                        device="cpu", use_cache: bool = True, *, fp=None):
    """The control of the QAT rows, ``FP32 + retrain``: the FP model trained for the QAT
    rows' extra epochs (``quant.qat_epochs``) with their optimiser and batches (AdamW 1e-3,
    weight decay 1e-4, batch 128, gradient-norm clip 10, the pool's training images) and
    no quantization, so that what retraining alone does to recourse is measured.
    ``info``: ``compress_seconds``, ``test_accuracy``."""
    import copy

    if fp is None:
        fp, _ = small_cnn(dataset, profile, seed, device, use_cache)
    s = train_seed("quant_model", seed)
    epochs = profile.quant.qat_epochs
    cfg = _base("small_cnn_retrained", dataset, profile, s, arch="SmallCNN-64", epochs=epochs,
                optimizer="AdamW", lr=1e-3, weight_decay=1e-4, batch_size=128, grad_clip=10.0,
                data=_pool_spec(profile, seed), test_subset=profile.quant.test_subset,
                start=fingerprint(fp))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        secs = _timed(lambda: train_classifier(model, pool.x_train, pool.y_train, epochs,
                                               lr=1e-3, seed=s, weight_decay=1e-4,
                                               grad_clip=10.0, desc=f"{RETRAIN} {dataset}"))
        return {"compress_seconds": secs,
                "test_accuracy": accuracy(model, *quant_test_split(dataset, profile, seed))}

    return cached("small_cnn_retrained", cfg, lambda: copy.deepcopy(fp).cpu(), train, device,
                  use_cache)


@normalised
def latent_autoencoder(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
                       use_cache: bool = True):
    """The recourse solver's autoencoder (latent 32): Adam 1e-3, MSE, batch 128,
    ``quant.ae_epochs`` epochs on the pool's training images of all classes; then the
    per-dimension statistics of their codes (``fit_latent_stats``), kept in the cache.
    ``info``: ``train_seconds``, ``test_mse`` (on 1,000 test images, [-1, 1] scale)."""
    s = train_seed("quant_model", seed)
    epochs = profile.quant.ae_epochs
    cfg = _base("latent_autoencoder", dataset, profile, s, arch="LatentAutoencoder-32",
                epochs=epochs, lr=1e-3, batch_size=128, data=_pool_spec(profile, seed))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        secs = _timed(lambda: train_autoencoder(model, pool.x_train, epochs, seed=s,
                                                desc=f"latent AE {dataset}"))
        model.fit_latent_stats(pool.x_train)
        xt, _ = subsample(*load_split(dataset, "test"), 1000, s)
        with torch.no_grad():
            dev = next(model.parameters()).device
            mse = ((model(xt.to(dev)) - xt.to(dev)) ** 2).mean().item()
        return {"train_seconds": secs, "test_mse": mse}

    return cached("latent_autoencoder", cfg, LatentAutoencoder, train, device, use_cache)


@normalised
def kd_student(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
               use_cache: bool = True, *, fp=None, temperature: float = 2.0, alpha: float = 0.5,
               epochs: int | None = None):
    """KD+Quant's student: a fresh SmallCNN (its own seed) trained for ``epochs`` (default
    ``quant.clf_epochs``) on ``alpha CE + (1 - alpha) T^2 KL`` against the FP model ``fp``
    (default :func:`small_cnn`), with the FP recipe's optimiser.  The key holds the FP
    model's fingerprint.  ``info``: ``train_seconds``, ``test_accuracy``."""
    epochs = profile.quant.clf_epochs if epochs is None else int(epochs)
    if fp is None:
        fp, _ = small_cnn(dataset, profile, seed, device, use_cache)
    student_seed = train_seed("kd_student", seed)
    cfg = _base("kd_student", dataset, profile, student_seed, arch="SmallCNN-64",
                epochs=epochs, selection="best validation epoch",
                kd_temperature=temperature, kd_alpha=alpha, optimizer="AdamW",
                lr=1e-3, weight_decay=1e-4, batch_size=128, data=_pool_spec(profile, seed),
                test_subset=profile.quant.test_subset, teacher=fingerprint(fp),
                **({"patience": profile.quant.clf_patience} if profile.quant.clf_patience
                   else {}))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        out = {}
        secs = _timed(lambda: out.update(train_kd_student(
            model, fp, pool.x_train, pool.y_train, epochs, temperature, alpha, seed=student_seed,
            desc=f"KD student {dataset}", x_val=pool.x_val, y_val=pool.y_val,
            patience=profile.quant.clf_patience)))
        return {"train_seconds": secs, **out,
                "test_accuracy": accuracy(model, *quant_test_split(dataset, profile, seed))}

    return cached("kd_student", cfg, SmallCNN, train, device, use_cache)


@normalised
def recipe_config(name: str, profile="standard"):
    """A row's compression recipe with the epochs of ``profile`` and, for the QAT rows, its
    bit budget, penalty weight and policy learning rate (``quant.bit_budget``,
    ``quant.bit_lambda``, ``quant.policy_lr``; nothing else changes)."""
    from cflib.quantization.recipes import get_recipe, with_epochs

    cfg = get_recipe(name)
    sizes = profile.quant
    if hasattr(cfg, "student_epochs"):
        out = with_epochs(cfg, sizes.qat_epochs, sizes.clf_epochs)
        return replace(out, target_avg_bits=float(sizes.bit_budget),
                       policy_lr=sizes.policy_lr, bit_lambda=float(sizes.bit_lambda))
    return with_epochs(cfg, sizes.calib_epochs)


@normalised
def quantized(method: str, dataset: str = "fmnist", profile="standard", seed: int = 0,
              device="cpu", use_cache: bool = True, *, target: int = 0, config=None, fp=None,
              autoencoder=None):
    """A compressed SmallCNN of the quantization table, through the cache.

    ``method`` is a row of :data:`cflib.quantization.RECIPES` (its config with the
    profile's epochs), or any label when ``config`` is given (the sweep's and check
    rows' variants).  ``fp`` / ``autoencoder`` default to :func:`small_cnn` /
    :func:`latent_autoencoder`; the key holds the method, its config, the target, the
    data-pool spec and the fingerprints of both.  ``info``: ``compress_seconds`` (T_m of
    Overhead; KD+Quant's includes its student's training), ``test_accuracy``, the bits
    (``bits``, ``avg_weight_bits``, ``avg_act_bits``, ``bit_cost``) and, where they
    apply, ``teacher_success``, ``sparsity``, ``student_seconds``.
    """
    from dataclasses import asdict

    config = recipe_config(method, profile) if config is None else config
    t = check_class(target, 10, "target")
    if fp is None:
        fp, _ = small_cnn(dataset, profile, seed, device, use_cache)
    if autoencoder is None:
        autoencoder, _ = latent_autoencoder(dataset, profile, seed, device, use_cache)
    s = train_seed("quant_model", seed)
    cfg = _base("quantized", dataset, profile, s, method=method,
                recipe=type(config).__name__, config=asdict(config), target=t,
                data=_pool_spec(profile, seed), test_subset=profile.quant.test_subset,
                fp=fingerprint(fp), autoencoder=fingerprint(autoencoder))

    def train(q):
        pool = quant_pool(dataset, profile, seed)
        student, sinfo = None, {}
        if getattr(config, "kd", False):
            student, sinfo = kd_student(dataset, profile, seed, device, use_cache, fp=fp,
                                        temperature=config.kd_temperature,
                                        alpha=config.kd_alpha, epochs=config.student_epochs)
        info = compress(q, config, fp, pool, autoencoder=autoencoder, target=t, seed=s,
                        student=student, desc=f"{method} {dataset}")
        if student is not None:
            info["student_seconds"] = float(sinfo["train_seconds"])
            info["compress_seconds"] += info["student_seconds"]
        info["test_accuracy"] = accuracy(q, *quant_test_split(dataset, profile, seed))
        return info

    return cached("quantized", cfg, lambda: build_quant_model(config), train, device, use_cache)
