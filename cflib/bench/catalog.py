"""The catalog: every method of the book's tables, built the way the book builds it.

An explainer class (:mod:`cflib.explainers`) needs a classifier and a config; the book
also decides the sizes (a :class:`~cflib.bench.profiles.Profile`), the trained
networks a method leans on (the book's DCGAN, encoder and autoencoders, from
:mod:`cflib.bench.zoo`), the data a learned method fits on, the choices made on
validation data (:mod:`cflib.bench.choices`) and the seeds.  One call does all of it
for any method::

    from cflib.bench import catalog
    ex = catalog.build("C3LT", classifier, dataset="mnist", profile="smoke",
                       seeds=Seeds(train=0, data=0), pair=(4, 9))

:data:`CATALOG` maps each method name (as the papers spell it) to its :class:`Entry`:
the explainer class, whether it is built per class pair, and its builder.  What
:data:`DATA_KEYS` names can be passed instead of what the builder would load.

Pairs and targets are checked against the classifier's own output width, not the
datasets' ten classes: a 20-class model takes ``pair=(0, 15)`` wherever the method
does not need the dataset's images of those classes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Callable

import torch
from torch import nn

from cflib.bench import zoo
from cflib.bench.choices import expgan_weights, latent_search_lambda
from cflib.bench.data import (
    IMAGE_SHAPES,
    canonical_dataset,
    check_pair,
    class_subset,
    load_split,
)
from cflib.bench.profiles import Profile, get_profile
from cflib.bench.seeds import Seeds
from cflib.explainers import (
    C3LT,
    CEM,
    CVE,
    EXPLAINERS,
    PSCE,
    ROAR,
    AdvAttack,
    AdvAttackConfig,
    BayesCF,
    C3LTConfig,
    C3LTInverted,
    C3LTReconstruction,
    CEMPaperBudget,
    CEMTargeted,
    CVEReceptiveField,
    ExpGAN,
    Explainer,
    LatentRecourse,
    LatentSearch,
    OriginalData,
    QueryUnchanged,
    Schut,
    Wachter,
)
from cflib.names import unknown_name
from cflib.tensors import check_classifier, model_device

#: what ``build(..., **data)`` may be given instead of what the builder would load
DATA_KEYS = {
    "train": "(x, y) training images a learned method fits on (default: the dataset's train "
             "split)",
    "pool": "(x, y) real images to draw from (Original Data: target-class test images; "
            "CVE: distractor candidates)",
    "autoencoder": "the all-class autoencoder of CEM's and PSCE's loss (default: the book's, "
                   "zoo.autoencoder); None: no autoencoder term",
    "generator": "C3LT's frozen DCGAN generator (default: zoo.dcgan)",
    "discriminator": "C3LT's frozen DCGAN discriminator (default: zoo.dcgan)",
    "encoder": "C3LT's frozen encoder (default: zoo.c3lt_encoder)",
    "latent_autoencoder": "Latent PGD's LatentAutoencoder with fitted latent statistics "
                          "(default: zoo.latent_autoencoder)",
    "image_shape": "(C, H, W) of the classifier's inputs, to read its output width "
                   "(default: the dataset's, or the shape of the images given)",
    "cache": "True (default) to keep learned weights in the weight cache, False to train afresh",
    "c3lt_config": "C3LT: config fields to change in its loss (e.g. {'cls_type': 'hinge'}), for "
                   "an ablation",
}


@dataclass
class Request:
    """What a builder gets: the classifier, the dataset (None when the method needs no
    data), the profile, the seeds, the class pair and the ``data`` overrides."""

    classifier: nn.Module
    dataset: str | None
    profile: Profile
    seeds: Seeds
    pair: tuple[int, int] | None
    data: dict = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return model_device(self.classifier)

    @property
    def sizes(self):
        return self.profile.c3lt

    def need_dataset(self, method: str) -> str:
        if self.dataset is None:
            raise ValueError(f"{method} is built from a dataset's images or networks: pass "
                             f"dataset='mnist' or 'fmnist' (or the data it needs: "
                             f"{sorted(DATA_KEYS)})")
        return self.dataset

    def need_pair(self, method: str) -> tuple[int, int]:
        if self.pair is None:
            raise ValueError(f"{method} is built per class pair: pass pair=(query, target)")
        return self.pair

    def train_split(self, method: str):
        if self.data.get("train") is None:          # loaded once per request
            self.data["train"] = load_split(self.need_dataset(method), "train")
        return self.data["train"]

    def class_images(self, method: str, cls: int, n: int | None, seed: int) -> torch.Tensor:
        x, y = self.train_split(method)
        xc, _ = class_subset(x, y, cls, n, seed)
        if len(xc) == 0:
            where = f"dataset {self.dataset!r}" if self.dataset else "train="
            raise ValueError(f"{method}: no training image of class {cls} in {where}; pass "
                             "train=(x, y) with images of both classes of the pair")
        return xc

    def cache(self) -> dict | None:
        if not self.data.get("cache", True):
            return None
        q, t = self.need_pair("a learned method")
        return {"dataset": self.dataset, "pair": f"{q}->{t}", "profile": self.profile.name,
                "seed": self.seeds.train}

    def all_class_autoencoder(self, method: str):
        if "autoencoder" in self.data:      # autoencoder=None: no autoencoder term
            return self.data["autoencoder"]
        ae, _ = zoo.autoencoder(self.need_dataset(method), None, self.profile, self.seeds.train,
                                device=self.device)
        return ae

    def gan(self, method: str):
        """C3LT's generator, discriminator and encoder: the pair's encoder when the
        request has a pair (the public code has one per pair), else the all-class one."""
        G, D, E = (self.data.get(k) for k in ("generator", "discriminator", "encoder"))
        if G is None:
            (G, D), _ = zoo.dcgan(self.need_dataset(method), self.profile, self.seeds.train,
                                  device=self.device)
        if E is None and self.pair is not None:
            E, _ = zoo.c3lt_pair_encoder(self.need_dataset(method), self.pair, self.profile,
                                         self.seeds.train, device=self.device)
        elif E is None:
            E, _ = zoo.c3lt_encoder(self.need_dataset(method), self.profile, self.seeds.train,
                                    device=self.device)
        return G, D, E


@dataclass(frozen=True)
class Entry:
    """One method of the catalog: its explainer class, whether it is built per class pair,
    and the builder that makes it from a :class:`Request`."""

    name: str
    cls: type[Explainer]
    per_pair: bool
    builder: Callable[[Request], Explainer]
    #: the table whose classifier and data the method explains: ``c3lt``, ``bayes``, ``quant``
    table: str = "c3lt"
    #: whether it searches (iterates per query); False: one forward pass or a lookup
    searches: bool = True

    @property
    def compacts(self) -> bool:
        """Whether it drops finished queries from its batch (its config has ``compact``)."""
        return "compact" in {f.name for f in fields(self.cls.Config)}


# -- the builders ------------------------------------------------------------------------------
def _original(r: Request) -> Explainer:
    pool = r.data.get("pool")
    if pool is None:
        pool = load_split(r.need_dataset("Original Data"), "test")
    return OriginalData(r.classifier).fit(*pool)


def _adv(r: Request) -> Explainer:
    steps = r.sizes.adv_steps
    # alpha scaled so that eps is reachable within the steps
    return AdvAttack(r.classifier, steps=steps, alpha=max(2.5 * AdvAttackConfig.eps / steps, 0.01))


def _cem(cls):
    def build(r: Request) -> Explainer:
        return cls(r.classifier, cls.Config(max_iterations=r.sizes.cem_max_iterations,
                                            c_steps=r.sizes.cem_c_steps),
                   autoencoder=r.all_class_autoencoder(cls.name))
    return build


def _cve(cls):
    def build(r: Request) -> Explainer:
        _, t = r.need_pair(cls.name)
        pool = r.data.get("pool")
        if pool is None:
            x, y = r.train_split(cls.name)
            pool = class_subset(x, y, t)
        return cls(r.classifier, cls.Config(n_distractors=r.sizes.cve_n_distractors)).fit(*pool)
    return build


def _expgan(r: Request) -> Explainer:
    q, t = r.need_pair("ExpGAN")
    s = r.seeds("expgan")
    n = r.sizes.c3lt_subset
    xq, xt = r.class_images("ExpGAN", q, n, s), r.class_images("ExpGAN", t, n, s)
    weights = expgan_weights(r.dataset) if r.dataset else {}
    config = ExpGAN.Config(epochs=r.sizes.expgan_epochs, seed=s, **weights)
    return ExpGAN(r.classifier, config).fit(xq, xt, pair=(q, t), cache=r.cache())


#: the public code halves the mappings' learning rate every 25 of its 201 epochs
C3LT_DECAY_FRACTION = 25 / 201


def c3lt_config(sizes, n_pairs: int, seed: int) -> C3LTConfig:
    """C3LT's config at a profile's sizes: ``c3lt_epochs`` epochs of batches of
    ``c3lt_batch`` over ``n_pairs`` image pairs; with ``c3lt_scaled_decay`` the learning
    rate is halved every 25/201 of the updates (the paper's eight halvings, whatever the
    number of epochs), else every 25 epochs as the paper."""
    steps = sizes.c3lt_epochs * -(-n_pairs // sizes.c3lt_batch)
    every = max(1, int(steps * C3LT_DECAY_FRACTION)) if sizes.c3lt_scaled_decay else None
    return C3LTConfig(epochs=sizes.c3lt_epochs, batch_size=sizes.c3lt_batch,
                      decay_every_steps=every, seed=seed)


def _c3lt(r: Request) -> Explainer:
    q, t = r.need_pair("C3LT")
    G, D, E = r.gan("C3LT")
    n = r.sizes.c3lt_subset
    xq = r.class_images("C3LT", q, n, r.seeds("c3lt"))
    xt = r.class_images("C3LT", t, n, r.seeds("c3lt_target_draw"))
    config = c3lt_config(r.sizes, min(len(xq), len(xt)), r.seeds("c3lt"))
    if r.data.get("c3lt_config"):     # a variant of the loss (the tuning's ablation)
        config = replace(config, **r.data["c3lt_config"])
    return C3LT(r.classifier, config, generator=G, encoder=E, discriminator=D).fit(
        xq, xt, cache=r.cache(), query_class=q, target_class=t)


def _c3lt_inverted(r: Request) -> Explainer:
    return C3LTInverted.from_fitted(_c3lt(r), invert_steps=r.sizes.invert_steps)


def _cem_paper(r: Request) -> Explainer:
    """CEM at the paper's budget (1000 iterations x 10 c-steps at ``standard`` and
    ``paper``; the smoke profile, for tests, shrinks it)."""
    return CEMPaperBudget(r.classifier, CEMPaperBudget.Config(
        max_iterations=r.sizes.cem_paper_iterations, c_steps=r.sizes.cem_paper_c_steps),
        autoencoder=r.all_class_autoencoder("CEM"))


def _c3lt_reconstruction(r: Request) -> Explainer:
    G, D, E = r.gan("C3LT (reconstruction)")
    return C3LTReconstruction(r.classifier, generator=G, encoder=E, discriminator=D)


def _latent_search(r: Request) -> Explainer:
    """REVISE on C3LT's generator and encoder, lambda chosen on the validation pairs."""
    G, _, E = r.gan("Latent search")
    lam = latent_search_lambda(r.dataset) if r.dataset else LatentSearch.Config.lambda_
    return LatentSearch(r.classifier, LatentSearch.Config(
        lambda_=lam, steps=r.sizes.latent_search_steps), generator=G, encoder=E)


