"""What a chapter's compute depends on: the definitions it ran (cflib.trace), each with a
digest (cflib.definitions).  Each kind of change that alters results must change the
digest of a definition the run recorded; a change that cannot alter them (an unused
helper, a docstring, a comment, a definition nothing ran) must change none."""
from __future__ import annotations

import importlib
import sys
import uuid

import pytest

from cflib import trace
from cflib.definitions import (
    CHECKOUT,
    PACKAGE,
    SKELETON,
    definitions,
    key_digest,
    key_lines,
    module_code,
    unit_digests,
)

V1 = '''\
"""A scratch module."""
import functools

SCALE = 2.0
TABLE = {"a": 1, "b": 2}


def helper(x):
    """Doubles."""
    return x * SCALE


def other(x):
    return x + 1


def deco(fn):
    @functools.wraps(fn)
    def wrapped(*a, **k):
        return fn(*a, **k)
    return wrapped


class Config:
    steps = 3

    def run(self, x, bias=0.5):
        return helper(x) * self.steps + bias


@deco
def decorated(x):
    return x


KEY = lambda x: x - 1   # noqa: E731


def main(x):
    return Config().run(x) + decorated(x) + KEY(x)
'''


@pytest.fixture
def scratch():
    """A module under cflib/ (so that the tracer sees it), written, imported, removed."""
    name = f"_scratch_{uuid.uuid4().hex[:8]}"
    path = PACKAGE / f"{name}.py"
    mods = []

    def load(text):
        path.write_text(text)
        importlib.invalidate_caches()
        sys.modules.pop(f"cflib.{name}", None)
        mod = importlib.import_module(f"cflib.{name}")
        mods.append(mod)
        return mod

    load.path = path
    load.rel = path.relative_to(CHECKOUT).as_posix()
    try:
        yield load
    finally:
        path.unlink(missing_ok=True)
        sys.modules.pop(f"cflib.{name}", None)


def _ran(mod, fn="main", arg=1.0):
    trace.start()
    try:
        getattr(mod, fn)(arg)
    finally:
        seg = trace.stop()
    return trace.record(seg)


def _stale(recorded: dict) -> list[str]:
    return [k for k, v in recorded.items() if key_digest(k) != v]


def test_units_cut_a_module_and_skeleton_holds_the_rest():
    units = unit_digests("x.py", V1)
    assert {"helper", "other", "deco", "Config.run", "decorated", "main", SKELETON} <= set(units)
    # a docstring or comment edit, or an unused helper appended, leaves every digest
    edited = V1.replace('"""Doubles."""', '"""Doubles its input."""').replace(
        "return x + 1", "return x + 1  # one more") + "\n\ndef unused():\n    return 0\n"
    after = unit_digests("x.py", edited)
    assert all(after[k] == v for k, v in units.items())
    # a constant is the skeleton's; a class attribute too
    assert unit_digests("x.py", V1.replace("SCALE = 2.0", "SCALE = 3.0"))[SKELETON] != units[SKELETON]
    assert unit_digests("x.py", V1.replace("steps = 3", "steps = 4"))[SKELETON] != units[SKELETON]
    assert key_lines(V1, "Config.run")[0] < key_lines(V1, "Config.run")[1]


def test_the_top_level_cut_is_what_network_provenance_recorded():
    """definitions() (a network's provenance) digests a top-level function as its unit."""
    top = definitions(text=V1)
    units = unit_digests("x.py", V1)
    assert top["helper"] == units["helper"] and top["main"] == units["main"]
    assert "TABLE['a']" in top and "Config" in top


def test_the_tracer_records_what_ran_and_not_what_did_not(scratch):
    mod = scratch(V1)
    rec = _ran(mod)
    mine = {k.split("::", 1)[1] for k in rec if k.startswith(scratch.rel)}
    assert {"main", "helper", "Config.run", "decorated", "deco", SKELETON} <= mine
    assert "other" not in mine
    # what an import of this module ran is not counted: only calls are
    assert all(not k.endswith("::<module>") or k.startswith("cflib/") for k in rec)


@pytest.mark.parametrize("change", [
    ("module constant", "SCALE = 2.0", "SCALE = 2.5"),
    ("default argument", "bias=0.5", "bias=0.25"),
    ("class attribute", "    steps = 3", "    steps = 5"),
    ("decorator", "        return fn(*a, **k)", "        return 2 * fn(*a, **k)"),
    ("lambda", "KEY = lambda x: x - 1", "KEY = lambda x: x - 2"),
    ("a definition newly called (its caller changed)",
     "return helper(x) * self.steps + bias", "return other(x) * self.steps + bias"),
    ("a same-result local in a definition that ran",
     "return x * SCALE", "y = x * SCALE\n    return y"),
])
def test_each_kind_of_change_that_can_alter_results_makes_the_run_stale(scratch, change):
    what, old, new = change
    mod = scratch(V1)
    rec = _ran(mod)
    assert _stale(rec) == []
    assert old in V1
    scratch.path.write_text(V1.replace(old, new))
    assert _stale(rec), f"a {what} changed and no recorded definition noticed"


@pytest.mark.parametrize("change", [
    ("an unused helper", "\n\ndef unused():\n    return 1\n"),
    ("a definition nothing ran changed", None),
    ("a docstring", None),
])
def test_changes_that_cannot_alter_results_leave_the_run_fresh(scratch, change):
    what, append = change
    mod = scratch(V1)
    rec = _ran(mod)
    text = V1 + (append or "")
    if what == "a definition nothing ran changed":
        text = V1.replace("return x + 1", "return x + 2")
    if what == "a docstring":
        text = V1.replace('"""Doubles."""', '"""Twice x."""')
    scratch.path.write_text(text)
    assert _stale(rec) == [], what


