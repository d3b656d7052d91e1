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
# # How the methods rank on the two datasets
#
# The MNIST and Fashion-MNIST chapters run the same rows with the same code.  This
# page reads their results and ranks the methods on each metric (1 = best, in the
# metric's direction), per dataset, so that a method that is good on digits but not
# on clothes stands out.  A rank on a realism metric (IM1, IM2, FID, KID) says nothing
# about whether the method *edited* the query.  Diversity and query dependence describe
# a set of counterfactuals and are not ranked: the most varied set is an attack's noise,
# the most query-dependent the unchanged query.

# %% tags=["parameters"]
profile: str = "standard"   # the profile of the results files this page reads
results_dir: str | None = None  # where the two C3LT chapters' results files are (None: results/)

# %%
from cflib.book import chapters

p = chapters.parameters("cross_dataset.py", globals())

# %% [markdown]
# <!-- summary -->

# %%
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from cflib.bench import results
from cflib.bench.tables.c3lt import C3LT_METRICS
from cflib.book import report, spread

frames, seeds = {}, {}
for title, name in (("MNIST", "mnist_eval"), ("Fashion-MNIST", "fashion_mnist_test")):
    own = results.read_results(name, p.results_dir)
    frames[title], seeds[title] = spread.seed_means(name, own, p.profile,
                                                    root=Path(p.results_dir) / "sweep")
display(Markdown("Ranks of the means over " + " and ".join(
    f"{n} training seed{'s' if n > 1 else ''} ({k})" for k, n in seeds.items())
    + f", profile `{p.profile}`; the rows are the paper's table and the unchanged query "
    "(our variants, such as `CEM (targeted)` or `C3LT (inverted)`, left out)."))

# %%
ranks = report.rank_methods(frames, [s.name for s in C3LT_METRICS], report.paper_rows("c3lt"))
fig = report.plot_rank_heatmaps(ranks)
plt.show()

# %% [markdown]
# ## Mean rank over the realism and faithfulness metrics
#
# The mean of each method's ranks over all metrics but time, on each dataset, and
# the change between the datasets.

# %%
report.page_table(report.rank_summary(ranks))

# %% [markdown]
# <!-- discussion -->
