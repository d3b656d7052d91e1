"""cflib: batched counterfactual explanations of image classifiers.

The library (this package's core) needs a classifier and images:

* :mod:`cflib.explainers`: one class per method, built from a classifier and a config,
  explaining a whole batch (:data:`~cflib.explainers.EXPLAINERS`);
* :mod:`cflib.metrics`: metric functions, each declared with its spec;
* :mod:`cflib.models`, :mod:`cflib.training`, :mod:`cflib.cache`: networks, training
  loops and the weight cache; :mod:`cflib.quantization`: fake quantization and the
  compression recipes; :mod:`cflib.tensors`, :mod:`cflib.scopes`, :mod:`cflib.io`.

The benchmark harness (:mod:`cflib.bench`) and the book's tools (:mod:`cflib.book`)
are layers above it; the core never imports them.
"""

__version__ = "0.1.0"


def _log_from_env() -> None:
    """``CFLIB_LOG=INFO`` (set by the chapter builder) sends cflib's log lines, with times,
    to stderr: the progress of a chapter run shows in the console."""
    import logging

    from cflib.env import log_level

    level = log_level()
    if not level:
        return
    logger = logging.getLogger("cflib")
    if not any(getattr(h, "_cflib", False) for h in logger.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S"))
        handler._cflib = True
        logger.addHandler(handler)
    logger.setLevel(level.upper())


_log_from_env()
