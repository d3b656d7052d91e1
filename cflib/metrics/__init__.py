"""Metrics of the benchmark tables: functions over batched tensors, each with its spec.

Per-sample metrics return a tensor of shape (N,); the tables report their mean.  Every
metric is declared once as a :class:`~cflib.metrics.spec.MetricSpec` beside its
function (name, direction, display scale, meaning); importing this package registers
them all (:func:`get_spec`).
"""
from cflib.metrics import recourse, robustness  # noqa: F401  (registers their specs)
from cflib.metrics.aupc import AUPC_QUERY, AUPC_TARGET, COUT, AUPCResult, aupc
from cflib.metrics.basic import (
    ACCURACY,
    EDITS,
    FEATURE_VALIDITY,
    L0,
    L1,
    N_ALREADY_TARGET,
    PROXIMITY,
    PROXIMITY_TO_RECONSTRUCTION,
    SECONDS_PER_CF,
    VALIDITY,
    VALIDITY_ALL_JUDGES,
    VALIDITY_JUDGES,
    all_judges_validity,
    judged_validity,
    l0_count,
    l1_distance,
    proximity,
    validity,
)
from cflib.metrics.dependence import DIVERSITY, QUERY_DEPENDENCE, diversity, query_dependence
from cflib.metrics.distribution import FID, KID, FrozenFeatures, ImageFeatures, fid_kid
from cflib.metrics.plausibility import IM1, IM2, im1, im1_by_class, im2
from cflib.metrics.spec import SPECS, MetricSpec, get_spec, register

__all__ = ["im1", "im2", "im1_by_class", "fid_kid", "FrozenFeatures", "ImageFeatures", "proximity", "validity",
           "aupc", "AUPCResult", "MetricSpec", "SPECS", "get_spec", "register", "IM1", "IM2",
           "FID", "KID", "AUPC_TARGET", "AUPC_QUERY", "COUT", "PROXIMITY", "VALIDITY",
           "SECONDS_PER_CF", "ACCURACY", "EDITS", "FEATURE_VALIDITY", "PROXIMITY_TO_RECONSTRUCTION",
           "N_ALREADY_TARGET", "L1", "L0", "l1_distance", "l0_count",
           "VALIDITY_JUDGES", "VALIDITY_ALL_JUDGES", "judged_validity", "all_judges_validity",
           "DIVERSITY", "QUERY_DEPENDENCE", "diversity", "query_dependence"]
