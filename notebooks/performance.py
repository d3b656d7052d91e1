# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # How fast the methods run, batched and alone
#
# How much faster is each explainer on a whole batch than one image at a time, and how
# close does it come to what this machine can do?

# %% tags=["parameters"]
profile: str = "standard"   # the profile of the chapters' results this page reads
results_dir: str | None = None  # where the benchmark's and the chapters' results are (None: results/)

# %%
from cflib.book import chapters

p = chapters.parameters("performance.py", globals())

# %%
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from cflib.bench import results
from cflib.book import report

perf = results.read_table(Path(p.results_dir) / "performance.csv")
machine_file = Path(p.results_dir) / "performance_machine.csv"
threads = int(perf["threads"].iloc[0]) if "threads" in perf.columns else 1
threads = "1 CPU thread" if threads == 1 else f"{threads} CPU threads"
table = report.performance_table(perf)
loops_file = Path(p.results_dir) / "performance_loops.csv"
loops = results.read_table(loops_file) if loops_file.exists() else None
ops = report.read_ops(p.results_dir)

# %%
it = table[table["speed-up ×"].notna()]
best = it["speed-up ×"].idxmax()
worst = it["speed-up ×"].idxmin()
peak = it["% of peak batched"]
kept = table.get("passes/CF, none dropped")
lines = [
    f"- **Batching pays for every method**: the best batch is "
    f"{report.fmt(it['speed-up ×'].min())}× ({worst}) to "
    f"{report.fmt(it['speed-up ×'].max())}× ({best}) faster per counterfactual than one "
    f"image at a time (median {report.fmt(it['speed-up ×'].median())}×, "
    f"{len(it)} methods, one machine, best of the benchmark's repeats).",
    f"- **Share of the measured peak**: batched, the methods reach "
    f"{report.fmt(peak.min())} % to {report.fmt(peak.max())} % of it "
    f"(median {report.fmt(peak.median())} %); one at a time "
    f"{report.fmt(it['% of peak alone'].min())} % to "
    f"{report.fmt(it['% of peak alone'].max())} %.  The small classifiers of these "
    f"tables leave each operator little work: the rest of the time goes to launching "
    f"operators and to memory traffic.",
]
if kept is not None and kept.notna().any():
    k = table[kept.notna()]
    saved = 1 - k["passes/CF"] / k["passes/CF, none dropped"]
    lines.append(
        f"- **Dropping finished queries** saves {report.fmt(100 * saved.min())} % to "
        f"{report.fmt(100 * saved.max())} % of the model passes of the methods that stop "
        f"per query ({', '.join(k.index)}).")
searching = perf.loc[perf["iterative"].astype(str) == "True", "method"].unique()
searches = table[table["% of peak batched"].notna() & table.index.isin(searching)]
low = searches[searches["% of peak batched"] < 35]
if len(low):
    line = (f"- **Searches below 35 % of the peak**: {len(low)} of {len(searches)} "
            f"({', '.join(low.index)}), at "
            f"{report.fmt(low['% of peak batched'].min())} % to "
            f"{report.fmt(low['% of peak batched'].max())} %.")
    if ops is not None:
        dense = report.dense_share(ops).reindex(low.index).dropna()
        inside = report.dense_rate(perf, ops).reindex(low.index).dropna()
        if len(dense) and len(inside):
            line += (f"  The operator profile shows what bounds them (below): batched, "
                     f"they spend {report.fmt(100 * dense.min())} % to "
                     f"{report.fmt(100 * dense.max())} % of their time in convolutions and "
                     f"matrix products, the rest in pooling, elementwise operators and outside "
                     f"any operator; and within their dense operators they run at "
                     f"{report.fmt(100 * inside.min())} % to {report.fmt(100 * inside.max())} % "
                     f"of the peak: the small classifiers' convolutions on 28 × 28 images "
                     f"do not fill the machine as the peak's large kernels do.")
    lines.append(line)