def _posterior(cls, **sizes):
    def build(r: Request) -> Explainer:
        b = r.profile.bayes
        cfg = {k: (getattr(b, v) if isinstance(v, str) else v(b)) for k, v in sizes.items()}
        extra = {}
        if cls is PSCE:
            extra["autoencoder"] = r.all_class_autoencoder(cls.name)
        return cls(r.classifier, cls.Config(**cfg), **extra)
    return build


def _latent(r: Request) -> Explainer:
    ae = r.data.get("latent_autoencoder")
    if ae is None:
        ae, _ = zoo.latent_autoencoder(r.need_dataset("Latent PGD"), r.profile, r.seeds.train,
                                       device=r.device)
    q = r.profile.quant
    return LatentRecourse(r.classifier, LatentRecourse.Config(steps=q.eval_steps,
                                                              restarts=q.eval_restarts),
                          autoencoder=ae)


#: how the harness builds each explainer of :data:`cflib.explainers.EXPLAINERS`: whether per
#: class pair, the builder, the table whose classifier it explains, whether it searches
_HOW: dict[type[Explainer], tuple] = {
    OriginalData: (False, _original, "c3lt", False),
    QueryUnchanged: (False, lambda r: QueryUnchanged(r.classifier), "c3lt", False),
    AdvAttack: (False, _adv),
    CEM: (False, _cem(CEM)),
    CEMTargeted: (False, _cem(CEMTargeted)),
    CEMPaperBudget: (False, _cem_paper),
    CVE: (True, _cve(CVE)),
    CVEReceptiveField: (True, _cve(CVEReceptiveField)),
    ExpGAN: (True, _expgan, "c3lt", False),
    C3LT: (True, _c3lt, "c3lt", False),
    C3LTReconstruction: (True, _c3lt_reconstruction, "c3lt", False),
    C3LTInverted: (True, _c3lt_inverted),
    LatentSearch: (True, _latent_search),
    Wachter: (False, _posterior(Wachter, steps="opt_steps"), "bayes"),
    BayesCF: (False, _posterior(BayesCF, steps="opt_steps"), "bayes"),
    ROAR: (False, _posterior(ROAR, max_iter=lambda b: 5 * b.opt_steps), "bayes"),
    Schut: (False, _posterior(Schut, max_iters="schut_max_iters"), "bayes"),
    PSCE: (False, _posterior(PSCE, inner_steps="opt_steps"), "bayes"),
    LatentRecourse: (False, _latent, "quant"),
}


