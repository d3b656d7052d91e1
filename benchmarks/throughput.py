"""Throughput of every explainer: batched against one image at a time, against the machine's
measured peak (a roofline), and the passes per-sample stopping saves.

    .venv/bin/python benchmarks/throughput.py [--device cpu|cuda] [--images 128]
        [--batch-sizes 8 32 128] [--threads 2] [--out results/performance.csv]
    .venv/bin/python benchmarks/throughput.py --ops-only     # the operator profile alone
    .venv/bin/python benchmarks/throughput.py --methods CEM --update  # re-time some methods
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

Results go to ``results/performance.csv`` (one row per method, mode and batch size),
``results/performance_machine.csv`` (the peak measurements) and
``results/performance_loops.csv`` (the chapters' loops), which the book's performance
page reads.  ``--ops-only`` writes ``results/performance_ops.csv`` instead: where the
time of each loop and each batched search goes, operator by operator
(``torch.profiler``'s self time, grouped into convolutions, matrix products, pooling,
normalisation, the other operators, and the time outside any operator).
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
from cflib.book.runs.written import command_line, record_results  # noqa: E402
from cflib.tensors import predict  # noqa: E402

#: which classifier and data each method explains (the table it belongs to, from the catalog)
SETTING = {name: e.table for name, e in catalog.CATALOG.items()}
#: methods that search (optimise or iterate per image); the rest are one forward pass
ITERATIVE = [name for name, e in catalog.CATALOG.items() if e.searches]
#: searches that stop each query when it is done and drop it from the batch
COMPACTING = [name for name, e in catalog.CATALOG.items() if e.compacts]


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
    """Best seconds of ``repeats`` calls after a warm-up."""
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
def _rates(fn, dev, repeats: int, work: float) -> tuple[float, float]:
    """(best, median) rate of ``work`` units over ``repeats`` timed calls after a warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        _sync(dev)
        t0 = time.perf_counter()
        fn()
        _sync(dev)
        times.append(time.perf_counter() - t0)
    times.sort()
    return work / times[0], work / times[len(times) // 2]


#: the kernels the peak is taken from: dense matrix products and convolutions, the two
#: kinds of work the explainers and the chapters' loops do.  Taking the matrix products
#: alone is not a peak on every machine: on an AMD EPYC, torch's float32 matmul reached
#: 83.7 GFLOP/s at one thread while its convolutions ran at up to 135 and the DCGAN and
#: encoder loops above the matmul rate (fractions 1.2-1.6); the highest median of either
#: family is the rate this machine and library were seen to reach
PEAK_KINDS = ("matmul", "conv2d")


def measure_peak(dev: torch.device, threads: int, repeats: int = 7) -> list[dict]:
    """Float32 rates of large matrix products and convolutions and the copy bandwidth at
    ``threads`` threads (CPU) or on the device: each kernel run ``repeats`` times after a
    warm-up, its best and median rate kept (``rate`` is the median).  The peak is the
    highest median of the matrix products and convolutions (:data:`PEAK_KINDS`); ``peak``
    marks its row."""
    before = torch.get_num_threads()
    if dev.type == "cpu":
        torch.set_num_threads(threads)
    rows = []
    try:
        for n in (1024, 2048):
            a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
            best, med = _rates(lambda: a @ b, dev, repeats, 2 * n ** 3)
            rows.append({"kernel": f"matmul {n}x{n}x{n}", "kind": "flops", "family": "matmul",
                         "rate": med, "best": best})
        for (bs, c, hw, k) in ((64, 64, 56, 3), (128, 128, 28, 3), (256, 32, 28, 5)):
            x = torch.randn(bs, c, hw, hw, device=dev)
            w = torch.randn(c, c, k, k, device=dev)
            best, med = _rates(lambda: F.conv2d(x, w, padding=k // 2), dev, repeats,
                               2 * bs * c * c * k * k * hw * hw)
            rows.append({"kernel": f"conv2d {bs}x{c}x{hw}x{hw}, {c}->{c} {k}x{k}",
                         "kind": "flops", "family": "conv2d", "rate": med, "best": best})
        src = torch.randn(64 * 2 ** 20, device=dev)          # 256 MB
        dst = torch.empty_like(src)
        best, med = _rates(lambda: dst.copy_(src), dev, repeats, 2 * src.numel() * 4)
        rows.append({"kernel": "copy 256 MB", "kind": "bytes", "family": "copy", "rate": med,
                     "best": best})
    finally:
        torch.set_num_threads(before)
    top = max((r for r in rows if r["family"] in PEAK_KINDS), key=lambda r: r["rate"])
    return [{**r, "threads": threads if dev.type == "cpu" else 0, "repeats": repeats,
             "peak": r is top} for r in rows]


def peak_of(pk: pd.DataFrame, threads: int) -> tuple[float, float, str]:
    """(peak FLOP/s, copy bandwidth, the peak's kernel) at ``threads`` from
    :func:`measure_peak`'s rows."""
    here = pk[pk["threads"] == threads]
    top = here[here["peak"]].iloc[0]
    return float(top["rate"]), float(here.loc[here["kind"] == "bytes", "rate"].max()), \
        str(top["kernel"])


# -- the training and search loops of the chapters ------------------------------------------
def _frozen(*nets):
    for net in nets:
        net.eval().requires_grad_(False)
    return nets


def _loop_c3lt(batch: int, updates: int):
    """``updates`` C3LT mapping updates at ``batch`` images per class (random networks of
    the chapters' architectures: an update's cost does not depend on the weights)."""
    from cflib.explainers import C3LT
    from cflib.models import C3LTClassifier
    from cflib.models.dcgan import DCGAN, EncoderDCGAN

    gan = DCGAN()
    G, D = _frozen(gan.generator, gan.discriminator)
    E, f = _frozen(EncoderDCGAN(), C3LTClassifier())
    x = torch.rand(batch * updates, 1, 28, 28) * 2 - 1

    def run():
        ex = C3LT(f, C3LT.Config(epochs=1, batch_size=batch, decay_every_steps=10 ** 6),
                  generator=G, encoder=E, discriminator=D)
        ex.fit(x, x.flip(0), query_class=0, target_class=1)
        return torch.tensor(ex.info["history"][-1]["loss"])
    return run


def _loop_dcgan(batches: int):
    from cflib.models.dcgan import DCGAN, train_dcgan

    x = torch.rand(64 * batches, 1, 28, 28) * 2 - 1

    def run():
        torch.manual_seed(0)
        gan = DCGAN()
        stats = train_dcgan(gan, x, 1, batch_size=64, seed=0)
        return torch.tensor([stats["loss_d"], stats["loss_g"]])
    return run


def _loop_encoder(batches: int):
    from cflib.models.dcgan import EncoderDCGAN, Generator, train_encoder

    torch.manual_seed(0)
    (G,) = _frozen(Generator())
    x = torch.rand(128 * batches, 1, 28, 28) * 2 - 1

    def run():
        torch.manual_seed(1)
        enc = EncoderDCGAN()
        stats = train_encoder(enc, G, x, 1, batch_size=128, seed=0)
        return torch.tensor([stats["loss_img_l1"], stats["loss_latent_mse"]])
    return run


def _loop_cem(n: int, iterations: int):
    from cflib.explainers import CEM
    from cflib.models import C3LTClassifier
    from cflib.models.autoencoder import make_autoencoder

    torch.manual_seed(0)
    f, ae = C3LTClassifier().eval(), make_autoencoder("conv-1x14x14").eval()
    x = torch.rand(n, 1, 28, 28) * 2 - 1
    ex = CEM(f, CEM.Config(max_iterations=iterations, c_steps=1), autoencoder=ae)

    def run():
        return ex.explain(x, 3, seed=0).x_cf
    return run


#: (loop, unit, units per run, units in the chapters' step (an epoch: 60,000 images),
#:  what a run does)
LOOPS = {
    "C3LT mapping update, batch 32": (lambda: _loop_c3lt(32, 12), "update", 12, None,
                                      "the standard profile's batch"),
    "C3LT mapping update, batch 128": (lambda: _loop_c3lt(128, 6), "update", 6, None,
                                       "the public code's batch"),
    "DCGAN epoch": (lambda: _loop_dcgan(24), "batch of 64", 24, 60000 / 64,
                    "24 batches, scaled to the 938 batches of an epoch"),
    "encoder epoch": (lambda: _loop_encoder(12), "batch of 128", 12, 60000 / 128,
                      "12 batches, scaled to the 469 batches of an epoch"),
    "CEM iteration, 100 queries": (lambda: _loop_cem(100, 30), "iteration", 30, None,
                                   "30 FISTA iterations on 100 queries with the AE term"),
}


def measure_loops(threads: int, repeats: int = 2, names=None) -> list[dict]:
    """Each loop of :data:`LOOPS` with the speed paths off (``before``: the computation
    of the plain modules) and on (``after``), alternating, best of ``repeats``; FLOPs
    counted once per mode; ``max_abs_diff`` is the largest difference of the two modes'
    outputs (losses or counterfactuals), what the speed paths change in the numbers."""
    from cflib.scopes import fast_paths

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    rows = []
    try:
        for name, (make, unit, units, per_step, what) in LOOPS.items():
            if names and name not in names:
                continue
            run = make()
            best, outs, flops = {}, {}, {}
            for _ in range(repeats):
                for mode in ("before", "after"):
                    with fast_paths(mode == "after"):
                        t0 = time.perf_counter()
                        outs[mode] = run()
                        sec = time.perf_counter() - t0
                    best[mode] = min(best.get(mode, float("inf")), sec)
            for mode in ("before", "after"):
                with fast_paths(mode == "after"), CountFlops() as fc:
                    run()
                flops[mode] = float(fc.total)
            diff = float((outs["before"] - outs["after"]).abs().max())
            for mode in ("before", "after"):
                sec = best[mode] / units
                rows.append({"loop": name, "paths": mode, "unit": unit, "what": what,
                             "threads": threads, "seconds_per_unit": sec,
                             "seconds_per_epoch": sec * per_step if per_step else None,
                             "flops_per_unit": flops[mode] / units,
                             "flops_per_s": flops[mode] / best[mode],
                             "speedup": best["before"] / best[mode], "max_abs_diff": diff})
            print(f"{name:<32} before {best['before'] / units:8.3f} s/{unit}, after "
                  f"{best['after'] / units:8.3f} s/{unit} "
                  f"({best['before'] / best['after']:.2f}x; outputs differ by {diff:.1e})",
                  flush=True)
    finally:
        torch.set_num_threads(before)
    return rows


# -- where the time goes: an operator profile ------------------------------------------------
#: operator families of the profile, matched in order on the aten operator's name
OP_FAMILIES = (("convolution", ("conv",)),
               ("matrix product", ("addmm", "mm", "bmm", "matmul", "linear")),
               ("pooling", ("pool",)),
               ("normalisation", ("batch_norm", "layer_norm")))


def op_family(name: str) -> str:
    """The family of an operator of the profile (``aten::mkldnn_convolution``:
    convolution); ``elementwise and other`` for the rest (activations, reductions,
    copies, optimiser arithmetic, allocation)."""
    op = name.split("::")[-1]
    for family, keys in OP_FAMILIES:
        if any(k in op for k in keys):
            return family
    return "elementwise and other"


def op_profile(subject: str, kind: str, fn, threads: int) -> list[dict]:
    """``fn`` once as a warm-up, then once under ``torch.profiler`` at ``threads``
    threads: one row per operator with its self time (children excluded, so the rows
    add up to the time spent inside operators), its calls, and the call's wall time;
    ``outside operators`` is the rest of the wall time (Python, autograd's bookkeeping,
    the profiler's own cost per call)."""
    from torch.profiler import ProfilerActivity, profile

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        fn()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            t0 = time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
    finally:
        torch.set_num_threads(before)
    base = {"subject": subject, "kind": kind, "threads": threads, "wall_seconds": wall}
    rows = [{**base, "operator": e.key, "family": op_family(e.key),
             "self_seconds": e.self_cpu_time_total / 1e6, "calls": e.count}
            for e in prof.key_averages() if e.self_cpu_time_total > 0]
    inside = sum(r["self_seconds"] for r in rows)
    rows.append({**base, "operator": "outside operators", "family": "outside operators",
                 "self_seconds": max(wall - inside, 0.0), "calls": 0})
    top = max(rows, key=lambda r: r["self_seconds"])
    print(f"{subject:<32} {wall:7.2f} s, {sum(r['calls'] for r in rows) / wall:8.0f} "
          f"operator calls/s; largest: {top['operator']} "
          f"{100 * top['self_seconds'] / wall:.0f} %", flush=True)
    return rows


def profile_all(methods, loop_threads: int, threads: int, images: int,
                batch_size: int, device: str) -> pd.DataFrame:
    """The operator profile of every loop of :data:`LOOPS` (speed paths on, at the
    chapters' thread count) and of every search of ``methods`` batched at
    ``batch_size`` (as the benchmark times them)."""
    from cflib.scopes import fast_paths

    rows = []
    for name, (make, *_) in LOOPS.items():
        run = make()
        with fast_paths(True):
            rows += op_profile(name, "loop", run, loop_threads)
    cache = {}
    for method in [m for m in methods if m in ITERATIVE]:
        name = SETTING[method]
        if name not in cache:
            cache[name] = setting(name, device)
        clf, xq, target, kw = cache[name]
        x = xq[:images].to(device)
        ex = build(method, clf, kw, batch_size)
        rows += op_profile(method, f"search, batch {batch_size}",
                           lambda ex=ex, x=x: ex.explain(x, target, seed=0), threads)
    return pd.DataFrame(rows)


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


def update_rows(old: pd.DataFrame, new: pd.DataFrame, device: str | None = None,
                key: str = "method") -> pd.DataFrame:
    """``old`` with the rows of ``new``'s ``key`` values (methods, or a profile's subjects;
    on ``device`` when given) replaced by ``new``'s, in ``old``'s order of them (one
    ``old`` lacks goes last); every other row as it was."""
    gone = old[key].isin(set(new[key]))
    if device is not None:
        gone &= old["device"] == device
    order = {m: i for i, m in enumerate(dict.fromkeys([*old[key], *new[key]]))}
    out = pd.concat([old[~gone], new], ignore_index=True)
    return out.sort_values(key, key=lambda c: c.map(order), kind="stable", ignore_index=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=os.environ.get("DEVICE", "cpu"))
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--threads", type=int, default=None,
                    help="CPU threads of the timed runs (default: all cores)")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--alone-images", type=int, default=None,
                    help="time one at a time on the first N queries only (default: all of "
                         "--images; a short sample where a slot is short, e.g. on a GPU)")
    ap.add_argument("--loop-threads", type=int, default=1,
                    help="threads of the training and search loops (the chapters' 1)")
    ap.add_argument("--skip-loops", action="store_true",
                    help="time the explainers only, not the chapters' loops")
    # CEM (paper budget) is CEM with 40 times the iterations: the same time per iteration
    ap.add_argument("--methods", nargs="+",
                    default=[m for m in catalog.CATALOG if m != "CEM (paper budget)"])
    ap.add_argument("--out", default=str(ROOT / "results" / "performance.csv"))
    ap.add_argument("--update", action="store_true",
                    help="replace only the rows of --methods (and every loop's) in --out, or in "
                         "performance_ops.csv with --ops-only; the other rows stay as measured")
    ap.add_argument("--ops-only", action="store_true",
                    help="only the operator profile of the loops and the searches "
                         "(performance_ops.csv beside --out), no timings")
    args = ap.parse_args(argv)
    if args.alone_images is not None and args.alone_images < 1:
        raise SystemExit(f"--alone-images must be at least 1, got {args.alone_images}")
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
    if args.ops_only:
        if dev.type != "cpu":
            raise SystemExit("--ops-only profiles the CPU loops: run it with --device cpu")
        ops = profile_all(args.methods, args.loop_threads, threads, args.images,
                          max(args.batch_sizes), args.device).assign(machine=machine)
        ops_csv = Path(args.out).with_name("performance_ops.csv")
        if args.update and ops_csv.exists():
            ops = update_rows(pd.read_csv(ops_csv), ops, key="subject")
        out = write_table(ops, ops_csv)
        record_results([out], command_line("benchmarks/throughput.py", sys.argv[1:]))
        print(f"written {out}")
        return
    loop_threads = args.loop_threads
    counts = sorted({threads, cores} | ({loop_threads} if dev.type == "cpu" else set()))
    peaks = []
    for n in (counts if dev.type == "cpu" else [threads]):
        peaks += measure_peak(dev, n)
    pk = pd.DataFrame(peaks).assign(device=dev.type, machine=machine)
    peak, bandwidth, kernel = peak_of(pk, threads if dev.type == "cpu" else 0)
    print(f"peak {peak / 1e9:.1f} GFLOP/s ({kernel}, median of {pk['repeats'].iloc[0]}), "
          f"bandwidth {bandwidth / 1e9:.1f} GB/s at {threads} thread(s); ridge "
          f"{peak / bandwidth:.1f} FLOP/byte", flush=True)
    out_dir = Path(args.out).parent
    if dev.type == "cpu" and not args.skip_loops:
        loops = pd.DataFrame(measure_loops(loop_threads)).assign(machine=machine)
        lpeak, _, lkernel = peak_of(pk, loop_threads)
        loops["peak_flops_per_s"] = lpeak
        loops["peak_kernel"] = lkernel
        loops["fraction_of_peak"] = loops["flops_per_s"] / lpeak
        record_results([write_table(loops, out_dir / "performance_loops.csv")],
                       command_line("benchmarks/throughput.py", sys.argv[1:]))

    rows, cache = [], {}
    for method in args.methods:
        name = SETTING[method]
        if name not in cache:
            cache[name] = setting(name, args.device)
        clf, xq, target, kw = cache[name]
        x = xq[:args.images].to(dev)
        base = {"method": method, "device": dev.type, "machine": machine, "threads": threads,
                "n_images": len(x), "iterative": method in ITERATIVE}

        def row(mode, bs, m, compact=True, single=None, n=len(x)):
            per = m["seconds"] / n
            return {**base, "n_images": n, "mode": mode, "batch_size": bs, "compact": compact,
                    "seconds": m["seconds"], "seconds_per_cf": per,
                    "flops_per_cf": m["flops"] / n, "bytes_per_cf": m["bytes"] / n,
                    "model_passes_per_cf": m["passes"],
                    "flops_per_s": m["flops"] / m["seconds"],
                    "speedup": 1.0 if single is None else single / per}

        sample = x[:args.alone_images] if args.alone_images else x
        alone = one_at_a_time(build(method, clf, kw, 1), sample, target, dev, args.repeats)
        rows.append(row("one at a time", 1, alone, n=len(sample)))
        single = alone["seconds"] / len(sample)
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
    df["peak_kernel"] = kernel
    df["bandwidth_bytes_per_s"] = bandwidth
    df["intensity"] = df["flops_per_cf"] / df["bytes_per_cf"].where(df["bytes_per_cf"] > 0)
    df["roofline_flops_per_s"] = (df["intensity"] * bandwidth).clip(upper=peak)
    df["fraction_of_peak"] = df["flops_per_s"] / peak
    df["fraction_of_roofline"] = df["flops_per_s"] / df["roofline_flops_per_s"]
    df["memory_bound"] = df["intensity"] < peak / bandwidth
    written = []
    if args.update and Path(args.out).exists():
        # each row keeps the peak it was measured against; the machine file stays with
        # the rows of the last full run
        df = update_rows(pd.read_csv(args.out), df, device=dev.type)
    else:
        written.append(write_table(
            pk, Path(args.out).with_name(Path(args.out).stem + "_machine.csv")))
    out = write_table(df, args.out)
    record_results([out, *written], command_line("benchmarks/throughput.py", sys.argv[1:]))
    print(f"written {out}; largest fraction of peak {df['fraction_of_peak'].max():.3f}")


if __name__ == "__main__":
    main()
