"""Metrics of the benchmark tables: functions over batched tensors.

Per-sample metrics return a tensor of shape (N,); the tables report their mean.
"""
from cflib.metrics.aupc import AUPCResult, aupc
from cflib.metrics.basic import proximity, validity
from cflib.metrics.distribution import FrozenFeatures, fid_kid
from cflib.metrics.plausibility import im1, im2

__all__ = ["im1", "im2", "fid_kid", "FrozenFeatures", "proximity", "validity", "aupc",
           "AUPCResult"]
