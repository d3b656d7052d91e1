"""Saved explanations and fitted explainers: exact round trips, and clear refusals.

``Counterfactuals.save`` / ``load`` for every method's output (meta tensors included);
``Explainer.save`` / ``load`` of the fit record (C3LT's mappings, ExpGAN's networks, CVE's
and Original Data's pools; the config alone for a method that learns nothing): the loaded
explainer explains bit for bit as the saved one, and a classifier or network other than
the ones it was fitted against, a file of another schema version or of another method is
refused with an error naming what differs.
"""
from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from cflib.bench import catalog
from cflib.bench.catalog import CATALOG
from cflib.explainers import (
    C3LT,
    CEM,
    CVE,
    AdvAttack,
    C3LTInverted,
    Counterfactuals,
    ExpGAN,
    Explainer,
    OriginalData,
)
from cflib.explainers.base import CF_SCHEMA, load_counterfactuals, save_counterfactuals
from cflib.explainers.records import FIT_SCHEMA, FitRecord
from cflib.models import ConvAutoencoder, LatentAutoencoder
from cflib.models.dcgan import DCGAN, EncoderDCGAN

LEARNED = {"Original Data", "CVE", "CVE (receptive field)", "ExpGAN", "C3LT", "C3LT (inverted)"}


def assert_same(a, b, where="value"):
    """``a`` and ``b`` equal exactly: tensors in dtype, shape and every element (NaN equal to
    NaN), every other value in type and value, recursively."""
    if torch.is_tensor(a):
        assert torch.is_tensor(b), where
        assert a.dtype == b.dtype and a.shape == b.shape, where
        torch.testing.assert_close(a.cpu(), b.cpu(), rtol=0, atol=0, equal_nan=True,
                                   msg=where)
        return
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same(u, v, f"{where}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), where
    else:
        assert a == b, where


def assert_same_cf(a: Counterfactuals, b: Counterfactuals, seconds=True):
    for k, v in a.__dict__.items():
        if k != "seconds" or seconds:
            assert_same(v, b.__dict__[k], k)


@pytest.fixture(scope="module")
def data(bars):
    torch.manual_seed(0)
    gan = DCGAN(ngf=8, ndf=8).eval()
    return dict(train=bars, pool=bars, autoencoder=ConvAutoencoder().eval(),
                generator=gan.generator, discriminator=gan.discriminator,
                encoder=EncoderDCGAN(ndf=8).eval(), cache=False,
                latent_autoencoder=LatentAutoencoder().fit_latent_stats(bars[0]).eval())


def networks_of(ex: Explainer) -> dict:
    """The keywords that rebuild ``ex`` (its frozen networks, by the constructor's names)."""
    return dict(ex.frozen_networks())


# -- every method ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(CATALOG))
def test_every_method_round_trips_its_counterfactuals_and_itself(name, tiny_classifier, bars,
                                                                  data, tmp_path):
    x, y = bars
    xq = torch.cat([x[y == 0][:3], x[y == 1][:1]])      # one query already in its target
    ex = catalog.build(name, tiny_classifier, dataset="mnist", profile="smoke", seeds=0,
                       pair=(0, 1), **data)
    cf = ex.explain(xq, 1, seed=0)
    # the explanation
    cf.save(tmp_path / "cf")
    back = Counterfactuals.load(tmp_path / "cf.json")
    assert_same_cf(cf, back)
    assert back.meta["n_already_target"] == 1
    # the explainer: its record (or config) and nothing else
    assert (ex.fit_record is not None) == (name in LEARNED) and ex.fitted
    ex.save(tmp_path / "ex")
    rng = torch.random.get_rng_state()
    loaded = Explainer.load(tmp_path / "ex", tiny_classifier, **networks_of(ex))
    assert torch.equal(torch.random.get_rng_state(), rng)     # loading draws nothing
    assert type(loaded) is type(ex) and loaded.config == ex.config and loaded.fitted
    if ex.fit_record is not None:
        r, s = ex.fit_record, loaded.fit_record
        assert (s.method, s.config, s.fingerprints) == (r.method, r.config, r.fingerprints)
        assert_same(r.tensors, s.tensors, "tensors")
        assert_same(r.values, s.values, "values")
        assert_same(r.info, s.info, "info")
    again = loaded.explain(xq, 1, seed=0)
    assert_same_cf(cf, again, seconds=False)         # bit for bit, meta included


# -- C3LT, ExpGAN, CVE at tiny sizes ---------------------------------------------------------
@pytest.fixture(scope="module")
def c3lt(tiny_classifier, bars, data):
    x, y = bars
    nets = {k: data[k] for k in ("generator", "encoder", "discriminator")}
    ex = C3LT(tiny_classifier, epochs=1, batch_size=16, seed=0, **nets)
    return ex.fit(x[y == 0][:32], x[y == 1][:32]), nets


def test_c3lt_round_trip_is_exact(c3lt, bars, tmp_path):
    ex, nets = c3lt
    x, y = bars
    xb = torch.cat([x[y == 0][-6:], x[y == 1][-2:]])
    target = torch.tensor([1] * 6 + [0] * 2)
    before = ex.explain(xb, target, seed=3)
    path = ex.save(tmp_path / "c3lt")
    assert path.suffix == ".json" and (tmp_path / "c3lt.pt").exists()
    doc = json.loads(path.read_text())
    assert doc["schema"] == FIT_SCHEMA and doc["method"] == "C3LT"
    assert set(doc["record"]["fingerprints"]) == {"classifier", "generator", "encoder",
                                                   "discriminator"}
    loaded = C3LT.load(path, ex.classifier, **nets)
    assert (loaded.query_class, loaded.target_class, loaded.image_shape) == (0, 1, (1, 28, 28))
    assert loaded.info["history"] == ex.info["history"] and loaded.info["steps"] == 2
    for (k, p), q in zip(ex.maps.state_dict().items(), loaded.maps.state_dict().values()):
        assert torch.equal(p, q), k
    after = loaded.explain(xb, target, seed=3)
    assert torch.equal(after.x_cf, before.x_cf)
    assert torch.equal(after.meta["reconstruction"], before.meta["reconstruction"])
    # the variant reads the loaded record, and saves and loads as itself
    inv = C3LTInverted.from_fitted(loaded, invert_steps=2)
    assert inv.fit_record is loaded.fit_record and inv.config.invert_steps == 2
    a = inv.explain(xb, target, seed=0)
    inv.save(tmp_path / "inv")
    inv2 = Explainer.load(tmp_path / "inv", ex.classifier, **nets)
    assert isinstance(inv2, C3LTInverted) and inv2.config.invert_steps == 2
    assert torch.equal(inv2.explain(xb, target, seed=0).x_cf, a.x_cf)


def test_c3lt_fitted_is_the_record(tiny_classifier, c3lt):
    ex, nets = c3lt
    fresh = C3LT(tiny_classifier, epochs=1, **nets)
    assert not fresh.fitted and fresh.fit_record is None and fresh.maps is None
    assert fresh.info == {} and fresh.query_class is None
    with pytest.raises(AttributeError):
        fresh.fitted = True                      # no flag to set by hand
    with pytest.raises(RuntimeError, match="fit"):
        fresh.save("never")
    with pytest.raises(RuntimeError, match="fitted C3LT"):
        C3LTInverted.from_fitted(fresh)
    assert isinstance(ex.fit_record, FitRecord) and ex.fitted
    with pytest.raises(Exception):
        ex.fit_record.method = "other"           # frozen


def test_a_different_classifier_or_network_is_refused_by_name(c3lt, bars, data, tmp_path):
    ex, nets = c3lt
    path = ex.save(tmp_path / "c3lt")
    other = copy.deepcopy(ex.classifier)
    with torch.no_grad():
        other.head[-1].bias[0] += 1e-3
    with pytest.raises(ValueError, match=r"the classifier given .* not the one"):
        C3LT.load(path, other, **nets)
    torch.manual_seed(1)
    gan = DCGAN(ngf=8, ndf=8).eval()
    with pytest.raises(ValueError, match=r"the generator given .* not the one"):
        C3LT.load(path, ex.classifier, **{**nets, "generator": gan.generator})
    with pytest.raises(ValueError, match=r"the discriminator given"):
        C3LT.load(path, ex.classifier, **{**nets, "discriminator": gan.discriminator})
    with pytest.raises(ValueError, match="fitted with a discriminator"):
        C3LT.load(path, ex.classifier, generator=nets["generator"], encoder=nets["encoder"])
    # a network changed after fitting is no longer the one the mappings were fitted with
    enc = copy.deepcopy(nets["encoder"])
    with torch.no_grad():
        next(enc.parameters()).mul_(1.01)
    moved = C3LT(ex.classifier, ex.config, **{**nets, "encoder": enc})
    with pytest.raises(ValueError, match="the encoder given"):
        moved._adopt(ex.fit_record)


def test_another_method_schema_or_tensor_file_is_refused(c3lt, tiny_classifier, tmp_path):
    ex, nets = c3lt
    path = ex.save(tmp_path / "c3lt")
    with pytest.raises(ValueError, match="holds a saved 'C3LT', not a 'ExpGAN'"):
        ExpGAN.load(path, tiny_classifier)
    doc = json.loads(path.read_text())
    (tmp_path / "old.json").write_text(json.dumps({**doc, "schema": 99}))
    (tmp_path / "old.pt").write_bytes((tmp_path / "c3lt.pt").read_bytes())
    with pytest.raises(ValueError, match="schema version 99"):
        Explainer.load(tmp_path / "old", tiny_classifier, **nets)
    with pytest.raises(TypeError, match="C3LT.load takes the classifier and the networks"):
        C3LT.load(path, tiny_classifier, **nets, autoencoder=nets["encoder"])
    # the .pt of another save beside this .json
    AdvAttack(tiny_classifier, steps=2).save(tmp_path / "adv")
    (tmp_path / "c3lt.pt").write_bytes((tmp_path / "adv.pt").read_bytes())
    with pytest.raises(ValueError, match="not saved together"):
        C3LT.load(path, tiny_classifier, **nets)
    with pytest.raises(FileNotFoundError):
        Explainer.load(tmp_path / "nothing", tiny_classifier)


def test_expgan_round_trip_is_exact_and_checked(tiny_classifier, bars, tmp_path):
    x, y = bars
    ex = ExpGAN(tiny_classifier, epochs=1, batch_size=16, width=4).fit(
        x[y == 0][:16], x[y == 1][:16], pair=(0, 1))
    xb = torch.cat([x[y == 0][-4:], x[y == 1][-4:]])
    target = torch.tensor([1] * 4 + [0] * 4)
    before = ex.explain(xb, target, seed=0)
    ex.save(tmp_path / "expgan")
    loaded = Explainer.load(tmp_path / "expgan.pt", tiny_classifier)
    assert isinstance(loaded, ExpGAN) and loaded.pair == (0, 1)
    assert loaded.info == ex.info
    assert torch.equal(loaded.explain(xb, target, seed=0).x_cf, before.x_cf)
    other = copy.deepcopy(tiny_classifier)
    with torch.no_grad():
        other.head[-1].weight[0, 0] += 1e-3
    with pytest.raises(ValueError, match="classifier given"):
        ExpGAN.load(tmp_path / "expgan", other)


def test_cve_round_trip_keeps_its_pool_and_features(tiny_classifier, bars, tmp_path):
    x, y = bars
    ex = CVE(tiny_classifier, n_distractors=2).fit(x[y == 1][:40], y[y == 1][:40])
    cf = ex.explain(x[y == 0][:4], 1, seed=2)
    ex.save(tmp_path / "cve")
    loaded = CVE.load(tmp_path / "cve", tiny_classifier)
    for k in ("pool_index", "pool_x", "pool_y", "pool_f"):
        assert torch.equal(getattr(loaded, k), getattr(ex, k)), k
    again = loaded.explain(x[y == 0][:4], 1, seed=2)
    assert_same_cf(cf, again, seconds=False)
    assert torch.equal(again.meta["distractor"], cf.meta["distractor"])


def test_methods_that_learn_nothing_save_their_config(tiny_classifier, data, tmp_path):
    cem = CEM(tiny_classifier, max_iterations=3, clip=(-5.0, 5.0),
              autoencoder=data["autoencoder"])
    cem.save(tmp_path / "cem")
    back = Explainer.load(tmp_path / "cem", tiny_classifier, autoencoder=data["autoencoder"])
    assert back.config == cem.config and back.config.clip == (-5.0, 5.0)   # a tuple again
    assert back.fit_record is None and back.fitted
    # a config only: any classifier may be explained with it
    other = copy.deepcopy(tiny_classifier)
    with torch.no_grad():
        other.head[-1].bias[0] += 1.0
    assert AdvAttack.load(AdvAttack(tiny_classifier, steps=4).save(tmp_path / "adv"),
                          other).config.steps == 4
    # the .json edited by hand (another method named in it): its checksum refuses it
    doc = json.loads((tmp_path / "cem.json").read_text())
    doc["method"], doc["config"] = "Original Data", {"batch_size": 256}
    (tmp_path / "cem.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="do not match their checksum"):
        OriginalData.load(tmp_path / "cem", tiny_classifier)
    # re-signed (a forgery by hand): a learned method saved without its record is refused
    from cflib.explainers.records import checksum

    tensors = torch.load(tmp_path / "cem.pt", weights_only=True)
    doc["sha256"] = checksum(doc, tensors)
    (tmp_path / "cem.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="no fit record, but Original Data must be fitted"):
        OriginalData.load(tmp_path / "cem", tiny_classifier)
    del doc["sha256"]                                  # a checksum deleted: refused too
    (tmp_path / "cem.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="has no checksum"):
        OriginalData.load(tmp_path / "cem", tiny_classifier)


# -- Counterfactuals files ---------------------------------------------------------------------
@pytest.fixture
def cf(tiny_classifier, bars):
    x, y = bars
    return AdvAttack(tiny_classifier, steps=3).explain(x[y == 0][:6], 1, seed=0)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d["batches"][""].update(seconds="fast"), "do not match their checksum"),
    (lambda d: d["batches"][""].update(method="Mine"), "do not match their checksum"),
    (lambda d: d.pop("sha256"), "has no checksum"),
])
def test_a_saved_json_edited_in_any_field_is_refused(cf, tmp_path, edit, match):
    """The checksum covers the .json as well as the .pt: a changed method, time, meta or
    tensor name is seen; a deleted checksum is no way around it."""
    path = cf.save(tmp_path / "cf")
    doc = json.loads(path.read_text())
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=match):
        Counterfactuals.load(path)


