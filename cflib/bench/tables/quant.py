"""The quantization table (Yahyati et al. 2026, "When Bits Break Recourse"): recourse on
Fashion-MNIST under seven compression recipes.

:func:`run_quant_table` trains (or loads) the FP32 SmallCNN and the latent autoencoder
of one training seed, draws the queries (test images outside the target class),
computes the FP recourse once with :class:`~cflib.explainers.latent.LatentRecourse`
("Latent PGD"), builds every compressed row of :data:`cflib.quantization.RECIPES`
through the cache and scores it against that shared FP recourse with the table's
metric specs (:data:`QUANT_METRICS`):

- ``Accuracy`` on the test split (the full split; the public code uses its queries), and
  per class;
- ``VD``: share of FP recourse the compressed model rejects (NaN when none exists), with
  a Wilson (binomial) interval;
- ``CRG``: relative cost gap of the two models' own recourse (0 is best);
- ``DirSim``: cosine of the two latent actions (standardised deltas);
- ``Overhead``: ``T_m / T_PTQ INT8``, each recipe's own compression seconds (stored in the
  cache) over PTQ INT8's, and ``T_m / T_MixedPrec-QAT`` beside it;
- the false-acceptance companions of VD (a model that accepts everything has VD 0):
  ``FA_recon``, the share of autoencoder reconstructions of non-target test images the
  model puts in the target, and ``FA_infeasible``, the share of queries whose FP recourse
  failed that the model accepts at the FP's last point, each with a Wilson interval;

plus bootstrap half-widths, feasibility, transfer margins, bits and timings.  Beside the
seven recipes it scores ``FP32 + retrain``, the FP model trained for the QAT rows'
extra epochs without quantization (the control of every QAT row).  Besides the table
(``variant = ""``) it computes the protocol check rows (``repo_init``, ``raw_latent``,
``own_fp_reference`` and, behind ``quant.teacher_k10``, ``teacher_K10``), the
uniform-bit PTQ sweep and each model's bit allocation.  Every argument is checked
before anything is trained.
"""
from __future__ import annotations

import copy
import logging
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Mapping

import pandas as pd
import torch
from torch import nn

from cflib.bench import zoo
from cflib.bench.data import load_split, n_classes
from cflib.bench.profiles import normalised
from cflib.bench.results import CLASSIFIER, Run, tidy
from cflib.bench.runner import RunArgs, evaluate
from cflib.bench.runner import shape_checks as _shape_checks
from cflib.bench.runner import summarise as _summarise
from cflib.bench.seeds import Seeds
from cflib.bench.tables.registry import TableSpec, register_table
from cflib.explainers import Counterfactuals
from cflib.explainers.latent import LatentRecourse, LatentRecourseConfig
from cflib.metrics import recourse as rm
from cflib.metrics.recourse import (
    AVG_ACT_BITS,
    AVG_WEIGHT_BITS,
    BIT_COST,
    COMPRESS_SECONDS,
    CRG,
    CRG_CI,
    DIRSIM,
    DIRSIM_CI,
    FA_INFEASIBLE,
    FA_INFEASIBLE_HIGH,
    FA_INFEASIBLE_LOW,
    FA_RECON,
    FA_RECON_HIGH,
    FA_RECON_LOW,
    FP_FEASIBLE,
    MEDIAN_DELTA,
    N_ALREADY_TARGET,
    N_BOTH_FEASIBLE,
    N_FP_FEASIBLE,
    N_FP_INFEASIBLE,
    N_QUERIES,
    OVERHEAD,
    OVERHEAD_VS_MIXEDPREC,
    Q_FEASIBLE,
    SPARSITY,
    TEACHER_SUCCESS,
    TRAIN_SECONDS,
    TRANSFER_MARGIN,
    VD,
    VD_HIGH,
    VD_LOW,
)
from cflib.metrics.spec import MetricSpec, register
from cflib.names import unknown_name
from cflib.quantization.fake import check_bits
from cflib.quantization.recipes import RECIPES, magnitude_prune
from cflib.tensors import check_class, logits_on

log = logging.getLogger("cflib")

TABLE = "quant"
FP32 = "FP32"
RETRAIN = zoo.RETRAIN            # "FP32 + retrain": the QAT rows' control
BASELINE = "PTQ INT8"            # Overhead's denominator, as in the listing (1.00x)
MIXEDPREC = "MixedPrec-QAT"      # the public code's runtime script's denominator
#: the rows of the chapter: FP32 (reference) and its retrained control first, then the
#: listing's order
QUANT_ROWS = [FP32, RETRAIN, *RECIPES]
QAT_ROWS = ["MixedPrec-QAT", "CFQ-QAT", "KD+Quant", "Prune+Quant"]
N_BOOT = rm.N_BOOT
DEFAULT_TARGET = 0               # T-shirt/top, as the code


