"""Guards without a side door (issue 62): a chapter's seal cannot be switched off by
deleting its record, a missing chapter is refused, the generated README block and results
page are bound to the results, and the record of a results file keeps who wrote it."""
from __future__ import annotations

import shutil

import nbformat
import pytest

from cflib.book.runs import digests
from cflib.book.runs.paths import CHAPTER_DIR, PROJECT_ROOT


@pytest.fixture
def book(tmp_path):
    """The committed chapters copied to a scratch folder."""
    folder = tmp_path / "chapters"
    shutil.copytree(CHAPTER_DIR, folder)
    return folder


def test_a_chapter_without_its_run_record_is_refused(book):
    path = book / "cross_dataset.ipynb"
    nb = nbformat.read(path, as_version=4)
    del nb.metadata["cflib"]
    nbformat.write(nb, path)
    bad = digests.check_seal("cross_dataset", book)
    assert bad and "has no run record" in bad[0] and "make chapter NB=cross_dataset" in bad[0]
    assert digests.check_outputs("cross_dataset", PROJECT_ROOT / "results", book)


def test_a_missing_chapter_is_refused(book):
    (book / "cross_dataset.ipynb").unlink()
    bad = digests.check_outputs("cross_dataset", PROJECT_ROOT / "results", book)
    assert bad and "is missing" in bad[0] and "git checkout" in bad[0]


@pytest.mark.data
def test_a_number_edited_in_the_readme_or_the_results_page_is_named(tmp_path):
    from cflib.book.report.readme import RESULTS_PAGE, generated_stale

    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    shutil.copy2(PROJECT_ROOT / "README.md", readme)
    shutil.copy2(RESULTS_PAGE, page)
    assert generated_stale(readme, PROJECT_ROOT / "results", page) == []
    text = readme.read_text()
    start = text.index("<!-- summary:start -->")
    i = text.index("0.", start)
    readme.write_text(text[:i] + "9." + text[i + 2:])           # one digit changed
    assert "summary block does not match" in " ".join(
        generated_stale(readme, PROJECT_ROOT / "results", page))
    page.write_text(page.read_text().replace("0.", "9.", 1))
    assert len(generated_stale(readme, PROJECT_ROOT / "results", page)) == 2


@pytest.mark.data
@pytest.mark.parametrize("cut", ["<!-- summary:start -->", "<!-- summary:end -->", "both"])
def test_a_readme_without_its_summary_markers_is_named_not_passed(tmp_path, cut):
    """Removing a marker used to switch the summary's check off (an edited number then
    passed verify); a missing, doubled or swapped marker is a finding of its own."""
    from cflib.book.report.readme import RESULTS_PAGE, generated_stale

    readme, page = tmp_path / "README.md", tmp_path / "results.md"
    shutil.copy2(RESULTS_PAGE, page)
    text = (PROJECT_ROOT / "README.md").read_text()
    for marker in (["<!-- summary:start -->", "<!-- summary:end -->"] if cut == "both" else [cut]):
        text = text.replace(marker, "")
    readme.write_text(text)
    bad = generated_stale(readme, PROJECT_ROOT / "results", page)
    assert len(bad) == 1 and "lost its summary block's markers" in bad[0]
    twice = (PROJECT_ROOT / "README.md").read_text() + "\n<!-- summary:end -->\n"
    readme.write_text(twice)
    assert "lost its summary block's markers" in generated_stale(readme, PROJECT_ROOT / "results",
                                                                  page)[0]


def test_a_record_keeps_who_wrote_an_unchanged_file(tmp_path):
    from cflib.book.runs.written import read_ledger, record_written

    f = tmp_path / "t.csv"
    f.write_text("a\n1\n")
    record_written([f], "python tool.py", tmp_path)
    with pytest.raises(ValueError, match="recorded already, unchanged"):
        record_written([f], "someone else", tmp_path)
    with pytest.raises(ValueError, match="--by must name"):
        record_written([f], " ", tmp_path)
    f.write_text("a\n2\n")                              # a new content: a new record
    record_written([f], "python tool.py --again", tmp_path)
    assert read_ledger(tmp_path)["t.csv"]["by"] == "python tool.py --again"


