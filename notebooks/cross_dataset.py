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
profile = "standard"
device = "cpu"
seed = 0
results_name = "cross_dataset"
results_dir = "results"

# %%
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from cflib import report
from cflib.benchmark import C3LT_METRICS

files = {"MNIST": Path(results_dir) / "mnist_eval.csv",
         "Fashion-MNIST": Path(results_dir) / "fashion_mnist_test.csv"}
frames = {k: pd.read_csv(f, keep_default_na=False) for k, f in files.items() if f.exists()}
display(Markdown("Results read: " + ", ".join(f"`{files[k]}` (profile "
                                              f"`{v['profile'].iloc[0]}`)" for k, v in frames.items())))

# %%
ranks = report.rank_methods(frames, C3LT_METRICS)
fig, axes = plt.subplots(1, len(frames), figsize=(5.2 * len(frames), 3.6), squeeze=False)
for ax, (name, r) in zip(axes[0], ranks.items()):
    sns.heatmap(r, annot=True, fmt=".0f", cmap="viridis_r", cbar=False, ax=ax)
    ax.set_title(f"{name}: rank per metric (1 = best)", fontsize=10)
    ax.set_xlabel("")
    ax.set_ylabel("")
fig.tight_layout()
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