def test_every_field_of_a_saved_batch_is_checked(cf, tmp_path):
    """A file re-signed by hand (out of scope for the checksum) still meets the field
    checks: a tensor name pointed at another tensor, a time that is not a number."""
    from cflib.explainers.records import checksum

    path = cf.save(tmp_path / "cf")
    tensors = torch.load(tmp_path / "cf.pt", weights_only=True)
    for field, value, match in (("success", {"__tensor__": "/x"}, "'success'"),
                                ("seconds", "fast", "'seconds'")):
        doc = json.loads(path.read_text())
        doc["batches"][""][field] = value
        doc["sha256"] = checksum(doc, tensors)
        path.with_name("bad.json").write_text(json.dumps(doc))
        (tmp_path / "bad.pt").write_bytes((tmp_path / "cf.pt").read_bytes())
        with pytest.raises(ValueError, match=match):
            Counterfactuals.load(tmp_path / "bad")


def test_counterfactuals_of_another_schema_version_are_refused(cf, tmp_path):
    path = cf.save(tmp_path / "cf")
    doc = json.loads(path.read_text())
    assert doc["schema"] == CF_SCHEMA and doc["kind"] == "cflib.Counterfactuals"
    path.write_text(json.dumps({**doc, "schema": CF_SCHEMA + 1}))
    with pytest.raises(ValueError, match=f"schema version {CF_SCHEMA + 1}"):
        Counterfactuals.load(path)
    with pytest.raises(FileNotFoundError):
        Counterfactuals.load(tmp_path / "missing")


