"""cflib.gemmconv: a one-channel convolution whose input gradient is a matrix product.

The gradient is checked as a function, in float64 against ``F.conv2d``'s own backward, on
shapes built to catch a wrong col2im (non-square kernels, padding on one side only, a
channels-last gradient); the scope is checked to convert exactly the plain layers and to
leave every module as it was, whatever happens inside it."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from cflib.gemmconv import conv2d_gemm_input_gradient, gemm_convertible, gemm_input_gradients
from cflib.scopes import fast_paths

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
def test_gradients_are_the_convolutions(xs, ws, padding, channels_last):
    torch.manual_seed(0)
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


@pytest.mark.parametrize("layer,convertible", [
    (nn.Conv2d(1, 8, 5), True),
    (nn.Conv2d(1, 8, 3, padding=1, bias=False), True),
    (nn.Conv2d(3, 8, 3), False),                          # more than one input channel
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
    with gemm_input_gradients(net, None, net):             # None skipped, a repeat is one net
        assert "forward" in vars(net[0]) and "forward" not in vars(net[2])
        y = net[0](x.clone().requires_grad_())
        assert type(y.grad_fn).__name__ == "_OneChannelConvBackward"   # the converted path ran
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
        with gemm_input_gradients(net):
            raise RuntimeError("inside")
    assert "forward" not in vars(net[0])
    with fast_paths(False), gemm_input_gradients(net):
        assert "forward" not in vars(net[0])


def test_other_dtypes_run_the_modules_own_forward():
    net = _net().double()
    x = torch.rand(2, 1, 16, 16, dtype=torch.float64)
    before = _input_grad(net, x)
    with gemm_input_gradients(net):
        assert torch.equal(_input_grad(net, x), before)    # float64: not converted
        y = net[0](x.clone().requires_grad_())
        assert type(y.grad_fn).__name__ == "ConvolutionBackward0"      # oneDNN's, not ours
