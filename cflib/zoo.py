"""The trained networks of the book, each built through the cache.

Cache keys hold the dataset, the architecture, every hyperparameter, the seed and
the profile, so no weight is shared across datasets or profiles by accident.
"""
from __future__ import annotations

from cflib.data import canonical_dataset, class_subset, load_split, subsample
from cflib.models import C3LTClassifier, FeatureNet
from cflib.profiles import Profile, get_profile
from cflib.training import accuracy, cached, train_autoencoder, train_classifier


def _base(kind, dataset, profile: Profile, seed, **hp):
    return {"kind": kind, "dataset": dataset, "profile": profile.name, "seed": seed, **hp}


def _trained_classifier(kind: str, arch: str, build, dataset: str, profile: Profile,
                        seed: int, epochs: int, device, use_cache: bool):
    """A classifier trained with Adam (lr 1e-3, batch 128) on ``profile.train_subset``
    training images, through the cache; ``info["test_accuracy"]`` on the full test split."""
    cfg = _base(kind, dataset, profile, seed, arch=arch, epochs=epochs, lr=1e-3,
                batch_size=128, train_subset=profile.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.train_subset, seed)
        train_classifier(model, x, y, epochs, lr=1e-3, seed=seed,
                         desc=f"{kind.replace('_', ' ')} {dataset}")
        return {"test_accuracy": accuracy(model, *load_split(dataset, "test"))}

    return cached(kind, cfg, build, train, device, use_cache)


def classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
               use_cache: bool = True):
    """The C3LT CNN, trained with Adam (lr 1e-3, batch 128); returns (model, info).

    ``info["test_accuracy"]`` is the accuracy on the full test split, in [0, 1].
    """
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    return _trained_classifier("classifier", "C3LTClassifier", C3LTClassifier, dataset,
                               profile, seed, profile.clf_epochs, device, use_cache)


def feature_net(dataset: str, profile="standard", seed: int = 0, device="cpu",
                use_cache: bool = True):
    """The FID/KID feature network (128-d), trained as a classifier on the dataset
    (seed + 1000: independent of the explained classifier)."""
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    return _trained_classifier("feature_net", "FeatureNet-128", FeatureNet, dataset, profile,
                               seed + 1000, profile.feat_epochs, device, use_cache)


#: the class-specific autoencoder architecture of IM1/IM2, chosen on the validation pairs
#: (MNIST 7->2, Fashion-MNIST 1->3) by ``python -m cflib.tuning im_autoencoder``: the one
#: whose IM1 best separates real target-class from real query-class held-out training
#: images (``results/tuning/im_autoencoder.csv``; a test keeps the two in agreement)
IM_CLASS_AE = "dense-20"
#: the all-class autoencoder (IM2, CEM's and PSCE's loss terms): the reference one
ALL_CLASS_AE = "conv-1x14x14"
AE_VAL_FRACTION = 0.1


def autoencoder_split(dataset: str, cls: int | None, profile="standard", seed: int = 0):
    """The training images of an autoencoder and its held-out validation images: the
    train split (of class ``cls``, or all classes), ``profile.ae_subset`` of them, split
    by a seeded permutation into (1 - AE_VAL_FRACTION, AE_VAL_FRACTION)."""
    from cflib.data import holdout

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    x, y = load_split(dataset, "train")
    if cls is not None:
        x, y = class_subset(x, y, cls)
    x, _ = subsample(x, y, profile.ae_subset, seed)
    return holdout(x, AE_VAL_FRACTION, seed)


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
    from cflib.models.autoencoder import make_autoencoder
    from cflib.training import reconstruction_mse

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    arch = arch or (ALL_CLASS_AE if cls is None else IM_CLASS_AE)
    make_autoencoder(arch)  # an unknown architecture fails before any training
    epochs = profile.ae_all_epochs if cls is None else profile.ae_class_epochs
    cfg = _base("autoencoder", dataset, profile, seed, arch=arch, cls=cls, max_epochs=epochs,
                patience=profile.ae_patience, val_fraction=AE_VAL_FRACTION, lr=1e-3,
                batch_size=128, subset=profile.ae_subset)

    def train(model):
        x, x_val = autoencoder_split(dataset, cls, profile, seed)
        info = train_autoencoder(model, x, epochs, seed=seed, x_val=x_val,
                                 patience=profile.ae_patience,
                                 desc=f"AE {arch} {dataset} {'all' if cls is None else cls}")
        xt, yt = load_split(dataset, "test")
        if cls is not None:
            xt, yt = class_subset(xt, yt, cls)
        return {**info, "test_mse": reconstruction_mse(model, xt)}

    return cached("autoencoder", cfg, lambda: make_autoencoder(arch), train, device, use_cache)


