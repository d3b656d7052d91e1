"""Counterfactual explainers: one module per method, one shared base, one catalog.

:data:`METHODS` maps each method's name, spelled as the papers spell it, to its
class; every class builds itself for a profile with the same call::

    METHODS["C3LT"].from_profile(classifier, dataset="mnist", profile="smoke",
                                 seed=0, pair=(4, 9))

C3LT table (Khorram & Fuxin 2022): Original Data, Adv. Attack, CEM, CVE, ExpGAN, C3LT,
plus our reference rows and variants: Query (unchanged), CEM (targeted),
CVE (receptive field), C3LT (reconstruction).
Bayesian classifiers (Duell & Fan 2026): Wachter, BayesCF, ROAR, Schut, PSCE.
Recourse under quantization (Yahyati et al. 2026): Latent PGD.
"""
from cflib.explainers.adversarial import AdvAttack, AdvAttackConfig
from cflib.explainers.base import (
    DATA_KEYS,
    Counterfactuals,
    Explainer,
    ExplainerConfig,
    check_images,
    predict,
)
from cflib.explainers.c3lt import C3LT, C3LTConfig, C3LTReconstruction
from cflib.explainers.cem import CEM, CEMConfig, CEMTargeted
from cflib.explainers.cve import CVE, CVEConfig, CVEReceptiveField
from cflib.explainers.expgan import ExpGAN, ExpGANConfig
from cflib.explainers.latent import LatentRecourse, LatentRecourseConfig
from cflib.explainers.original import OriginalData, OriginalDataConfig, QueryUnchanged
from cflib.explainers.psce import PSCE, PSCEConfig
from cflib.explainers.roar import ROAR, ROARConfig
from cflib.explainers.schut import Schut, SchutConfig
from cflib.explainers.wachter import BayesCF, Wachter, WachterConfig
from cflib.scopes import frozen, seeded

#: the catalog: method name as the papers spell it -> explainer class
METHODS: dict[str, type[Explainer]] = {cls.name: cls for cls in (
    OriginalData, QueryUnchanged, AdvAttack, CEM, CEMTargeted, CVE, CVEReceptiveField,
    ExpGAN, C3LT, C3LTReconstruction,
    Wachter, BayesCF, ROAR, Schut, PSCE,
    LatentRecourse,
)}


def get_method(name: str) -> type[Explainer]:
    """The explainer class of a method name, or a ValueError listing the names."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose one of {list(METHODS)}")
    return METHODS[name]


__all__ = ["METHODS", "DATA_KEYS", "get_method", "Counterfactuals", "Explainer",
           "ExplainerConfig", "check_images", "predict", "frozen", "seeded",
           "OriginalData", "OriginalDataConfig", "QueryUnchanged", "AdvAttack",
           "AdvAttackConfig", "CEM", "CEMConfig", "CEMTargeted", "CVE", "CVEConfig",
           "CVEReceptiveField", "ExpGAN", "ExpGANConfig", "C3LT", "C3LTConfig",
           "C3LTReconstruction", "Wachter", "BayesCF", "WachterConfig", "ROAR", "ROARConfig",
           "Schut", "SchutConfig", "PSCE", "PSCEConfig", "LatentRecourse",
           "LatentRecourseConfig"]
