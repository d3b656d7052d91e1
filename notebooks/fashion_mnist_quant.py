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
# # Recourse under quantization on Fashion-MNIST
#
# This chapter reproduces the Fashion-MNIST table of Yahyati, Lamaakal, El Makkaoui &
# Ouahbi, *When Bits Break Recourse: Counterfactual-Faithful Quantization* (arXiv
# 2605.17160, 2026).  Its question: a small CNN is compressed to a few bits per weight
# and activation; its accuracy barely moves, but does the *recourse* computed on the
# full-precision model (the change that would move an image into the target class,
# T-shirt/top) still work on the compressed one?  Accuracy alone cannot say: a
# compressed model can agree with the original on test images and still reject the
# original's counterfactuals.
#
# | row | what it is |
# |---|---|
# | FP32 | the full-precision SmallCNN (our reference row; every VD, CRG, DirSim is measured against its recourse) |
# | PTQ INT8 / PTQ INT4 | post-training quantization of every weight and activation to 8 / 4 bits, steps and clips calibrated on validation images |
# | CF-PTQ | PTQ INT4 whose calibration set also holds the FP model's counterfactuals of the validation images |
# | MixedPrec-QAT | quantization-aware training with a learned per-layer bit choice in {2, 3, 4, 8} under a bit budget |
# | CFQ-QAT | the same, plus a loss that keeps the FP model's recourse points in the target class (the paper's method) |
# | KD+Quant | a student distilled from the FP model, then MixedPrec-QAT |
# | Prune+Quant | 30 % global magnitude pruning (the mask kept through training), then MixedPrec-QAT |
#
# Recourse is searched in the 32-d latent space of a convolutional autoencoder by
# projected gradient steps (`Latent PGD`, the same explainer for every model).  The
# paper's Fashion-MNIST listing gives accuracy and training overhead only; its VD, CRG
# and DirSim for this dataset are not public, so those columns are ours alone.  The
# code lives in `cflib` (`cflib.quant_benchmark`, `cflib.quantization`,
# `cflib.explainers.latent`, `cflib.metrics.recourse`); this notebook only calls it.
# Re-run it with `make chapter NB=fashion_mnist_quant PROFILE=paper DEVICE=cuda`.

# %% tags=["parameters"]
profile: str = "standard"   # smoke | standard | paper: sizes only, never the algorithm
device: str = "cpu"         # cpu, cuda or cuda:N
train_seed: int = 0         # the first training seed; the profile says how many follow
data_seed: int = 0          # seeds the queries and the recourse solver's restarts
target: int = 0             # the recourse target class (0: T-shirt/top, the code's)
methods: list | None = None  # None: the seven compressed rows, e.g. ["PTQ INT8", "CFQ-QAT"]
results_name: str = "fashion_mnist_quant"  # the results file's name
results_dir: str = "results"               # where the results files are written

# %%
from cflib.book import chapters

p = chapters.parameters("fashion_mnist_quant.py", globals())

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from cflib.bench import results
from cflib.bench.data import CLASS_NAMES
from cflib.bench.profiles import get_profile
from cflib.bench.tables import quant as quant_benchmark
from cflib.book import report

prof = get_profile(p.profile)
seeds = list(range(p.train_seed, p.train_seed + prof.quant.n_seeds))
display(Markdown(
    f"**Run parameters:** profile `{prof.name}`, device `{p.device}`, training seed(s) "
    f"{seeds}, target class {p.target} ({CLASS_NAMES['fmnist'][p.target]}), "
    f"data seed {p.data_seed}, {prof.quant.n_queries} test draws before the label filter."))
report.metrics_table([s for s in quant_benchmark.QUANT_METRICS
                      if s.name in ("Accuracy", "VD", "CRG", "DirSim", "Overhead",
                                    "FP_Feasible", "Transfer_Margin", "Bit_cost", "Sparsity")])

# %%
run = quant_benchmark.run_quant_table("fmnist", prof, seeds, p.data_seed, p.device, p.methods,
                                      p.target)
written = results.write_run(run, p.results_name, p.results_dir)
fp = run.results[(run.results["method"] == "FP32") & (run.results["variant"] == "")]
fpv = fp.groupby("metric")["value"].mean()
display(Markdown(
    f"FP32 SmallCNN: **{fpv['Accuracy']:.2%}** test accuracy; {int(fpv['N_queries'])} queries "
    f"(of which {int(fpv['N_already_target'])} are already classified as the target by the "
    f"FP model, kept as the code keeps them); FP recourse feasible for "
    f"**{fpv['FP_Feasible']:.1%}** of them.  Results written to `{written[0].name}`, "
    f"`{written[1].name}` and `{written[2].name}`."))

