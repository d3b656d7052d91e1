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
# # Benchmark your own method
#
# The other chapters compare the published methods; this one compares yours.  It
# defines a method in the page, as a reader would, and runs it through exactly a
# table's protocol with `cflib.bench.compare` (its queries, seeds, trained networks,
# metrics and reference rows), beside the book's rows.  The method is a baseline the
# tables lack, the *nearest unlike neighbour* {cite:p}`keane2020good`: for each query,
# the closest training image of the target class (L1 on [−1, 1]) among those the
# classifier assigns to the target.
# It returns a real image: a generative method should move the query less while scoring
# as well on realism.  It runs on the C3LT table's MNIST pair 4→9.

# %% [markdown]
# **What this shows.**
#
# ```{glue:md} reading
# :format: myst
# ```
#
# *From a terminal*, at the end, runs the same for a method in a module of your own.

# %% tags=["parameters"]
profile: str = "standard"   # smoke | standard | paper: sizes only, never the algorithm
device: str = "cpu"         # cpu, cuda or cuda:N
train_seed: int = 0         # seeds every network the table's protocol trains
data_seed: int = 0          # seeds the query draw, the reference split and the methods' draws
results_name: str | None = None   # the results files' stem (None: the chapter's own)
results_dir: str | None = None    # None: the book's run writes results/, any other _build/runs/

# %% tags=["setup"]
from cflib.book import chapters

p = chapters.parameters("your_method.py", globals())

# %% tags=["setup"]
from cflib.bench.compare import Comparison, compare
from cflib.bench.seeds import Seeds
from cflib.book import report

seeds = Seeds(train=p.train_seed, data=p.data_seed)

# %% [markdown]
# ## The method: a class of your own
#
# A method is an `Explainer` subclass: a `name`, a frozen `Config` (here the base's,
# `batch_size` only), and `_generate`, which turns a batch of queries into a batch of
# counterfactuals.  A method that learns something sets `needs_fit` and keeps what
# `fit` learned with `record_fit` (a `FitRecord`, saved and loaded with the explainer);
# `compare` fits it per class pair with the pair's training images (drawn as C3LT's
# are) before it explains that pair's queries.

# %% tags=["compute"]
import torch

from cflib.explainers import Explainer
from cflib.tensors import predict


class NearestUnlikeNeighbour(Explainer):
    """The nearest unlike neighbour (Keane & Smyth 2020): for each query, the training
    image of the target class closest to it in L1 distance (on [-1, 1]), among those the
    classifier assigns to the target.  A real image: nothing is synthesised."""

    name = "Nearest unlike neighbour"
    needs_fit = True

    def fit(self, x_query, x_target, pair):
        """Keep the target class's training images that the classifier assigns to it."""
        target = pair[1]
        keep = predict(self.classifier, x_target).argmax(1) == target
        return self.record_fit({"pool": x_target[keep.to(x_target.device)]},
                               {"target": target})

    def _generate(self, x, target, query, generator):
        fitted = self.fit_record.values["target"]
        if (target != fitted).any():
            raise ValueError(f"{self.name} was fitted for target class {fitted}")
        pool = self.fit_record.tensors["pool"].to(x.device, x.dtype)
        distance = torch.cdist(x.flatten(1), pool.flatten(1), p=1)
        return pool[distance.argmin(1)]


# %% [markdown]
# ## Through the table's protocol
#
# One call runs it, with the table's two reference rows (`Original Data`: real target
# images drawn at random; `Query (unchanged)`), scores every row with the table's
# metrics, writes the results and the page, and reads the book's rows of the table
# where they stand beside this run.

# %% tags=["compute"]
cmp = compare(NearestUnlikeNeighbour, tables=["c3lt-mnist"], profile=p.profile,
              pairs=["4->9"], seeds=seeds, device=p.device, out=p.results_dir,
              results_name=p.results_name, book_results=p.results_dir,
              page=report.bench_page)

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

cmp = Comparison.load(p.results_dir, p.results_name, book_results=p.results_dir)
tc = cmp.tables["c3lt-mnist"]
display(Markdown(f"**Run parameters:** profile `{cmp.profile}`, device `{cmp.device}`, "
                 f"training seed `{cmp.seeds.train}`, data seed `{cmp.seeds.data}`; pairs "
                 f"{', '.join(tc.pairs)}.  This page's numbers are in "
                 f"`{p.results_name}_c3lt-mnist.csv`, the whole comparison on one page in "
                 f"`{p.results_name}.html`."))