@pytest.mark.parametrize("entry, msg", [
    (object(), r"meta entry 'x/meta.extra' is a object"),
    ({"a": [1, {2: "b"}]}, r"meta entry 'x/meta.extra.a.1' has a key 2 of type int"),
    (torch.nn.Linear(1, 1), "is a Linear"),
])
def test_a_meta_entry_of_an_unsupported_type_is_refused(cf, entry, msg, tmp_path):
    cf.meta["extra"] = entry
    with pytest.raises(TypeError, match=msg):
        save_counterfactuals(tmp_path / "cf", {"x": cf})
    assert not (tmp_path / "cf.json").exists()


def test_counterfactuals_keep_types_and_a_head_saves_only_its_rows(cf, tmp_path):
    cf.meta.update(pair=(0, 1), nan=float("nan"), none=None, nested={"t": cf.x[:2] * 0 + 1})
    cf.save(tmp_path / "all")
    back = Counterfactuals.load(tmp_path / "all")
    assert_same_cf(cf, back)
    big = cf.x.repeat(50, 1, 1, 1)
    many = Counterfactuals(**{**cf.__dict__, "x": big, "x_cf": big.clone(),
                              **{k: getattr(cf, k).repeat(50)
                                 for k in ("target", "pred", "pred_cf", "success")}})
    many.head(2).save(tmp_path / "head")
    assert (tmp_path / "head.pt").stat().st_size < (tmp_path / "all.pt").stat().st_size
    assert len(Counterfactuals.load(tmp_path / "head")) == 2
    # several batches in one file: load_counterfactuals, not Counterfactuals.load
    save_counterfactuals(tmp_path / "two", {"a": cf, "b": cf.head(3)})
    two = load_counterfactuals(tmp_path / "two")
    assert list(two) == ["a", "b"] and len(two["b"]) == 3
    with pytest.raises(ValueError, match="2 batches"):
        Counterfactuals.load(tmp_path / "two")