# %% [markdown]
# ## The table: ours beside the paper's
#
# Accuracy (%) and Overhead (×) beside the paper's listing (`cflib/reference/
# reported.csv`); VD, CRG and DirSim with their spread (the 95 % bootstrap half-width
# over queries for one seed, the sd over seeds for several); average bits (`Bit_cost`);
# the share of queries whose recourse exists on the FP and on the compressed model.
# Compare accuracy as the *gap to our FP32 row*: the absolute level depends on the
# training-set size (the `standard` profile trains on the public code's 4,500 images,
# the paper's listing implies the full training split).  Compare overhead by its
# *ordering*: our FP training is short and QAT is many times the cost of calibration.

# %%
report.style(report.quant_table(run.results))

# %% [markdown]
# ### Accuracy hides what VD shows
#
# Left: accuracy of each compressed row, ours beside the paper's, our FP32 as the
# dashed line.  Right: VD, the share of the FP model's recourse that the compressed
# model no longer assigns to the target.

# %%
fig = report.plot_acc_vs_vd(run.results)
plt.show()

# %% [markdown]
# ### VD against bits
#
# Uniform post-training quantization of every weight and activation to b bits (the
# sweep), scored at the FP recourse points (forward passes only); the
# mixed-precision rows are drawn at their average bits.

# %%
fig = report.plot_vd_vs_bits(run.sweep, run.results)
plt.show()
report.style(run.sweep.groupby(["bits", "metric"])["value"].mean().unstack())

# %% [markdown]
# ## Recourse, query by query
#
# Each row a query whose FP recourse exists (those with a VD event first): the query,
# its FP recourse, and each compressed model's *own* recourse.  A red frame marks a
# model that rejects the FP recourse (a VD event); a grey cell a model on which no
# recourse was found.  Under each cell, the cosine of the two latent actions.

# %%
fig = report.plot_recourse_grid(run)
plt.show()

# %% [markdown]
# ### Is "mixed precision" mixed?
#
# The final bit width of every quantizer (four weight tensors, three activation
# maps) of every trained row.

# %%
fig = report.plot_bit_allocation(run.bits)
plt.show()

# %% [markdown]
# ### Distributions
#
# Per-query relative cost gap and direction cosine (queries feasible on both models),
# and the compressed model's target margin at the FP recourse points (left of 0: the
# model rejects the FP recourse).

# %%
fig = report.plot_recourse_distributions(run)
plt.show()

# %% [markdown]
# ## What the run shows
#
# The paper's claims and the shape our spec expects, each tested on this run, with a
# paired-bootstrap 95 % interval where two methods are compared on the same queries.
# `matched` says whether the two rows are within one accuracy point and a quarter bit
# of each other (the paper's claim is for matched accuracy and bits); `significant`
# whether the interval excludes zero in the expected direction.  The chapter need not
# confirm the paper; it shows the test.

# %%
report.style(quant_benchmark.shape_checks(run))

# %% [markdown]
# How close our orderings are to the listing's (Kendall's τ; overhead is a timing of
# this machine, its ordering is what compares):

# %%
main_rows = run.results[(run.results["variant"] == "") & (run.results["method"] != "FP32")]
report.style(report.ranking_agreement(main_rows, "quant", "fmnist", ["Accuracy", "Overhead"]))

# %% [markdown]
# ## Protocol check table
#
# Where we deviate from the public code, the code's choice computed beside ours:
# the code's quantizer initialisation (`repo_init`) against our MSE initialisation;
# the code's raw latent (`raw_latent`) against our standardised one (FP recourse
# feasibility, median ‖δ‖); each row's own reference model (`own_fp_reference`: the
# pruned FP model, the KD student) against the shared FP32 reference; and Prune+Quant's
# final sparsity beside its pruning fraction.

# %%
report.style(report.quant_checks_table(run.checks))

# %% [markdown]
# ## Where our numbers differ from the paper's
#
# <!-- discussion -->

# %% [markdown]
# The sizes of this run:

# %%
report.profile_table(prof, ["quant"])

