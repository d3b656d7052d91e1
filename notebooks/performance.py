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
# Every explainer of `cflib` takes a whole batch: the search for each image runs as
# one batched tensor computation.  This page measures what that buys.  For every
# method of the catalog, the same query images are explained one at a time and in
# batches of several sizes, on the machine that built the page
# (`benchmarks/throughput.py`, `make benchmark`; `DEVICE=cuda` on a GPU).  The
# floating-point work of each call is counted per operator (matmuls and convolutions,
# forward and backward), so the achieved rate can be set against a bound: the rate the
# same classifier reaches on a large batch (1,024 images) in one forward and one
# backward pass to the input, the work a batched search repeats.
#
# The methods run with the iteration budgets of the `smoke` profile and the networks
# of that profile (the same architectures as the chapters, trained less): the time of
# one iteration, and so the ratios, do not depend on how many iterations a profile
# asks for; the chapters' own timings (at `standard`) are below, beside the papers'.

# %% tags=["parameters"]
profile: str = "standard"   # the profile of the chapters' results this page reads
device: str = "cpu"         # unused: the benchmark's device is in its results file
train_seed: int = 0         # unused: this page draws nothing
data_seed: int = 0          # unused: this page draws nothing
results_name: str = "performance"  # the benchmark's results file
results_dir: str = "results"       # where it is

# %%
from cflib.book import chapters

p = chapters.parameters("performance.py", globals())

# %%
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from cflib.bench import results
from cflib.book import report

perf = results.read_table(Path(p.results_dir) / f"{p.results_name}.csv")
display(Markdown(f"Measured on: {perf['machine'].iloc[0]} (device `{perf['device'].iloc[0]}`), "
                 f"{int(perf['n_images'].iloc[0])} images per method."))
report.style(report.performance_table(perf))

# %% [markdown]
# ## Time per counterfactual against batch size
#
# Batch size 1 is the one-at-a-time loop.  The reference rows (`Original Data`,
# `Query (unchanged)`) run no model and are left out.

# %%
fig = report.plot_time_vs_batch(perf)
plt.show()

# %% [markdown]
# ## How close to the hardware
#
# The achieved FLOP rate as a fraction of the bound.  One image at a time, a search
# launches many small kernels and the fraction is low; batched, it approaches the
# bound.  Methods that also run other networks than the classifier (CEM's and PSCE's
# autoencoder, C3LT's generator and encoder, Latent PGD's decoder) can exceed 1: those
# networks run at a higher rate than the small classifier that sets the bound.

# %%
fig = report.plot_fraction_of_bound(perf)
plt.show()

# %% [markdown]
# ## The chapters' timings beside the papers'
#
# Seconds per counterfactual of the C3LT table's methods in this book's chapters (mean
# over pairs, the `standard` budgets, this machine) and the timings the C3LT paper
# reports (unconfirmed listings; the paper's hardware is a GPU).

# %%
timings = {"MNIST": results.read_results("mnist_eval", p.results_dir),
           "Fashion-MNIST": results.read_results("fashion_mnist_test", p.results_dir)}
report.style(report.timing_beside_papers(timings))