# -- the bench guards the classifier's behaviour, not only its weights ---------------------
@pytest.mark.parametrize("what, make, match", [
    ("a hook", lambda clf: lambda m, x, t: (clf[1].register_forward_hook(
        lambda mod, i, o: -o), x)[1], "a hook left on the classifier"),
    ("grad mode", lambda clf: lambda m, x, t: (__import__("torch").set_grad_enabled(False), x)[1],
     "gradient mode"),
    ("default dtype", lambda clf: lambda m, x, t: (__import__("torch").set_default_dtype(
        __import__("torch").float64), x)[1], "default dtype"),
    ("an exit", lambda clf: lambda m, x, t: __import__("sys").exit(0), "called sys.exit"),
    # forward replaced on the instance: no weight, no hook changes (probe 62, n23)
    ("forward patched", lambda clf: lambda m, x, t: (
        setattr(clf, "forward", (lambda f: lambda inp: f(inp).flip(-1))(clf.forward)), x)[1],
     "forward replaced on the model"),
    ("a submodule's forward patched", lambda clf: lambda m, x, t: (
        setattr(clf[1], "forward", lambda inp: inp[:, :3] * 0), x)[1],
     "forward replaced on 1"),
    ("its class swapped", lambda clf: lambda m, x, t: (
        setattr(clf[0], "__class__", type("Other", (__import__("torch").nn.Flatten,), {})),
        x)[1],
     "or its class"),
    ("default device", lambda clf: lambda m, x, t: (
        __import__("torch").set_default_device("meta"), x)[1], "default device"),
    ("a BaseException", lambda clf: lambda m, x, t: (_ for _ in ()).throw(_Stop("no")),
     "failed on table t: _Stop: no"),
])
def test_a_method_that_changes_the_classifier_or_torch_is_refused_by_name(what, make, match):
    import torch

    from cflib.bench.methods import MethodError, _guard, state_of
    from cflib.explainers import from_function

    clf = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 3)).eval()
    with torch.no_grad():
        clf[1].weight.zero_()
        clf[1].bias.copy_(torch.tensor([3.0, 0.0, -1.0]))    # every query in class 0
    fn = make(clf)

    def mine(model, x, target):
        return fn(model, x, target)

    ex = _guard(from_function(mine)(clf), "Mine", "table t", clf, state_of(clf))
    before = (torch.is_grad_enabled(), torch.get_default_dtype())
    with pytest.raises(MethodError, match=match):
        ex.explain(torch.zeros(2, 1, 4, 4), 1)
    # torch's global settings are put back, whatever the method did
    assert (torch.is_grad_enabled(), torch.get_default_dtype()) == before
    assert torch.get_default_device() == torch.device("cpu")


class _Stop(BaseException):
    """A method's own BaseException (not an Exception): named like any failure."""


def test_a_method_that_changes_torch_while_being_built_is_refused_before_any_run():
    """Global state changed in ``__init__`` (probe 62, n21) was never compared: the
    probe build on the stand-in classifier now is; and an interrupt still passes."""
    import torch

    from cflib.bench.methods import MethodError, probe, resolve_method
    from cflib.bench.tables.registry import get_spec
    from cflib.explainers import Explainer

    class NoGrad(Explainer):
        name = "NoGrad"

        def __init__(self, classifier, config=None):
            super().__init__(classifier, config)
            torch.set_grad_enabled(False)

        def _generate(self, x, target, query, generator):
            return x

    class Interrupted(NoGrad):
        name = "Interrupted"

        def __init__(self, classifier, config=None):
            raise KeyboardInterrupt

    table = get_spec("c3lt-mnist")
    with pytest.raises(MethodError, match="gradient mode .*when built"):
        probe(resolve_method(NoGrad), table)
    assert torch.is_grad_enabled()                     # put back
    with pytest.raises(KeyboardInterrupt):
        probe(resolve_method(Interrupted), table)


