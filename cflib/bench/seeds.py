"""Seeds by role: a training seed and a data seed, and every seed the book derives from them.

A chapter run has two seeds:

* ``train`` seeds everything that is *trained*: the networks' initialisation, their
  training data draws and batch order (classifiers, autoencoders, DCGAN, encoder, C3LT's
  mappings, ExpGAN, the Bayesian and quantized models);
* ``data`` seeds what is *drawn to evaluate*: the query images, the split of real
  target images into the FID/KID reference and the ``Original Data`` pool, the
  methods' own randomness at explain time, KID's subsets, the Bayesian chapter's
  queries and fresh posterior draws, the quantization chapter's queries and test draw.

A sweep over training seeds keeps the data seed fixed, so its spread measures training
alone.  Every purpose's seed is ``offset + stride * seed(role) + repeat``
(:data:`PURPOSES`, shown in the book's protocol notes); the offsets keep purposes apart
and reproduce the seeds of earlier versions of the book at ``train = data = 0``.
"""
from __future__ import annotations

from dataclasses import dataclass

from cflib.scopes import SEED_MAX

#: purpose -> (role, offset, stride, what it seeds)
PURPOSES: dict[str, tuple[str, int, int, str]] = {
    # training
    "classifier": ("train", 0, 1, "the C3LT CNN: initialisation, training draw, batches"),
    "feature_net": ("train", 1000, 1, "the FID/KID feature network"),
    "judge": ("train", 2000, 1, "the independent classifier of Validity (independent "
                                "classifier), its held-out split"),
    "judge_resnet": ("train", 3000, 1, "the residual-network judge of transfer validity, "
                                       "its held-out split"),
    "judge_mlp": ("train", 4000, 1, "the multilayer-perceptron judge of transfer validity, "
                                    "its held-out split"),
    "autoencoder": ("train", 0, 1, "IM1/IM2 and loss autoencoders, their validation split"),
    "dcgan": ("train", 0, 1, "C3LT's DCGAN"),
    "encoder": ("train", 0, 1, "C3LT's encoder (all classes and per pair)"),
    "c3lt": ("train", 0, 1, "C3LT's mappings: initialisation, batches, query-class draw"),
    "c3lt_target_draw": ("train", 1, 1, "C3LT's draw of target-class training images"),
    "expgan": ("train", 0, 1, "ExpGAN: initialisation, batches, training draws"),
    "bayes_model": ("train", 0, 1, "the MC-dropout CNN and the BNN, their fixed posterior draws"),
    "psce_class_ae": ("train", 500, 1, "the target-class autoencoders of PSCE's ablation"),
    "quant_pool": ("train", 0, 1, "the quantization chapter's training pool and its split"),
    "quant_model": ("train", 0, 1, "the FP SmallCNN, the latent AE and the compressed models"),
    "kd_student": ("train", 1, 1, "KD+Quant's student"),
    # evaluation draws
    "queries": ("data", 0, 1, "the C3LT chapters' query images"),
    "reference_split": ("data", 0, 1, "real target images: FID/KID reference vs Original Data"),
    "explain": ("data", 0, 1, "the methods' randomness at explain time (PGD start, draws)"),
    "kid": ("data", 0, 1, "KID's random subsets"),
    "bayes_queries": ("data", 12345, 1000, "the Bayesian chapter's queries and targets, per repeat"),
    "bayes_fresh": ("data", 10_000_000, 1000, "fresh posterior draws that judge a repeat"),
    "quant_queries": ("data", 1, 1, "the quantization chapter's queries"),
    "quant_test": ("data", 2, 1, "the quantization chapter's test subset (when it has one)"),
    "quant_explain": ("data", 0, 1, "the latent recourse solver's restarts"),
    "quant_fa": ("data", 3, 1, "the non-target test images of the false-acceptance rate"),
}


@dataclass(frozen=True)
class Seeds:
    """The two seeds of a run; ``seeds("queries")`` is the seed of one purpose."""

    train: int = 0
    data: int = 0

    def __post_init__(self):
        for role in ("train", "data"):
            v = getattr(self, role)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= SEED_MAX:
                raise ValueError(f"the {role} seed must be an int >= 0 (in 0..2**63-1, a "
                                 f"64-bit seed), got {v!r}")

    def __call__(self, purpose: str, repeat: int = 0) -> int:
        if purpose not in PURPOSES:
            raise ValueError(f"unknown seed purpose {purpose!r}; known: {sorted(PURPOSES)}")
        role, offset, stride, _ = PURPOSES[purpose]
        seed = offset + stride * getattr(self, role) + int(repeat)
        if not 0 <= seed <= SEED_MAX:
            raise ValueError(f"the {role} seed {getattr(self, role)} gives the {purpose!r} seed "
                             f"{seed} (= {offset} + {stride} x seed + {int(repeat)}), outside "
                             "0..2**63-1; use a smaller seed")
        return seed

    def columns(self) -> dict[str, int]:
        """The results table's seed columns."""
        return {"train_seed": self.train, "data_seed": self.data}


def train_seed(purpose: str, seed: int) -> int:
    """The seed of a training purpose for training seed ``seed``."""
    if PURPOSES.get(purpose, ("",))[0] != "train":
        raise ValueError(f"{purpose!r} is not a training purpose")
    return Seeds(train=int(seed))(purpose)
