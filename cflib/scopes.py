"""Scopes that leave the caller's state as it was.

:func:`frozen` puts networks in evaluation mode without parameter gradients and
restores both; :func:`seeded` seeds torch's global RNGs and restores their state.
Every explainer's ``explain``/``fit`` and the weight cache run inside them, so a
model explained (or a network cached) mid-training goes on training unchanged.
"""
from __future__ import annotations

import contextlib
from numbers import Integral
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


#: the largest seed cflib takes: torch's generators take 64-bit seeds, and a seed must
#: also fit a signed 64-bit integer (a tensor, a results file's int64 column)
SEED_MAX = 2 ** 63 - 1


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an int in ``0 .. 2**63 - 1``, or a ValueError naming the range."""
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise ValueError(f"{name} must be an int in 0..2**63-1, got {type(seed).__name__} "
                         f"{seed!r}")
    if not 0 <= int(seed) <= SEED_MAX:
        raise ValueError(f"{name} must be in 0..2**63-1 (a 64-bit seed), got {int(seed)}; "
                         "use a smaller non-negative int")
    return int(seed)


def _rng_devices() -> list[int]:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return list(range(torch.cuda.device_count()))
    return []


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op CPU threads set to ``n`` inside the block, put back after."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextlib.contextmanager
def seeded(seed: int | None) -> Iterator[torch.Generator | None]:
    """Seed torch's global RNGs inside the block and restore their state on exit.

    Yields a CPU generator seeded with ``seed`` (draws on the CPU are the same on
    every device), or ``None`` when ``seed`` is None (then the global RNG is used
    as it stands, and still restored).  A seed outside ``0 .. 2**63 - 1`` is a
    ValueError (:func:`check_seed`) before the RNG is touched.
    """
    if seed is not None:
        seed = check_seed(seed)
    with torch.random.fork_rng(devices=_rng_devices()):
        if seed is None:
            yield None
        else:
            torch.manual_seed(int(seed))
            yield torch.Generator().manual_seed(int(seed))


#: the speed paths (channels_last, cflib.models.dcgan's FrozenGenerator and the generator's
#: shortcuts) on or off: one switch, flipped only by :func:`fast_paths`
_FAST = {"on": True}


def fast_paths_enabled() -> bool:
    """Whether the speed paths are on (they are, unless inside ``fast_paths(False)``)."""
    return _FAST["on"]


@contextlib.contextmanager
def fast_paths(enabled: bool = True) -> Iterator[None]:
    """Switch the speed paths on or off inside the block: with ``False`` every loop runs
    the plain computation it ran before they existed (what the throughput benchmark
    times as "before", and how a reader checks that they change only the rounding)."""
    before = _FAST["on"]
    _FAST["on"] = bool(enabled)
    try:
        yield
    finally:
        _FAST["on"] = before


def _channels_last_output(_module, _args, out):
    if torch.is_tensor(out) and out.dim() == 4:
        return out.contiguous(memory_format=torch.channels_last)
    return out


@contextlib.contextmanager
def channels_last(*modules: nn.Module | None) -> Iterator[None]:
    """Run ``modules`` in the channels-last memory layout inside the block (a speed scope;
    the values computed are the same up to float rounding).

    Why: on the CPU, PyTorch's max-pooling of an NCHW tensor runs a scalar loop (about
    10x slower than its channels-last kernel, measured on the C3LT CNN), and a network
    whose first layer sees one channel never leaves NCHW on its own.  Inside the block
    every 2-d (transposed) convolution returns a channels-last output, and the 4-d weights
    of the convolutions that see more than one channel are stored channels-last (a
    convolution of a single channel keeps NCHW weights: its input gradient is about twice
    slower with channels-last weights).  On exit every tensor is put back in its own
    layout, with the values it holds then (a network trained inside the block keeps what
    it learned), and the hooks are removed: the caller's networks are the same objects,
    with the same layout, after.
    """
    saved, hooks, seen = [], [], set()
    if not fast_paths_enabled():
        modules = ()
    try:
        for m in modules:
            if m is None or id(m) in seen:
                continue
            seen.add(id(m))
            for s in m.modules():
                if isinstance(s, (nn.Conv2d, nn.ConvTranspose2d)):
                    hooks.append(s.register_forward_hook(_channels_last_output))
                    w = s.weight
                    if w.dim() == 4 and w.shape[1] > 1 and not w.is_contiguous(
                            memory_format=torch.channels_last):
                        original = w.data
                        w.data = w.data.contiguous(memory_format=torch.channels_last)
                        saved.append((w, original, w._version))
        yield
    finally:
        for h in hooks:
            h.remove()
        for t, original, version in reversed(saved):
            if t._version != version:          # trained inside the block: keep its values
                with torch.no_grad():
                    original.copy_(t.data)
            t.data = original


def channels_last_agrees(module: nn.Module, x: torch.Tensor, rtol: float = 1e-4) -> bool:
    """Whether ``module(x)`` runs inside :func:`channels_last` and gives what it gives
    outside (a network that ``view``\\ s a convolution's output cannot run channels-last).
    Two forward passes on ``x`` (a couple of images are enough), no gradient."""
    try:
        with torch.no_grad(), frozen(module):
            a = module(x)
            with channels_last(module):
                b = module(x)
    except RuntimeError:
        return False
    if not (torch.is_tensor(a) and torch.is_tensor(b)) or a.shape != b.shape:
        return False
    scale = a.abs().max().clamp_min(1e-6)
    return bool(((a - b).abs().max() <= rtol * scale).item())
