"""The explainer base (``cflib.explainers.base``) with stub methods on 1x2x2 images: what
``explain`` records (success, already-target queries, model passes), the default search
loop over chunks, config and seed checks, fitting, devices, and the Counterfactuals
record (validity, head)."""
from __future__ import annotations

import pytest
import torch
from test_output_check import QUERY, Linear2, Returns

from cflib.explainers.base import AutoencoderExplainer, Explainer, ExplainerConfig


def test_a_query_already_in_its_target_is_never_a_success():
    x = QUERY.clone()
    x[2, 0, 0, 0] = 0.5                       # row 2 is already class 1
    out = x.clone()
    out[:, 0, 0, 0] = 0.7                     # every counterfactual is class 1
    ex = Returns(Linear2())
    ex.out = out
    cf = ex.explain(x, 1)
    assert cf.pred.tolist() == [0, 0, 1] and cf.pred_cf.tolist() == [1, 1, 1]
    assert cf.success.tolist() == [True, True, False]
    assert cf.meta["already_target"].tolist() == [False, False, True]
    assert cf.meta["n_already_target"] == 1
    assert cf.validity == pytest.approx(2 / 3)
    x[:, 0, 0, 0] = 0.5                       # every query already there: refused
    with pytest.raises(ValueError, match="already assigns every query to its target"):
        ex.explain(x, 1)


class TwoPasses(Explainer):
    """Pushes the batch through the classifier twice; returns it unchanged."""

    name = "Two passes"

    def _generate(self, x, target, query, generator):
        self.classifier(x)
        self.classifier(x)
        return x.clone()


def test_model_passes_count_images_through_the_first_layer_per_query():
    cf = TwoPasses(Linear2()).explain(QUERY, 1)
    assert cf.meta["model_passes"] == 2.0


class Chunked(Explainer):
    """The default _generate: _search per chunk of batch_size rows."""

    name = "Chunked"

    def _search(self, x, t):
        self.chunks.append(len(x))
        return x + 0.25


def test_the_default_search_covers_every_row_in_chunks_of_batch_size():
    ex = Chunked(Linear2(), batch_size=2)
    ex.chunks = []
    x = torch.full((5, 1, 2, 2), -0.5)
    cf = ex.explain(x, 1)
    assert ex.chunks == [2, 2, 1]
    assert torch.equal(cf.x_cf, torch.full((5, 1, 2, 2), -0.25))


@pytest.mark.parametrize("seed, match", [(True, "seed must be an int or None, got bool"),
                                         (1.0, "seed must be an int or None, got float"),
                                         (-1, "seed"), (2 ** 63, "seed")])
def test_a_bad_seed_is_refused(seed, match):
    with pytest.raises(ValueError, match=match):
        TwoPasses(Linear2()).explain(QUERY, 1, seed=seed)


@pytest.mark.parametrize("kw, match", [
    (dict(batch_size=0), "batch_size must be >= 1, got 0"),
    (dict(batch_size=True), "batch_size must be int, got bool"),
    (dict(batch_size=2.0), "batch_size must be int, got float"),
])
def test_config_fields_are_checked_against_their_annotations(kw, match):
    with pytest.raises(ValueError, match=match):
        ExplainerConfig(**kw)
    assert ExplainerConfig(batch_size=1).batch_size == 1


class NeedsFit(Returns):
    name = "Needs fit"
    needs_fit = True


def test_a_method_that_learns_must_be_fitted_first():
    ex = NeedsFit(Linear2())
    ex.out = QUERY.clone()
    with pytest.raises(RuntimeError, match="Needs fit must be fitted first"):
        ex.explain(QUERY, 1)


class WithAE(AutoencoderExplainer):
    name = "With AE"

    def _generate(self, x, target, query, generator):
        return self.autoencoder(x)


def test_an_autoencoder_on_another_device_is_refused_and_one_on_the_classifiers_is_used():
    ae = torch.nn.Identity()
    lin = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"the autoencoder is on meta but the classifier on "
                                         r"cpu"):
        WithAE(Linear2(), autoencoder=torch.nn.Sequential(lin.to("meta")))
    cf = WithAE(Linear2(), autoencoder=ae).explain(QUERY, 1)
    assert torch.equal(cf.x_cf, QUERY)


def test_head_cuts_every_per_row_tensor_and_keeps_the_rest():
    ex = Returns(Linear2())
    out = QUERY.clone()
    out[0, 0, 0, 0] = 0.5
    ex.out = out
    cf = ex.explain(QUERY, 1)
    h = cf.head(2)
    assert len(h) == 2 and torch.equal(h.x_cf, out[:2]) and h.success.tolist() == [True, False]
    assert h.meta["already_target"].tolist() == [False, False]
    assert h.meta["model_passes"] == cf.meta["model_passes"] and h.seconds == cf.seconds
