"""cflib.gemmconv: one-channel convolutions as matrix products, max-pooling before ReLU.

The gradient of a one-input-channel convolution and the forward of a one-output-channel
one are checked as functions, in float64 against ``F.conv2d``, on shapes built to catch a
wrong col2im (non-square kernels, padding on one side only, a channels-last gradient,
batches on both sides of ``FOLD_BELOW``); the pooling-first sequence is checked bit for
bit on windows built to break it (all negative, ties, zeros); the scopes are checked to
convert exactly the plain layers and to leave every module as it was, whatever happens
inside them."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cflib.gemmconv import (
    FOLD_BELOW,
    MIN_IMAGES,
    conv2d_gemm_input_gradient,
    conv2d_gemm_one_output,
    gemm_convertible,
    one_channel_convolutions,
    pool_before_relu,
    pooling_as_maxima,
    window_maxima,
)
from cflib.scopes import channels_last, fast_paths

SHAPES = [((3, 1, 28, 28), (32, 1, 5, 5), (0, 0)),     # the C3LT CNN's first layer
          ((2, 1, 14, 11), (16, 1, 3, 3), (1, 1)),     # an autoencoder's, padded
          ((2, 1, 9, 7), (4, 1, 3, 2), (2, 0)),        # non-square, padded on one axis
          ((1, 1, 6, 6), (1, 1, 1, 4), (0, 1))]


def _grads(fn, x, w, b, padding, g):
    x, w, b = (t.clone().requires_grad_() for t in (x, w, b))
    y = fn(x, w, b, padding)
    y.backward(g)
    return y, x.grad, w.grad, b.grad


@pytest.mark.parametrize("xs,ws,padding", SHAPES)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("batch", [None, FOLD_BELOW])       # F.fold, the shifted additions
def test_gradients_are_the_convolutions(xs, ws, padding, channels_last, batch):
    torch.manual_seed(0)
    xs = xs if batch is None else (batch,) + xs[1:]
    x, w, b = torch.randn(xs, dtype=torch.float64), torch.randn(ws, dtype=torch.float64), \
        torch.randn(ws[0], dtype=torch.float64)
    ref = _grads(lambda x, w, b, p: F.conv2d(x, w, b, padding=p), x, w, b, padding,
                 g := torch.randn(F.conv2d(x, w, padding=padding).shape, dtype=torch.float64))
    if channels_last:
        g = g.contiguous(memory_format=torch.channels_last)
    got = _grads(conv2d_gemm_input_gradient, x, w, b, padding, g)
    assert torch.equal(got[0], ref[0])                       # the forward is F.conv2d's
    for a, r in zip(got[1:], ref[1:]):
        assert a.shape == r.shape
        torch.testing.assert_close(a, r, rtol=1e-12, atol=1e-12)


def test_float32_gradient_within_rounding():
    torch.manual_seed(0)
    x, w = torch.rand(50, 1, 28, 28) * 2 - 1, torch.randn(32, 1, 5, 5) * 0.2
    g = torch.randn(50, 32, 24, 24).contiguous(memory_format=torch.channels_last)
    exact = torch.ops.aten.convolution_backward(
        g.double(), x.double(), w.double(), None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
        [True, False, False])[0]
    xg = x.clone().requires_grad_()
    conv2d_gemm_input_gradient(xg, w).backward(g)
    assert (xg.grad.double() - exact).abs().max() <= 1e-5 * exact.abs().max()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"\[N, 1, H, W\]"):
        conv2d_gemm_input_gradient(torch.zeros(1, 3, 8, 8), torch.zeros(4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"\[1, C_in, kh, kw\]"):
        conv2d_gemm_one_output(torch.zeros(1, 3, 8, 8), torch.zeros(2, 3, 3, 3))
    with pytest.raises(ValueError, match="below the kernel"):
        conv2d_gemm_one_output(torch.zeros(1, 3, 8, 8), torch.zeros(1, 3, 3, 3), padding=(3, 0))
    with pytest.raises(ValueError, match="C_in"):
        conv2d_gemm_one_output(torch.zeros(1, 3, 8, 8), torch.zeros(1, 2, 3, 3))


ONE_OUT = [((3, 16, 28, 28), (1, 16, 3, 3), (1, 1)),      # an autoencoder's last layer
           ((2, 4, 9, 7), (1, 4, 3, 2), (2, 0)),          # non-square, padded on one axis
           ((2, 3, 8, 9), (1, 3, 4, 5), (0, 4)),          # the widest padding allowed
           ((1, 2, 6, 6), (1, 2, 1, 1), (0, 0))]


@pytest.mark.parametrize("xs,ws,padding", ONE_OUT)
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("batch", [None, FOLD_BELOW])
def test_one_output_forward_is_the_convolution(xs, ws, padding, channels_last, batch):
    torch.manual_seed(0)
    xs = xs if batch is None else (batch,) + xs[1:]
    x, w, b = torch.randn(xs, dtype=torch.float64), torch.randn(ws, dtype=torch.float64), \
        torch.randn(1, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    ref = _grads(lambda x, w, b, p: F.conv2d(x, w, b, padding=p), x, w, b, padding,
                 g := torch.randn(F.conv2d(x, w, padding=padding).shape, dtype=torch.float64))
    got = _grads(conv2d_gemm_one_output, x, w, b, padding, g)
    for a, r in zip(got, ref):
        assert a.shape == r.shape
        torch.testing.assert_close(a, r, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layer,convertible", [
    (nn.Conv2d(1, 8, 5), True),
    (nn.Conv2d(1, 8, 3, padding=1, bias=False), True),
    (nn.Conv2d(3, 8, 3), False),                          # several channels in and out
    (nn.Conv2d(8, 1, 3, padding=1), True),                # one output channel
    (nn.Conv2d(8, 1, (3, 2), padding=(2, 1)), True),
    (nn.Conv2d(8, 1, 3, padding=3), False),               # padding beyond the kernel
    (nn.Conv2d(8, 1, 3, stride=2), False),
    (nn.Conv2d(1, 8, 3, stride=2), False),
    (nn.Conv2d(1, 8, 3, dilation=2), False),
    (nn.Conv2d(1, 8, 3, padding="same"), False),
    (nn.Conv2d(1, 8, 3, padding=1, padding_mode="reflect"), False),
    (nn.ConvTranspose2d(1, 8, 3), False),
    (type("MyConv", (nn.Conv2d,), {})(1, 8, 3), False),   # a subclass may change forward
])
def test_which_layers_are_converted(layer, convertible):
    assert gemm_convertible(layer) is convertible


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 6, 5), nn.ReLU(), nn.Conv2d(6, 4, 3, stride=2),
                         nn.Flatten(), nn.Linear(100, 3)).eval()


def _input_grad(net, x):
    x = x.clone().requires_grad_()
    net(x).pow(2).sum().backward()
    return x.grad


def test_scope_converts_the_first_layer_and_leaves_the_net_as_it_was():
    net = _net()
    x = torch.rand(4, 1, 16, 16)
    before = _input_grad(net, x)
    with torch.no_grad():
        out = net(x)
    state = {k: v.clone() for k, v in net.state_dict().items()}
    with one_channel_convolutions(net, None, net):             # None skipped, a repeat is one net
        assert "forward" in vars(net[0]) and "forward" not in vars(net[2])
        y = net[0](x.clone().requires_grad_())
        assert type(y.grad_fn).__name__ == "_OneInputConvBackward"   # the converted path ran
        inside = _input_grad(net, x)
        with torch.no_grad():
            assert torch.equal(net(x), out)                # the forward is unchanged
    assert not any("forward" in vars(m) for m in net.modules())
    assert all(torch.equal(v, state[k]) for k, v in net.state_dict().items())
    torch.testing.assert_close(inside, before, rtol=1e-5, atol=1e-6)
    assert torch.equal(_input_grad(net, x), before)        # after the block: oneDNN again


def test_scope_restores_on_error_and_is_off_without_fast_paths():
    net = _net()
    with pytest.raises(RuntimeError, match="inside"):
        with one_channel_convolutions(net):
            raise RuntimeError("inside")
    assert "forward" not in vars(net[0])
    with fast_paths(False), one_channel_convolutions(net):
        assert "forward" not in vars(net[0])


def test_other_dtypes_run_the_modules_own_forward():
    net = _net().double()
    x = torch.rand(2, 1, 16, 16, dtype=torch.float64)
    before = _input_grad(net, x)
    with one_channel_convolutions(net):
        assert torch.equal(_input_grad(net, x), before)    # float64: not converted
        y = net[0](x.clone().requires_grad_())
        assert type(y.grad_fn).__name__ == "ConvolutionBackward0"      # oneDNN's, not ours


def test_one_image_runs_the_modules_own_forward():
    net = _net()
    with one_channel_convolutions(net):
        for n, name in [(MIN_IMAGES - 1, "ConvolutionBackward0"),
                        (MIN_IMAGES, "_OneInputConvBackward")]:
            y = net[0](torch.rand(n, 1, 16, 16, requires_grad=True))
            assert type(y.grad_fn).__name__ == name


def test_one_output_layer_is_converted_in_the_scope():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(),
                        nn.Conv2d(8, 1, 3, padding=1)).eval()
    x = torch.rand(4, 1, 12, 12)
    before = _input_grad(net, x)
    with one_channel_convolutions(net):
        y = net[2](torch.rand(4, 8, 12, 12, requires_grad=True))
        assert type(y.grad_fn).__name__ == "_OneOutputConvBackward"
        inside = _input_grad(net, x)
    torch.testing.assert_close(inside, before, rtol=1e-5, atol=1e-6)
    assert not any("forward" in vars(m) for m in net.modules())


def test_channels_last_output_without_the_copy():
    """Under the channels-last scope the first layer writes channels-last at once (oneDNN's
    channels-last kernel: the same values up to rounding)."""
    net = _net()
    x = torch.rand(5, 1, 16, 16, requires_grad=True)
    with channels_last(net):
        ref = net[0](x)
        with one_channel_convolutions(net):
            y = net[0](x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6)
    with one_channel_convolutions(net):                    # no channels-last scope: NCHW
        assert net[0](x).is_contiguous()


def test_forward_without_gradients_channels_last_at_once(monkeypatch):
    """A pass without gradients (a search's validity check) under both scopes writes the
    first layer's output channels-last at once: no copy after it, the same values up to
    rounding, the same bits as the pass with gradients; outside the channels-last scope,
    or on one image, the module's own forward."""
    torch.manual_seed(0)
    net = _net()
    x = torch.rand(6, 1, 16, 16)
    with torch.no_grad():
        ref = net[0](x)
    copies = []
    real = torch.Tensor.contiguous
    with channels_last(net), one_channel_convolutions(net):
        monkeypatch.setattr(torch.Tensor, "contiguous", lambda t, *a, **k: (
            copies.append(1) if not t.is_contiguous(*a, **k) else None) or real(t, *a, **k))
        with torch.no_grad():
            y = net[0](x)
        monkeypatch.undo()
        with_grad = net[0](x.clone().requires_grad_())
    assert not copies                                      # written channels-last, not copied
    assert y.is_contiguous(memory_format=torch.channels_last) and y.grad_fn is None
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6)
    assert torch.equal(y, with_grad.detach())
    with one_channel_convolutions(net), torch.no_grad():
        assert torch.equal(net[0](x), ref)                 # no channels-last scope: its own
    with channels_last(net), one_channel_convolutions(net), torch.no_grad():
        one = net[0](x[:1])                                # one image: its own, then the copy
    assert torch.equal(one, ref[:1])