def test_a_quant_run_round_trips_the_recourse_its_figures_draw(tmp_path):
    """QuantRun.save writes every table row's recourse (its counterfactuals and per-query
    VD events, cost gaps, cosines, margins); QuantRun.load gives them back exactly, so the
    page's recourse grid renders from the files alone (a variant's recourse is not saved)."""
    import pandas as pd

    from cflib.bench.results import COLUMNS
    from cflib.bench.tables.quant import QuantRun, RowRecourse

    g = torch.Generator().manual_seed(0)
    n = 5

    def cf(method):
        x = torch.rand(n, 1, 28, 28, generator=g)
        return Counterfactuals(x, x.flip(-1), torch.full((n,), 3), torch.zeros(n, dtype=torch.long),
                               torch.full((n,), 3), torch.tensor([1, 1, 0, 1, 0], dtype=torch.bool),
                               seconds=0.5, method=method, meta={"steps": 40})

    def vec():
        return torch.rand(n, generator=g, dtype=torch.float64)

    rec = {(0, "", "FP32"): RowRecourse(cf("FP32"), None, None, None, None, None),
           (0, "", "PTQ INT8"): RowRecourse(cf("PTQ INT8"), torch.randn(n, 10, generator=g),
                                            vec(), vec(), vec(), vec()),
           (0, "teacher_K10", "KD+Quant"): RowRecourse(cf("KD+Quant"), None, vec(), vec(),
                                                       vec(), vec())}
    row = {c: None for c in COLUMNS}
    row.update(dataset="fmnist", method="FP32", metric="Accuracy", value=0.9, variant="",
               train_seed=0, data_seed=0, profile="smoke")
    one = pd.DataFrame({"bits": [8], "metric": ["Accuracy"], "value": [0.9],
                        "train_seed": [0], "profile": ["smoke"]})
    run = QuantRun(pd.DataFrame([row], columns=COLUMNS), recourse=rec, sweep=one, bits=one,
                   checks=one)
    run.save(tmp_path, "q")
    back = QuantRun.load(tmp_path, "q")
    assert set(back.recourse) == {(0, "", "FP32"), (0, "", "PTQ INT8")}
    assert back.train_seeds == [0]
    for key in back.recourse:
        a, b = rec[key], back.recourse[key]
        assert_same_cf(a.cf, b.cf)
        for k in ("logits_at_fp", "vd_events", "cost_gap", "dirsim", "margin"):
            assert_same(getattr(a, k), getattr(b, k), f"{key} {k}")