def _dcgan_config(dataset: str, profile: Profile, seed: int) -> dict:
    return _base("dcgan", dataset, profile, seed, arch="DCGAN-28 nz100 ngf64 ndf64",
                 epochs=profile.dcgan_epochs, lr=2e-4, beta1=0.5, batch_size=64,
                 subset=profile.dcgan_subset)


def dcgan(dataset: str, profile="standard", seed: int = 0, device="cpu",
          use_cache: bool = True):
    """The DCGAN of the C3LT code (latent 100, ngf=ndf=64, 28x28, tanh), trained on TRAIN.

    PyTorch-examples DCGAN loop: Adam lr 2e-4, betas (0.5, 0.999), batch 64,
    ``dcgan_epochs`` epochs on ``dcgan_subset`` images of all classes.  Returns
    ``((generator, discriminator), info)``; both come from one cached module.
    """
    from cflib.models.dcgan import DCGAN, train_dcgan

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    cfg = _dcgan_config(dataset, profile, seed)

    def train(gan):
        x, y = subsample(*load_split(dataset, "train"), profile.dcgan_subset, seed)
        return train_dcgan(gan, x, profile.dcgan_epochs, lr=2e-4, beta1=0.5,
                           batch_size=64, seed=seed, desc=f"DCGAN {dataset}")

    gan, info = cached("dcgan", cfg, DCGAN, train, device, use_cache)
    return (gan.generator.eval(), gan.discriminator.eval()), info


def c3lt_encoder(dataset: str, profile="standard", seed: int = 0, device="cpu",
                 use_cache: bool = True):
    """The C3LT image->latent encoder (``EncoderDCGAN``) that inverts :func:`dcgan`'s generator.

    Trained ``encoder_epochs`` epochs on the same ``dcgan_subset`` TRAIN images
    (Adam lr 1e-3, batch 128) with ``|G(E(x)) - x|_1 + |E(G(z)) - z|^2``; the cache
    key holds the generator's key, so a retrained GAN gets a new encoder.
    ``info["test_recon_l1"]`` is the mean |G(E(x)) - x| on 1000 test images.
    """
    import torch

    from cflib.models.dcgan import EncoderDCGAN, train_encoder
    from cflib.training import cache_key

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    cfg = _base("c3lt_encoder", dataset, profile, seed, arch="EncoderDCGAN-100",
                epochs=profile.encoder_epochs, lr=1e-3, batch_size=128,
                latent_weight=1.0, subset=profile.dcgan_subset,
                generator=cache_key(_dcgan_config(dataset, profile, seed)))

    def train(enc):
        (G, _), _ = dcgan(dataset, profile, seed, next(enc.parameters()).device, use_cache)
        x, y = subsample(*load_split(dataset, "train"), profile.dcgan_subset, seed)
        info = train_encoder(enc, G, x, profile.encoder_epochs, lr=1e-3, batch_size=128,
                             seed=seed, desc=f"C3LT encoder {dataset}")
        xt, yt = subsample(*load_split(dataset, "test"), 1000, seed)
        with torch.no_grad():
            dev = next(enc.parameters()).device
            err = sum((G(enc(xt[i:i + 250].to(dev))) - xt[i:i + 250].to(dev)).abs().sum().item()
                      for i in range(0, len(xt), 250)) / xt.numel()
        return {**info, "test_recon_l1": err}

    return cached("c3lt_encoder", cfg, EncoderDCGAN, train, device, use_cache)