def _pool_net(inplace=False):
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(inplace=inplace), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(3 * 7 * 7, 2)).eval()


@pytest.mark.parametrize("inplace", [False, True])
def test_pool_before_relu_is_the_same_bits(inplace, monkeypatch):
    torch.manual_seed(0)
    net = _pool_net(inplace)
    x = torch.randn(6, 1, 16, 16)
    # uniform images: the convolution's output is one value per channel, every window a
    # tie, of either sign (the rounded weights' sum and the bias): a negative window
    # sends no gradient, a positive one sends it to its first element
    x[0] = -1.0
    x[1] = 0.0
    x[2, :, ::2] = x[2, :, 1::2]                  # ties between rows of a window
    with torch.no_grad():
        net[0].weight[:, :, :, :] = net[0].weight.round()
    ref = (net(x), _input_grad(net, x))
    with pool_before_relu(net):
        assert "forward" in vars(net)
        # the fused path never calls the ReLU module (a scope that fused nothing would)
        monkeypatch.setattr(nn.ReLU, "forward", lambda self, x: pytest.fail("ReLU ran"))
        got = (net(x), _input_grad(net, x))
        monkeypatch.undo()
        assert torch.equal(net[:3](x), F.max_pool2d(F.relu(net[0](x)), 2))   # a slice: as it was
    for a, r in zip(got, ref):
        assert torch.equal(a, r)
    assert not any("forward" in vars(m) for m in net.modules())