if loops_file.exists():
    lt = report.loops_table(loops)
    slow = (report.dense_share(ops).reindex(
        lt.index[lt["speed-up ×"] < 1.5]).dropna() if ops is not None else [])
    fast = lt[lt["speed-up ×"] >= 1.5]
    rest = lt.loc[~lt.index.isin(fast.index), "speed-up ×"]
    lines.append(
        f"- **The chapters' loops**: the speed paths make {len(fast)} of {len(lt)} loops at "
        f"least 1.5× faster ({', '.join(fast.index) or 'none'})"
        + (f"; the others gain {report.fmt(rest.min())}× to {report.fmt(rest.max())}×"
           if len(rest) else "")
        + f".  After them the loops run at {report.fmt(lt['% of peak after'].min())} % to "
        f"{report.fmt(lt['% of peak after'].max())} % of the one-thread peak."
        + (f"  The profile says why the others gain less: they spend "
           f"{report.fmt(100 * slow.min())} % to {report.fmt(100 * slow.max())} % of their "
           f"time inside convolutions and matrix products already, which no speed path "
           f"shortens (a DCGAN in training computes its batch norms from each batch, so "
           f"they cannot be folded into its convolutions)." if len(slow) else ""))
short = [
    f"- **Batching pays for every method**: the best batch is "
    f"{report.fmt(it['speed-up ×'].min())}× to {report.fmt(it['speed-up ×'].max())}× faster "
    "per counterfactual than one image at a time.",
    f"- **Batched, the methods reach {report.fmt(peak.min())} % to {report.fmt(peak.max())} % "
    "of the measured peak**: the small classifiers leave each operator little work.",
]
if kept is not None and kept.notna().any():
    short.append(f"- **Dropping finished queries saves up to {report.fmt(100 * saved.max())} % "
                 "of the model passes** of the searches that stop per query.")
if len(low):
    short.append(f"- **{len(low)} of {len(searches)} searches stay below 35 % of the peak**: "
                 "their time goes to small operators and launches (the profile below).")
if loops_file.exists():
    short.append(f"- **The speed paths make {len(fast)} of {len(lt)} of the chapters' loops at "
                 "least 1.5× faster.**")
display(Markdown("**What the measurements show**, on the machine named under the table.\n\n"
                 + "\n".join(short)))
details = "\n".join(lines)

# %%
peaks = perf["peak_flops_per_s"].dropna().unique()
runs = (f"  The rows come from {len(peaks)} runs of the benchmark (`--update` re-times some "
        "methods): each row's share of the peak is of the peak measured in its own run ("
        + ", ".join(f"{report.fmt(v / 1e9)}" for v in sorted(peaks)) + " GFLOP/s)."
        if len(peaks) > 1 else "")
display(Markdown(f"**Every method, batched and alone**, measured on: {perf['machine'].iloc[0]} "
                 f"(device `{perf['device'].iloc[0]}`), {int(perf['n_images'].iloc[0])} images per "
                 f"method, {threads}.{runs}"))
display(report.page_table(table))
report.fold("What the measurements show, in detail", details)

# %% [markdown]
# ## How it was measured
#
# Every explainer of `cflib` takes a whole batch: the search for each image runs as
# one batched tensor computation, and a query that has finished is dropped from the
# batch's later passes.  This page measures what that buys.  For every method of the
# catalog, the same query images are explained one at a time and in batches of several
# sizes on the machine that built the page (`benchmarks/throughput.py`, `make benchmark`;
# `DEVICE=cuda` on a GPU).  The floating-point work and the bytes each operator reads and
# writes are counted (matmuls and convolutions, forward and backward), so the achieved
# rate can be set against a true bound: the machine's **measured peak** (the best rate
# of large matrix products and convolutions at the benchmark's thread count) and the
# **roofline** {cite:p}`williams2008roofline` at each method's arithmetic intensity, the
# lower of the peak and intensity × the measured copy bandwidth.
#
# The methods run with the iteration budgets and the networks of the `smoke` profile
# (the same architectures as the chapters, trained less): the time of one iteration,
# and so every ratio here, does not depend on how many iterations a profile asks for.
# `CEM (paper budget)` is CEM with more iterations and is left out; the reference rows
# (`Original Data`, `Query (unchanged)`) run no search and are left out of the table and
# the figures.  The chapters' own timings (at their profile) are at the end, beside the
# papers'.

# %%
if machine_file.exists():
    display(report.page_table(report.machine_table(results.read_table(machine_file))))

