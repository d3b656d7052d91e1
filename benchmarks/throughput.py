"""Throughput of every explainer: batched against one image at a time, against the machine's
measured peak (a roofline), and the passes per-sample stopping saves.

    .venv/bin/python benchmarks/throughput.py [--device cpu|cuda] [--images 128]
        [--batch-sizes 8 32 128] [--threads 2] [--out results/performance.csv]
    make benchmark [DEVICE=cuda]

For each method of the catalog (``cflib.bench.catalog.build`` at the ``smoke`` profile:
its networks are small and cached, its iteration budgets are the smoke ones), the same
``--images`` query images are explained

* one at a time: ``explain`` called on each image alone (``batch_size = 1``), and
* batched: one ``explain`` call on all images with ``batch_size`` = each of
  ``--batch-sizes`` (the batch is cut into chunks of that size);
* for the searches that drop finished queries from the batch (per-sample stopping:
  Wachter, BayesCF, ROAR, Schut, PSCE), once more at the largest batch with finished
  queries kept in it (``compact=False``), to count the passes compaction saves.

Each timing is the best of ``--repeats`` runs after one warm-up.  The floating-point
work of a call is counted with the formulas of ``torch.utils.flop_counter`` (every
matmul and convolution, forward and backward), and the bytes those operators read and
write (their inputs and outputs at 4 bytes per element): their ratio is the
*arithmetic intensity*.

**The roofline.**  The machine's peak is measured, not assumed: the best FLOP rate of a
large float32 matrix product and of a large convolution (the two kinds of work the
explainers do), at the benchmark's thread count (``peak``) and on all cores
(``peak_all``); the memory bandwidth is the best rate of a large copy.  Each method's
achieved rate is reported as ``fraction_of_peak`` (never above 1 when the peak is a
true peak) and against the roofline ``min(peak, intensity x bandwidth)``; a method whose
intensity lies below ``peak / bandwidth`` is memory-bound.

Results go to ``results/performance.csv`` (one row per method, mode and batch size) and
``results/performance_machine.csv`` (the peak measurements), which the book's
performance page reads.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("TQDM_DISABLE", "1")  # a log of results, not of progress bars
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cflib.bench import catalog, zoo  # noqa: E402
from cflib.bench.data import class_subset, load_split  # noqa: E402
from cflib.bench.results import write_table  # noqa: E402
from cflib.tensors import predict  # noqa: E402

#: which classifier and data each method explains (the chapter that uses it)
SETTING = {
    **{m: "c3lt" for m in ("Original Data", "Query (unchanged)", "Adv. Attack", "CEM",
                           "CEM (targeted)", "CVE", "CVE (receptive field)", "ExpGAN", "C3LT",
                           "C3LT (reconstruction)", "C3LT (inverted)")},
    **{m: "bayes" for m in ("Wachter", "BayesCF", "ROAR", "Schut", "PSCE")},
    "Latent PGD": "quant",
}
#: methods that search (optimise or iterate per image); the rest are one forward pass
ITERATIVE = ["Adv. Attack", "CEM", "CEM (targeted)", "CVE", "CVE (receptive field)",
             "C3LT (inverted)", "Wachter", "BayesCF", "ROAR", "Schut", "PSCE", "Latent PGD"]
#: searches that stop each query when it is done and drop it from the batch
COMPACTING = ["Wachter", "BayesCF", "ROAR", "Schut", "PSCE"]


class CountFlops(TorchDispatchMode):
    """FLOPs and operator bytes with ``torch.utils.flop_counter``'s per-operator formulas.

    ``FlopCounterMode`` itself tracks modules with backward hooks that make
    ``torch.autograd.grad`` fail ("a leaf node was passed to _will_engine_execute_node"),
    and every search here takes input gradients with it; this mode applies the same
    registry of formulas (matmuls, convolutions and their backward ops) without the
    module tracking, and adds the bytes each such operator reads and writes.
    """

    def __init__(self):
        super().__init__()
        self.total = 0
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += formula(*args, **kwargs, out_val=out)
            for t in (*args, *(out if isinstance(out, (tuple, list)) else (out,))):
                if torch.is_tensor(t):
                    self.bytes += t.numel() * t.element_size()
        return out

    def get_total_flops(self) -> int:
        return self.total


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _best(fn, dev, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        _sync(dev)
        t0 = time.perf_counter()
        fn()
        _sync(dev)
        best = min(best, time.perf_counter() - t0)
    return best


# -- the machine ------------------------------------------------------------------------------
def measure_peak(dev: torch.device, threads: int, repeats: int = 3) -> list[dict]:
    """The best float32 rates of large matrix products and convolutions, and the copy
    bandwidth, at ``threads`` threads (CPU) or on the device."""
    before = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    rows = []
    try:
        for n in (1024, 2048):
            a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
            sec = _best(lambda: a @ b, dev, repeats)
            rows.append({"kernel": f"matmul {n}x{n}x{n}", "kind": "flops",
                         "rate": 2 * n ** 3 / sec})
        for (bs, c, hw, k) in ((64, 64, 56, 3), (128, 128, 28, 3), (256, 32, 28, 5)):
            x = torch.randn(bs, c, hw, hw, device=dev)
            w = torch.randn(c, c, k, k, device=dev)
            sec = _best(lambda: F.conv2d(x, w, padding=k // 2), dev, repeats)
            rows.append({"kernel": f"conv2d {bs}x{c}x{hw}x{hw}, {c}->{c} {k}x{k}",
                         "kind": "flops", "rate": 2 * bs * c * c * k * k * hw * hw / sec})
        src = torch.randn(64 * 2 ** 20, device=dev)          # 256 MB
        dst = torch.empty_like(src)
        sec = _best(lambda: dst.copy_(src), dev, repeats)
        rows.append({"kernel": "copy 256 MB", "kind": "bytes", "rate": 2 * src.numel() * 4 / sec})
    finally:
        torch.set_num_threads(before)
    return [{**r, "threads": threads if dev.type == "cpu" else 0} for r in rows]


# -- the methods --------------------------------------------------------------------------------
def setting(name: str, device: str):
    """(classifier, queries, target, build data) of a setting, at smoke sizes; the
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