def test_pool_before_relu_leaves_hooked_pairs_and_fast_paths_off():
    net = _pool_net()
    seen = []
    h = net[1].register_forward_hook(lambda m, a, o: seen.append(o.shape))
    with pool_before_relu(net):
        assert "forward" not in vars(net)         # a hook on the ReLU sees its own output
        net(torch.rand(2, 1, 16, 16))
    h.remove()
    assert seen == [torch.Size([2, 3, 14, 14])]
    with fast_paths(False), pool_before_relu(net):
        assert "forward" not in vars(net)
    with pytest.raises(RuntimeError, match="inside"):
        with pool_before_relu(net):
            raise RuntimeError("inside")
    assert "forward" not in vars(net)


@pytest.mark.parametrize("shape,k", [((3, 4, 12, 12), 2), ((2, 3, 7, 9), 2), ((2, 2, 9, 10), 3),
                                     ((2, 2, 5, 5), 1)])
@pytest.mark.parametrize("layout", ["nchw", "channels_last"])
def test_window_maxima_is_max_pooling_bit_for_bit(shape, k, layout):
    """The maxima of strided views are the pooling's values: odd sizes (the last row and
    column dropped, floor mode), ties, NaN (propagated by both) and both layouts."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=g)
    x[0, 0, :k, :k] = 1.5                                   # a window of ties
    x[-1, -1, 0, 0] = float("nan")
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    ref, got = F.max_pool2d(x, k), window_maxima(x, k)
    assert got.shape == ref.shape
    assert torch.equal(got.isnan(), ref.isnan()) and got.isnan().any()
    assert torch.equal(got.nan_to_num(), ref.nan_to_num())
    with pytest.raises(ValueError, match="window_maxima"):
        window_maxima(x[0], k)


def test_pooling_as_maxima_only_without_gradients():
    """Inside the scope a plain pooling runs as maxima where no gradient flows (the same
    bits) and as itself where one does; a pooling with padding or other strides is left
    alone; on exit the modules are as they were."""
    net = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.MaxPool2d(2),
                        nn.MaxPool2d(2, stride=1), nn.MaxPool2d(2, padding=1)).eval()
    x = torch.randn(4, 1, 14, 14)
    with torch.no_grad():
        ref = net(x)
    xg = x.clone().requires_grad_()
    grad_ref = torch.autograd.grad(net(xg).sum(), xg)[0]
    with pooling_as_maxima(net, None):
        assert "forward" in vars(net[2]) and "forward" not in vars(net[3])
        assert "forward" not in vars(net[4])
        with torch.no_grad():
            assert torch.equal(net(x), ref)
        y = net[2](torch.randn(2, 3, 6, 6, requires_grad=True))
        assert type(y.grad_fn).__name__ == "MaxPool2DWithIndicesBackward0"
        xg = x.clone().requires_grad_()
        assert torch.equal(torch.autograd.grad(net(xg).sum(), xg)[0], grad_ref)
    assert not any("forward" in vars(m) for m in net.modules())
    with fast_paths(False), pooling_as_maxima(net):
        assert "forward" not in vars(net[2])