def test_a_linked_seed_folder_or_a_record_outside_results_is_refused(tmp_path):
    """A seed folder that is a link was published by `cflib readme` and passed `verify`
    (probe 62, n11); a record naming a file outside the results folder passed (n06)."""
    import json

    from cflib.book.runs.written import LEDGER, check_written, read_ledger
    from cflib.book.spread import read_sweep

    sweep = tmp_path / "sweep" / "ch" / "standard"
    (sweep / "seed1").mkdir(parents=True)
    (sweep / "seed1" / "ch.csv").write_text("method,metric,value\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (sweep / "seed3").symlink_to(elsewhere)
    with pytest.raises(ValueError, match="seed3 is a link to a folder"):
        read_sweep("ch", "standard", root=tmp_path / "sweep")
    (tmp_path / LEDGER).write_text(json.dumps({"format": 1, "files": {}}))
    bad = check_written(tmp_path, claimed={"sweep/ch/standard/seed1/ch.csv"})
    assert any("seed3 is a link to a folder" in b for b in bad), bad
    for name in ("../README.md", "/etc/passwd", "a/../../b.csv"):
        (tmp_path / LEDGER).write_text(json.dumps(
            {"format": 1, "files": {name: {"sha256": "0" * 64}}}))
        with pytest.raises(ValueError, match="which is not a file under"):
            read_ledger(tmp_path)


# -- the shipped networks are never retrained in silence -------------------------------------
def test_networks_without_their_manifest_or_entry_are_an_error(tmp_path, monkeypatch):
    import json

    import torch

    from cflib import shipped

    root = tmp_path / "networks"
    shipped.write(root, [{"kind": "toy", "key": "abc", "config": {"a": 1},
                          "state": {"w": torch.ones(2)}, "info": {}, "trained_on": {},
                          "provenance": {"commit": "x", "code": {}}}])
    doc = json.loads((root / shipped.MANIFEST).read_text())
    doc["networks"] = {}                                  # the entry removed
    (root / shipped.MANIFEST).write_text(json.dumps(doc))
    shipped._manifest.cache_clear()
    with pytest.raises(ValueError, match="not listed in MANIFEST.json.*CFLIB_SHIPPED=off"):
        shipped.load("toy", "abc", {"a": 1}, torch.nn.Linear(1, 1), root)
    from cflib.bench.networks import check

    assert check(tmp_path / "nowhere") and "lists no network" in check(root)[0]
    # shipping never writes over a file its manifest does not list
    with pytest.raises(ValueError, match="never written over"):
        shipped.write(root, [{"kind": "toy", "key": "abc", "config": {"a": 1},
                              "state": {"w": torch.ones(2)}, "info": {}, "trained_on": {},
                              "provenance": {"commit": "x", "code": {}}}])


def test_networks_list_and_ship_never_pass_over_a_folder_that_fails_its_check(tmp_path):
    """`cflib networks list` with the manifest gone said "0 networks" and exited 0 (the 31
    files still there), and `ship` left a stray file unnamed: both now list what they can,
    then exit naming every problem, as `check` does."""
    import torch

    from cflib import shipped
    from cflib.book.cli import main

    root = tmp_path / "networks"
    shipped.write(root, [{"kind": "toy", "key": "abc", "config": {"a": 1},
                          "state": {"w": torch.ones(2)}, "info": {}, "trained_on": {},
                          "provenance": {"commit": "x", "code": {}}}])
    shipped._manifest.cache_clear()
    main(["networks", "list", "--root", str(root)])                      # whole: passes
    (root / "toy-0000.safetensors").write_bytes(b"stray")
    with pytest.raises(SystemExit, match=r"cflib networks list: toy-0000\.safetensors: not "
                                         r"listed in MANIFEST\.json"):
        main(["networks", "list", "--root", str(root)])
    (root / shipped.MANIFEST).unlink()
    shipped._manifest.cache_clear()
    with pytest.raises(SystemExit, match=r"cflib networks list: .* has no MANIFEST\.json"):
        main(["networks", "list", "--root", str(root)])


@pytest.mark.data
def test_verify_names_a_shipped_network_its_manifest_does_not_hold(tmp_path, monkeypatch):
    """verify read the chapters and the results, not networks/: a manifest entry removed
    or the manifest deleted passed it."""
    import shutil as sh

    from cflib.bench import networks
    from cflib.book.cli import main

    root = tmp_path / "networks"
    sh.copytree(networks.NETWORKS_DIR, root)
    monkeypatch.setattr(networks, "NETWORKS_DIR", root)
    main(["verify"])                                   # the committed folder: whole
    (root / "MANIFEST.json").unlink()
    with pytest.raises(SystemExit, match=r"networks/: .* has no MANIFEST\.json"):
        main(["verify"])
