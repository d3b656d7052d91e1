"""Validity and proximity."""
from __future__ import annotations

import torch


def validity(pred_cf: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample 1.0 where the counterfactual is classified as the target, else 0.0.

    ``pred_cf`` holds class indices (N,) or scores (N, K).
    """
    if pred_cf.dim() == 2:
        pred_cf = pred_cf.argmax(1)
    if pred_cf.shape != target.shape:
        raise ValueError(f"pred_cf {tuple(pred_cf.shape)} and target {tuple(target.shape)} differ")
    return (pred_cf == target).float()


def proximity(x: torch.Tensor, x_cf: torch.Tensor) -> torch.Tensor:
    """Mean absolute pixel change per image on the [-1, 1] scale (C3LT's proximity)."""
    if x.shape != x_cf.shape:
        raise ValueError(f"x {tuple(x.shape)} and x_cf {tuple(x_cf.shape)} differ in shape")
    return (x_cf - x).abs().flatten(1).mean(1)
