"""The weight cache: train once, load after, never load a corrupt or mismatched file."""
import torch
from torch import nn

from cflib.cache import cache_path, cached


def make():
    return nn.Linear(3, 2)


class Trainer:
    def __init__(self):
        self.calls = 0

    def __call__(self, model):
        self.calls += 1
        with torch.no_grad():
            model.weight.fill_(float(self.calls))
        return {"calls": self.calls}


CFG = {"kind": "toy", "dataset": "mnist", "seed": 0, "profile": "smoke", "epochs": 1}


def test_trains_once_then_loads(tmp_cache):
    tr = Trainer()
    m1, info1 = cached("toy", CFG, make, tr)
    m2, info2 = cached("toy", CFG, make, tr)
    assert tr.calls == 1 and info2 == info1 == {"calls": 1}
    assert torch.equal(m1.weight, m2.weight)
    assert not list(tmp_cache.glob("*.tmp")), "no temporary file left behind"


def test_key_changes_with_config(tmp_cache):
    other = {**CFG, "dataset": "fmnist"}
    assert cache_path("toy", CFG) != cache_path("toy", other)
    tr = Trainer()
    cached("toy", CFG, make, tr)
    cached("toy", other, make, tr)
    assert tr.calls == 2


def test_corrupt_file_is_retrained(tmp_cache):
    tr = Trainer()
    cached("toy", CFG, make, tr)
    cache_path("toy", CFG).write_bytes(b"not a checkpoint")
    m, info = cached("toy", CFG, make, tr)
    assert tr.calls == 2 and info == {"calls": 2}
    # and the retrained weights replaced the corrupt file
    _, info = cached("toy", CFG, make, tr)
    assert tr.calls == 2


def test_mismatched_file_is_retrained(tmp_cache):
    tr = Trainer()
    cached("toy", CFG, make, tr)
    path = cache_path("toy", CFG)
    payload = torch.load(path, weights_only=True)
    payload["config"]["epochs"] = 99          # written for another config
    torch.save(payload, path)
    cached("toy", CFG, make, tr)
    assert tr.calls == 2


def test_wrong_architecture_is_retrained(tmp_cache):
    tr = Trainer()
    cached("toy", CFG, make, tr)
    cached("toy", CFG, lambda: nn.Linear(4, 2), tr)
    assert tr.calls == 2


def test_fingerprint_follows_the_weights():
    import torch

    from cflib.cache import fingerprint

    torch.manual_seed(0)
    a = torch.nn.Linear(3, 2)
    b = torch.nn.Linear(3, 2)
    b.load_state_dict(a.state_dict())
    assert fingerprint(a) == fingerprint(b) and len(fingerprint(a)) == 16
    with torch.no_grad():
        b.weight[0, 0] += 1e-6
    assert fingerprint(a) != fingerprint(b)


def test_learned_explainer_cache_key_holds_the_classifier(tmp_cache, tiny_classifier, bars):
    # a retrained classifier must not meet ExpGAN/C3LT weights trained against another one
    import copy

    import torch

    from cflib.explainers.base import Explainer

    class Toy(Explainer):
        name = "Toy"
        learned = True

        def fit(self, cache):
            net = torch.nn.Linear(1, 1)
            self.calls = 0

            def train(m):
                self.calls += 1
                return {}
            self._cached_fit(net, cache, train)
            return self

    key = {"dataset": "bars", "pair": "0->1", "profile": "smoke", "seed": 0}
    assert Toy(tiny_classifier).fit(key).calls == 1
    assert Toy(tiny_classifier).fit(key).calls == 0          # loaded
    other = copy.deepcopy(tiny_classifier)
    with torch.no_grad():
        other.head[-1].bias[0] += 0.1
    assert Toy(other).fit(key).calls == 1                    # a new key


