"""The base's check of what a method returns (``Explainer._checked_output``), tested once
with a stub method: finite values out of the image range are clamped to the nearest image,
values inside it pass bit for bit, a NaN or an infinite counterfactual is a RuntimeError
naming the method and its rows (never clipped into a valid-looking image), and a result
of the wrong shape or type is a RuntimeError before the classifier sees it."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from cflib.explainers.base import Explainer


class Linear2(nn.Module):
    """A classifier on 1x2x2 images: class 1 when the first pixel is above 0, else class 0
    (a third class, never chosen, keeps its logits from reading as probabilities)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.bias.copy_(torch.tensor([0.0, 0.0, -5.0]))
            self.fc.weight[1, 0] = 1.0
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x.flatten(1))


class Returns(Explainer):
    """A method whose search returns whatever the test puts in ``out``."""

    name = "Stub method"

    def _generate(self, x, target, query, generator):
        return self.out


QUERY = torch.full((3, 1, 2, 2), -0.5)


def _stub(out):
    ex = Returns(Linear2())
    ex.out = out
    return ex


def test_out_of_range_values_are_clamped_and_in_range_values_pass_unchanged():
    out = torch.tensor([[1.5, -3.0, 0.25, -1.0],      # 1.5 -> 1, -3 -> -1, the rest kept
                        [1.0, 0.999, -0.999, 7.0],
                        [-0.5, -0.5, -0.5, -0.5]]).view(3, 1, 2, 2)
    cf = _stub(out).explain(QUERY, 1, seed=0)
    want = torch.tensor([[1.0, -1.0, 0.25, -1.0],
                         [1.0, 0.999, -0.999, 1.0],
                         [-0.5, -0.5, -0.5, -0.5]]).view(3, 1, 2, 2)
    assert torch.equal(cf.x_cf, want)
    # the classifier judged the clamped images: rows 0 and 1 have a first pixel above 0
    assert cf.pred_cf.tolist() == [1, 1, 0] and cf.success.tolist() == [True, True, False]


def test_a_float64_result_comes_back_in_the_classifiers_dtype():
    out = torch.full((3, 1, 2, 2), 0.3, dtype=torch.float64)
    cf = _stub(out).explain(QUERY, 1)
    assert cf.x_cf.dtype == torch.float32
    assert torch.equal(cf.x_cf, torch.full((3, 1, 2, 2), 0.3, dtype=torch.float32))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_counterfactual_is_an_error_naming_the_method_and_its_rows(bad):
    out = torch.zeros(3, 1, 2, 2)
    out[1, 0, 0, 1] = bad
    out[2, 0, 1, 1] = bad
    ok = _stub(torch.zeros(3, 1, 2, 2))
    ok.explain(QUERY, 1)                     # a finite result: every pass, the last one judges it
    ex = _stub(out)
    with pytest.raises(RuntimeError, match=r"Stub method returned 2 non-finite "
                                           r"counterfactual\(s\) \(NaN or inf; rows \[1, 2\]\) "
                                           r"of a batch of 3"):
        ex.explain(QUERY, 1)
    # the error comes before the counterfactuals are judged: one classifier pass fewer
    assert ex.classifier.calls == ok.classifier.calls - 1


@pytest.mark.parametrize("out, shape", [
    (torch.zeros(2, 1, 2, 2), r"\(2, 1, 2, 2\)"),          # a row missing
    (torch.zeros(3, 4), r"\(3, 4\)"),                      # flattened
    ([[0.0] * 4] * 3, "list"),                             # not a tensor
])
def test_a_result_of_another_shape_or_type_is_an_error(out, shape):
    with pytest.raises(RuntimeError, match=rf"Stub method returned counterfactuals of shape "
                                           rf"{shape} for a batch of shape \(3, 1, 2, 2\)"):
        _stub(out).explain(QUERY, 1)


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_a_complex_result_is_an_error_naming_the_method(dtype):
    ex = _stub(torch.zeros(3, 1, 2, 2, dtype=dtype))
    with pytest.raises(RuntimeError, match=rf"Stub method returned counterfactuals of dtype "
                                           rf"{dtype}; images are real tensors"):
        ex.explain(QUERY, 1)


def test_an_integer_result_is_used_as_the_images_it_is():
    """-1, 0 and 1 are images: an integer result comes back in the classifier's dtype."""
    cf = _stub(torch.ones(3, 1, 2, 2, dtype=torch.int64)).explain(QUERY, 1)
    assert cf.x_cf.dtype == torch.float32 and torch.equal(cf.x_cf, torch.ones(3, 1, 2, 2))
