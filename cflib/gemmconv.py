"""One-channel convolutions as matrix products, and max-pooling before ReLU: CPU speed
scopes for a pixel search's step.

On the CPU, PyTorch's oneDNN runs the convolutions of *one channel* far below the
machine's peak: the backward of a layer with one input channel (the first layer of
every classifier of grey images: the C3LT CNN's, 1 -> 32 channels, 5x5, 100 images of
28x28, one thread, 15 ms for 92 MFLOP, 6 GFLOP/s, where its second layer runs at about
100) and the forward of a layer with one output channel (an autoencoder's last layer:
16 -> 1 channels, 3x3, 3.9 ms for 23 MFLOP).  A pixel search needs both at every step:
the gradient of its loss with respect to the image, through the classifier and, for
CEM, through the autoencoder too.

Inside :func:`one_channel_convolutions`:

* a layer with **one input channel** keeps its forward (``F.conv2d``; when a
  :func:`cflib.scopes.channels_last` scope will store its output channels-last, it is
  computed in that layout at once, the weights read channels-last, without the copy:
  oneDNN's channels-last kernel, the same values up to rounding); its input gradient
  is one matrix product, the weights' transpose times the output gradient
  (``[kh*kw, C_out] x [C_out, N*Ho*Wo]``: the gradient at every window position), then
  a col2im: ``kh*kw`` shifted additions in a fixed order (``F.fold`` below 16 images,
  where its one call beats the additions' many; the same additions in the same order,
  so the same numbers);
* a layer with **one output channel** computes its forward the same way around: the
  flipped kernel's taps times the input's channels (one matrix product,
  ``[kh*kw, C_in] x [C_in, N*H*W]``) and a col2im of the taps; its gradients are
  PyTorch's own (``aten.convolution_backward``).

The input gradient of the first kind is the convolution's: the same sums in another
order, so it differs from oneDNN's by float rounding (about 1e-7 relative), and so do
the second kind's forward and the first kind's channels-last forward.  A search that
iterates thousands of steps can end elsewhere by that much (the Protocols page gives
what it moved in the book).

Inside :func:`pool_before_relu`, a ``ReLU`` followed by a ``MaxPool2d`` in an
``nn.Sequential`` (a call of the whole sequence) runs as the pooling then the ReLU:
``max`` and ``max(., 0)`` commute, so the values are the same bit for bit, and so is the
gradient (the window's maximum is the same element whichever runs first, and when it is
not positive both send it zero); the ReLU then sees a quarter of the values, forward and
backward.

Only plain layers are converted (:func:`gemm_convertible`: ``nn.Conv2d`` with one input
or one output channel, stride 1, dilation 1, one group, zero padding of at most the
kernel's size less one); a call on another device (a GPU's cuDNN has no such gap), in
another dtype, or on one image runs the module's own ``forward``; so does a call without
gradients, except that a layer with one input channel whose output a channels-last scope
stores computes it in that layout at once, as above (a search's validity pass).
Inside ``cflib.scopes.fast_paths(False)`` neither scope does anything.  On exit every
module is as it was: the scopes set and remove instance attributes ``forward``, never
touch the weights.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from cflib.scopes import fast_paths_enabled

__all__ = ["one_channel_convolutions", "pool_before_relu", "pooling_as_maxima",
           "gemm_convertible", "conv2d_gemm_input_gradient", "conv2d_gemm_one_output",
           "window_maxima"]

#: below this many images a col2im is one ``F.fold`` call, from it the shifted additions
#: (measured on the C3LT CNN's and the autoencoders' layers, one thread: the same sums in
#: the same order either way, so the same numbers)
FOLD_BELOW = 16

#: one image at a time oneDNN's own kernels are faster (CEM's step on one query, one or
#: two threads: 2.8 ms against 3.0-3.1 converted; from two images on the conversion wins)
MIN_IMAGES = 2


def _col2im(rows: torch.Tensor, n: int, lh: int, lw: int, kh: int, kw: int,
            h: int, w: int, ph: int, pw: int) -> torch.Tensor:
    """``rows`` ``[kh*kw, N*lh*lw]``, tap ``(i, j)`` of window ``(a, b)`` added onto pixel
    ``(a + i - ph, b + j - pw)`` of an ``[N, 1, h, w]`` image (``h + 2 ph = lh + kh - 1``)."""
    if n < FOLD_BELOW:
        return F.fold(rows.view(kh * kw, n, lh * lw).transpose(0, 1), (h, w), (kh, kw),
                      padding=(ph, pw))
    taps = rows.view(kh, kw, n, lh, lw)
    out = rows.new_zeros(n, lh + kh - 1, lw + kw - 1)
    for i in range(kh):
        for j in range(kw):
            out[:, i:i + lh, j:j + lw] += taps[i, j]
    return out[:, ph:ph + h, pw:pw + w].unsqueeze(1).contiguous()


def _channel_rows(t: torch.Tensor) -> torch.Tensor:
    """``[N, C, H, W]`` as ``[C, N*H*W]`` (a view when ``t`` is channels-last)."""
    n, c, h, w = t.shape
    return t.permute(1, 0, 2, 3).reshape(c, n * h * w)


def _one_input_forward(x, weight, bias, ph: int, pw: int, cl_out: bool) -> torch.Tensor:
    """``F.conv2d`` of a one-channel ``x``; with ``cl_out``, written channels-last at once."""
    if cl_out:      # oneDNN writes channels-last for channels-last weights (with one
        # input channel, the same memory seen with channels-last strides)
        kh, kw = weight.shape[2:]
        weight = weight.contiguous().as_strided(weight.shape, (kh * kw, 1, kw, 1))
    return F.conv2d(x, weight, bias, padding=(ph, pw))


class _OneInputConv(torch.autograd.Function):
    """``F.conv2d`` of ``[N, 1, H, W]`` by ``[C_out, 1, kh, kw]`` (stride 1, zero padding),
    whose input gradient is a matrix product and a col2im."""

    @staticmethod
    def forward(ctx, x, weight, bias, ph: int, pw: int, cl_out: bool):
        ctx.padding = (ph, pw)
        ctx.save_for_backward(x, weight)
        return _one_input_forward(x, weight, bias, ph, pw, cl_out)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        ph, pw = ctx.padding
        n, _, h, w = x.shape
        c_out, _, kh, kw = weight.shape
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            rows = weight.reshape(c_out, kh * kw).t() @ _channel_rows(grad)
            gx = _col2im(rows, n, grad.shape[2], grad.shape[3], kh, kw, h, w, ph, pw)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            _, gw, gb = torch.ops.aten.convolution_backward(
                grad, x, weight, [c_out], [1, 1], [ph, pw], [1, 1], False, [0, 0], 1,
                [False, ctx.needs_input_grad[1], ctx.needs_input_grad[2]])
        return gx, gw, gb, None, None, None


class _OneOutputConv(torch.autograd.Function):
    """``F.conv2d`` of ``[N, C_in, H, W]`` by ``[1, C_in, kh, kw]`` (stride 1, zero padding
    ``ph <= kh - 1``, ``pw <= kw - 1``) as a matrix product and a col2im; PyTorch's
    gradients."""

    @staticmethod
    def forward(ctx, x, weight, bias, ph: int, pw: int):
        ctx.padding = (ph, pw)
        ctx.save_for_backward(x, weight)
        n, c_in, h, w = x.shape
        _, _, kh, kw = weight.shape
        # output (a, b) = sum over taps (i, j) of input (a + i - ph, b + j - pw): the
        # flipped taps of input pixel (u, v) land on (u - i + ph, v - j + pw)
        taps = weight.flip(2, 3).reshape(c_in, kh * kw).t() @ _channel_rows(x)
        y = _col2im(taps, n, h, w, kh, kw, h + 2 * ph - kh + 1, w + 2 * pw - kw + 1,
                    kh - 1 - ph, kw - 1 - pw)
        return y if bias is None else y + bias.view(1, 1, 1, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        ph, pw = ctx.padding
        gx, gw, gb = torch.ops.aten.convolution_backward(
            grad, x, weight, [1], [1, 1], [ph, pw], [1, 1], False, [0, 0], 1,
            list(ctx.needs_input_grad[:3]))
        return gx, gw, gb, None, None


def _check(x, weight, what):
    if x.dim() != 4 or weight.dim() != 4 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"{what} takes x [N, C_in, H, W] and weight [C_out, C_in, kh, kw], "
                         f"got {tuple(x.shape)} and {tuple(weight.shape)}")


def conv2d_gemm_input_gradient(x, weight, bias=None, padding=(0, 0)) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, padding=padding)`` for ``x`` of one channel (stride 1),
    its input gradient computed as a matrix product (the forward is ``F.conv2d``'s)."""
    _check(x, weight, "conv2d_gemm_input_gradient")
    if x.shape[1] != 1:
        raise ValueError("conv2d_gemm_input_gradient takes x [N, 1, H, W] and weight "
                         f"[C_out, 1, kh, kw], got {tuple(x.shape)} and {tuple(weight.shape)}")
    return _OneInputConv.apply(x, weight, bias, int(padding[0]), int(padding[1]), False)


