"""Run profiles: one name that sets every size, never the algorithm.

``smoke`` runs in seconds to minutes on a 2-core CPU (tests and CI), ``standard``
is the real protocol at reduced size (the default of ``make book``), ``paper``
uses the papers' sizes and is meant for a GPU.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Profile:
    name: str
    # data sizes
    n_images: int | None          # query images per pair (None: every test image of the class)
    train_subset: int | None      # training images for the classifier / feature net (None: all)
    # classifier (C3LT CNN) and FID/KID feature network
    clf_epochs: int
    feat_epochs: int
    # IM1/IM2 autoencoders: at most these epochs, early stopping on a held-out tenth
    # (the reference setup trains 30 epochs per class, 4 all-class)
    ae_class_epochs: int
    ae_all_epochs: int
    ae_subset: int | None
    # targeted PGD (Adv. Attack)
    adv_steps: int
    # CEM (alibi defaults: 1000 iterations, 10 c-steps)
    cem_max_iterations: int
    cem_c_steps: int
    # CVE distractors per query
    cve_n_distractors: int
    # ExpGAN epochs per pair
    expgan_epochs: int
    # C3LT: DCGAN epochs, encoder epochs, mapping epochs per pair
    dcgan_epochs: int
    dcgan_subset: int | None
    encoder_epochs: int
    c3lt_epochs: int
    c3lt_subset: int | None       # training images per class for the mappings
    # AUPC path resolution (784/50 pixels a step in the paper)
    aupc_steps: int = 50
    # early stopping of the autoencoders: epochs without a better validation error
    ae_patience: int = 3
    # Bayesian chapter
    bayes_repeats: int = 1
    bayes_n_images: int = 100
    bayes_epochs: int = 1
    bayes_opt_steps: int = 100    # Adam steps per search round (Wachter/BayesCF per lambda, PSCE per
                                  # outer round; ROAR runs 5x as many)
    schut_max_iters: int = 5000
    # Quantization chapter (Yahyati et al. 2026; QUANT.md 6.2).  Defaults are the
    # ``standard`` sizes, the public code's own protocol.
    quant_train_subset: int | None = 5000   # training pool before the validation split (None: all)
    quant_val_fraction: float = 0.1         # share of the pool split off for calibration/validation
    quant_clf_epochs: int = 5               # FP SmallCNN and the KD student
    quant_ae_epochs: int = 5                # latent autoencoder
    quant_qat_epochs: int = 4               # MixedPrec-QAT, CFQ-QAT, Prune+Quant, KD+Quant
    quant_calib_epochs: int = 3             # PTQ INT8, PTQ INT4, CF-PTQ
    quant_n_queries: int = 256              # test draws before the label filter (QUANT.md 14)
    quant_eval_steps: int = 40              # latent PGD steps of the evaluation solver
    quant_eval_restarts: int = 2            # and its restarts
    quant_n_seeds: int = 1                  # training seeds seed .. seed + n - 1
    quant_sweep_bits: tuple[int, ...] = (2, 3, 4, 5, 6, 8)  # uniform W=A=b PTQ sweep
    quant_test_subset: int | None = None    # test images for Accuracy (None: the full split)
    quant_teacher_k10: bool = False         # the K = 10 teacher ablation (setting "teacher_K10")

    def to_dict(self) -> dict:
        return asdict(self)


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke", n_images=12, train_subset=4000, clf_epochs=1, feat_epochs=1,
        ae_class_epochs=2, ae_all_epochs=1, ae_subset=1000, ae_patience=1, adv_steps=10,
        cem_max_iterations=20, cem_c_steps=2, cve_n_distractors=2, expgan_epochs=1,
        dcgan_epochs=1, dcgan_subset=1024, encoder_epochs=1, c3lt_epochs=1,
        c3lt_subset=256, aupc_steps=10, bayes_repeats=1, bayes_n_images=8,
        bayes_epochs=1, bayes_opt_steps=20, schut_max_iters=40,
        # 3,000 images and 3 AE epochs, 20 solver steps: below that the smoke FP recourse
        # fails on (nearly) every query and VD, CRG, DirSim are undefined
        quant_train_subset=3000, quant_clf_epochs=1, quant_ae_epochs=3, quant_qat_epochs=1,
        quant_calib_epochs=1, quant_n_queries=24, quant_eval_steps=20, quant_eval_restarts=1,
        quant_n_seeds=1, quant_sweep_bits=(2, 4, 8), quant_test_subset=2000,
        quant_teacher_k10=False,
    ),
    "standard": Profile(
        name="standard", n_images=100, train_subset=None, clf_epochs=4, feat_epochs=1,
        ae_class_epochs=30, ae_all_epochs=5, ae_subset=None, ae_patience=3, adv_steps=100,
        cem_max_iterations=250, cem_c_steps=3, cve_n_distractors=5, expgan_epochs=6,
        dcgan_epochs=1, dcgan_subset=None, encoder_epochs=1, c3lt_epochs=10,
        c3lt_subset=1000, aupc_steps=50, bayes_repeats=3, bayes_n_images=100,
        bayes_epochs=3, bayes_opt_steps=100, schut_max_iters=1000,
        quant_train_subset=5000, quant_clf_epochs=5, quant_ae_epochs=5, quant_qat_epochs=4,
        quant_calib_epochs=3, quant_n_queries=256, quant_eval_steps=40, quant_eval_restarts=2,
        quant_n_seeds=1, quant_sweep_bits=(2, 3, 4, 5, 6, 8), quant_test_subset=None,
        quant_teacher_k10=False,
    ),
    "paper": Profile(
        name="paper", n_images=None, train_subset=None, clf_epochs=10, feat_epochs=10,
        ae_class_epochs=100, ae_all_epochs=50, ae_subset=None, ae_patience=5, adv_steps=200,
        cem_max_iterations=1000, cem_c_steps=10, cve_n_distractors=10, expgan_epochs=50,
        dcgan_epochs=25, dcgan_subset=None, encoder_epochs=20, c3lt_epochs=200,
        c3lt_subset=None, aupc_steps=50, bayes_repeats=5, bayes_n_images=100,
        bayes_epochs=10, bayes_opt_steps=100, schut_max_iters=5000,
        quant_train_subset=None, quant_clf_epochs=5, quant_ae_epochs=5, quant_qat_epochs=4,
        quant_calib_epochs=3, quant_n_queries=1000, quant_eval_steps=40, quant_eval_restarts=2,
        quant_n_seeds=3, quant_sweep_bits=(2, 3, 4, 5, 6, 8), quant_test_subset=None,
        quant_teacher_k10=True,
    ),
}


def get_profile(name: str | Profile, **overrides) -> Profile:
    """Return the named profile, optionally with some sizes overridden."""
    if isinstance(name, Profile):
        prof = name
    else:
        if name not in PROFILES:
            raise ValueError(
                f"unknown profile {name!r}; choose one of {sorted(PROFILES)}"
            )
        prof = PROFILES[name]
    return replace(prof, **overrides) if overrides else prof