TWO_PROCESSES = """
import logging, sys, time, torch
from pathlib import Path
from cflib.cache import cached, fingerprint

who, marks = sys.argv[1], Path(sys.argv[2])


def wait_for(name):
    t0 = time.time()
    while not (marks / name).exists():
        if time.time() - t0 > 120:
            raise SystemExit(f"process {who}: no {name!r} marker after 120 s")
        time.sleep(0.02)


class MarkWaiting(logging.Handler):   # the cache logs that this process waits for the lock
    def emit(self, record):
        if record.getMessage().startswith("waiting: another process is training"):
            (marks / f"waiting-{who}").touch()


log = logging.getLogger("cflib")
log.setLevel(logging.INFO)
log.addHandler(MarkWaiting())


def build():
    return torch.nn.Linear(4, 2)


def train(m):
    (marks / f"training-{who}").touch()   # inside cached(): this process holds the lock
    wait_for("go")                        # and trains until the test lets it finish
    with torch.no_grad():
        m.weight.add_(float(who))         # each process would train differently
    return {"who": who}


m, info = cached("toy", {"seed": 0, "kind": "lock-test"}, build, train)
print(fingerprint(m), info["who"])
"""


def _wait_for(path, procs, timeout=120):
    import time

    t0 = time.time()
    while not path.exists():
        dead = [p for p in procs if p.poll() is not None]
        assert not dead, f"a process ended before {path.name} appeared: {dead[0].communicate()}"
        assert time.time() - t0 < timeout, f"no {path.name} after {timeout} s"
        time.sleep(0.02)


