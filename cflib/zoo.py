"""The trained networks of the book, each built through the cache.

Cache keys hold the dataset, the architecture, every hyperparameter, the seed and
the profile, so no weight is shared across datasets or profiles by accident.
"""
from __future__ import annotations

from cflib.data import canonical_dataset, class_subset, load_split, subsample
from cflib.models import C3LTClassifier, ConvAutoencoder, FeatureNet
from cflib.profiles import Profile, get_profile
from cflib.training import accuracy, cached, train_autoencoder, train_classifier


def _base(kind, dataset, profile: Profile, seed, **hp):
    return {"kind": kind, "dataset": dataset, "profile": profile.name, "seed": seed, **hp}


def classifier(dataset: str, profile="standard", seed: int = 0, device="cpu",
               use_cache: bool = True):
    """The C3LT CNN, trained with Adam (lr 1e-3, batch 128); returns (model, info).

    ``info["test_accuracy"]`` is the accuracy on the full test split, in [0, 1].
    """
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    cfg = _base("classifier", dataset, profile, seed, arch="C3LTClassifier",
                epochs=profile.clf_epochs, lr=1e-3, batch_size=128,
                train_subset=profile.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.train_subset, seed)
        train_classifier(model, x, y, profile.clf_epochs, lr=1e-3, seed=seed,
                         desc=f"classifier {dataset}")
        return {"test_accuracy": accuracy(model, *load_split(dataset, "test"))}

    return cached("classifier", cfg, C3LTClassifier, train, device, use_cache)


def feature_net(dataset: str, profile="standard", seed: int = 0, device="cpu",
                use_cache: bool = True):
    """The FID/KID feature network (128-d), trained as a classifier on the dataset."""
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    seed = seed + 1000  # independent of the explained classifier
    cfg = _base("feature_net", dataset, profile, seed, arch="FeatureNet-128",
                epochs=profile.feat_epochs, lr=1e-3, batch_size=128,
                train_subset=profile.train_subset)

    def train(model):
        x, y = subsample(*load_split(dataset, "train"), profile.train_subset, seed)
        train_classifier(model, x, y, profile.feat_epochs, lr=1e-3, seed=seed,
                         desc=f"feature net {dataset}")
        return {"test_accuracy": accuracy(model, *load_split(dataset, "test"))}

    return cached("feature_net", cfg, FeatureNet, train, device, use_cache)


def autoencoder(dataset: str, cls: int | None, profile="standard", seed: int = 0,
                device="cpu", use_cache: bool = True):
    """A conv autoencoder on one class (``cls``) or on all classes (``cls=None``)."""
    dataset, profile = canonical_dataset(dataset), get_profile(profile)
    epochs = profile.ae_all_epochs if cls is None else profile.ae_class_epochs
    cfg = _base("autoencoder", dataset, profile, seed, arch="ConvAutoencoder-16",
                cls=cls, epochs=epochs, lr=1e-3, batch_size=128, subset=profile.ae_subset)

    def train(model):
        x, y = load_split(dataset, "train")
        if cls is not None:
            x, y = class_subset(x, y, cls)
        x, _ = subsample(x, y, profile.ae_subset, seed)
        train_autoencoder(model, x, epochs, seed=seed,
                          desc=f"AE {dataset} {'all' if cls is None else cls}")
        xt, yt = load_split(dataset, "test")
        if cls is not None:
            xt, yt = class_subset(xt, yt, cls)
        import torch
        with torch.no_grad():
            dev = next(model.parameters()).device
            mse = sum(((model(xt[i:i + 1000].to(dev)) - xt[i:i + 1000].to(dev)) ** 2).sum().item()
                      for i in range(0, len(xt), 1000)) / xt.numel()
        return {"test_mse": mse}

    return cached("autoencoder", cfg, ConvAutoencoder, train, device, use_cache)