# %% [markdown]
# ## The chapters' own loops, before and after the speed paths
#
# Most of a chapter's time is not in the benchmark above: it is in training and search
# loops.  Each is timed here with `cflib`'s speed paths off (`before`: the plain modules'
# computation) and on (`after`: the caller's classifier and autoencoders channels-last
# where they agree with themselves, CEM's one-channel convolutions as matrix products
# (the pixel gradient through the layers with one input channel, the forward of the
# autoencoder's layers with one output channel) and its ReLU -> max-pooling pairs run
# pooling first (`cflib.gemmconv`), the DCGAN generator folded for the
# loops that keep it frozen, one batched pass per C3LT update), at one thread as the
# chapters run, best of the benchmark's repeats, on random networks of the chapters'
# architectures (an update's cost does not depend on the weights).  `max |difference|` is
# how far the two computations' outputs differ (losses or counterfactuals): rounding,
# amplified by the iterations.

# %%
if loops is not None:
    display(Markdown(f"At one thread the peak is **{report.fmt(loops['peak_flops_per_s'].iloc[0] / 1e9)} "
                     f"GFLOP/s** ({loops['peak_kernel'].iloc[0]}, the median of its repeats)."))
    display(report.page_table(report.loops_table(loops)))
else:
    display(Markdown("The loops were not timed on this machine (`make benchmark` times them)."))

# %% [markdown]
# ## What a step asks of a GPU
#
# On a GPU a search step costs less in arithmetic than in what it asks of the host: each
# operator is at least one kernel launch, and each time the host reads a value back (an
# `.item()`, a Python `if` on a tensor, an index by a boolean mask, whose size the host
# must know) it waits for every kernel launched before.  `benchmarks/step_overhead.py`
# counts both per step of each search and per batch of the chapters' generator loops,
# with a dispatch mode that sees every operator, for the code before the rework of the
# steps and for today's, on the throughput benchmark's setting.  Counts depend on the code path, not on the machine, with one
# exception: CEM's one-channel convolutions run as matrix products on the CPU only, so
# its CPU count is not its GPU count.  The searches that drop finished queries from
# the batch read back every step by design (the batch's size is the host's to know);
# with `compact=False` they keep every query in the batch and mask the finished ones.

# %%
steps = report.read_steps(p.results_dir)
if steps is not None:
    st = report.steps_table(steps)
    left = report.step_syncs_left(steps)
    code = steps.drop_duplicates("code").set_index("code")["commit"]
    after = "syncs/step after"
    kept = st.index.str.endswith("finished queries kept")
    queries = steps.loc[steps["n_images"].astype(str) != "", "n_images"].iloc[0]
    text = (f"Counted on {int(float(queries))} queries (the searches)"
            + (f", the code before at commit `{code['before']}` and after at `{code['after']}`"
               if "before" in code else f", commit `{code.iloc[0]}`") + ". ")
    if "syncs/step before" in st:
        text += (f"Before, {int((st['syncs/step before'] > 0).sum())} of {len(st)} rows "
                 "read back from the device every step; ")
    text += (f"now {int((st[after] > 0).sum())} do"
             + (f", {int((st.loc[kept, after] > 0).sum()) or 'none'} of them with finished "
                "queries kept" if kept.any() else "") + ".")
    if left:
        masked = {m for m in left if st.get(after).get(f"{m}, finished queries kept") == 0}
        text += "  What still reads back each step: " + "; ".join(
            f"{m} ({report.fmt(st.loc[m, after])} a step"
            + (", none with finished queries kept)" if m in masked else ")")
            for m in left) + "."
    display(Markdown(text))
    display(report.page_table(st))
    if left:
        display(report.fold("Where each remaining read-back is (operator, source line, "
                            "reads a step)",
                            "\n".join(f"- **{m}**: " + ", ".join(f"`{w_}`" for w_ in w.split("; "))
                                      for m, w in left.items())))
else:
    display(Markdown("The steps were not counted on this machine "
                     "(`python benchmarks/step_overhead.py`)."))

# %% [markdown]
# ## Where the time goes
#
# A rate far below the peak says that time goes elsewhere than into the large dense
# operators, not where.  `benchmarks/throughput.py --ops-only` (run by `make benchmark`)
# profiles each loop above and each search batched at the benchmark's largest batch
# once with `torch.profiler`, and adds up every operator's own time (its children
# excluded) by family: convolutions and matrix products (the work the peak measures),
# pooling, normalisation, the other operators (activations, reductions, copies, the
# optimiser's arithmetic) and the time outside any operator (Python, autograd's
# bookkeeping, and the profiler's own cost, a few microseconds per call, so that share
# is an upper bound).

# %%
if ops is not None:
    display(report.fold("Operator profile: the share of each loop's and search's time per "
                        "operator family", report.ops_table(ops)))