def test_two_processes_needing_one_network_train_it_once(tmp_path):
    """A lock per cache entry: the second process, started while the first holds the lock
    (it is inside its training), waits for it, then loads what the first wrote.  Both steps
    are markers, not times: process 1 marks that it trains and finishes only when told;
    process 2 is started after that mark and marks when the cache says it waits."""
    import subprocess
    import sys

    from cflib.cache import events

    env = {**__import__("os").environ, "CFLIB_CACHE": str(tmp_path / "cache")}
    marks = tmp_path / "marks"
    marks.mkdir()

    def start(who):
        return subprocess.Popen([sys.executable, "-c", TWO_PROCESSES, who, str(marks)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    procs = [start("1")]
    try:
        _wait_for(marks / "training-1", procs)        # process 1 holds the entry's lock
        procs.append(start("2"))
        _wait_for(marks / "waiting-2", procs)         # process 2 found it held and waits
        assert procs[1].poll() is None and not (marks / "training-2").exists()
        (marks / "go").touch()
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0], [err for _, err in outs]
    assert outs[0][0].split() == outs[1][0].split()    # the same weights, trainer 1's
    assert outs[1][0].split()[1] == "1"
    assert not (marks / "training-2").exists()         # process 2 never trained
    trained = [e for e in events(tmp_path / "cache") if e["event"] == "trained"]
    assert len(trained) == 1 and trained[0]["entry"].startswith("toy-")


# -- issue 27: the key holds what changes the weights; the checksum covers the info ---------------
def test_an_edited_info_fails_the_checksum_and_is_retrained(tmp_cache):
    tr = Trainer()
    cached("toy", CFG, make, tr)
    path = cache_path("toy", CFG)
    payload = torch.load(path, weights_only=True)
    payload["info"]["calls"] = 99                 # e.g. a hand-edited test_accuracy
    torch.save(payload, path)
    m, info = cached("toy", CFG, make, tr)
    assert tr.calls == 2 and info == {"calls": 2}
    stored = torch.load(path, weights_only=True)
    assert stored["info"] == {"calls": 2}          # replaced by the retrained entry
    cached("toy", CFG, make, tr)
    assert tr.calls == 2                           # and that one loads


def test_the_checksum_covers_weights_and_info():
    from cflib.cache import payload_checksum as checksum

    state = make().state_dict()
    assert checksum(state, {"a": 0.5}) == checksum(dict(state), {"a": 0.5})
    assert checksum(state, {"a": 0.5}) != checksum(state, {"a": 0.5000001})
    assert checksum(state, {}) != checksum({k: v + 1 for k, v in state.items()}, {})


def test_an_entry_of_the_old_format_is_retrained_not_re_signed(tmp_cache):
    """A format-1 file (checksum over the weights only) with the right config and a valid
    old checksum is not trusted: retrained, replaced by a file of today's format."""
    from cflib.cache import FORMAT, _normalise, keyed, state_fingerprint

    assert FORMAT == 3
    path = cache_path("toy", CFG)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = make()
    with torch.no_grad():
        old.weight.fill_(-7.0)
    state = old.state_dict()
    torch.save({"format": 1, "config": _normalise(keyed(CFG)), "state_dict": state,
                "sha256": state_fingerprint(state), "info": {"calls": 0}}, path)
    tr = Trainer()
    m, info = cached("toy", CFG, make, tr)
    assert tr.calls == 1 and info == {"calls": 1} and (m.weight == 1.0).all()
    assert torch.load(path, weights_only=True)["format"] == FORMAT


def test_the_key_holds_the_thread_count_and_the_device_type(tmp_cache, monkeypatch):
    """A network is trained at CFLIB_THREADS threads (default 1, whatever torch is set to:
    one setting for the library, the chapters and the bench), which the key holds."""
    from cflib.cache import keyed

    class Counting(Trainer):
        def __call__(self, model):
            self.threads = torch.get_num_threads()
            return super().__call__(model)

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        one = cache_path("toy", CFG)
        assert keyed(CFG)["trained_on"]["threads"] == 1          # the default, not torch's
        tr = Counting()
        cached("toy", CFG, make, tr)
        assert tr.threads == 1 and torch.get_num_threads() == 2   # trained at 1, put back
        torch.set_num_threads(1)
        cached("toy", CFG, make, tr)               # at torch's 1 thread: the same entry
        assert tr.calls == 1 and one.exists()
        monkeypatch.setenv("CFLIB_THREADS", "2")
        two = cache_path("toy", CFG)
        assert keyed(CFG)["trained_on"]["threads"] == 2 and one != two
        cached("toy", CFG, make, tr)               # another setting: its own entry
        assert tr.calls == 2 and tr.threads == 2 and two.exists()
    finally:
        torch.set_num_threads(before)
    cuda = keyed(CFG, "cuda")["trained_on"]          # no CUDA needed to name the key
    assert cuda["device_type"] == "cuda" and "threads" not in cuda
    assert keyed(CFG)["trained_on"]["device_type"] == "cpu"
    assert cache_path("toy", CFG, "cuda") != cache_path("toy", CFG, "cpu")
    assert {k: v for k, v in keyed(CFG).items() if k != "trained_on"
            } == CFG                                # the caller's config is not changed


def test_the_stored_config_names_threads_and_device(tmp_cache):
    cached("toy", CFG, make, Trainer())
    stored = torch.load(cache_path("toy", CFG), weights_only=True)["config"]["trained_on"]
    assert stored["threads"] == torch.get_num_threads() and stored["device_type"] == "cpu"
    assert "threads" not in CFG


def test_a_folder_where_the_lock_file_goes_is_one_clear_error_before_training(tmp_cache):
    import pytest

    path = cache_path("toy", CFG)
    (path.parent / (path.name + ".lock")).mkdir(parents=True)
    tr = Trainer()
    with pytest.raises(RuntimeError, match=r"lock file .*\.lock of cache entry .* cannot be "
                                           r"taken \(IsADirectoryError"):
        cached("toy", CFG, make, tr)
    assert tr.calls == 0


def test_a_lock_file_that_is_a_dangling_link_or_a_loop_is_one_clear_error(tmp_cache):
    """A lock left as a link to a missing folder (or a link to itself) is named, with
    the fix, before any training (it was a raw ``OSError`` from filelock)."""
    import os

    import pytest

    path = cache_path("toy", CFG)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.parent / (path.name + ".lock")
    for target in (path.parent / "no-such-folder" / "x", lock):   # dangling, then a loop
        os.symlink(target, lock)
        tr = Trainer()
        with pytest.raises(RuntimeError, match=r"lock file .*\.lock of cache entry .* cannot "
                                               r"be taken .*remove it"):
            cached("toy", CFG, make, tr)
        assert tr.calls == 0 and not path.exists()
        lock.unlink()
    cached("toy", CFG, make, Trainer())                 # removed: it trains and caches
    assert path.exists()
