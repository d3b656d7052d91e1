"""Memoized steps (cflib.memo): read back while the code they ran is unchanged, computed
again as soon as it changes, never half-written, never in the repository."""
from __future__ import annotations

import json

import pytest
import torch
from test_trace import V1, scratch  # noqa: F401  (the fixture; tests/ is on sys.path)

from cflib import memo, trace
from cflib.bench.runner import Explained, explained, state_key, tensor_digest
from cflib.explainers import Counterfactuals


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CFLIB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CFLIB_MEMO", raising=False)
    return tmp_path / "cache"


def _save(value, folder):
    (folder / "v.json").write_text(json.dumps(value))


def _load(folder):
    return json.loads((folder / "v.json").read_text())


def test_a_step_is_computed_once_then_read_back(scratch):  # noqa: F811
    mod = scratch(V1)
    calls = []

    def compute():
        calls.append(1)
        return mod.main(1.0)

    a = memo.memoized("toy", {"x": 1}, compute, _save, _load)
    b = memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert a == b and len(calls) == 1
    memo.memoized("toy", {"x": 2}, compute, _save, _load)        # other inputs: computed
    assert len(calls) == 2


def test_a_change_of_the_code_the_step_ran_computes_it_again(scratch):  # noqa: F811
    mod = scratch(V1)
    calls = []

    def compute():
        calls.append(1)
        return mod.main(1.0)

    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    scratch.path.write_text(V1.replace("SCALE = 2.0", "SCALE = 3.0"))
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 2
    # a change of code the step did not run keeps it
    scratch.path.write_text(V1.replace("SCALE = 2.0", "SCALE = 3.0")
                            .replace("return x + 1", "return x + 7"))
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 2


def test_a_hit_counts_the_steps_code_for_the_enclosing_run(scratch):  # noqa: F811
    mod = scratch(V1)
    memo.memoized("toy", {"x": 1}, lambda: mod.main(1.0), _save, _load)
    trace.start()
    try:
        memo.memoized("toy", {"x": 1}, lambda: pytest.fail("computed"), _save, _load)
    finally:
        rec = trace.record(trace.stop())
    assert any(k.endswith("::Config.run") for k in rec)


def test_off_broken_or_unreadable_entries_are_computed(scratch, monkeypatch, cache):  # noqa: F811
    mod = scratch(V1)
    calls = []

    def compute():
        calls.append(1)
        return mod.main(1.0)

    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    for record in (cache / "memo" / "toy").glob("*/record.json"):
        record.write_text("{not json")
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 2
    for v in (cache / "memo" / "toy").glob("*/v.json"):
        v.write_text("[")                   # the payload cut short
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 3
    monkeypatch.setenv("CFLIB_MEMO", "off")
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 4
    monkeypatch.setenv("CFLIB_MEMO", "maybe")
    with pytest.raises(ValueError, match="CFLIB_MEMO"):
        memo.memoized("toy", {"x": 1}, compute, _save, _load)


def test_counterfactuals_come_back_bit_equal():
    x = torch.rand(5, 1, 4, 4) * 2 - 1
    cf = Counterfactuals(x, x.flip(0), torch.full((5,), 3), torch.zeros(5, dtype=torch.long),
                         torch.full((5,), 3), torch.ones(5, dtype=torch.bool), 0.25, "Toy",
                         {"config": {"steps": 3}, "already_target": [False] * 5})
    first = explained("toy", {"k": 1}, lambda: Explained(cf, {"budget_fraction": 0.5}))
    again = explained("toy", {"k": 1}, lambda: pytest.fail("computed"))
    assert torch.equal(again.cf.x_cf, first.cf.x_cf) and again.cf.seconds == 0.25
    assert again.extra == {"budget_fraction": 0.5} and again.cf.meta["config"] == {"steps": 3}


def test_the_key_of_a_built_method_changes_with_its_state():
    class Toy:
        def __init__(self, w, pool):
            self.config = {"steps": 3}
            self.net = torch.nn.Linear(2, 2)
            with torch.no_grad():
                self.net.weight.fill_(w)
                self.net.bias.fill_(0.0)
            self.pool = pool

    a = state_key(Toy(1.0, torch.zeros(3)))
    assert a == state_key(Toy(1.0, torch.zeros(3)))
    assert a != state_key(Toy(2.0, torch.zeros(3)))       # other weights
    assert a != state_key(Toy(1.0, torch.ones(3)))        # another pool
    assert tensor_digest(torch.zeros(3)) != tensor_digest(torch.zeros(4))


def test_a_network_is_told_by_its_content_not_its_files_date(scratch, monkeypatch, cache):  # noqa: F811
    """The same network file in another clone or worktree (another modification time) is
    the same network; other bytes of the same size are not; an entry kept before files were
    told by content ([size, mtime]) is compared as it was."""
    import os

    mod = scratch(V1)
    cache.mkdir(parents=True, exist_ok=True)
    net = cache / "toy-net.pt"
    net.write_bytes(b"weights-a")
    used = [{"kind": "toy", "entry": net.name, "origin": "cache", "provenance": "", "code": {}}]
    asked = []

    def networks_used(since=0):
        """The step asks which networks were used before and after it computes: none, then
        ours."""
        asked.append(since)
        return used if len(asked) % 2 == 0 else []

    monkeypatch.setattr(memo, "networks_used", networks_used)
    calls = []

    def compute():
        calls.append(1)
        return mod.main(1.0)

    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    os.utime(net, ns=(1, 1))                        # the same bytes, another date
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 1
    net.write_bytes(b"weights-b")                   # other bytes of the same size
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 2
    # an entry of the earlier format: size and date, compared as they were
    record = next((cache / "memo" / "toy").glob("*/record.json"))
    kept = json.loads(record.read_text())
    st = net.stat()
    kept["networks"][0]["stat"] = [st.st_size, st.st_mtime_ns]
    record.write_text(json.dumps(kept))
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 2
    os.utime(net, ns=(2, 2))
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 3
    net.unlink()                                    # gone: computed again
    memo.memoized("toy", {"x": 1}, compute, _save, _load)
    assert len(calls) == 4