# -- the metrics -----------------------------------------------------------------------------
@dataclass
class QuantContext:
    """One compressed row scored against an FP recourse (CPU tensors).

    ``fp``: the reference recourse (on the FP model); ``q``: the row's own recourse
    (on f_q; None for the FP32 row); ``logits_at_fp``: f_q's logits at ``fp.x_cf``;
    ``info``: the model's cache info; ``overhead`` / ``overhead_mixedprec``: its two
    Overhead readings; ``fa_pred``: the model's decisions on the autoencoder
    reconstructions of the false-acceptance images; ``test_pred`` / ``test_y``: its
    decisions on the accuracy images and their labels.
    """

    fp: Counterfactuals
    q: Counterfactuals | None
    logits_at_fp: torch.Tensor | None
    target: int
    info: dict
    overhead: float = math.nan
    seed: int = 0
    n_boot: int = N_BOOT
    overhead_mixedprec: float = math.nan
    fa_pred: torch.Tensor | None = None
    test_pred: torch.Tensor | None = None
    test_y: torch.Tensor | None = None

    @property
    def fp_success(self) -> torch.Tensor:
        return self.fp.success.cpu()

    @property
    def q_success(self) -> torch.Tensor:
        return self.q.success.cpu()

    @cached_property
    def q_valid(self) -> torch.Tensor:
        """``argmax f_q(x_hat_f) == t`` per query."""
        return self.logits_at_fp.argmax(1) == self.target

    @cached_property
    def vd_events(self) -> torch.Tensor:
        return rm.vd_events(self.fp_success, self.q_valid)

    @cached_property
    def fa_events(self) -> torch.Tensor:
        """Per reconstruction: 1 where the model puts it in the target."""
        return (self.fa_pred.cpu() == self.target).double()

    @cached_property
    def infeasible_accepted(self) -> torch.Tensor:
        """Per query whose FP recourse failed (already-target queries excluded): 1 where
        the compressed model accepts the FP's last point; NaN for the other queries."""
        out = self.q_valid.double()
        skip = self.fp_success | (self.fp.pred.cpu() == self.target)
        out[skip] = float("nan")
        return out

    def class_accuracy(self, k: int) -> float:
        """Test accuracy on the images of class ``k``."""
        mask = self.test_y.cpu() == k
        if not mask.any():
            return float("nan")
        return (self.test_pred.cpu()[mask] == k).double().mean().item()

    @cached_property
    def cost_gap(self) -> torch.Tensor:
        return rm.relative_cost_gap(self.fp_success, self.q_success, self.fp.meta["cost"],
                                    self.q.meta["cost"])

    @cached_property
    def dirsim(self) -> torch.Tensor:
        return rm.direction_similarity(self.fp_success, self.q_success, self.fp.meta["delta"],
                                       self.q.meta["delta"])

    @cached_property
    def margins(self) -> torch.Tensor:
        return rm.transfer_margins(self.fp_success, self.logits_at_fp, self.target)

    def ci(self, values: torch.Tensor) -> float:
        return rm.bootstrap_ci(values, self.n_boot, self.seed).half_width

    def record(self) -> "RowRecourse":
        if self.q is None:
            return RowRecourse(self.fp, None, None, None, None, None)
        return RowRecourse(self.q, self.logits_at_fp, self.vd_events, self.cost_gap,
                           self.dirsim, self.margins)


#: per-class test accuracy, one metric per class of the table's dataset (QUANT.dataset)
CLASS_ACCURACY = rm.class_accuracy_specs(n_classes("fmnist"))
#: the model's own test accuracy, from its training record (the context's ``info``)
MODEL_ACCURACY = register(MetricSpec(
    "Accuracy", lambda c: float(c.info["test_accuracy"]), True,
    "classifier test accuracy (a fraction)"))[0]
FA_METRICS = (FA_RECON, FA_RECON_LOW, FA_RECON_HIGH)
#: every metric of the chapter
QUANT_METRICS = (
    MODEL_ACCURACY, VD, VD_LOW, VD_HIGH, CRG, DIRSIM, OVERHEAD, OVERHEAD_VS_MIXEDPREC, *FA_METRICS,
    FA_INFEASIBLE, FA_INFEASIBLE_LOW, FA_INFEASIBLE_HIGH, CRG_CI, DIRSIM_CI, FP_FEASIBLE,
    Q_FEASIBLE, TRANSFER_MARGIN, AVG_WEIGHT_BITS, AVG_ACT_BITS, BIT_COST, COMPRESS_SECONDS,
    TRAIN_SECONDS, TEACHER_SUCCESS, SPARSITY, MEDIAN_DELTA, N_QUERIES, N_FP_FEASIBLE,
    N_FP_INFEASIBLE, N_BOTH_FEASIBLE, N_ALREADY_TARGET, *CLASS_ACCURACY,
)
#: what each kind of row carries
FP32_METRICS = (MODEL_ACCURACY, FP_FEASIBLE, MEDIAN_DELTA, TRAIN_SECONDS, N_QUERIES, N_FP_FEASIBLE,
                N_ALREADY_TARGET, *FA_METRICS, *CLASS_ACCURACY)
