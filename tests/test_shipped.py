"""The shipped measuring networks (cflib.shipped) and the provenance of every network
(cflib.provenance): loaded before the cache, never replaced silently, and a network
trained by other code is named as such."""
from __future__ import annotations

import json
import logging

import pytest
import torch
from torch import nn

from cflib import provenance as prov
from cflib import shipped
from cflib.cache import FORMAT, cache_key, cache_path, cached, networks_used

CFG = {"kind": "toy", "dataset": "mnist", "seed": 0, "profile": "standard", "epochs": 1}


def make():
    return nn.Linear(3, 2)


def never(model):
    raise AssertionError("a shipped network was retrained")


def _ship(folder, value=5.0, config=CFG):
    net = make()
    with torch.no_grad():
        net.weight.fill_(value)
        net.bias.zero_()
    shipped.write(folder, [{"kind": "toy", "key": cache_key(config), "config": config,
                            "state": net.state_dict(), "info": {"test_accuracy": 0.5},
                            "trained_on": {"device_type": "cpu", "threads": 1},
                            "provenance": prov.provenance(make, seconds=1.0)}])
    return folder / f"toy-{cache_key(config)}.safetensors"


@pytest.fixture()
def ships(tmp_path, tmp_cache, monkeypatch):
    path = _ship(tmp_path / "networks")
    monkeypatch.setenv("CFLIB_SHIPPED", str(tmp_path / "networks"))
    return path


def test_a_shipped_network_is_loaded_before_the_cache_and_never_trained(ships):
    before = len(networks_used())
    m, info = cached("toy", CFG, make, never)
    assert (m.weight == 5.0).all() and info == {"test_accuracy": 0.5}
    used = networks_used(before)
    assert [(u["kind"], u["origin"]) for u in used] == [("toy", "shipped")]
    assert "by today's training code" in used[0]["provenance"]
    assert not cache_path("toy", CFG).exists(), "the cache is not written"
    # at another thread count too: the shipped network is the book's, wherever it runs
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1 if threads > 1 else 2)
        m, _ = cached("toy", CFG, make, never)
    finally:
        torch.set_num_threads(threads)
    assert (m.weight == 5.0).all()


def test_an_edited_shipped_file_is_an_error_before_any_training(ships):
    data = bytearray(ships.read_bytes())
    data[-1] ^= 1
    ships.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="fails its sha256.*git checkout"):
        cached("toy", CFG, make, never)


def test_a_manifest_that_lists_another_config_is_an_error(ships):
    manifest = ships.parent / "MANIFEST.json"
    data = json.loads(manifest.read_text())
    entry = next(iter(data["networks"].values()))
    entry["config"]["epochs"] = 99
    manifest.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="another config"):
        cached("toy", CFG, make, never)


def test_shipping_off_retrains_and_a_bad_value_is_refused(ships, monkeypatch):
    monkeypatch.setenv("CFLIB_SHIPPED", "off")
    m, info = cached("toy", CFG, make, lambda net: {"trained": 1})
    assert info == {"trained": 1} and not (m.weight == 5.0).all()
    monkeypatch.setenv("CFLIB_SHIPPED", "/nowhere/at/all")
    with pytest.raises(ValueError, match="holds no MANIFEST.json"):
        cached("toy", CFG, make, never)


def test_a_cached_network_records_its_provenance_and_older_code_is_named(
        tmp_cache, monkeypatch, caplog):
    from cflib.training import train_classifier

    def train(net):
        x, y = torch.zeros(4, 3), torch.zeros(4, dtype=torch.long)
        return {"epochs": train_classifier(net, x, y, 0)}

    monkeypatch.setenv("CFLIB_SHIPPED", "off")
    cached("toy", CFG, make, train)
    payload = torch.load(cache_path("toy", CFG), weights_only=True)
    assert payload["format"] == FORMAT == 3
    code = payload["provenance"]["code"]
    # the training reaches train_classifier (a cflib function it names), not the rest
    assert "cflib/training.py::train_classifier" in code
    assert not any("zoo.py" in k for k in code), sorted(code)
    assert payload["provenance"]["commit"] == prov.commit()
    # nothing it reached changed: the entry is today's, loaded without a word
    before = len(networks_used())
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="cflib"):
        cached("toy", CFG, make, never)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert "by today's training code" in networks_used(before)[0]["provenance"]
    # a reached definition changed: still loaded, and the log names it
    real = prov._file_definitions

    def edited(module, mtime):
        defs = dict(real(module, mtime))
        if module == "cflib/training.py":
            defs["train_classifier"] = "0" * 12
        return defs

    monkeypatch.setattr(prov, "_file_definitions", edited)
    before = len(networks_used())
    with caplog.at_level(logging.WARNING, logger="cflib"):
        cached("toy", CFG, make, never)
    assert ("training code has changed since (cflib/training.py::train_classifier)"
            in caplog.text)
    assert networks_used(before)[0]["origin"] == "cache"