# %% [markdown]
# ```{admonition} Protocol notes
# :class: note
# What the public code (github Ism-ail11/When-Bits-Break-Recourse-Counterfactual-
# Faithful-Quantization, `cfq/experiments/image.py`) does, what it leaves open, and
# what we did:
#
# - **Data**: Fashion-MNIST through `cflib.data` in [−1, 1] (the code uses [0, 1]; every
#   pixel term of the solver is computed on the [0, 1] scale, so the code's constants
#   keep their meaning).  A seeded pool of `quant_train_subset` training images (all of
#   them at `paper`), a tenth split off for calibration; queries: the first
#   `quant_n_queries` draws of a seeded permutation of the test split, labels other
#   than the target kept (the code: 128 draws; we use 256 at `standard` so that the
#   paired intervals can separate methods).  Queries the FP model already assigns to
#   the target are kept, as in the code, and counted above.
# - **Models**: the code's SmallCNN (conv 32, conv 64, FC 64, 10; AdamW 1e-3, weight
#   decay 1e-4, batch 128) and its conv autoencoder (latent 32; Adam, MSE; tanh output
#   instead of sigmoid for [−1, 1]), epochs from the profile.
# - **Quantization** (fake quantization written in cflib: torch.ao and torchao have no
#   2–4-bit mixed precision with input gradients): weights symmetric per tensor with a
#   learned step, activations after each block with a learned clip, a Gumbel-softmax bit
#   choice over {2, 3, 4, 8} per quantizer (hard and deterministic at evaluation), the
#   bit cost ½ · parameter-weighted weight bits + ½ · activation bits with a budget of 4.
#   **Deviation (a)**: steps and clips start at the minimiser of the quantization error
#   over a 40-point grid (the code's fixed rule clips activations at 6.0 and costs
#   accuracy; the check table shows both).
# - **PTQ**: steps and clips calibrated (Adam 5e-3) to the FP logits on the validation
#   images; **CF-PTQ** adds the FP model's teacher counterfactuals of the non-target
#   validation images (2 steps of 0.12).  **QAT** (AdamW 1e-3 on every parameter,
#   temperature 5 → 0.25, gradient clip 10); **CFQ-QAT** adds CE(f_q(x̃), t) at the
#   teacher points x̃ the FP model puts in the target (teacher: 2 steps of 0.12, computed
#   once per training image since it is deterministic; the code computes it per batch,
#   the result is the same).  **Deviation (c)**: Prune+Quant's mask is re-applied after
#   every optimizer step (the code lets the pruned weights grow back).  **Deviation
#   (d)**: the image code has no KD+Quant (its `kd_quant` silently runs MixedPrec-QAT);
#   ours is the tabular recipe: a fresh student trained on ½ CE + ½ · T² · KL with
#   T = 2, then MixedPrec-QAT.
# - **Recourse** (`Latent PGD`): the code's objective CE(f(x̂), t) + 0.01 (‖δ‖ + 0.02
#   ‖x̂ − x‖₁) + 0.01 relu(‖x̂ − x‖₁ − 120), plain gradient steps of 0.08 projected on
#   ‖δ‖ ≤ 4, `quant_eval_steps` steps × `quant_eval_restarts` restarts, the best restart
#   kept (success, then cost, then CE).  **Deviation (b)**: δ acts on the latent
#   standardised per dimension (training-pool mean and std): on the code's raw latent
#   (per-dimension std about 3) a radius of 4 barely moves, and FP recourse exists for
#   few queries (the check table shows the raw-latent rate).
# - **Metrics**: **deviation (e)**: Accuracy on the full test split (the code: on the
#   ≈ 115 queries).  VD over the queries whose FP recourse exists; **deviation (f)**: NaN
#   with a warning when none exists (the code divides by max(|F|, 1) and reports 0).
#   CRG and DirSim over queries feasible on both models.  Every row is measured against
#   the one FP32 recourse (the code re-references Prune+Quant and KD+Quant to the pruned
#   model and the student; the check table shows that variant).  95 % intervals: 1,000
#   seeded bootstrap resamples of the queries; paired intervals resample the same
#   queries for both rows.
# - **Overhead** (not defined in the paper; the code has none for images): (T_FP +
#   T_method) / (T_FP + T_PTQ INT8), wall times of this machine stored in each cached
#   model, FP training included (the only reading that gives ratios near the listing's).
#   The listing has CF-PTQ above MixedPrec-QAT; in the image code CF-PTQ's extra work is
#   a 2-step teacher on a few hundred images, so ours is close to PTQ's.
# - **Seeds**: one training seed at `smoke` and `standard`; three at `paper`, where the
#   table shows mean ± sd.
# ```