def build(method: str, clf, kw: dict, batch_size: int, compact: bool = True):
    ex = catalog.build(method, clf, profile="smoke", seeds=0, **kw)
    ex.config = replace(ex.config, batch_size=batch_size)
    if not compact:
        ex.config = replace(ex.config, compact=False)
    return ex


def batched(ex, x, target, dev, repeats: int) -> dict:
    """Best seconds of ``repeats`` batched calls after a warm-up, and one call's FLOPs,
    operator bytes and model passes per counterfactual."""
    sec = _best(lambda: ex.explain(x, target, seed=0), dev, repeats)
    with CountFlops() as fc:
        cf = ex.explain(x, target, seed=0)
    return {"seconds": sec, "flops": float(fc.total), "bytes": float(fc.bytes),
            "passes": cf.meta["model_passes"]}


def one_at_a_time(ex, x, target, dev, repeats: int) -> dict:
    """Every image alone: the sum of per-image times (best of ``repeats`` loops)."""
    def loop():
        return [ex.explain(x[i:i + 1], target, seed=i) for i in range(len(x))]

    sec = _best(loop, dev, repeats)
    with CountFlops() as fc:
        cfs = loop()
    return {"seconds": sec, "flops": float(fc.total), "bytes": float(fc.bytes),
            "passes": sum(c.meta["model_passes"] for c in cfs) / len(cfs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("DEVICE", "cpu"))
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads of the timed runs (default: all cores)")
    ap.add_argument("--repeats", type=int, default=2)
    # CEM (paper budget) is CEM with 40 times the iterations: the same time per iteration
    ap.add_argument("--methods", nargs="+",
                    default=[m for m in catalog.CATALOG if m != "CEM (paper budget)"])
    ap.add_argument("--out", default=str(ROOT / "results" / "performance.csv"))
    args = ap.parse_args(argv)
    for m in args.methods:
        catalog.get_entry(m)
        if m not in SETTING:
            raise SystemExit(f"{m!r} has no benchmark setting; add it to SETTING in {__file__}")
    dev = torch.device(args.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("DEVICE=cuda but CUDA is not available on this machine")
    cores = os.cpu_count() or 1
    threads = args.threads or cores
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    machine = (f"{platform.machine()}, {cores} cores, torch {torch.__version__}"
               if dev.type == "cpu" else torch.cuda.get_device_name(dev))
    peaks = measure_peak(dev, threads)
    if dev.type == "cpu" and threads != cores:
        peaks += measure_peak(dev, cores)
    pk = pd.DataFrame(peaks).assign(device=dev.type, machine=machine)
    here = pk[pk["threads"] == (threads if dev.type == "cpu" else 0)]
    peak = float(here.loc[here["kind"] == "flops", "rate"].max())
    bandwidth = float(here.loc[here["kind"] == "bytes", "rate"].max())
    print(f"peak {peak / 1e9:.1f} GFLOP/s, bandwidth {bandwidth / 1e9:.1f} GB/s at "
          f"{threads} thread(s); ridge {peak / bandwidth:.1f} FLOP/byte", flush=True)

    rows, cache = [], {}
    for method in args.methods:
        name = SETTING[method]
        if name not in cache:
            cache[name] = setting(name, args.device)
        clf, xq, target, kw = cache[name]
        x = xq[:args.images].to(dev)
        base = {"method": method, "device": dev.type, "machine": machine, "threads": threads,
                "n_images": len(x), "iterative": method in ITERATIVE}

        def row(mode, bs, m, compact=True, single=None):
            n = len(x)
            per = m["seconds"] / n
            return {**base, "mode": mode, "batch_size": bs, "compact": compact,
                    "seconds": m["seconds"], "seconds_per_cf": per,
                    "flops_per_cf": m["flops"] / n, "bytes_per_cf": m["bytes"] / n,
                    "model_passes_per_cf": m["passes"],
                    "flops_per_s": m["flops"] / m["seconds"],
                    "speedup": 1.0 if single is None else single / per}

        alone = one_at_a_time(build(method, clf, kw, 1), x, target, dev, args.repeats)
        rows.append(row("one at a time", 1, alone))
        single = alone["seconds"] / len(x)
        for bs in args.batch_sizes:
            m = batched(build(method, clf, kw, bs), x, target, dev, args.repeats)
            rows.append(row("batched", bs, m, single=single))
        if method in COMPACTING:
            bs = max(args.batch_sizes)
            m = batched(build(method, clf, kw, bs, compact=False), x, target, dev, args.repeats)
            rows.append(row("batched, finished queries kept", bs, m, compact=False,
                            single=single))
        best = max(r["speedup"] for r in rows if r["method"] == method)
        print(f"{method:<24} {single * 1e3:9.3f} ms/CF alone, best batched {best:6.1f}x faster",
              flush=True)
    df = pd.DataFrame(rows)
    df["peak_flops_per_s"] = peak
    df["bandwidth_bytes_per_s"] = bandwidth
    df["intensity"] = df["flops_per_cf"] / df["bytes_per_cf"].where(df["bytes_per_cf"] > 0)
    df["roofline_flops_per_s"] = (df["intensity"] * bandwidth).clip(upper=peak)
    df["fraction_of_peak"] = df["flops_per_s"] / peak
    df["fraction_of_roofline"] = df["flops_per_s"] / df["roofline_flops_per_s"]
    df["memory_bound"] = df["intensity"] < peak / bandwidth
    out = write_table(df, args.out)
    write_table(pk, Path(args.out).with_name(Path(args.out).stem + "_machine.csv"))
    print(f"written {out}; largest fraction of peak {df['fraction_of_peak'].max():.3f}")


if __name__ == "__main__":
    main()