display(Markdown(tc.note))

# %% [markdown]
# ## The table
#
# The mean over the pairs run, the paper's value beneath ours where the C3LT paper
# reports one (IM2 is shown x10 and KID x1e3, as in the paper).

# %%
report.page_table(report.bench_table(tc))

# %% [markdown]
# ## How sure each value is, and ranks
#
# Each value of this run's rows rests on the queries of each pair: its 95 % interval
# resamples them (the bootstrap of `cflib.bench.intervals`); the book's committed rows
# kept four counterfactuals per pair, not every query's, so they carry no interval and
# are compared by their value.  A row ranks above another only where their intervals
# separate; where several ranks are possible the table gives the range (1 = best, in the
# metric's direction; time and the set-level FID, KID, diversity and query dependence are
# not ranked).

# %%
display(Markdown(f"Sample size: {tc.sample_size()}."))
report.page_table(report.bench_intervals(tc))

# %%
report.page_table(report.bench_ranks(tc))

# %%
from myst_nb import glue

# the page's answer, shown under "What this shows" at the top of the page
glue("reading", Markdown(report.bench_verdict(tc)), display=False)

# %% [markdown]
# ## Counterfactuals
#
# The first queries of the pair (columns), the method's counterfactual beside the
# reference rows' and each one's change from the query (red: ink added, blue: ink
# removed); a red frame marks a counterfactual the classifier does not assign to the
# target, a grey dashed frame a query it already assigned to the target (never counted as
# valid).

# %%
for fig in report.bench_grid(tc):
    plt.show()

# %% [markdown]
# ## The chapter's checks
#
# What the papers lead us to expect of the C3LT table (`cflib/bench/reference/expected.csv`),
# tested on the rows above, as the C3LT chapters test them.

# %%
checks = tc.checks()
if checks.empty:
    display(Markdown("None of the table's expectations applies to these rows: they compare "
                     "the papers' methods, and none of them stands beside this one here."))
else:
    display(report.verdicts(checks))

# %% [markdown]
# ## From a terminal
#
# The same comparison for a class (or a function `fn(model, x, target) -> x_cf`) in a
# module of your own:
#
# ```bash
# cflib bench --method mypkg.mymodule:MyExplainer --config '{"steps": 50}' \
#     --tables c3lt-mnist,c3lt-fmnist --profile smoke --pairs '4->9,0->2'
# ```
#
# It writes a results file per table (the book's results schema) and one HTML page
# with everything above, under `./cflib-bench/<method>-<profile>/` of the current folder
# (or `--out DIR`, anywhere but the committed `results/` and `book/`: a user's method
# never replaces a committed file; a second run to a folder holding a run's files needs
# `--force`).  The tables are `c3lt-mnist`, `c3lt-fmnist` (the C3LT table on each
# dataset, its pairs) and `bayes-mc_dropout`, `bayes-bnn` (the Bayesian chapter's two
# classifiers).  The book's committed rows stand beside yours only where they were made
# with the same profile and seeds and their reference rows equal your run's (the same
# networks and queries); at another profile the book's methods run beside yours at that
# profile, labelled as that run's rows (`--no-book-methods`: only the reference rows),
# and the page says which.

# %% [markdown]
# ```{admonition} Protocol notes
# :class: note
# - **The protocol** is the C3LT table's (its chapter's protocol notes): the same query
#   images (a seeded draw of the profile's `n_images` test images of the query class),
#   the same FID/KID reference half of the real target images, the same classifier,
#   autoencoders, feature and independent networks from the weight cache.
# - **Fitting**: a method with `needs_fit` is fitted per pair with
#   `fit(x_query, x_target, pair=(query, target))`, `c3lt_subset` training images of each
#   class (all of them at `standard`), drawn as C3LT's are.
# - **The book's rows** are read from the table's results file only when made at this
#   run's profile and seeds, with the profile's query count, and when their reference
#   rows equal this run's on every metric but time; the page's note says which.
# - **Threads**: `compare` runs torch at `CFLIB_THREADS` threads (default 1, the
#   chapters'), so that it loads the networks the chapters trained.
# ```
