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
# The MNIST and Fashion-MNIST chapters run the same six rows with the same code.
# This page reads their two results files and ranks the methods on each metric
# (1 = best, in the metric's direction from the reference file), per dataset, so
# that a method that is good on digits but not on clothes stands out.

# %% tags=["parameters"]
profile: str = "standard"   # the profile of the results files this page reads
device: str = "cpu"         # unused: this page trains nothing
train_seed: int = 0         # unused: this page draws nothing
data_seed: int = 0          # unused: this page draws nothing
results_name: str = "cross_dataset"  # unused: this page writes no results file
results_dir: str = "results"         # where the two C3LT chapters' results files are

# %%
from cflib.book import chapters

p = chapters.parameters("cross_dataset.py", globals())

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from cflib.bench import results
from cflib.bench.tables.c3lt import C3LT_METRICS
from cflib.book import report

frames = {"MNIST": results.read_results("mnist_eval", p.results_dir),
          "Fashion-MNIST": results.read_results("fashion_mnist_test", p.results_dir)}
display(Markdown("Results read: " + ", ".join(f"{k} (profile `{v['profile'].iloc[0]}`)"
                                              for k, v in frames.items())))

# %%
ranks = report.rank_methods(frames, [s.name for s in C3LT_METRICS])
fig = report.plot_rank_heatmaps(ranks)
plt.show()

# %% [markdown]
# ## Mean rank over the realism and faithfulness metrics
#
# The mean of each method's ranks over all metrics but time, on each dataset, and
# the change between the datasets.

# %%
report.rank_summary(ranks)

# %% [markdown]
# <!-- discussion -->