# -- Bayesian classifiers of the Duell & Fan (2026) chapter ---------------------------------
BAYES_N_SAMPLES = 20  # posterior samples per prediction (MC-dropout masks / BNN weight draws)


def mc_dropout_classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
                          use_cache: bool = True):
    """The C3LT CNN trained with dropout 0.5 and used with dropout on (MC dropout).

    Adam (lr 1e-3, batch 128) for ``profile.bayes_epochs`` epochs on the train split;
    predictions average the softmax over ``BAYES_N_SAMPLES`` fixed dropout masks
    (``sample_seed = seed``).  Returns (model, info); ``info["test_accuracy"]`` is the
    accuracy of the posterior-mean prediction on the full test split,
    ``info["test_accuracy_deterministic"]`` that of the dropout-off network.
    """
    from cflib.models.bayesian import MCDropoutCNN, predictive_accuracy

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    cfg = _base("mc_dropout_classifier", dataset, profile, seed, arch="MCDropoutCNN",
                p=0.5, epochs=profile.bayes_epochs, lr=1e-3, batch_size=128,
                train_subset=profile.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.train_subset, seed)
        train_classifier(model, x, y, profile.bayes_epochs, lr=1e-3, seed=seed,
                         desc=f"MC-dropout CNN {dataset}")
        xt, yt = load_split(dataset, "test")
        return {"test_accuracy": predictive_accuracy(model, xt, yt),
                "test_accuracy_deterministic": accuracy(model, xt, yt)}

    return cached("mc_dropout_classifier", cfg,
                  lambda: MCDropoutCNN(p=0.5, n_samples=BAYES_N_SAMPLES, sample_seed=seed),
                  train, device, use_cache)


def bnn_classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
                   use_cache: bool = True):
    """A Bayes-by-Backprop network (C3LT trunk, mean-field Gaussian FC layers).

    ELBO with Adam (lr 1e-3, batch 128, prior N(0, 0.1^2), sigma initialised at
    softplus(-5)) for ``profile.bayes_epochs`` epochs on the train split; predictions
    average the softmax over ``BAYES_N_SAMPLES`` fixed weight draws.  Returns
    (model, info) as :func:`mc_dropout_classifier`.
    """
    from cflib.models.bayesian import BayesByBackpropCNN, predictive_accuracy, train_bnn

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    cfg = _base("bnn_classifier", dataset, profile, seed, arch="BayesByBackpropCNN",
                prior_sigma=0.1, rho_init=-5.0, epochs=profile.bayes_epochs, lr=1e-3,
                batch_size=128, train_subset=profile.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.train_subset, seed)
        elbo = train_bnn(model, x, y, profile.bayes_epochs, lr=1e-3, seed=seed,
                         desc=f"BNN {dataset}")
        xt, yt = load_split(dataset, "test")
        return {"test_accuracy": predictive_accuracy(model, xt, yt),
                "test_accuracy_deterministic": accuracy(model, xt, yt), **elbo}

    return cached("bnn_classifier", cfg,
                  lambda: BayesByBackpropCNN(prior_sigma=0.1, rho_init=-5.0,
                                             n_samples=BAYES_N_SAMPLES, sample_seed=seed),
                  train, device, use_cache)


# -- the quantization chapter (Yahyati et al. 2026; QUANT.md 3, 6 and 7) ---------------------
def quant_pool(dataset: str, profile="standard", seed: int = 0):
    """The chapter's training pool (QUANT.md 6.1): ``quant_train_subset`` training images
    drawn with ``seed``, then a seeded permutation splits off ``quant_val_fraction`` of them
    for validation, calibration and initialisation (5,000 -> 4,500 / 500 at standard, as
    the code).  Returns a :class:`cflib.quantization.methods.Pool`; an empty split is a
    ValueError naming the profile fields to raise."""
    import torch

    from cflib.quantization.methods import Pool

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    frac = float(profile.quant_val_fraction)
    if not 0 <= frac < 1:
        raise ValueError(f"quant_val_fraction must be in [0, 1), got {frac}")
    x, y = subsample(*load_split(dataset, "train"), profile.quant_train_subset, seed)
    n_val = int(round(frac * len(x)))
    if n_val < 1 or n_val >= len(x):
        raise ValueError(
            f"the calibration set is empty: quant_val_fraction={frac} of {len(x)} pool images "
            f"gives {n_val} validation images and {len(x) - n_val} training images; raise "
            "quant_val_fraction (or quant_train_subset) so that both are non-empty")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    val, train = perm[:n_val], perm[n_val:]
    return Pool(x[train], y[train], x[val], y[val])


