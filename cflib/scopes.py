"""Scopes that leave the caller's state as it was.

:func:`frozen` puts networks in evaluation mode without parameter gradients and
restores both; :func:`seeded` seeds torch's global RNGs and restores their state.
Every explainer's ``explain``/``fit`` and the weight cache run inside them, so a
model explained (or a network cached) mid-training goes on training unchanged.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn


@contextlib.contextmanager
def frozen(*modules: nn.Module | None) -> Iterator[None]:
    """Evaluation mode and ``requires_grad=False`` for every module inside the block.

    On exit every submodule's ``training`` flag and every parameter's
    ``requires_grad`` flag are put back exactly as they were (``None`` entries are
    skipped; nesting is fine).  Gradients with respect to *inputs* still flow.
    """
    saved = []
    seen: set[int] = set()
    for m in modules:
        if m is None or id(m) in seen:
            continue
        seen.add(id(m))
        saved.append(([(s, s.training) for s in m.modules()],
                      [(p, p.requires_grad) for p in m.parameters()]))
        m.eval()
        for p in m.parameters():
            p.requires_grad_(False)
    try:
        yield
    finally:
        for modes, flags in reversed(saved):
            for s, training in modes:
                s.training = training
            for p, flag in flags:
                p.requires_grad_(flag)


def _rng_devices() -> list[int]:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return list(range(torch.cuda.device_count()))
    return []


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[torch.Generator | None]:
    """Seed torch's global RNGs inside the block and restore their state on exit.

    Yields a CPU generator seeded with ``seed`` (draws on the CPU are the same on
    every device), or ``None`` when ``seed`` is None (then the global RNG is used
    as it stands, and still restored).
    """
    with torch.random.fork_rng(devices=_rng_devices()):
        if seed is None:
            yield None
        else:
            torch.manual_seed(int(seed))
            yield torch.Generator().manual_seed(int(seed))
