"""A plain function as an explainer (cflib.explainers.function): the base's checks apply,
the caller's model and RNG are left as they were, and from_function makes a class that is
built from a classifier alone."""
import pytest
import torch

from cflib.explainers import FunctionExplainer, from_function


def halfway(model, x, target):
    return 0.5 * x


def test_a_function_runs_through_the_base(tiny_classifier, bars):
    x = bars[0][:6]
    calls = []

    def spy(model, xb, target):
        calls.append((len(xb), target.dtype))
        assert model is tiny_classifier and not model.training
        return 0.5 * xb

    cf = FunctionExplainer(tiny_classifier, spy, batch_size=4).explain(x, 1)
    assert [c[0] for c in calls] == [4, 2] and calls[0][1] == torch.long   # chunks of 4
    assert torch.allclose(cf.x_cf, 0.5 * x) and cf.method == "spy"
    assert cf.meta["config"] == {"batch_size": 4}


def test_the_queries_given_to_the_function_are_a_copy(tiny_classifier, bars):
    x = bars[0][:4].clone()

    def scribble(model, xb, target):
        xb.fill_(0.0)                  # in place, on what it was given
        return xb

    cf = FunctionExplainer(tiny_classifier, fn=scribble).explain(x, 1)
    assert torch.equal(cf.x, x) and torch.equal(x, bars[0][:4])


def test_model_mode_flags_and_rng_are_left_as_they_were(tiny_classifier, bars):
    def noisy(model, x, target):
        return x + 0.1 * torch.randn_like(x)

    tiny_classifier.train()
    flags = [p.requires_grad for p in tiny_classifier.parameters()]
    state = torch.get_rng_state()
    try:
        a = FunctionExplainer(tiny_classifier, noisy).explain(bars[0][:4], 1, seed=3)
        b = FunctionExplainer(tiny_classifier, noisy).explain(bars[0][:4], 1, seed=3)
        assert torch.equal(a.x_cf, b.x_cf)                   # seeded
        assert tiny_classifier.training
        assert [p.requires_grad for p in tiny_classifier.parameters()] == flags
        assert torch.equal(torch.get_rng_state(), state)
    finally:
        tiny_classifier.eval()


def test_from_function_is_a_class_built_from_a_classifier(tiny_classifier, bars):
    Method = from_function(halfway, name="Halfway")
    assert issubclass(Method, FunctionExplainer) and Method.name == "Halfway"
    cf = Method(tiny_classifier).explain(bars[0][:3], 1)
    assert cf.method == "Halfway"
    cf = Method(tiny_classifier, Method.Config(batch_size=2)).explain(bars[0][:3], 1)
    assert cf.meta["config"]["batch_size"] == 2


def test_bad_functions_are_clear_errors(tiny_classifier, bars):
    x = bars[0][:5]
    with pytest.raises(TypeError, match=r"must take three arguments \(model, x, target\)"):
        FunctionExplainer(tiny_classifier, lambda model, x: x)
    with pytest.raises(TypeError, match="must be a function"):
        from_function(42)
    with pytest.raises(TypeError, match="needs a function"):
        FunctionExplainer(tiny_classifier)
    with pytest.raises(ValueError, match="one of cflib's own methods"):
        from_function(halfway, name="C3LT")
    with pytest.raises(RuntimeError, match=r"crop returned counterfactuals of shape "
                                           r"\(5, 1, 14, 28\) for a batch of shape"):
        FunctionExplainer(tiny_classifier, lambda m, x, t: x[:, :, :14],
                          name="crop").explain(x, 1)
    with pytest.raises(RuntimeError, match=r"listy returned counterfactuals of shape list"):
        FunctionExplainer(tiny_classifier, lambda m, x, t: x.tolist(), name="listy").explain(x, 1)
    with pytest.raises(RuntimeError, match=r"nan returned 5 non-finite counterfactual"):
        FunctionExplainer(tiny_classifier, lambda m, x, t: x * float("nan"),
                          name="nan").explain(x, 1)


def test_counterfactuals_outside_the_image_range_are_warned_about_and_counted():
    """A function returning [0, 255] images: each is clamped to [-1, 1], the batch warns
    and the count is in the meta (inputs outside the range warn as well)."""
    import pytest
    import torch
    from torch import nn

    from cflib.explainers import FunctionExplainer

    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 3))
    x = torch.rand(4, 1, 4, 4) * 2 - 1
    ex = FunctionExplainer(model, lambda m, xb, t: (xb + 1) * 127.5)
    with pytest.warns(RuntimeWarning, match="returned 4 of 4 counterfactuals with pixels "
                                            "outside the image range"):
        cf = ex.explain(x, 1)
    assert cf.meta["n_outside_range"] == 4 and cf.x_cf.max() <= 1
    inside = FunctionExplainer(model, lambda m, xb, t: xb * 0.5).explain(x, 1)
    assert inside.meta["n_outside_range"] == 0