def test_definitions_split_dict_entries_and_ignore_imports_and_docstrings():
    a = prov.definitions(text='import os\nP = {"a": 1, "b": 2}\ndef f():\n    """doc"""\n'
                              '    return 1\n')
    b = prov.definitions(text='import sys\nP = {"a": 1, "b": 3, "c": 4}\ndef f():\n'
                              '    return 1\n')
    assert a["P['a']"] == b["P['a']"] and a["P['b']"] != b["P['b']"] and a["f"] == b["f"]


def test_an_edited_provenance_fails_the_checksum(tmp_cache, monkeypatch):
    monkeypatch.setenv("CFLIB_SHIPPED", "off")
    cached("toy", CFG, make, lambda net: {"a": 1})
    path = cache_path("toy", CFG)
    payload = torch.load(path, weights_only=True)
    payload["provenance"]["commit"] = "forged"
    torch.save(payload, path)
    calls = []
    cached("toy", CFG, make, lambda net: calls.append(1) or {"a": 2})
    assert calls == [1], "an edited provenance is retrained, as an edited weight"


def test_a_format_2_entry_loads_and_says_it_recorded_no_provenance(tmp_cache, monkeypatch):
    from cflib.cache import _normalise, keyed, payload_checksum

    monkeypatch.setenv("CFLIB_SHIPPED", "off")
    net = make()
    state = net.state_dict()
    path = cache_path("toy", CFG)
    path.parent.mkdir(parents=True)
    torch.save({"format": 2, "config": _normalise(keyed(CFG)), "state_dict": state,
                "sha256": payload_checksum(state, {"a": 0}), "info": {"a": 0}}, path)
    before = len(networks_used())
    _, info = cached("toy", CFG, make, never)
    assert info == {"a": 0}
    assert "recorded no provenance" in networks_used(before)[0]["provenance"]


@pytest.mark.slow
def test_ship_then_every_measuring_network_loads_from_the_shipped_folder(
        tmp_path, tmp_cache, monkeypatch):
    """cflib networks ship at smoke: every measuring network written with its manifest;
    then, with an empty cache, each is loaded from the shipped folder (nothing trained),
    and the folder checks clean until a file is edited."""
    from cflib.bench import networks as nets
    from cflib.cache import events

    monkeypatch.setenv("CFLIB_SHIPPED", "off")
    manifest, written = nets.ship(tmp_path / "networks", profile="smoke")
    kinds = sorted({n["kind"] for n in written})
    assert kinds == ["autoencoder", "bnn_classifier", "classifier", "feature_net",
                     "judge_classifier", "judge_mlp", "judge_resnet", "mc_dropout_classifier",
                     "small_cnn"]
    assert all(n["provenance"]["commit"] == prov.commit() for n in written)
    assert nets.check(tmp_path / "networks") == []
    monkeypatch.setenv("CFLIB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("CFLIB_SHIPPED", str(tmp_path / "networks"))
    used = nets.measuring_networks("smoke")
    assert len(used) == len(written) and {u["origin"] for u in used} == {"shipped"}
    assert not events(tmp_path / "empty-cache"), "nothing was trained"
    f = sorted((tmp_path / "networks").glob("classifier-*.safetensors"))[0]
    f.write_bytes(f.read_bytes()[:-1] + b"\0")
    assert any(f.name in p and "sha256" in p for p in nets.check(tmp_path / "networks"))