def _pool_spec(profile: Profile, seed: int) -> dict:
    return {"train_subset": profile.quant_train_subset, "val_fraction": profile.quant_val_fraction,
            "seed": seed}


def quant_test_split(dataset: str, profile="standard", seed: int = 0):
    """The images Accuracy is measured on: the full test split (deviation (e); the code uses
    its ~115 queries), or ``quant_test_subset`` of them drawn with ``seed + 2``."""
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    return subsample(*load_split(dataset, "test"), profile.quant_test_subset, seed + 2)


def _timed(fn):
    import time

    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def small_cnn(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
              use_cache: bool = True):
    """The chapter's FP32 SmallCNN: AdamW (lr 1e-3, weight decay 1e-4), batch 128,
    ``quant_clf_epochs`` epochs on the pool's training images, no selection (the code's
    ``_train_classifier``).  ``info``: ``train_seconds`` (T_fp of Overhead, stored so a
    cached re-run reproduces it) and ``test_accuracy`` (:func:`quant_test_split`)."""
    from cflib.models import SmallCNN

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    epochs = profile.quant_clf_epochs
    cfg = _base("small_cnn", dataset, profile, seed, arch="SmallCNN-64", epochs=epochs,
                optimizer="AdamW", lr=1e-3, weight_decay=1e-4, batch_size=128,
                data=_pool_spec(profile, seed), test_subset=profile.quant_test_subset)

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        secs = _timed(lambda: train_classifier(model, pool.x_train, pool.y_train, epochs,
                                               lr=1e-3, seed=seed, weight_decay=1e-4,
                                               desc=f"SmallCNN {dataset}"))
        return {"train_seconds": secs,
                "test_accuracy": accuracy(model, *quant_test_split(dataset, profile, seed))}

    return cached("small_cnn", cfg, SmallCNN, train, device, use_cache)


def latent_autoencoder(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
                       use_cache: bool = True):
    """The recourse solver's autoencoder (latent 32): Adam 1e-3, MSE, batch 128,
    ``quant_ae_epochs`` epochs on the pool's training images of all classes; then the
    per-dimension statistics of their codes (``fit_latent_stats``), kept in the cache.
    ``info``: ``train_seconds``, ``test_mse`` (on 1,000 test images, [-1, 1] scale)."""
    import torch

    from cflib.models import LatentAutoencoder

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    epochs = profile.quant_ae_epochs
    cfg = _base("latent_autoencoder", dataset, profile, seed, arch="LatentAutoencoder-32",
                epochs=epochs, lr=1e-3, batch_size=128, data=_pool_spec(profile, seed))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        secs = _timed(lambda: train_autoencoder(model, pool.x_train, epochs, seed=seed,
                                                desc=f"latent AE {dataset}"))
        model.fit_latent_stats(pool.x_train)
        xt, _ = subsample(*load_split(dataset, "test"), 1000, seed)
        with torch.no_grad():
            dev = next(model.parameters()).device
            mse = ((model(xt.to(dev)) - xt.to(dev)) ** 2).mean().item()
        return {"train_seconds": secs, "test_mse": mse}

    return cached("latent_autoencoder", cfg, LatentAutoencoder, train, device, use_cache)