def test_a_module_imported_by_what_ran_counts_with_its_skeleton(scratch):
    """A constant read from another module (imported at module level) is an input."""
    mod = scratch(V1.replace('import functools', 'import functools\n\nfrom cflib.env import _TRUE'))
    rec = _ran(mod)
    assert "cflib/env.py::<module>" in rec
    assert "cflib/env.py::threads" not in rec      # its functions count only when they run


def test_segments_nest_and_notes_count_for_the_enclosing_run(scratch):
    mod = scratch(V1)
    trace.start()
    try:
        with trace.segment() as seg:
            mod.helper(1.0)
        trace.note({"cflib/x.py::noted": "abc"})
        mod.other(1.0)
    finally:
        outer = trace.stop()
    inner = trace.record(seg)
    assert any(k.endswith("::helper") for k in inner)
    assert not any(k.endswith("::other") for k in inner)
    everything = trace.record(outer)
    assert any(k.endswith("::helper") for k in everything)
    assert any(k.endswith("::other") for k in everything)
    assert everything.get("cflib/x.py::noted") == "abc"


def test_paused_code_is_not_recorded(scratch):
    mod = scratch(V1)
    trace.start()
    try:
        with trace.paused():
            mod.other(1.0)
        mod.helper(1.0)
    finally:
        rec = trace.record(trace.stop())
    assert any(k.endswith("::helper") for k in rec)
    assert not any(k.endswith("::other") for k in rec)


def test_a_second_tracer_is_refused_clearly():
    sys.settrace(lambda *a: None)
    try:
        with pytest.raises(RuntimeError, match="another tracer"):
            trace.start()
    finally:
        sys.settrace(None)
    assert not trace.active()


def test_module_code_names_the_innermost_unit_of_a_line():
    code = module_code("x.py", V1)
    line = V1.splitlines().index("        return helper(x) * self.steps + bias") + 1
    assert code.unit_at(line) == "Config.run"
    assert code.unit_at(1) is None


# -- certificates: which changed lines must have run ---------------------------------------
def test_a_change_in_a_branch_the_twins_never_ran_is_refused():
    from cflib.book.runs.certify import unrun_changes

    old = V1
    new = V1.replace("return x * SCALE", "if x > 1e9:\n        return 0.0\n    return x * SCALE")
    lines_new = new.splitlines()
    ran = {i + 1 for i, line in enumerate(lines_new) if "return x * SCALE" in line
           or "if x > 1e9" in line}
    ran_old = {i + 1 for i, line in enumerate(old.splitlines()) if "return x * SCALE" in line}
    key = "cflib/x.py::helper"
    # the new branch's body never ran (only at standard, say): refused, the line named
    missing = unrun_changes(key, old, new, ran_old, ran)
    assert missing and all("line" in m for m in missing)
    body = next(i + 1 for i, line in enumerate(lines_new) if "return 0.0" in line)
    assert unrun_changes(key, old, new, ran_old, ran | {body}) == []


def test_a_changed_default_counts_only_when_the_function_ran():
    from cflib.book.runs.certify import unrun_changes

    new = V1.replace("bias=0.5", "bias=0.25")
    key = "cflib/x.py::Config.run"
    def_line = next(i + 1 for i, line in enumerate(V1.splitlines()) if "def run(" in line)
    body_line = def_line + 1
    assert unrun_changes(key, V1, new, {def_line}, {def_line})          # imported, not run
    assert unrun_changes(key, V1, new, {def_line, body_line}, {def_line, body_line}) == []


def test_outputs_are_compared_without_clocks(tmp_path):
    import pandas as pd

    from cflib.book.runs.certify import normalised

    a = pd.DataFrame({"method": ["A", "A"], "metric": ["IM1", "Seconds_per_CF"],
                      "value": [0.5, 1.0], "provenance": ["x", "y"]})
    b = a.assign(value=[0.5, 2.0], provenance=["z", "w"])
    a.to_csv(tmp_path / "a.csv", index=False)
    b.to_csv(tmp_path / "b.csv", index=False)
    assert normalised(tmp_path / "a.csv") == normalised(tmp_path / "b.csv")
    b.assign(value=[0.5000001, 2.0]).to_csv(tmp_path / "b.csv", index=False)
    assert normalised(tmp_path / "a.csv") != normalised(tmp_path / "b.csv")


def test_a_skeleton_change_counts_only_the_skeletons_lines():
    """A module's skeleton holds no unit: an import removed (the skeleton changed) beside a
    change inside a function that never ran is, for a run that recorded only the
    skeleton, the import's line alone (the function's change is its own unit's)."""
    from cflib.book.runs.certify import unrun_changes

    old = "import os\nimport sys\n\n\ndef f(x):\n    return x + 1\n"
    new = "import os\n\n\ndef f(x):\n    return x + 2\n"
    # the old twin ran the imports (lines 1-2), nobody ran f's body
    assert unrun_changes("cflib/m.py::<module>", old, new, {1, 2, 5}, {1, 4}) == []
    assert unrun_changes("cflib/m.py::f", old, new, {1, 2, 5}, {1, 4})   # f's own: refused
