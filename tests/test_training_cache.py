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
import sys, time, torch
from cflib.cache import cached, fingerprint

def build():
    return torch.nn.Linear(4, 2)

def train(m):
    time.sleep(1.5)                      # long enough for the other process to arrive
    with torch.no_grad():
        m.weight.add_(float(sys.argv[1]))  # each process would train differently
    return {"who": sys.argv[1]}

m, info = cached("toy", {"seed": 0, "kind": "lock-test"}, build, train)
print(fingerprint(m), info["who"])
"""


def test_two_processes_needing_one_network_train_it_once(tmp_path):
    """A lock per cache entry: the second process waits, then loads what the first wrote."""
    import subprocess
    import sys

    from cflib.cache import events

    env = {**__import__("os").environ, "CFLIB_CACHE": str(tmp_path / "cache")}
    procs = [subprocess.Popen([sys.executable, "-c", TWO_PROCESSES, str(k)], env=env,
                              stdout=subprocess.PIPE, text=True) for k in (1, 2)]
    outs = [p.communicate(timeout=120)[0].split() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1]                      # the same weights, the same trainer
    trained = [e for e in events(tmp_path / "cache") if e["event"] == "trained"]
    assert len(trained) == 1 and trained[0]["entry"].startswith("toy-")


def test_thread_count_is_part_of_the_key(tmp_cache):
    """CPU training differs with the thread count: an entry trained at 2 threads is never
    what a 1-thread run loads."""
    before = torch.get_num_threads()
    tr = Trainer()
    try:
        torch.set_num_threads(1)
        one = cache_path("toy", CFG)
        cached("toy", CFG, make, tr)
        torch.set_num_threads(2)
        assert cache_path("toy", CFG) != one
        cached("toy", CFG, make, tr)
        assert tr.calls == 2
        torch.set_num_threads(1)
        cached("toy", CFG, make, tr)         # the 1-thread entry is still there
        assert tr.calls == 2
    finally:
        torch.set_num_threads(before)


def test_edited_info_fails_the_checksum(tmp_cache):
    tr = Trainer()
    cached("toy", CFG, make, tr)
    path = cache_path("toy", CFG)
    payload = torch.load(path, weights_only=True)
    payload["info"]["calls"] = 42            # a hand-edited accuracy, say
    torch.save(payload, path)
    _, info = cached("toy", CFG, make, tr)
    assert tr.calls == 2 and info == {"calls": 2}


def test_an_old_format_entry_is_retrained_not_resigned(tmp_cache):
    from cflib import cache

    tr = Trainer()
    cached("toy", CFG, make, tr)
    path = cache_path("toy", CFG)
    payload = torch.load(path, weights_only=True)
    payload["format"] = cache.FORMAT - 1
    torch.save(payload, path)
    cached("toy", CFG, make, tr)
    assert tr.calls == 2
    assert torch.load(path, weights_only=True)["format"] == cache.FORMAT
