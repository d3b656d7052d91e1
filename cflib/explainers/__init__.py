"""Counterfactual explainers, one module per method, one shared base."""
from cflib.explainers.base import Counterfactuals, Explainer, ExplainerConfig
from cflib.explainers.adversarial import AdvAttack, AdvAttackConfig
from cflib.explainers.original import OriginalData, OriginalDataConfig

__all__ = ["Counterfactuals", "Explainer", "ExplainerConfig", "AdvAttack",
           "AdvAttackConfig", "OriginalData", "OriginalDataConfig"]