else:
    display(Markdown("The operators were not profiled on this machine "
                     "(`python benchmarks/throughput.py --ops-only`)."))

# %% [markdown]
# ## Time per counterfactual against batch size
#
# Batch size 1 is the one-at-a-time loop.  Each method keeps its colour and marker on
# every page of the book.

# %%
fig = report.plot_time_vs_batch(perf)
plt.show()

# %% [markdown]
# ## How close to the hardware
#
# The achieved FLOP rate as a share of the measured peak, one image at a time and at
# the best batch size; the black tick is the roofline at the method's intensity, the
# most it could reach.  One image at a time, a search launches many small operators
# and its rate is a small share of the peak; batched, the same operators work on
# larger tensors.

# %%
fig = report.plot_fraction_of_bound(perf)
plt.show()

# %% [markdown]
# ## The chapters' timings beside the papers'
#
# Seconds per counterfactual of the C3LT table's methods in this book's chapters (mean
# over pairs, at the chapters' profile, this machine: the book's own run of each chapter,
# training seed 0, whose times this machine measured) and the timings the C3LT paper
# reports (the paper's hardware is a GPU).

# %%
timings = {"MNIST": results.read_results("mnist_eval", p.results_dir),
           "Fashion-MNIST": results.read_results("fashion_mnist_test", p.results_dir)}
report.page_table(report.timing_beside_papers(timings))

# %% [markdown]
# ## A chapter on a GPU
#
# `make gpu-check` runs on a machine with a GPU, with that machine's own Python and an
# empty cache: the device tests, then the MNIST C3LT chapter's compute at `standard`
# (every network trained there, every method on the chapter's pairs), timed part by
# part (`benchmarks/chapter_timing.py`): a method's time runs from its start on a pair
# to the next method's, so it holds its own training (C3LT's mappings, ExpGAN) and its
# scoring.

# %%
gpu = report.read_gpu_chapter(p.results_dir)
if gpu is not None:
    g = report.gpu_chapter_table(gpu)
    parts = g[~g.index.str.startswith("training")].drop(index="total")
    top = parts.sort_values("seconds").index[-1]
    display(Markdown(
        f"On one {gpu['machine'].iloc[0]} (torch {gpu['torch'].iloc[0]}) the chapter's compute "
        f"took **{report.fmt(g.loc['total', 'seconds'])} s** from an empty cache, pairs "
        f"{gpu['pairs'].iloc[0]}; the largest part: {top} "
        f"({report.fmt(g.loc[top, '% of the run'])} %)."))
    display(report.fold("Each part of the chapter's compute on the GPU", g))
else:
    display(Markdown("No chapter was timed on a GPU (`make gpu-check` on a machine with one)."))

# %% [markdown]
# ## The whole book from an empty cache
#
# A fresh clone renders the committed chapters without computing anything.  Re-executing
# every chapter with no trained network in the cache is the other end: the `standard`
# book, `make book RERUN=1 WORKERS=2` on a 2-core machine (two single-threaded workers
# side by side), timed end to end, with each chapter's compute time and, from the weight
# cache's `events.log`, the time each kind of network took to train
# (`benchmarks/first_run.py`).

# %%
first = report.read_first_run(p.results_dir)
if first is not None:
    book_wall = first.loc[first["name"] == "wall time", "seconds"].item()
    summed = first[(first["scope"] == "book") & (first["name"] != "wall time")].iloc[0]
    by_chapter, by_network = report.first_run_tables(first)
    top = by_network.index[0]
    display(Markdown(
        f"The first run took **{report.fmt(book_wall / 3600)} h** of wall time on "
        f"{int(summed['workers'])} workers; its {len(by_chapter)} chapters computed for "
        f"{report.fmt(summed['seconds'] / 3600)} h in all ({report.fmt(summed['seconds'] / book_wall)}× "
        f"the wall time side by side), {report.fmt(100 * summed['train_seconds'] / summed['seconds'])} % "
        f"of it training {int(by_network['trained'].sum())} networks; the largest share is "
        f"{top}'s ({report.fmt(by_network.loc[top, '% of all compute'])} %)."))
    display(report.page_table(by_chapter))
    display(report.fold("The networks the first run trained, by kind", by_network))
else:
    display(Markdown("The book's first run on an empty cache was not measured on this "
                     "machine (`benchmarks/first_run.py`)."))
