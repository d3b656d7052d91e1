"""Counterfactual explainers, one module per method, one shared base.

C3LT table (Khorram & Fuxin 2022): Original Data, Adv. Attack, CEM, CVE, ExpGAN, C3LT.
Bayesian classifiers (Duell & Fan 2026): Wachter, BayesCF, ROAR, Schut, PSCE.
"""
from cflib.explainers.base import Counterfactuals, Explainer, ExplainerConfig
from cflib.explainers.adversarial import AdvAttack, AdvAttackConfig
from cflib.explainers.original import OriginalData, OriginalDataConfig
from cflib.explainers.cem import CEM, CEMConfig
from cflib.explainers.cve import CVE, CVEConfig
from cflib.explainers.expgan import ExpGAN, ExpGANConfig

__all__ = ["Counterfactuals", "Explainer", "ExplainerConfig", "AdvAttack", "AdvAttackConfig",
           "OriginalData", "OriginalDataConfig", "CEM", "CEMConfig", "CVE", "CVEConfig",
           "ExpGAN", "ExpGANConfig"]