ROW_METRICS = (MODEL_ACCURACY, VD, VD_LOW, VD_HIGH, CRG, DIRSIM, OVERHEAD, OVERHEAD_VS_MIXEDPREC,
               *FA_METRICS, FA_INFEASIBLE, FA_INFEASIBLE_LOW, FA_INFEASIBLE_HIGH, CRG_CI,
               DIRSIM_CI, Q_FEASIBLE, TRANSFER_MARGIN, AVG_WEIGHT_BITS, AVG_ACT_BITS, BIT_COST,
               COMPRESS_SECONDS, N_QUERIES, N_FP_FEASIBLE, N_FP_INFEASIBLE, N_BOTH_FEASIBLE,
               *CLASS_ACCURACY)
#: reported where the model's training record holds them (runner.evaluate's ``optional``)
OPTIONAL_METRICS = (("teacher_success", TEACHER_SUCCESS), ("sparsity", SPARSITY))
CHECK_METRICS = {
    "repo_init": (MODEL_ACCURACY, VD, FA_RECON),
    "raw_latent": (FP_FEASIBLE, MEDIAN_DELTA),
    "own_fp_reference": (VD, CRG, DIRSIM, FP_FEASIBLE),
    "teacher_K10": ROW_METRICS,
    "code_bits": (MODEL_ACCURACY, VD, FA_RECON, AVG_WEIGHT_BITS, AVG_ACT_BITS),
}
SWEEP_METRICS = (MODEL_ACCURACY, VD, TRANSFER_MARGIN, FA_RECON)


# -- arguments -------------------------------------------------------------------------------
def check_methods(methods, entries=()) -> list[str]:
    """The compressed rows to run (default: all 7, in the listing's order); ``"FP32"`` is
    always computed and may be listed.  An unknown name is a ValueError listing the 7."""
    if methods is None:
        return list(RECIPES)
    if isinstance(methods, str):
        methods = [methods]
    out = []
    for m in methods:
        if m == FP32:
            continue
        if m not in RECIPES:
            raise unknown_name("compression recipe", m, RECIPES, " (FP32 is always computed)")
        if m not in out:
            out.append(m)
    return out


def check_train_seeds(train_seeds, n_seeds: int) -> list[int]:
    """The training seeds to run: a list of ints >= 0 (default ``0 .. n_seeds - 1``)."""
    if train_seeds is None:
        return list(range(n_seeds))
    if isinstance(train_seeds, int) and not isinstance(train_seeds, bool):
        train_seeds = [train_seeds]
    train_seeds = list(train_seeds)
    if not train_seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                              for s in train_seeds):
        raise ValueError(f"train_seeds must be a non-empty list of ints >= 0, got "
                         f"{train_seeds!r}")
    if len(set(train_seeds)) != len(train_seeds):
        raise ValueError(f"train_seeds repeat: {train_seeds}")
    return train_seeds


def quant_queries(dataset: str, n: int, target: int, seed: int = 0):
    """The chapter's queries: a permutation of the test split seeded with ``seed`` (the
    data seed's ``quant_queries`` purpose), its first ``n`` draws, labels != ``target`` kept
    (as the public code).  Returns ``(x, y, index)``; no query left is a ValueError."""
    x, y = load_split(dataset, "test")
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(x):
        raise ValueError(f"quant.n_queries must be an int in 1..{len(x)}, got {n!r}")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))[:n]
    idx = perm[y[perm] != target]
    if not len(idx):
        raise ValueError(f"no test image outside class {target} among the first {n} draws; "
                         "raise quant.n_queries")
    return x[idx], y[idx], idx


@normalised
def solver_config(profile, **overrides) -> LatentRecourseConfig:
    """The evaluation solver of ``profile`` (40 steps x 2 restarts at standard)."""
    q = profile.quant
    return LatentRecourseConfig(**{"steps": q.eval_steps, "restarts": q.eval_restarts,
                                   **overrides})