def test_bad_save_files_get_errors_that_name_the_file(tmp_path):
    """Each bad file names itself: JSON that is not JSON, a .pt that is not torch's, a
    file of another kind (with the loader that reads it), a .json beside another run's
    .pt, and a file of an unknown kind."""
    import re

    import pytest
    import torch

    from cflib.explainers import Counterfactuals

    x = torch.zeros(2, 1, 4, 4)
    cf = Counterfactuals(x=x, x_cf=x + 0.1, target=torch.tensor([1, 1]),
                         pred=torch.tensor([0, 0]), pred_cf=torch.tensor([1, 0]),
                         success=torch.tensor([True, False]), seconds=0.1, method="toy",
                         meta={"already_target": torch.tensor([False, False])})
    a, b = tmp_path / "a", tmp_path / "b"
    cf.save(a)
    Counterfactuals(**{**cf.__dict__, "x_cf": x + 0.5}).save(b)
    (tmp_path / "b.pt").replace(tmp_path / "a.pt")       # a's .json beside b's .pt
    with pytest.raises(ValueError, match=re.escape(f"{a}.json and {a}.pt do not match")):
        Counterfactuals.load(a)
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(f"{a}.json is not a saved")):
        Counterfactuals.load(a)
    cf.save(a)
    (tmp_path / "a.pt").write_bytes(b"\\0\\1\\2")
    with pytest.raises(ValueError, match=re.escape(f"{a}.pt is not the tensors")):
        Counterfactuals.load(a)
    cf.save(a)
    doc = (tmp_path / "a.json").read_text().replace("cflib.Counterfactuals", "cflib.Explainer")
    (tmp_path / "a.json").write_text(doc)
    with pytest.raises(ValueError, match="holds a saved cflib.Explainer.*<Method>.load"):
        Counterfactuals.load(a)
    (tmp_path / "a.json").write_text('{"kind": "something else"}')
    with pytest.raises(ValueError, match="its kind is 'something else'"):
        Counterfactuals.load(a)
