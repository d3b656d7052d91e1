"""The input gradient of a one-channel convolution as a matrix product: a CPU speed scope.

On the CPU, PyTorch's oneDNN backward of a convolution with *one input channel* (the
first layer of every classifier of grey images) runs far below the machine's peak:
the C3LT CNN's first layer (1 -> 32 channels, 5x5, 100 images of 28x28, one thread)
takes about 15 ms for 92 MFLOP, 6 GFLOP/s, where its second layer runs at about 100.
A pixel search needs exactly that gradient at every step (the gradient of its loss
with respect to the image), and CEM's FISTA step computes it twice (the classifier's
first layer and the autoencoder's).

Inside :func:`gemm_input_gradients` such a layer's forward is its own (the same
``F.conv2d`` call, the same numbers); its input gradient is computed as

* one matrix product, the weights' transpose times the output gradient
  (``[kh*kw, C_out] x [C_out, N*Ho*Wo]``: the gradient of every window position), then
* ``kh*kw`` shifted additions of those rows onto the (padded) image (col2im), in a
  fixed order;

and, when a caller asks for them, the weight and bias gradients by PyTorch's own
backward.  The input gradient is the convolution's: the same sums in another order,
so it differs from oneDNN's by float rounding (about 1e-7 relative), and a search that
iterates thousands of steps can end elsewhere by that much (the Protocols page gives
what it moved in the book).  Measured on that layer inside CEM's step (100 images, one
thread, ``torch.profiler``): its input gradient 4.0 ms instead of 14.8, the step 1.2 to
1.35 times faster (``benchmarks/throughput.py``'s loops time it before and after).

Only plain layers are converted (:func:`gemm_convertible`: ``nn.Conv2d`` with one
input channel, stride 1, dilation 1, one group, zero padding); a call on another device
(a GPU's cuDNN has no such gap) or in another dtype runs the module's own ``forward``.
Inside ``cflib.scopes.fast_paths(False)`` the scope does nothing.  On exit every
module is as it was: the scope sets and removes an instance attribute ``forward``,
never touches the weights.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from cflib.scopes import fast_paths_enabled

__all__ = ["gemm_input_gradients", "gemm_convertible", "conv2d_gemm_input_gradient"]


class _OneChannelConv(torch.autograd.Function):
    """``F.conv2d`` of ``[N, 1, H, W]`` by ``[C_out, 1, kh, kw]`` (stride 1, zero
    padding), whose input gradient is a matrix product and a col2im."""

    @staticmethod
    def forward(ctx, x, weight, bias, ph: int, pw: int):
        ctx.padding = (ph, pw)
        ctx.save_for_backward(x, weight)
        return F.conv2d(x, weight, bias, padding=(ph, pw))

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        ph, pw = ctx.padding
        n, _, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        ho, wo = grad.shape[2], grad.shape[3]
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            # [C_out, N*Ho*Wo], a view when the gradient is channels-last
            g = grad.permute(1, 0, 2, 3).reshape(c_out, n * ho * wo)
            rows = (weight.reshape(c_out, kh * kw).t() @ g).view(kh, kw, n, ho, wo)
            gxp = grad.new_zeros(n, ho + kh - 1, wo + kw - 1)
            for i in range(kh):
                for j in range(kw):
                    gxp[:, i:i + ho, j:j + wo] += rows[i, j]
            gx = gxp[:, ph:ph + h, pw:pw + w].unsqueeze(1).contiguous()
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            _, gw, gb = torch.ops.aten.convolution_backward(
                grad, x, weight, [c_out], [1, 1], [ph, pw], [1, 1], False, [0, 0], 1,
                [False, ctx.needs_input_grad[1], ctx.needs_input_grad[2]])
        return gx, gw, gb, None, None


def conv2d_gemm_input_gradient(x, weight, bias=None, padding=(0, 0)) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, padding=padding)`` for ``x`` of one channel (stride 1),
    its input gradient computed as a matrix product (the forward is ``F.conv2d``'s)."""
    if x.dim() != 4 or x.shape[1] != 1 or weight.dim() != 4 or weight.shape[1] != 1:
        raise ValueError("conv2d_gemm_input_gradient takes x [N, 1, H, W] and weight "
                         f"[C_out, 1, kh, kw], got {tuple(x.shape)} and {tuple(weight.shape)}")
    return _OneChannelConv.apply(x, weight, bias, int(padding[0]), int(padding[1]))


def gemm_convertible(m: nn.Module) -> bool:
    """Whether :func:`gemm_input_gradients` converts ``m``: an ``nn.Conv2d`` (not a
    subclass) with one input channel, stride 1, dilation 1, one group and zero padding
    given as numbers."""
    return (type(m) is nn.Conv2d and m.in_channels == 1 and m.groups == 1
            and tuple(m.stride) == (1, 1) and tuple(m.dilation) == (1, 1)
            and m.padding_mode == "zeros" and not isinstance(m.padding, str))


def _converted_forward(m: nn.Conv2d, original):
    ph, pw = (int(p) for p in m.padding)

    def forward(x):
        if (x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 4
                or m.weight.dtype != torch.float32 or not torch.is_grad_enabled()):
            return original(x)
        return _OneChannelConv.apply(x, m.weight, m.bias, ph, pw)
    return forward


@contextlib.contextmanager
def gemm_input_gradients(*modules: nn.Module | None) -> Iterator[None]:
    """Inside the block, every convertible convolution of ``modules``
    (:func:`gemm_convertible`) computes its input gradient as a matrix product on the
    CPU; on exit each module is as it was.  ``None`` entries are skipped; nothing is
    converted inside ``cflib.scopes.fast_paths(False)``."""
    patched = []
    try:
        if fast_paths_enabled():
            for mod in modules:
                if mod is None:
                    continue
                for s in mod.modules():
                    if gemm_convertible(s) and "forward" not in s.__dict__:
                        s.forward = _converted_forward(s, s.forward)
                        patched.append(s)
        yield
    finally:
        for s in patched:
            s.__dict__.pop("forward", None)