def _check_args(args: RunArgs) -> RunArgs:
    """What the quantization table checks beyond the common arguments, before anything
    is trained: the target class, the training seeds (default: the profile's
    ``quant.n_seeds`` from the run's training seed), each recipe's config at this profile,
    the solver and the sweep's bits, the data files, each seed's training pool and the
    queries."""
    prof, data_seed = args.profile, args.seeds.data
    t = check_class(DEFAULT_TARGET if args.target is None else args.target,
                    n_classes(args.dataset), "target")
    first = args.seeds.train
    train_seeds = check_train_seeds(list(range(first, first + prof.quant.n_seeds))
                                    if args.train_seeds is None else list(args.train_seeds),
                                    prof.quant.n_seeds)
    for m in set(args.methods) | {BASELINE}:
        zoo.recipe_config(m, prof)
    solver_config(prof)
    for b in prof.quant.sweep_bits:
        check_bits(b, "every quant.sweep_bits entry")
    for s in train_seeds:
        zoo.quant_pool(args.dataset, prof, s)
    quant_queries(args.dataset, prof.quant.n_queries, t, Seeds(data=data_seed)("quant_queries"))
    false_acceptance_images(args.dataset, prof.quant.n_fa_images, t,
                            Seeds(data=data_seed)("quant_fa"))
    return replace(args, train_seeds=tuple(train_seeds), target=t)


# -- one seed ----------------------------------------------------------------------------------
@dataclass
class RowRecourse:
    """One row's recourse on one seed's queries (CPU): its own recourse ``cf`` (on f_q, or
    the FP recourse for FP32) and, for compressed rows, f_q's logits at the FP recourse
    points and the per-query VD events, cost gaps, direction cosines and margins (NaN
    where a query does not count)."""

    cf: Counterfactuals
    logits_at_fp: torch.Tensor | None
    vd_events: torch.Tensor | None
    cost_gap: torch.Tensor | None
    dirsim: torch.Tensor | None
    margin: torch.Tensor | None


def overhead(infos: Mapping[str, dict], baseline: str = BASELINE) -> dict[str, float]:
    """Overhead of every model of ``infos`` from the compression seconds their cache infos
    hold: ``T_m / T_baseline`` (:func:`cflib.metrics.recourse.overhead`); all NaN when the
    baseline is not among them."""
    if baseline not in infos:
        return {m: math.nan for m in infos}
    return rm.overhead({m: i["compress_seconds"] for m, i in infos.items()}, baseline)


def false_acceptance_images(dataset: str, n: int, target: int, seed: int = 0) -> torch.Tensor:
    """The images of the false-acceptance rate: ``n`` test images outside the target class,
    drawn with ``seed`` (the data seed's ``quant_fa`` purpose).  They may overlap the
    queries; what is scored is the model's decision on their autoencoder reconstructions."""
    x, y = load_split(dataset, "test")
    keep = torch.nonzero(y != target).squeeze(1)
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(keep):
        raise ValueError(f"quant.n_fa_images must be an int in 1..{len(keep)}, got {n!r}")
    perm = torch.randperm(len(keep), generator=torch.Generator().manual_seed(seed))[:n]
    return x[keep[perm]]


