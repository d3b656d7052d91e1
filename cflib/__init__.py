"""cflib: batched counterfactual explanations of image classifiers.

The library behind the counterfactual benchmark companion book: datasets and class
pairs (:mod:`cflib.data`), models and cached training (:mod:`cflib.models`,
:mod:`cflib.training`), explainers (:mod:`cflib.explainers`), metrics
(:mod:`cflib.metrics`) and the benchmark runner (:mod:`cflib.benchmark`).
"""

__version__ = "0.1.0"