def _catalog(explainers: dict[str, type[Explainer]]) -> dict[str, Entry]:
    """One entry per explainer of the library's one registry, under its name there: a
    method the library gains without a builder here fails on import, by name."""
    lacking = [n for n, cls in explainers.items() if cls not in _HOW]
    if lacking:
        raise RuntimeError(f"cflib.bench.catalog has no builder for {lacking}: add them to _HOW")
    return {n: Entry(n, cls, *_HOW[cls]) for n, cls in explainers.items()}


#: method name as the papers spell it -> its entry (the names and classes are
#: :data:`cflib.explainers.EXPLAINERS`')
CATALOG: dict[str, Entry] = _catalog(EXPLAINERS)
#: the book's own methods (a user's method, given to a run as an entry of its own, is not
#: one: its code
#: is not cflib's, so no step of it is memoized)
BOOK_METHODS = frozenset(CATALOG)


def get_entry(name: str, entries=()) -> Entry:
    """The entry of a method name: one of ``entries`` (a user's method, passed to a run,
    never registered), else the catalog's; a ValueError lists the names."""
    for e in entries:
        if e.name == name:
            return e
    if name not in CATALOG:
        raise unknown_name("method", name, [*CATALOG, *(e.name for e in entries)])
    return CATALOG[name]


