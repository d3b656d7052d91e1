"""Throughput of every explainer: batched against one image at a time, and against the
hardware bound.

    .venv/bin/python benchmarks/throughput.py [--device cpu|cuda] [--images 128]
        [--batch-sizes 8 32 128] [--out results/performance.csv]
    make benchmark [DEVICE=cuda]

For each method of the catalog (built with ``catalog.build`` at the ``smoke`` profile:
its networks are small and cached, its iteration budgets are the smoke ones), the same
``--images`` query images are explained

* one at a time: ``explain`` called on each image alone (``batch_size = 1``), and
* batched: one ``explain`` call on all images with ``batch_size`` = each of
  ``--batch-sizes`` (the batch is cut into chunks of that size).

Each timing is the best of ``--repeats`` runs after one warm-up.  The floating-point
work of a call is counted with the formulas of ``torch.utils.flop_counter`` (every
matmul and convolution, forward and backward; :class:`CountFlops`), so the achieved
rate is FLOPs / second.
The bound is the rate of the method's classifier on a large batch (1,024 images) in
one forward and one backward pass to the input, the work a batched search repeats;
``fraction`` is the achieved rate over that bound.  Results go to
``results/performance.csv`` (one row per method, mode and batch size), which the
book's performance page reads.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import pandas as pd
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cflib.bench import catalog, zoo  # noqa: E402
from cflib.bench.data import class_subset, load_split  # noqa: E402
from cflib.bench.results import write_table  # noqa: E402
from cflib.scopes import frozen  # noqa: E402
from cflib.tensors import predict  # noqa: E402

#: which classifier and data each method explains (the chapter that uses it)
SETTING = {
    **{m: "c3lt" for m in ("Original Data", "Query (unchanged)", "Adv. Attack", "CEM",
                           "CEM (targeted)", "CVE", "CVE (receptive field)", "ExpGAN", "C3LT",
                           "C3LT (reconstruction)")},
    **{m: "bayes" for m in ("Wachter", "BayesCF", "ROAR", "Schut", "PSCE")},
    "Latent PGD": "quant",
}
#: methods that search (optimise or iterate per image); the rest are one forward pass
ITERATIVE = ["Adv. Attack", "CEM", "CEM (targeted)", "CVE", "CVE (receptive field)",
             "Wachter", "BayesCF", "ROAR", "Schut", "PSCE", "Latent PGD"]


class CountFlops(TorchDispatchMode):
    """Counts FLOPs with ``torch.utils.flop_counter``'s per-operator formulas.

    ``FlopCounterMode`` itself tracks modules with backward hooks that make
    ``torch.autograd.grad`` fail ("a leaf node was passed to _will_engine_execute_node"),
    and every search here takes input gradients with it; this mode applies the same
    registry of formulas (matmuls, convolutions and their backward ops) without the
    module tracking.
    """

    def __init__(self):
        super().__init__()
        self.total = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += formula(*args, **kwargs, out_val=out)
        return out

    def get_total_flops(self) -> int:
        return self.total


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def setting(name: str, device: str):
    """(classifier, queries, target, from_profile data) of a setting, at smoke sizes; the
    queries are test images the classifier does not already assign to the target."""
    clf, xq, target, kw = _setting(name, device)
    keep = predict(clf, xq).argmax(1).cpu() != target
    return clf, xq[keep], target, kw


def _setting(name: str, device: str):
    if name == "c3lt":
        clf, _ = zoo.classifier("mnist", "smoke", device=device)
        x, y = load_split("mnist", "test")
        xq, _ = class_subset(x, y, 4)
        return clf, xq, 9, {"pair": (4, 9), "dataset": "mnist"}
    if name == "bayes":
        clf, _ = zoo.mc_dropout_classifier("mnist", "smoke", device=device)
        x, y = load_split("mnist", "test")
        xq, _ = class_subset(x, y, 4)
        return clf, xq, 9, {"dataset": "mnist"}
    clf, _ = zoo.small_cnn("fmnist", "smoke", device=device)
    x, y = load_split("fmnist", "test")
    xq, _ = class_subset(x, y, 2)
    return clf, xq, 0, {"dataset": "fmnist"}


def build(method: str, clf, kw: dict, batch_size: int):
    from dataclasses import replace

    ex = catalog.build(method, clf, profile="smoke", seeds=0, **kw)
    ex.config = replace(ex.config, batch_size=batch_size)
    return ex


def timed(ex, x, target, dev, repeats: int) -> tuple[float, float]:
    """(best seconds of ``repeats`` calls after a warm-up, FLOPs of one call)."""
    ex.explain(x, target, seed=0)
    best = float("inf")
    for _ in range(repeats):
        _sync(dev)
        t0 = time.perf_counter()
        ex.explain(x, target, seed=0)
        _sync(dev)
        best = min(best, time.perf_counter() - t0)
    with CountFlops() as fc:
        ex.explain(x, target, seed=0)
    return best, float(fc.get_total_flops())


def one_at_a_time(ex, x, target, dev, repeats: int) -> tuple[float, float]:
    """Every image alone: the sum of per-image times (best of ``repeats`` loops)."""
    ex.explain(x[:1], target, seed=0)
    best = float("inf")
    for _ in range(repeats):
        _sync(dev)
        t0 = time.perf_counter()
        for i in range(len(x)):
            ex.explain(x[i:i + 1], target, seed=i)
        _sync(dev)
        best = min(best, time.perf_counter() - t0)
    with CountFlops() as fc:
        for i in range(len(x)):
            ex.explain(x[i:i + 1], target, seed=i)
    return best, float(fc.get_total_flops())


def bound(clf, x, dev, batch: int = 1024, repeats: int = 3) -> float:
    """FLOPs per second of one forward and one backward pass to the input on a large batch."""
    xb = x[:1].repeat(batch, 1, 1, 1).to(dev)
    with frozen(clf):
        def step():
            z = xb.clone().requires_grad_(True)
            out = clf(z)
            (g,) = torch.autograd.grad(out.logsumexp(1).sum(), z)
            return g

        step()
        with CountFlops() as fc:
            step()
        best = float("inf")
        for _ in range(repeats):
            _sync(dev)
            t0 = time.perf_counter()
            step()
            _sync(dev)
            best = min(best, time.perf_counter() - t0)
    return float(fc.get_total_flops()) / best


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("DEVICE", "cpu"))
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--methods", nargs="+", default=list(catalog.CATALOG))
    ap.add_argument("--out", default=str(ROOT / "results" / "performance.csv"))
    args = ap.parse_args(argv)
    dev = torch.device(args.device)
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, "
               f"{torch.get_num_threads()} threads" if dev.type == "cpu"
               else torch.cuda.get_device_name(dev))
    rows, bounds, cache = [], {}, {}
    for method in args.methods:
        name = SETTING[method]
        if name not in cache:
            cache[name] = setting(name, args.device)
        clf, xq, target, kw = cache[name]
        x = xq[:args.images].to(dev)
        if name not in bounds:
            bounds[name] = bound(clf, x, dev)
        base = {"method": method, "device": dev.type, "machine": machine, "n_images": len(x),
                "iterative": method in ITERATIVE, "bound_flops_per_s": bounds[name]}
        ex = build(method, clf, kw, 1)
        sec, flops = one_at_a_time(ex, x, target, dev, args.repeats)
        single = sec / len(x)
        rows.append({**base, "mode": "one at a time", "batch_size": 1, "seconds": sec,
                     "seconds_per_cf": single, "flops_per_cf": flops / len(x),
                     "flops_per_s": flops / sec, "speedup": 1.0})
        for bs in args.batch_sizes:
            ex = build(method, clf, kw, bs)
            sec, flops = timed(ex, x, target, dev, args.repeats)
            rows.append({**base, "mode": "batched", "batch_size": bs, "seconds": sec,
                         "seconds_per_cf": sec / len(x), "flops_per_cf": flops / len(x),
                         "flops_per_s": flops / sec, "speedup": single / (sec / len(x))})
        best = max(r["speedup"] for r in rows if r["method"] == method)
        print(f"{method:<24} {single * 1e3:9.3f} ms/CF alone, best batched {best:6.1f}x faster",
              flush=True)
    df = pd.DataFrame(rows)
    df["fraction_of_bound"] = df["flops_per_s"] / df["bound_flops_per_s"]
    out = write_table(df, args.out)
    print(f"written {out}")


if __name__ == "__main__":
    main()
