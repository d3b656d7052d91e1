"""The book's tables, one module each, each a runner of the protocol of
:mod:`cflib.bench.runner` with its spec (:mod:`cflib.bench.tables.registry`):
:mod:`~cflib.bench.tables.c3lt` (the C3LT table, MNIST and Fashion-MNIST),
:mod:`~cflib.bench.tables.bayes` (counterfactuals under Bayesian classifiers) and
:mod:`~cflib.bench.tables.quant` (recourse under quantization).

Importing this package imports every module in it, so each registers its spec: a new
table is a new module here."""
import importlib as _importlib
import pkgutil as _pkgutil

for _m in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _m.name != "registry" and not _m.name.startswith("_"):
        _importlib.import_module(f"{__name__}.{_m.name}")