def conv2d_gemm_one_output(x, weight, bias=None, padding=(0, 0)) -> torch.Tensor:
    """``F.conv2d(x, weight, bias, padding=padding)`` for ``weight`` of one output channel
    (stride 1, padding at most the kernel's size less one), computed as a matrix product
    and a col2im (the same sums in another order); its gradients are PyTorch's."""
    _check(x, weight, "conv2d_gemm_one_output")
    ph, pw = int(padding[0]), int(padding[1])
    kh, kw = weight.shape[2:]
    if weight.shape[0] != 1 or not (0 <= ph < kh and 0 <= pw < kw):
        raise ValueError("conv2d_gemm_one_output takes weight [1, C_in, kh, kw] and padding "
                         f"below the kernel's size, got {tuple(weight.shape)} and {padding}")
    return _OneOutputConv.apply(x, weight, bias, ph, pw)


def gemm_convertible(m: nn.Module) -> bool:
    """Whether :func:`one_channel_convolutions` converts ``m``: an ``nn.Conv2d`` (not a
    subclass) with one input or one output channel, stride 1, dilation 1, one group, and
    zero padding given as numbers (for one output channel, below the kernel's size)."""
    if not (type(m) is nn.Conv2d and m.groups == 1 and tuple(m.stride) == (1, 1)
            and tuple(m.dilation) == (1, 1) and m.padding_mode == "zeros"
            and not isinstance(m.padding, str)):
        return False
    return m.in_channels == 1 or (
        m.out_channels == 1 and all(p < k for p, k in zip(m.padding, m.kernel_size)))


