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
