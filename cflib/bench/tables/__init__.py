"""The book's tables, each a runner of the protocol of :mod:`cflib.bench.runner`:
:mod:`~cflib.bench.tables.c3lt` (the C3LT table, MNIST and Fashion-MNIST),
:mod:`~cflib.bench.tables.bayes` (counterfactuals under Bayesian classifiers) and
:mod:`~cflib.bench.tables.quant` (recourse under quantization)."""
