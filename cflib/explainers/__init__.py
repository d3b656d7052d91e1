"""Counterfactual explainers: one module per method, one shared base.

Every method is a class built from a classifier and a frozen config (plus the
networks it needs), fitted first where ``needs_fit`` says so, then asked for a whole
batch at once::

    from cflib.explainers import AdvAttack
    cf = AdvAttack(classifier, steps=100).explain(x, target=9)

A batch of counterfactuals is saved with ``cf.save(path)`` and read back with
:meth:`Counterfactuals.load`; a fitted explainer with ``explainer.save(path)`` and
:meth:`Explainer.load` (``Explainer.load(path, classifier, generator=G, ...)``), which
checks the classifier and networks against the ones it was fitted with
(:class:`~cflib.explainers.records.FitRecord`).

:data:`EXPLAINERS` maps each method's name, spelled as the papers spell it, to its
class.  (The benchmark harness builds them at a profile's sizes with the book's
trained networks: :mod:`cflib.bench.catalog`.)  A plain function
``fn(model, x, target) -> x_cf`` becomes an explainer with :class:`FunctionExplainer`
or, as a class, :func:`from_function` (not in :data:`EXPLAINERS`: it is the user's).

C3LT table (Khorram & Fuxin 2022): Original Data, Adv. Attack, CEM, CVE, ExpGAN, C3LT,
plus our reference rows and variants: Query (unchanged), CEM (targeted), CEM (paper
budget), CVE (receptive field), C3LT (reconstruction), C3LT (inverted), Latent search
(REVISE on C3LT's generator: what the generator allows).
Bayesian classifiers (Duell & Fan 2026): Wachter, BayesCF, ROAR, Schut, PSCE.
Recourse under quantization (Yahyati et al. 2026): Latent PGD.
"""
from cflib.explainers.adversarial import AdvAttack, AdvAttackConfig
from cflib.explainers.base import Counterfactuals, Explainer, ExplainerConfig
from cflib.explainers.c3lt import C3LT, C3LTConfig, C3LTInverted, C3LTReconstruction
from cflib.explainers.cem import CEM, CEMConfig, CEMPaperBudget, CEMTargeted
from cflib.explainers.cve import CVE, CVEConfig, CVEReceptiveField
from cflib.explainers.expgan import ExpGAN, ExpGANConfig
from cflib.explainers.function import FunctionConfig, FunctionExplainer, from_function
from cflib.explainers.latent import LatentRecourse, LatentRecourseConfig
from cflib.explainers.latent_search import LatentSearch, LatentSearchConfig
from cflib.explainers.original import OriginalData, OriginalDataConfig, QueryUnchanged
from cflib.explainers.psce import PSCE, PSCEConfig
from cflib.explainers.records import FitRecord
from cflib.explainers.roar import ROAR, ROARConfig
from cflib.explainers.schut import Schut, SchutConfig
from cflib.explainers.wachter import BayesCF, Wachter, WachterConfig
from cflib.names import unknown_name

#: method name as the papers spell it -> explainer class
EXPLAINERS: dict[str, type[Explainer]] = {cls.name: cls for cls in (
    OriginalData, QueryUnchanged, AdvAttack, CEM, CEMTargeted, CEMPaperBudget, CVE,
    CVEReceptiveField, ExpGAN, C3LT, C3LTReconstruction, C3LTInverted, LatentSearch,
    Wachter, BayesCF, ROAR, Schut, PSCE,
    LatentRecourse,
)}


def get_explainer(name: str) -> type[Explainer]:
    """The explainer class of a method name, or a ValueError listing the names."""
    if name not in EXPLAINERS:
        raise unknown_name("method", name, EXPLAINERS)
    return EXPLAINERS[name]


__all__ = ["EXPLAINERS", "get_explainer", "Counterfactuals", "Explainer", "ExplainerConfig",
           "FitRecord", "FunctionExplainer", "FunctionConfig", "from_function",
           "OriginalData", "OriginalDataConfig", "QueryUnchanged", "AdvAttack",
           "AdvAttackConfig", "CEM", "CEMConfig", "CEMTargeted", "CEMPaperBudget", "CVE",
           "CVEConfig", "CVEReceptiveField", "ExpGAN", "ExpGANConfig", "C3LT", "C3LTConfig",
           "C3LTReconstruction", "C3LTInverted", "Wachter", "BayesCF", "WachterConfig", "ROAR", "ROARConfig",
           "Schut", "SchutConfig", "PSCE", "PSCEConfig", "LatentRecourse",
           "LatentRecourseConfig", "LatentSearch", "LatentSearchConfig"]
