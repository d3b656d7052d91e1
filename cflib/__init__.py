"""cflib: batched counterfactual explanations of image classifiers.

The library behind the counterfactual benchmark companion book: datasets and class
pairs (:mod:`cflib.data`), every size per profile (:mod:`cflib.profiles`), models and
cached training (:mod:`cflib.models`, :mod:`cflib.training`, :mod:`cflib.zoo`), one
catalog of explainers (:data:`cflib.explainers.METHODS`), metric functions and specs
(:mod:`cflib.metrics`), one runner per table (:mod:`cflib.c3lt_benchmark`,
:mod:`cflib.bayes_benchmark`), the results schema (:mod:`cflib.results`), the papers'
numbers (:mod:`cflib.reference`) and the book's tables and figures (:mod:`cflib.report`).
"""

__version__ = "0.1.0"


def _log_from_env() -> None:
    """``CFLIB_LOG=INFO`` (set by the chapter builder) sends cflib's log lines, with times,
    to stderr: the progress of a chapter run shows in the console."""
    import logging
    import os

    level = os.environ.get("CFLIB_LOG")
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