def _stores_channels_last(m: nn.Module) -> bool:
    """Whether a :func:`cflib.scopes.channels_last` scope stores ``m``'s output channels-last."""
    from cflib.scopes import _channels_last_output
    return any(h is _channels_last_output for h in m._forward_hooks.values())


def _converted_forward(m: nn.Conv2d, original):
    ph, pw = (int(p) for p in m.padding)
    one_input = m.in_channels == 1

    def forward(x):
        if (x.device.type != "cpu" or x.dtype != torch.float32 or x.dim() != 4
                or m.weight.dtype != torch.float32 or x.shape[0] < MIN_IMAGES):
            return original(x)
        if not torch.is_grad_enabled():
            # no gradient (a search's validity pass): the forward alone, channels-last at
            # once where the scope stores it so (oneDNN's NCHW kernel and the copy after it
            # took 4-5 ms of CEM's 60-65 ms step on 100 queries, one thread)
            if one_input and _stores_channels_last(m):
                return _one_input_forward(x, m.weight, m.bias, ph, pw, True)
            return original(x)
        if one_input:
            return _OneInputConv.apply(x, m.weight, m.bias, ph, pw, _stores_channels_last(m))
        return _OneOutputConv.apply(x, m.weight, m.bias, ph, pw)
    return forward


@contextlib.contextmanager
def _patched(modules, pick) -> Iterator[None]:
    """Set the instance ``forward`` that ``pick(sub)`` gives (or None) on every
    submodule of ``modules``; remove them on exit."""
    patched = []
    try:
        if fast_paths_enabled():
            for mod in modules:
                if mod is None:
                    continue
                for s in mod.modules():
                    fwd = pick(s) if "forward" not in s.__dict__ else None
                    if fwd is not None:
                        s.forward = fwd
                        patched.append(s)
        yield
    finally:
        for s in patched:
            s.__dict__.pop("forward", None)


@contextlib.contextmanager
def one_channel_convolutions(*modules: nn.Module | None) -> Iterator[None]:
    """Inside the block, every convertible convolution of ``modules``
    (:func:`gemm_convertible`) runs as matrix products on the CPU (one input channel: its
    input gradient; one output channel: its forward); on exit each module is as it was.
    ``None`` entries are skipped; nothing is converted inside
    ``cflib.scopes.fast_paths(False)``."""
    with _patched(modules, lambda s: _converted_forward(s, s.forward)
                  if gemm_convertible(s) else None):
        yield