@torch.no_grad()
def reconstruct(autoencoder: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """The autoencoder's reconstructions of ``x`` (CPU), in batches on its device."""
    dev = next(autoencoder.parameters()).device
    was = autoencoder.training
    autoencoder.eval()
    try:
        out = [autoencoder(x[i:i + batch_size].to(dev)).cpu()
               for i in range(0, len(x), batch_size)]
    finally:
        autoencoder.train(was)
    return torch.cat(out)


def decisions(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``argmax model(x)`` per image (CPU)."""
    return logits_on(model, x).argmax(1).cpu()


class _Seed:
    """What one training seed's run shares: the data, the FP model, the AE and the solver."""

    def __init__(self, dataset, prof, seeds: Seeds, device, target):
        self.dataset, self.prof, self.seeds, self.device, self.t = (dataset, prof, seeds,
                                                                    device, target)
        self.seed = seeds.train
        self.x, self.y, self.index = quant_queries(dataset, prof.quant.n_queries, target,
                                                   seeds("quant_queries"))
        self.fp, self.fp_info = zoo.small_cnn(dataset, prof, seeds.train, device)
        self.ae, self.ae_info = zoo.latent_autoencoder(dataset, prof, seeds.train, device)
        self.solver = solver_config(prof)
        self.fa_recon = reconstruct(self.ae, false_acceptance_images(
            dataset, prof.quant.n_fa_images, target, seeds("quant_fa")))
        self.x_test, self.y_test = zoo.quant_test_split(dataset, prof, seeds.train)
        self.base = {"dataset": dataset, **seeds.columns(), "profile": prof.name}

    def solve(self, model: nn.Module, config: LatentRecourseConfig | None = None
              ) -> Counterfactuals:
        ex = LatentRecourse(model, config or self.solver, autoencoder=self.ae)
        return ex.explain(self.x, self.t, seed=self.seeds("quant_explain")).cpu()

    def quantized(self, label: str, config=None):
        return zoo.quantized(label, self.dataset, self.prof, self.seed, self.device,
                             target=self.t, config=config, fp=self.fp, autoencoder=self.ae)

    def context(self, q: nn.Module, info: dict, fp_cf: Counterfactuals,
                q_cf: Counterfactuals | None, over: float = math.nan,
                over_mixed: float = math.nan) -> QuantContext:
        return QuantContext(fp_cf, q_cf, logits_on(q, fp_cf.x_cf),
                            self.t, info, over, self.seeds("quant_explain"), N_BOOT,
                            over_mixed, decisions(q, self.fa_recon),
                            decisions(q, self.x_test), self.y_test)

    def rows(self, method: str, variant: str, values: dict[str, float]) -> list[dict]:
        return [{**self.base, "method": method, "variant": variant, "metric": k,
                 "value": float(v)} for k, v in values.items()]


def run_quant(dataset: str = "fmnist", profile="standard", seeds: Seeds = Seeds(),
              device="cpu", methods=None, target: int = DEFAULT_TARGET) -> "QuantRun":
    """Every row of the table, the check rows, the sweep and the bits for one training
    seed; returns a :class:`QuantRun` (one seed).  Arguments are checked first
    (:meth:`TableSpec.args` of :data:`QUANT`)."""
    from cflib.bench.data import canonical_dataset

    if canonical_dataset(dataset) != QUANT.dataset:
        raise ValueError(f"the quantization table is on {QUANT.dataset}, not {dataset!r}")
    a = QUANT.args(profile, seeds, device, methods, train_seeds=[seeds.train], target=target)
    return _run_seed(a.dataset, a.profile, seeds, a.device, list(a.methods), a.target)


def _run_seed(dataset, prof, seeds: Seeds, device, methods, t) -> "QuantRun":
    s = _Seed(dataset, prof, seeds, device, t)
    seed = seeds.train
    log.info("quant %s seed %d: %d queries, FP32 accuracy %.4f", dataset, seed, len(s.x),
             s.fp_info["test_accuracy"])
    rows, rec, bits = [], {}, []

    # FP32: the reference recourse, computed once
    fp_cf = s.solve(s.fp)
    fp_ctx = s.context(s.fp, {**s.fp_info}, fp_cf, None)
    rows += s.rows(FP32, "", evaluate(fp_ctx, FP32_METRICS))
    rec[(seed, "", FP32)] = fp_ctx.record()

    # the compressed rows (PTQ INT8 always: Overhead's baseline) and the retrained control
    models = {m: s.quantized(m) for m in dict.fromkeys([BASELINE, *methods])}
    if any(m in QAT_ROWS for m in methods):
        rq, rinfo = zoo.small_cnn_retrained(dataset, prof, seed, device, fp=s.fp)
        models = {RETRAIN: (rq, {**rinfo, "bits": {}, "avg_weight_bits": 32.0,
                                 "avg_act_bits": 32.0, "bit_cost": 32.0}), **models}
    infos = {m: i for m, (_, i) in models.items()}
    over, over_mixed = overhead(infos), overhead(infos, MIXEDPREC)
    own: dict[str, Counterfactuals] = {}
    for m in [m for m in models if m == RETRAIN or m in methods]:
        q, info = models[m]
        log.info("quant %s seed %d: %s (accuracy %.4f, bits %s)", dataset, seed, m,
                 info["test_accuracy"], info["bits"])
        own[m] = s.solve(q)
        ctx = s.context(q, info, fp_cf, own[m], over[m], over_mixed[m])
        rows += s.rows(m, "", evaluate(ctx, ROW_METRICS, OPTIONAL_METRICS))
        rec[(seed, "", m)] = ctx.record()
        bits += [{"method": m, "quantizer": k, "bits": int(b), "train_seed": seed,
                  "profile": prof.name} for k, b in info["bits"].items()]

    # check rows
    for m in [m for m in ("PTQ INT8", "PTQ INT4") if m in methods]:
        cfg = replace(zoo.recipe_config(m, prof), init="repo")
        q, info = s.quantized(f"{m} [repo_init]", cfg)
        ctx = s.context(q, info, fp_cf, None)
        rows += s.rows(m, "repo_init", evaluate(ctx, CHECK_METRICS["repo_init"]))
    raw_cf = s.solve(s.fp, replace(s.solver, latent="raw"))
    raw_ctx = QuantContext(raw_cf, None, None, t, {}, seed=seeds("quant_explain"))
    rows += s.rows(FP32, "raw_latent", evaluate(raw_ctx, CHECK_METRICS["raw_latent"]))
    rec[(seed, "raw_latent", FP32)] = raw_ctx.record()
    for m in [m for m in ("Prune+Quant", "KD+Quant") if m in methods]:
        ref = _own_reference(s, m)
        ref_cf = s.solve(ref)
        q, info = models[m]
        ctx = s.context(q, info, ref_cf, own[m])
        rows += s.rows(m, "own_fp_reference", evaluate(ctx, CHECK_METRICS["own_fp_reference"]))
        rec[(seed, "own_fp_reference", m)] = ctx.record()
    for m in [m for m in ("MixedPrec-QAT", "CFQ-QAT") if m in methods]:
        cfg = zoo.recipe_config(m, prof)
        code = replace(cfg, target_avg_bits=4.0, bit_lambda=0.01, policy_lr=None)
        if code != cfg:       # the code's bit budget, penalty and policy learning rate
            q, info = s.quantized(f"{m} [code_bits]", code)
            ctx = s.context(q, info, fp_cf, None)
            rows += s.rows(m, "code_bits", evaluate(ctx, CHECK_METRICS["code_bits"]))
            bits += [{"method": f"{m} [code_bits]", "quantizer": k, "bits": int(b),
                      "train_seed": seed, "profile": prof.name}
                     for k, b in info["bits"].items()]
    if prof.quant.teacher_k10 and "CFQ-QAT" in methods:
        cfg = replace(zoo.recipe_config("CFQ-QAT", prof), teacher_steps=10)
        q, info = s.quantized("CFQ-QAT [teacher_K10]", cfg)
        k_infos = {**infos, "K10": info}
        ctx = s.context(q, info, fp_cf, s.solve(q), overhead(k_infos)["K10"],
                        overhead(k_infos, MIXEDPREC)["K10"])
        rows += s.rows("CFQ-QAT", "teacher_K10", evaluate(ctx, ROW_METRICS, OPTIONAL_METRICS))
        rec[(seed, "teacher_K10", "CFQ-QAT")] = ctx.record()
        bits += [{"method": "CFQ-QAT [teacher_K10]", "quantizer": k, "bits": int(b),
                  "train_seed": seed, "profile": prof.name} for k, b in info["bits"].items()]

    # the uniform-bit PTQ sweep, forward-only at the FP recourse points
    sweep = []
    for b in prof.quant.sweep_bits:
        cfg = replace(zoo.recipe_config(BASELINE, prof), bits=int(b))
        label = next((m for m in RECIPES if zoo.recipe_config(m, prof) == cfg),
                     f"PTQ W{b}A{b}")
        q, info = s.quantized(label, cfg)
        ctx = s.context(q, info, fp_cf, None)
        sweep += [{"bits": int(b), "metric": k, "value": v, "train_seed": seed,
                   "profile": prof.name} for k, v in evaluate(ctx, SWEEP_METRICS).items()]

    results = tidy(rows)
    return QuantRun(results, rec, {seed: (s.x, s.y, s.index)}, pd.DataFrame(sweep),
                    pd.DataFrame(bits), check_table(results))


def _own_reference(s: _Seed, method: str) -> nn.Module:
    """The code's reference model of a row: the pruned, un-fine-tuned FP model
    (Prune+Quant) or the KD student (KD+Quant)."""
    cfg = zoo.recipe_config(method, s.prof)
    if cfg.prune_fraction > 0:
        ref = copy.deepcopy(s.fp)
        magnitude_prune(ref, cfg.prune_fraction)
        return ref.eval()
    student, _ = zoo.kd_student(s.dataset, s.prof, s.seed, s.device, fp=s.fp,
                                temperature=cfg.kd_temperature, alpha=cfg.kd_alpha,
                                epochs=cfg.student_epochs)
    return student


def check_table(results: pd.DataFrame) -> pd.DataFrame:
    """The protocol check table: each check row's value beside the table's value of the
    same method, metric and training seed (``ours``: variant ""; a metric only the FP32
    row carries, FP_Feasible, is FP32's), plus Prune+Quant's final sparsity beside its
    target fraction."""
    main = results[results["variant"] == ""].set_index(["method", "metric", "train_seed"])
    main = main["value"]
    out = []
    for r in results[results["variant"] != ""].itertuples():
        ours = main.get((r.method, r.metric, r.train_seed),
                        main.get((FP32, r.metric, r.train_seed), math.nan))
        out.append({"check": r.variant, "method": r.method, "metric": r.metric, "ours": ours,
                    "check value": r.value, "train_seed": r.train_seed})
    sp = results[(results["metric"] == SPARSITY.name) & (results["variant"] == "")]
    for r in sp.itertuples():
        out.append({"check": "final_sparsity", "method": r.method, "metric": SPARSITY.name,
                    "ours": r.value, "check value": RECIPES[r.method].prune_fraction,
                    "train_seed": r.train_seed})
    return pd.DataFrame(out, columns=["check", "method", "metric", "ours", "check value",
                                      "train_seed"])


# -- the chapter ---------------------------------------------------------------------------
#: RowRecourse's per-query tensors, saved in the meta of its counterfactuals under _ROW_META
_PER_QUERY = ("logits_at_fp", "vd_events", "cost_gap", "dirsim", "margin")
_ROW_META = "row_recourse"


@dataclass
class QuantRun(Run):
    """What :func:`run_quant_table` returns.

    ``results``: tidy rows (:data:`cflib.bench.results.COLUMNS`; ``variant`` "" for the
    table, else a check row); ``recourse``: ``{(train_seed, variant, method):
    RowRecourse}``; ``queries``: ``{train_seed: (x, y, test index)}``; ``sweep``: ``bits,
    metric, value, train_seed, profile`` of the uniform-bit PTQ sweep; ``bits``:
    ``method, quantizer, bits, train_seed, profile`` of each trained row; ``checks``: the
    protocol check table (:func:`check_table`).
    """

    results: pd.DataFrame
    recourse: dict = field(default_factory=dict)
    queries: dict = field(default_factory=dict)
    sweep: pd.DataFrame = field(default_factory=pd.DataFrame)
    bits: pd.DataFrame = field(default_factory=pd.DataFrame)
    checks: pd.DataFrame = field(default_factory=pd.DataFrame)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables written beside the results (:meth:`cflib.bench.results.Run.save`):
        ``<name>_sweep.csv``, ``<name>_bits.csv`` and ``<name>_checks.csv``."""
        return {"sweep": self.sweep, "bits": self.bits, "checks": self.checks}

    TABLES = ("sweep", "bits", "checks")
    SHOWN = "recourse"

    def shown(self) -> dict:
        """Every table row's recourse: its counterfactuals, with the per-query VD events,
        cost gaps, cosines and margins in their ``meta``."""
        shown = {}
        for (seed, variant, method), rec in self.recourse.items():
            if variant == "":
                per_query = {k: getattr(rec, k) for k in _PER_QUERY}
                shown[f"{seed}|{method}"] = replace(rec.cf, meta={**rec.cf.meta,
                                                                  _ROW_META: per_query})
        return shown

    @classmethod
    def from_saved(cls, results, tables, shown) -> "QuantRun":
        """The tables and the table rows' recourse :meth:`save` wrote (not the queries of
        the variants, not the networks)."""
        recourse = {}
        for key, cf in shown.items():
            seed, method = key.split("|", 1)
            meta = dict(cf.meta)
            per_query = meta.pop(_ROW_META)
            recourse[(int(seed), "", method)] = RowRecourse(replace(cf, meta=meta), **per_query)
        return cls(results, recourse=recourse, **tables)

    @property
    def train_seeds(self) -> list[int]:
        return sorted(set(self.queries) | {s for s, _, _ in self.recourse})

    @property
    def methods(self) -> list[str]:
        main = self.results[self.results["variant"] == ""]
        return [m for m in dict.fromkeys(main["method"]) if m != FP32]

    @staticmethod
    def merge(runs: list["QuantRun"]) -> "QuantRun":
        cat = lambda xs: pd.concat(xs, ignore_index=True)  # noqa: E731
        return QuantRun(tidy(cat([r.results for r in runs])),
                        {k: v for r in runs for k, v in r.recourse.items()},
                        {k: v for r in runs for k, v in r.queries.items()},
                        cat([r.sweep for r in runs]), cat([r.bits for r in runs]),
                        cat([r.checks for r in runs]))


def run_quant_table(args: RunArgs) -> QuantRun:
    """The chapter: :func:`run_quant` for each training seed of ``args`` (checked by the
    table's spec and trusted here) with one data seed (the same queries for every
    training seed), merged."""
    return QuantRun.merge([_run_seed(args.dataset, args.profile,
                                     Seeds(train=s, data=args.seeds.data), args.device,
                                     list(args.methods), args.target)
                           for s in args.train_seeds])


# -- summaries and the expected shape --------------------------------------------------------
def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one seed) and number of training seeds of
    every (variant, method, metric)."""
    out = _summarise(results, over="train_seed")
    return out[["variant", "method", "metric", "mean", "std", "n"]]


def _pooled(run: QuantRun, method: str, attr: str) -> torch.Tensor:
    """Per-query values of one row pooled over training seeds."""
    return torch.cat([getattr(run.recourse[(s, "", method)], attr) for s in run.train_seeds])


#: the per-query values behind each metric of a paired comparison
PAIRED_ATTR = {"VD": "vd_events", "CRG": "cost_gap", "DirSim": "dirsim",
               "Transfer_Margin": "margin"}


def shape_checks(run: QuantRun, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """What ``expected.csv`` (table ``quant``) leads us to expect, on a run
    (:func:`cflib.bench.runner.shape_checks`): orderings and thresholds on the means over
    training seeds of the table's rows and of the uniform-bit sweep (rows ``PTQ W{b}A{b}``),
    and paired comparisons on the same queries with a paired-bootstrap 95 % interval,
    tested only where the two rows are matched in accuracy and bits."""
    res = run.results[run.results["variant"] == ""]
    means = res.groupby(["method", "metric"], as_index=False)["value"].mean()
    if len(run.sweep):
        sw = run.sweep.groupby(["bits", "metric"], as_index=False)["value"].mean()
        sw["method"] = sw["bits"].map(lambda b: f"PTQ W{int(b)}A{int(b)}")
        means = pd.concat([means, sw[["method", "metric", "value"]]], ignore_index=True)

    def paired(a: str, b: str, metric: str):
        """Both rows' per-query values on the queries that count for both (NaN
        elsewhere), so the two means are over the same queries."""
        attr = PAIRED_ATTR[metric]
        va, vb = _pooled(run, a, attr).clone(), _pooled(run, b, attr).clone()
        out = torch.isnan(va) | torch.isnan(vb)
        va[out], vb[out] = float("nan"), float("nan")
        return va, vb

    return _shape_checks(means, TABLE, paired=paired, n_boot=n_boot, seed=seed,
                         candidates=[m for m in run.methods if m in RECIPES],
                         noise={"Accuracy": accuracy_noise(run)})


def accuracy_noise(run: QuantRun) -> tuple[float, str]:
    """The noise of an accuracy ordering: the standard error of the FP model's selection
    accuracy (it is the epoch of best accuracy on the pool's held-out images, so a gap
    below that error is what choosing another epoch moves), or the sd over training seeds
    where it is larger."""
    from cflib.bench.profiles import get_profile

    res = run.results[run.results["variant"] == ""]
    acc = res[(res["method"] == FP32) & (res["metric"] == "Accuracy")]["value"]
    p = float(acc.mean())
    q = get_profile(str(res["profile"].iloc[0])).quant
    pool = q.train_subset if q.train_subset is not None else 60000
    n_val = max(1, round(pool * q.val_fraction))
    se = math.sqrt(p * (1 - p) / n_val)
    sd = float(acc.std()) if len(acc) > 1 else 0.0
    if sd > se:
        return sd, f"the sd of FP32's accuracy over {len(acc)} training seeds"
    return se, (f"the standard error of the FP model's selection accuracy on its {n_val} "
                "held-out images")


# -- the table's spec ------------------------------------------------------------------------
def _means(rows: pd.DataFrame) -> pd.DataFrame:
    res = rows[(rows["variant"] == "") & (rows["method"] != CLASSIFIER)]
    return res.groupby(["method", "metric"], sort=False, as_index=False)["value"].mean()


def _intervals(run, model: str = "") -> pd.DataFrame:
    from cflib.bench.intervals import repeat_intervals

    s = summarise(run.results)
    s = s[s["variant"] == ""]
    return repeat_intervals(s)


def _stand_in(model: str = ""):
    from cflib.quantization import QuantSmallCNN

    return QuantSmallCNN().eval()


QUANT = register_table(TableSpec(
    key="quant", kind="quant", chapter="fashion_mnist_quant", source="fashion_mnist_quant.py",
    dataset="fmnist", title="Recourse under quantization on Fashion-MNIST",
    label="Recourse under quantization, Fashion-MNIST", template="fashion_mnist_quant",
    methods=tuple(QUANT_ROWS), references=(FP32,), metrics=tuple(QUANT_METRICS),
    per_pair=False, validity="VD", run=run_quant_table, load=QuantRun.load, means=_means,
    checks=shape_checks, intervals=_intervals,
    counterfactuals=lambda run, model="": {k: r.cf for k, r in run.recourse.items()},
    stand_in=_stand_in, n_images=lambda prof: prof.quant.n_queries,
    check_methods=check_methods, check_args=_check_args, run_methods=tuple(RECIPES),
    bench=False,
    scope="mean ± sd over the training seeds"))[0]


__all__ = ["run_quant", "run_quant_table", "QuantRun", "RowRecourse", "QuantContext",
           "summarise", "shape_checks", "overhead", "check_table", "quant_queries",
           "false_acceptance_images", "reconstruct", "decisions", "RETRAIN",
           "QUANT_ROWS", "QUANT_METRICS", "QUANT", "check_methods", "solver_config"]