def check_methods(methods, entries=()) -> list[str]:
    """Method names, each checked against the catalog and ``entries`` (duplicates
    dropped, order kept)."""
    if isinstance(methods, str):
        methods = [methods]
    out = []
    for m in methods:
        get_entry(m, entries)
        if m not in out:
            out.append(m)
    if not out:
        raise ValueError("methods must name at least one method")
    return out


def _image_shape(r: Request) -> tuple[int, ...] | None:
    if r.data.get("image_shape") is not None:
        return tuple(int(v) for v in r.data["image_shape"])
    for key in ("train", "pool"):
        if r.data.get(key) is not None:
            return tuple(r.data[key][0].shape[1:])
    return IMAGE_SHAPES.get(r.dataset) if r.dataset else None


def build(name: str, classifier: nn.Module, *, dataset: str | None = None,
          profile="standard", seeds: Seeds | int = 0, pair=None, entries=(),
          **data) -> Explainer:
    """The method ``name`` at the sizes of ``profile``, fitted when it must be.

    ``dataset`` names the data a learned method trains on and the book's networks it
    needs (None for methods that need neither); ``seeds`` the training and data seeds
    (an int: both); ``pair`` the (query, target) pair of a per-pair method, checked
    against the classifier's output width; ``entries``: methods beside the catalog's (a
    user's, never registered); ``data`` replaces what would be loaded
    (:data:`DATA_KEYS`).  Every argument is checked before anything is trained.
    """
    entry = get_entry(name, entries)
    unknown = sorted(set(data) - set(DATA_KEYS))
    if unknown:
        raise TypeError(f"unknown data argument(s) {unknown}; build takes {sorted(DATA_KEYS)}")
    if not isinstance(classifier, nn.Module):
        raise TypeError(f"{name} explains a torch.nn.Module classifier, got "
                        f"{type(classifier).__name__}")
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        seeds = Seeds(train=seeds, data=seeds)
    if not isinstance(seeds, Seeds):
        raise TypeError(f"seeds must be a Seeds(train=, data=) or an int, got {seeds!r}")
    r = Request(classifier, canonical_dataset(dataset) if dataset is not None else None,
                get_profile(profile), seeds, None, dict(data))
    if pair is not None:
        shape = _image_shape(r)
        if shape is None:
            raise ValueError("pass dataset= or image_shape=(C, H, W) so that the pair can be "
                             "checked against the classifier's output width")
        # a fixed, RNG-free probe image in [-1, 1]
        probe = torch.linspace(-1, 1, int(torch.tensor(shape).prod())).reshape(1, *shape)
        n_classes, _ = check_classifier(classifier, probe)
        r.pair = check_pair(pair, n_classes)
    elif entry.per_pair:
        r.need_pair(name)
    return entry.builder(r)