def kd_student(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
               use_cache: bool = True, *, fp=None, temperature: float = 2.0, alpha: float = 0.5,
               epochs: int | None = None):
    """KD+Quant's student: a fresh SmallCNN (seed + 1) trained for ``epochs`` (default
    ``quant_clf_epochs``) on ``alpha CE + (1 - alpha) T^2 KL`` against the FP model ``fp``
    (default :func:`small_cnn`), with the FP recipe's optimiser.  The key holds the FP
    model's fingerprint.  ``info``: ``train_seconds``, ``test_accuracy``."""
    from cflib.models import SmallCNN
    from cflib.quantization.methods import train_kd_student
    from cflib.training import fingerprint

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    epochs = profile.quant_clf_epochs if epochs is None else int(epochs)
    if fp is None:
        fp, _ = small_cnn(dataset, profile, seed, device, use_cache)
    cfg = _base("kd_student", dataset, profile, seed + 1, arch="SmallCNN-64", epochs=epochs,
                kd_temperature=temperature, kd_alpha=alpha, optimizer="AdamW", lr=1e-3,
                weight_decay=1e-4, batch_size=128, data=_pool_spec(profile, seed),
                test_subset=profile.quant_test_subset, teacher=fingerprint(fp))

    def train(model):
        pool = quant_pool(dataset, profile, seed)
        secs = _timed(lambda: train_kd_student(model, fp, pool.x_train, pool.y_train, epochs,
                                               temperature, alpha, seed=seed + 1,
                                               desc=f"KD student {dataset}"))
        return {"train_seconds": secs,
                "test_accuracy": accuracy(model, *quant_test_split(dataset, profile, seed))}

    return cached("kd_student", cfg, SmallCNN, train, device, use_cache)


def quantized(method: str, dataset: str = "fmnist", profile="standard", seed: int = 0,
              device="cpu", use_cache: bool = True, *, target: int = 0, config=None, fp=None,
              autoencoder=None):
    """A compressed SmallCNN of the quantization table, through the cache.

    ``method`` is a row of :data:`cflib.quantization.QUANT_METHODS` (its config with the
    profile's epochs), or any label when ``config`` is given (the sweep's and check
    rows' variants).  ``fp`` / ``autoencoder`` default to :func:`small_cnn` /
    :func:`latent_autoencoder`; the key holds the method, its config, the target, the
    data-pool spec and the fingerprints of both.  ``info``: ``compress_seconds`` (T_m of
    Overhead; KD+Quant's includes its student's training), ``test_accuracy``, the bits
    (``bits``, ``avg_weight_bits``, ``avg_act_bits``, ``bit_cost``) and, where they
    apply, ``teacher_success``, ``sparsity``, ``student_seconds``.
    """
    from dataclasses import asdict

    from cflib.explainers.base import as_target
    from cflib.quantization.methods import build_quant_model, compress, method_config
    from cflib.training import fingerprint

    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    config = method_config(method, profile) if config is None else config
    t = int(as_target(target, 1, "cpu")[0])
    if fp is None:
        fp, _ = small_cnn(dataset, profile, seed, device, use_cache)
    if autoencoder is None:
        autoencoder, _ = latent_autoencoder(dataset, profile, seed, device, use_cache)
    cfg = _base("quantized", dataset, profile, seed, method=method,
                recipe=type(config).__name__, config=asdict(config), target=t,
                data=_pool_spec(profile, seed), test_subset=profile.quant_test_subset,
                fp=fingerprint(fp), autoencoder=fingerprint(autoencoder))

    def train(q):
        pool = quant_pool(dataset, profile, seed)
        student, sinfo = None, {}
        if getattr(config, "kd", False):
            student, sinfo = kd_student(dataset, profile, seed, device, use_cache, fp=fp,
                                        temperature=config.kd_temperature,
                                        alpha=config.kd_alpha, epochs=config.student_epochs)
        info = compress(q, config, fp, pool, autoencoder=autoencoder, target=t, seed=seed,
                        student=student, desc=f"{method} {dataset}")
        if student is not None:
            info["student_seconds"] = float(sinfo["train_seconds"])
            info["compress_seconds"] += info["student_seconds"]
        info["test_accuracy"] = accuracy(q, *quant_test_split(dataset, profile, seed))
        return info

    return cached("quantized", cfg, lambda: build_quant_model(config), train, device, use_cache)