def _fused_forward(seq: nn.Sequential):
    """``seq``'s forward with each plain ``ReLU`` -> ``MaxPool2d`` pair run as the pooling
    then ``F.relu`` (None when it has no such pair).  Only a call of the whole
    ``seq`` runs it: a slice, or a child called on its own, is the module as it was."""
    kids, plan, fused = list(seq), [], False
    i = 0
    while i < len(kids):
        a, b = kids[i], kids[i + 1] if i + 1 < len(kids) else None
        if (type(a) is nn.ReLU and type(b) is nn.MaxPool2d and not b.return_indices
                and not (a._forward_hooks or a._forward_pre_hooks
                         or b._forward_hooks or b._forward_pre_hooks)):
            plan.append((b, True))
            fused, i = True, i + 2
        else:
            plan.append((a, False))
            i += 1
    if not fused:
        return None

    def forward(x):
        for m, then_relu in plan:
            x = F.relu(m(x)) if then_relu else m(x)
        return x
    return forward


@contextlib.contextmanager
def pool_before_relu(*modules: nn.Module | None) -> Iterator[None]:
    """Inside the block, each ``nn.Sequential`` of ``modules`` runs a ``ReLU`` directly
    followed by a ``MaxPool2d`` as the pooling then the ReLU (the same values and
    gradients, bit for bit, on a quarter of the pixels); on exit each module is as it
    was.  Nothing changes inside ``cflib.scopes.fast_paths(False)``."""
    with _patched(modules, lambda s: _fused_forward(s)
                  if type(s) is nn.Sequential else None):
        yield


def window_maxima(x: torch.Tensor, k: int) -> torch.Tensor:
    """``F.max_pool2d(x, k)`` (windows of ``k x k``, stride ``k``, no padding) as the
    elementwise maximum of the windows' ``k * k`` strided views: the same values bit for
    bit (a maximum of the same numbers; NaN propagates in both), several times faster
    than PyTorch's CPU pooling of an NCHW tensor.  No indices, so no max-pool gradient."""
    if x.dim() != 4 or k < 1:
        raise ValueError(f"window_maxima needs an [N, C, H, W] tensor and k >= 1, got "
                         f"{tuple(x.shape)} and {k}")
    h, w = x.shape[2] // k * k, x.shape[3] // k * k
    out = None
    for i in range(k):
        for j in range(k):
            v = x[:, :, i:h:k, j:w:k]
            out = v if out is None else torch.maximum(out, v)
    return out if k > 1 else out.clone()


def _poolable(m: nn.Module) -> int | None:
    """The window ``k`` of a plain ``nn.MaxPool2d`` of ``k x k`` windows with stride ``k``
    (no padding, dilation 1, floor mode, no indices), else None."""
    if type(m) is not nn.MaxPool2d or m.return_indices or m.ceil_mode:
        return None
    k, st, p, d = (v if isinstance(v, tuple) else (v, v)
                   for v in (m.kernel_size, m.stride, m.padding, m.dilation))
    if k[0] != k[1] or tuple(st) != tuple(k) or tuple(p) != (0, 0) or tuple(d) != (1, 1):
        return None
    return int(k[0])


def _maxima_forward(m: nn.MaxPool2d, k: int, original):
    def forward(x):
        if (x.device.type != "cpu" or x.dim() != 4
                or (torch.is_grad_enabled() and x.requires_grad)):
            return original(x)
        return window_maxima(x, k)
    return forward


@contextlib.contextmanager
def pooling_as_maxima(*modules: nn.Module | None) -> Iterator[None]:
    """Inside the block, each plain ``nn.MaxPool2d`` of ``modules`` (``k x k`` windows,
    stride ``k``) runs as :func:`window_maxima` on the CPU when no gradient flows through
    it (a validity pass, a metric's forward): the same values bit for bit.  A call that
    needs the pooling's gradient, or on another device, runs the module's own forward; on
    exit each module is as it was; nothing changes inside ``fast_paths(False)``."""
    def pick(s):
        k = _poolable(s)
        return None if k is None else _maxima_forward(s, k, s.forward)
    with _patched(modules, pick):
        yield
