"""The quantization table (Yahyati et al. 2026, "When Bits Break Recourse"): recourse on
Fashion-MNIST under seven compression recipes (QUANT.md).

:func:`run_quant_table` trains (or loads) the FP32 SmallCNN and the latent autoencoder
of one training seed, draws the queries (test images outside the target class),
computes the FP recourse once with :class:`~cflib.explainers.latent.LatentRecourse`
("Latent PGD"), builds every compressed row of :data:`cflib.quantization.QUANT_METHODS`
through the cache and scores it against that shared FP recourse with the table's
metric specs (:data:`QUANT_METRICS`):

- ``Accuracy`` on the test split (the full split, deviation (e));
- ``VD``: share of FP recourse the compressed model rejects (NaN when none exists);
- ``CRG``: relative cost gap of the two models' own recourse (0 is best);
- ``DirSim``: cosine of the two latent actions (standardised deltas);
- ``Overhead``: ``(T_fp + T_m) / (T_fp + T_PTQ INT8)``, seconds stored in the cache;

plus bootstrap half-widths, feasibility, transfer margins, bits and timings.  Besides
the table (``setting = ""``) it computes the protocol check rows (``repo_init``,
``raw_latent``, ``own_fp_reference`` and, behind ``quant_teacher_k10``,
``teacher_K10``), the uniform-bit PTQ sweep and each model's bit allocation.
Every argument is checked before anything is trained.
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

from cflib import zoo
from cflib.data import canonical_dataset, load_split
from cflib.explainers.base import Counterfactuals, as_target, model_device
from cflib.explainers.latent import LatentRecourse, LatentRecourseConfig
from cflib.metrics import recourse as rm
from cflib.metrics.spec import ACCURACY, MetricSpec, register
from cflib.profiles import Profile, get_profile
from cflib.quantization.fake import check_bits
from cflib.quantization.methods import METHODS as QUANT_METHODS
from cflib.quantization.methods import magnitude_prune, method_config
from cflib.results import shape_checks as _shape_checks
from cflib.results import tidy
from cflib.scopes import frozen

log = logging.getLogger("cflib")

TABLE = "quant"
FP32 = "FP32"
BASELINE = "PTQ INT8"            # Overhead's denominator, as in the listing (1.00x)
#: the rows of the chapter: FP32 (reference) first, then the listing's order
QUANT_ROWS = [FP32, *QUANT_METHODS]
PTQ_ROWS = ["PTQ INT8", "PTQ INT4", "CF-PTQ"]
QAT_ROWS = ["MixedPrec-QAT", "CFQ-QAT", "KD+Quant", "Prune+Quant"]
#: the protocol check rows (QUANT.md 8)
CHECK_SETTINGS = ("repo_init", "raw_latent", "own_fp_reference", "teacher_K10")
N_BOOT = rm.N_BOOT
DEFAULT_TARGET = 0               # T-shirt/top, as the code


def quant_pair(target: int = DEFAULT_TARGET) -> str:
    """The ``pair`` column of the chapter: every query class towards ``target``."""
    return f"any->{int(target)}"


QUANT_PAIR = quant_pair(DEFAULT_TARGET)


# -- the metrics -----------------------------------------------------------------------------
@dataclass
class QuantContext:
    """One compressed row scored against an FP recourse (CPU tensors).

    ``fp``: the reference recourse (on the FP model); ``q``: the row's own recourse
    (on f_q; None for the FP32 row); ``logits_at_fp``: f_q's logits at ``fp.x_cf``;
    ``info``: the model's cache info; ``overhead``: its Overhead.
    """

    fp: Counterfactuals
    q: Counterfactuals | None
    logits_at_fp: torch.Tensor | None
    target: int
    info: dict
    overhead: float = math.nan
    seed: int = 0
    n_boot: int = N_BOOT

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


def _mean(v: torch.Tensor) -> float:
    v = v[~torch.isnan(v)]
    return float(v.mean()) if len(v) else math.nan


def _info(key: str):
    return lambda c: float(c.info[key])


VD = MetricSpec("VD", lambda c: rm.vd(c.fp_success, c.q_valid), False,
                "validity drop: share of FP recourse the compressed model rejects")
CRG = MetricSpec("CRG", lambda c: _mean(c.cost_gap), None,
                 "cost of recourse gap: mean (c_q - c_f) / c_f over queries feasible on both")
DIRSIM = MetricSpec("DirSim", lambda c: _mean(c.dirsim), True,
                    "cosine of the FP and compressed latent actions, over queries feasible on both")
OVERHEAD = MetricSpec("Overhead", lambda c: c.overhead, False,
                      "(T_fp + T_method) / (T_fp + T_PTQ INT8): compression cost, FP training "
                      "included", timing=True)
VD_CI = MetricSpec("VD_ci95", lambda c: c.ci(c.vd_events), False,
                   "half-width of VD's 95 % percentile bootstrap interval over queries")
CRG_CI = MetricSpec("CRG_ci95", lambda c: c.ci(c.cost_gap), False,
                    "half-width of CRG's 95 % percentile bootstrap interval over queries")
DIRSIM_CI = MetricSpec("DirSim_ci95", lambda c: c.ci(c.dirsim), False,
                       "half-width of DirSim's 95 % percentile bootstrap interval over queries")
FP_FEASIBLE = MetricSpec("FP_Feasible", lambda c: c.fp.success.float().mean().item(), True,
                         "share of queries whose FP recourse succeeds (|F| / n)")
Q_FEASIBLE = MetricSpec("Q_Feasible", lambda c: c.q.success.float().mean().item(), True,
                        "share of queries whose recourse on the compressed model succeeds")
TRANSFER_MARGIN = MetricSpec(
    "Transfer_Margin", lambda c: _mean(c.margins), True,
    "mean over F of f_q's target margin z_t - max_j z_j at the FP recourse (< 0: a VD event)")
AVG_WEIGHT_BITS = MetricSpec("Avg_weight_bits", _info("avg_weight_bits"), False,
                             "parameter-weighted mean weight bits of the final allocation")
AVG_ACT_BITS = MetricSpec("Avg_act_bits", _info("avg_act_bits"), False,
                          "mean activation bits of the final allocation")
BIT_COST = MetricSpec("Bit_cost", _info("bit_cost"), False,
                      "1/2 average weight bits + 1/2 average activation bits (the code's cost)")
COMPRESS_SECONDS = MetricSpec("Compress_seconds", _info("compress_seconds"), False,
                              "wall time of the method's own stage (calibration, teacher, KD "
                              "student, pruning, QAT)", timing=True)
TRAIN_SECONDS = MetricSpec("Train_seconds", _info("train_seconds"), False,
                           "wall time of the FP32 SmallCNN's training", timing=True)
TEACHER_SUCCESS = MetricSpec("Teacher_success", _info("teacher_success"), True,
                             "share of non-target training (CFQ) or calibration (CF-PTQ) images "
                             "whose teacher point the FP model puts in the target")
SPARSITY = MetricSpec("Sparsity", _info("sparsity"), True,
                      "share of exactly-zero conv and linear weights in the final model")
MEDIAN_DELTA = MetricSpec("Median_delta", lambda c: c.fp.meta["delta"].norm(dim=1).median().item(),
                          False, "median ||delta|| of the FP recourse over all queries "
                                 "(latent units of the solver)")
N_QUERIES = MetricSpec("N_queries", lambda c: len(c.fp), True, "queries (labels != target)")
N_FP_FEASIBLE = MetricSpec("N_fp_feasible", lambda c: int(c.fp_success.sum()), True,
                           "queries with a successful FP recourse, |F|")
N_ALREADY_TARGET = MetricSpec("N_already_target", lambda c: int((c.fp.pred.cpu() == c.target).sum()),
                              False, "queries the FP model already puts in the target class "
                                     "(kept, as the code keeps them)")
N_BOTH_FEASIBLE = MetricSpec("N_both_feasible",
                             lambda c: int((c.fp_success & c.q_success).sum()), True,
                             "queries feasible on both models, |Both|")

#: every metric of the chapter, declared once (Accuracy is set by the runner)
QUANT_METRICS: tuple[MetricSpec, ...] = register(
    ACCURACY, VD, CRG, DIRSIM, OVERHEAD, VD_CI, CRG_CI, DIRSIM_CI, FP_FEASIBLE, Q_FEASIBLE,
    TRANSFER_MARGIN, AVG_WEIGHT_BITS, AVG_ACT_BITS, BIT_COST, COMPRESS_SECONDS, TRAIN_SECONDS,
    TEACHER_SUCCESS, SPARSITY, MEDIAN_DELTA, N_QUERIES, N_FP_FEASIBLE, N_BOTH_FEASIBLE,
    N_ALREADY_TARGET,
)
#: what each kind of row carries
FP32_METRICS = (ACCURACY, FP_FEASIBLE, MEDIAN_DELTA, TRAIN_SECONDS, N_QUERIES, N_FP_FEASIBLE,
                N_ALREADY_TARGET)
ROW_METRICS = (ACCURACY, VD, CRG, DIRSIM, OVERHEAD, VD_CI, CRG_CI, DIRSIM_CI, Q_FEASIBLE,
               TRANSFER_MARGIN, AVG_WEIGHT_BITS, AVG_ACT_BITS, BIT_COST, COMPRESS_SECONDS,
               N_QUERIES, N_FP_FEASIBLE, N_BOTH_FEASIBLE)
OPTIONAL_METRICS = {"teacher_success": TEACHER_SUCCESS, "sparsity": SPARSITY}
CHECK_METRICS = {
    "repo_init": (ACCURACY, VD),
    "raw_latent": (FP_FEASIBLE, MEDIAN_DELTA),
    "own_fp_reference": (VD, CRG, DIRSIM, FP_FEASIBLE),
    "teacher_K10": ROW_METRICS,
}
SWEEP_METRICS = (ACCURACY, VD, TRANSFER_MARGIN)


def evaluate(ctx: QuantContext, specs, optional: bool = False) -> dict[str, float]:
    """Every metric of ``specs`` for one context (Accuracy is the model's cached test
    accuracy); with ``optional``, also Teacher_success and Sparsity where the model's
    info holds them."""
    out = {}
    for spec in specs:
        out[spec.name] = (float(ctx.info["test_accuracy"]) if spec is ACCURACY else spec(ctx))
    if optional:
        for key, spec in OPTIONAL_METRICS.items():
            if key in ctx.info:
                out[spec.name] = spec(ctx)
    return out


# -- arguments -------------------------------------------------------------------------------
def check_methods(methods) -> list[str]:
    """The compressed rows to run (default: all 7, in the listing's order); ``"FP32"`` is
    always computed and may be listed.  An unknown name is a ValueError listing the 7."""
    if methods is None:
        return list(QUANT_METHODS)
    if isinstance(methods, str):
        methods = [methods]
    out = []
    for m in methods:
        if m == FP32:
            continue
        if m not in QUANT_METHODS:
            raise ValueError(f"unknown quantization method {m!r}; choose from "
                             f"{list(QUANT_METHODS)} (FP32 is always computed)")
        if m not in out:
            out.append(m)
    return out


def check_device(device) -> torch.device:
    """A torch device this machine has, or a ValueError naming the fix."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise ValueError(f"cannot read device {device!r} ({err}); use device='cpu' or 'cuda'") \
            from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} but CUDA is not available on this machine; "
                         "use device='cpu'")
    return dev


def check_seeds(seeds, profile: Profile) -> list[int]:
    if seeds is None:
        return list(range(profile.quant_n_seeds))
    if isinstance(seeds, int):
        seeds = [seeds]
    seeds = list(seeds)
    if not seeds or any(isinstance(s, bool) or int(s) != s for s in seeds):
        raise ValueError(f"seeds must be a non-empty list of ints, got {seeds!r}")
    return [int(s) for s in seeds]


def quant_queries(dataset: str, n: int, target: int, seed: int = 0):
    """The queries of one seed (QUANT.md 6.1): a permutation of the test split seeded with
    ``seed + 1``, its first ``n`` draws, labels != ``target`` kept (as the code).  Returns
    ``(x, y, index)``; no query left is a ValueError."""
    x, y = load_split(dataset, "test")
    if not 1 <= int(n) <= len(x):
        raise ValueError(f"quant_n_queries must be in 1..{len(x)}, got {n}")
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed + 1))[:int(n)]
    idx = perm[y[perm] != target]
    if not len(idx):
        raise ValueError(f"no test image outside class {target} among the first {n} draws; "
                         "raise quant_n_queries")
    return x[idx], y[idx], idx


def solver_config(profile: Profile, **overrides) -> LatentRecourseConfig:
    """The evaluation solver of ``profile`` (40 steps x 2 restarts at standard)."""
    return LatentRecourseConfig(**{**LatentRecourse.profile_config(profile, 0), **overrides})


def check_arguments(dataset, profile, seeds, device, methods, target):
    """Every argument of :func:`run_quant_table` checked, before anything is trained:
    ``(dataset, profile, seeds, device, methods, target)`` normalised."""
    dataset, prof = canonical_dataset(dataset), get_profile(profile)
    methods = check_methods(methods)
    t = int(as_target(target, 1, "cpu", 10)[0])
    seeds = check_seeds(seeds, prof)
    dev = check_device(device)
    for m in set(methods) | {BASELINE}:
        method_config(m, prof)
    solver_config(prof)
    for b in prof.quant_sweep_bits:
        check_bits(b, "every quant_sweep_bits entry")
    for s in seeds:
        zoo.quant_pool(dataset, prof, s)
        quant_queries(dataset, prof.quant_n_queries, t, s)
    return dataset, prof, seeds, dev, methods, t


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


@torch.no_grad()
def logits_on(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """The model's logits on ``x`` (evaluation mode; the caller's state is restored)."""
    with frozen(model):
        dev = model_device(model)
        return torch.cat([model(x[i:i + batch_size].to(dev)).cpu()
                          for i in range(0, len(x), batch_size)])


def overhead(fp_info: dict, infos: Mapping[str, dict], baseline: str = BASELINE
             ) -> dict[str, float]:
    """Overhead of every model of ``infos`` from the seconds their cache infos hold:
    ``(train_seconds of FP32 + compress_seconds) / (same for the baseline)``."""
    return rm.overhead({m: i["compress_seconds"] for m, i in infos.items()},
                       fp_info["train_seconds"], baseline)


class _Seed:
    """What one seed's run shares: the data, the FP model, the AE and the solver."""

    def __init__(self, dataset, prof, seed, device, target):
        self.dataset, self.prof, self.seed, self.device, self.t = (dataset, prof, seed,
                                                                   device, target)
        self.x, self.y, self.index = quant_queries(dataset, prof.quant_n_queries, target, seed)
        self.fp, self.fp_info = zoo.small_cnn(dataset, prof, seed, device)
        self.ae, self.ae_info = zoo.latent_autoencoder(dataset, prof, seed, device)
        self.solver = solver_config(prof)
        self.base = {"dataset": dataset, "pair": quant_pair(target), "seed": seed,
                     "profile": prof.name}

    def solve(self, model: nn.Module, config: LatentRecourseConfig | None = None
              ) -> Counterfactuals:
        ex = LatentRecourse(model, config or self.solver, autoencoder=self.ae)
        return ex.explain(self.x, self.t, seed=self.seed).cpu()

    def quantized(self, label: str, config=None):
        return zoo.quantized(label, self.dataset, self.prof, self.seed, self.device,
                             target=self.t, config=config, fp=self.fp, autoencoder=self.ae)

    def context(self, q: nn.Module, info: dict, fp_cf: Counterfactuals,
                q_cf: Counterfactuals | None, over: float = math.nan) -> QuantContext:
        return QuantContext(fp_cf, q_cf, logits_on(q, fp_cf.x_cf), self.t, info, over,
                            self.seed)

    def rows(self, method: str, setting: str, values: dict[str, float]) -> list[dict]:
        return [{**self.base, "method": method, "setting": setting, "metric": k,
                 "value": float(v)} for k, v in values.items()]


def run_quant(dataset: str = "fmnist", profile="standard", seed: int = 0, device="cpu",
              methods=None, target: int = DEFAULT_TARGET) -> "QuantRun":
    """Every row of the table, the check rows, the sweep and the bits for one training
    seed; returns a :class:`QuantRun` (one seed).  Arguments are checked first."""
    dataset, prof, (seed,), dev, methods, t = check_arguments(dataset, profile, [seed], device,
                                                              methods, target)
    return _run_seed(dataset, prof, seed, dev, methods, t)


def _run_seed(dataset, prof, seed, device, methods, t) -> "QuantRun":
    s = _Seed(dataset, prof, seed, device, t)
    log.info("quant %s seed %d: %d queries, FP32 accuracy %.4f", dataset, seed, len(s.x),
             s.fp_info["test_accuracy"])
    rows, rec, bits = [], {}, []

    # FP32: the reference recourse, computed once
    fp_cf = s.solve(s.fp)
    fp_ctx = QuantContext(fp_cf, None, None, t, {**s.fp_info}, seed=seed)
    rows += s.rows(FP32, "", evaluate(fp_ctx, FP32_METRICS))
    rec[(seed, "", FP32)] = fp_ctx.record()

    # the compressed rows (PTQ INT8 always: Overhead's baseline)
    models = {m: s.quantized(m) for m in dict.fromkeys([BASELINE, *methods])}
    over = overhead(s.fp_info, {m: i for m, (_, i) in models.items()})
    own: dict[str, Counterfactuals] = {}
    for m in methods:
        q, info = models[m]
        log.info("quant %s seed %d: %s (accuracy %.4f, bits %s)", dataset, seed, m,
                 info["test_accuracy"], info["bits"])
        own[m] = s.solve(q)
        ctx = s.context(q, info, fp_cf, own[m], over[m])
        rows += s.rows(m, "", evaluate(ctx, ROW_METRICS, optional=True))
        rec[(seed, "", m)] = ctx.record()
        bits += [{"method": m, "quantizer": k, "bits": int(b), "seed": seed,
                  "profile": prof.name} for k, b in info["bits"].items()]

    # check rows (QUANT.md 8)
    for m in [m for m in ("PTQ INT8", "PTQ INT4") if m in methods]:
        cfg = replace(method_config(m, prof), init="repo")
        q, info = s.quantized(f"{m} [repo_init]", cfg)
        ctx = s.context(q, info, fp_cf, None)
        rows += s.rows(m, "repo_init", evaluate(ctx, CHECK_METRICS["repo_init"]))
    raw_cf = s.solve(s.fp, replace(s.solver, latent="raw"))
    raw_ctx = QuantContext(raw_cf, None, None, t, {}, seed=seed)
    rows += s.rows(FP32, "raw_latent", evaluate(raw_ctx, CHECK_METRICS["raw_latent"]))
    rec[(seed, "raw_latent", FP32)] = raw_ctx.record()
    for m in [m for m in ("Prune+Quant", "KD+Quant") if m in methods]:
        ref = _own_reference(s, m)
        ref_cf = s.solve(ref)
        q, info = models[m]
        ctx = s.context(q, info, ref_cf, own[m])
        rows += s.rows(m, "own_fp_reference", evaluate(ctx, CHECK_METRICS["own_fp_reference"]))
        rec[(seed, "own_fp_reference", m)] = ctx.record()
    if prof.quant_teacher_k10 and "CFQ-QAT" in methods:
        cfg = replace(method_config("CFQ-QAT", prof), teacher_steps=10)
        q, info = s.quantized("CFQ-QAT [teacher_K10]", cfg)
        k_over = overhead(s.fp_info, {BASELINE: models[BASELINE][1], "K10": info})["K10"]
        ctx = s.context(q, info, fp_cf, s.solve(q), k_over)
        rows += s.rows("CFQ-QAT", "teacher_K10", evaluate(ctx, ROW_METRICS, optional=True))
        rec[(seed, "teacher_K10", "CFQ-QAT")] = ctx.record()

    # the uniform-bit PTQ sweep, forward-only at the FP recourse points
    sweep = []
    for b in prof.quant_sweep_bits:
        cfg = replace(method_config(BASELINE, prof), bits=int(b))
        label = next((m for m in QUANT_METHODS if method_config(m, prof) == cfg),
                     f"PTQ W{b}A{b}")
        q, info = s.quantized(label, cfg)
        ctx = s.context(q, info, fp_cf, None)
        sweep += [{"bits": int(b), "metric": k, "value": v, "seed": seed, "profile": prof.name}
                  for k, v in evaluate(ctx, SWEEP_METRICS).items()]

    results = tidy(rows)
    return QuantRun(results, rec, {seed: (s.x, s.y, s.index)}, pd.DataFrame(sweep),
                    pd.DataFrame(bits), check_table(results))


def _own_reference(s: _Seed, method: str) -> nn.Module:
    """The code's reference model of a row: the pruned, un-fine-tuned FP model
    (Prune+Quant) or the KD student (KD+Quant)."""
    cfg = method_config(method, s.prof)
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
    same method, metric and seed (``ours``: setting ""; a metric only the FP32 row
    carries, FP_Feasible, is FP32's), plus Prune+Quant's final sparsity beside its
    target fraction."""
    main = results[results["setting"] == ""].set_index(["method", "metric", "seed"])["value"]
    out = []
    for r in results[results["setting"] != ""].itertuples():
        ours = main.get((r.method, r.metric, r.seed), main.get((FP32, r.metric, r.seed), math.nan))
        out.append({"check": r.setting, "method": r.method, "metric": r.metric, "ours": ours,
                    "check value": r.value, "seed": r.seed})
    sp = results[(results["metric"] == SPARSITY.name) & (results["setting"] == "")]
    for r in sp.itertuples():
        out.append({"check": "final_sparsity", "method": r.method, "metric": SPARSITY.name,
                    "ours": r.value, "check value": QUANT_METHODS[r.method].prune_fraction,
                    "seed": r.seed})
    return pd.DataFrame(out, columns=["check", "method", "metric", "ours", "check value", "seed"])


# -- the chapter ---------------------------------------------------------------------------
@dataclass
class QuantRun:
    """What :func:`run_quant_table` returns.

    ``results``: tidy rows (:data:`cflib.results.COLUMNS`; ``setting`` "" for the table,
    else a check row); ``recourse``: ``{(seed, setting, method): RowRecourse}``;
    ``queries``: ``{seed: (x, y, test index)}``; ``sweep``: ``bits, metric, value, seed,
    profile`` of the uniform-bit PTQ sweep; ``bits``: ``method, quantizer, bits, seed,
    profile`` of each trained row; ``checks``: the protocol check table
    (:func:`check_table`).
    """

    results: pd.DataFrame
    recourse: dict = field(default_factory=dict)
    queries: dict = field(default_factory=dict)
    sweep: pd.DataFrame = field(default_factory=pd.DataFrame)
    bits: pd.DataFrame = field(default_factory=pd.DataFrame)
    checks: pd.DataFrame = field(default_factory=pd.DataFrame)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Extra tables written beside the results (:func:`cflib.results.write_run`):
        ``<name>_sweep.csv`` and ``<name>_bits.csv``."""
        return {"sweep": self.sweep, "bits": self.bits}

    @property
    def seeds(self) -> list[int]:
        return sorted(self.queries)

    @property
    def methods(self) -> list[str]:
        main = self.results[self.results["setting"] == ""]
        return [m for m in dict.fromkeys(main["method"]) if m != FP32]

    @staticmethod
    def merge(runs: list["QuantRun"]) -> "QuantRun":
        cat = lambda xs: pd.concat(xs, ignore_index=True)  # noqa: E731
        return QuantRun(tidy(cat([r.results for r in runs])),
                        {k: v for r in runs for k, v in r.recourse.items()},
                        {k: v for r in runs for k, v in r.queries.items()},
                        cat([r.sweep for r in runs]), cat([r.bits for r in runs]),
                        cat([r.checks for r in runs]))


def run_quant_table(dataset: str = "fmnist", profile="standard", seeds=None, device="cpu",
                    methods=None, target: int = DEFAULT_TARGET) -> QuantRun:
    """The chapter: :func:`run_quant` for each training seed (default ``0 ..
    quant_n_seeds - 1``), merged.  Every argument (dataset, profile, seeds, device,
    methods, target, the profile's sizes) is checked before anything is trained."""
    dataset, prof, seeds, dev, methods, t = check_arguments(dataset, profile, seeds, device,
                                                            methods, target)
    return QuantRun.merge([_run_seed(dataset, prof, s, dev, methods, t) for s in seeds])


# -- summaries and the expected shape --------------------------------------------------------
def summarise(results: pd.DataFrame) -> pd.DataFrame:
    """Mean, standard deviation (ddof 1; NaN for one seed) and number of seeds of every
    (setting, method, metric)."""
    return (results.groupby(["setting", "method", "metric"], sort=False)["value"]
            .agg(mean="mean", std="std", n="count").reset_index())


def _pooled(run: QuantRun, method: str, attr: str) -> torch.Tensor:
    """Per-query values of one row pooled over seeds (queries are per seed)."""
    return torch.cat([getattr(run.recourse[(s, "", method)], attr) for s in run.seeds])


def _value(means: pd.Series, method: str, metric: str) -> float:
    return float(means.get((method, metric), math.nan))


def shape_checks(run: QuantRun, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """The expected shape (QUANT.md 10.2 and 13) on a run, each with holds / fails.

    * the orderings of ``cflib/reference/expected.csv`` (table ``quant``) on the means
      over seeds of the compressed rows (ties hold);
    * FP recourse exists (FP_Feasible >= 0.60), PTQ INT8 within 1 point of FP32,
      Overhead(PTQ INT8) = 1, Prune+Quant's sparsity >= its fraction;
    * the sweep: VD(8) <= VD(4) <= VD(3) and Accuracy(4) within 2 points of FP32;
    * paired comparisons on the same queries with a paired-bootstrap 95 % CI of the
      difference: VD, |CRG| and DirSim of CFQ-QAT - MixedPrec-QAT, VD of CF-PTQ -
      PTQ INT4.  ``matched`` says whether the two rows are within 1 accuracy point and
      0.25 average bits (Bit_cost) of each other; ``holds`` is the point difference in
      the expected direction, ``significant`` whether the CI excludes 0 that way.
    """
    res = run.results[run.results["setting"] == ""]
    means = res.groupby(["method", "metric"])["value"].mean()
    rows = []
    comp = res[res["method"] != FP32].groupby(["method", "metric"], as_index=False)["value"].mean()
    order = _shape_checks(comp, TABLE)
    for r in order.to_dict("records"):
        rows.append({**r, "difference": r["value"] - r["other value"]})

    def add(text, arrow, method, value, other, other_value, holds, **extra):
        rows.append({"expectation": text, "direction": arrow, "method": method, "value": value,
                     "other": other, "other value": other_value,
                     "difference": value - other_value, "holds": bool(holds), **extra})

    fp_acc = _value(means, FP32, "Accuracy")
    feas = _value(means, FP32, "FP_Feasible")
    add("FP recourse exists: FP_Feasible >= 0.60", "↑", FP32, feas, "", 0.60, feas >= 0.60)
    if BASELINE in run.methods:
        a = _value(means, BASELINE, "Accuracy")
        add("Accuracy: PTQ INT8 within 1 point of FP32", "≈", BASELINE, a, FP32, fp_acc,
            abs(a - fp_acc) <= 0.01)
        o = _value(means, BASELINE, "Overhead")
        add("Overhead: PTQ INT8 = 1.00", "≈", BASELINE, o, "", 1.0, abs(o - 1.0) < 1e-9)
    if "Prune+Quant" in run.methods:
        sp, frac = _value(means, "Prune+Quant", "Sparsity"), QUANT_METHODS["Prune+Quant"]
        # floor(fraction * N) weights are zeroed: allow that rounding (N ~ 2e5)
        add("Sparsity: Prune+Quant keeps its pruning fraction", "↑", "Prune+Quant", sp, "",
            frac.prune_fraction, sp >= frac.prune_fraction - 1e-4)
    sw = run.sweep.groupby(["bits", "metric"])["value"].mean() if len(run.sweep) else None
    if sw is not None:
        vd_by_bits = {b: sw[(b, "VD")] for b in (8, 4, 3) if (b, "VD") in sw}
        pairs = list(zip([8, 4], [4, 3]))
        for hi_b, lo_b in pairs:
            if hi_b in vd_by_bits and lo_b in vd_by_bits:
                add(f"Sweep: VD({hi_b}) <= VD({lo_b})", "↓", f"W{hi_b}A{hi_b}",
                    vd_by_bits[hi_b], f"W{lo_b}A{lo_b}", vd_by_bits[lo_b],
                    vd_by_bits[hi_b] <= vd_by_bits[lo_b])
        if (4, "Accuracy") in sw:
            a4 = sw[(4, "Accuracy")]
            add("Sweep: Accuracy(4) within 2 points of FP32", "≈", "W4A4", a4, FP32, fp_acc,
                abs(a4 - fp_acc) <= 0.02)

    comparisons = [("CFQ-QAT", "MixedPrec-QAT", "VD", "vd_events", False),
                   ("CFQ-QAT", "MixedPrec-QAT", "CRG", "cost_gap", None),
                   ("CFQ-QAT", "MixedPrec-QAT", "DirSim", "dirsim", True),
                   ("CF-PTQ", "PTQ INT4", "VD", "vd_events", False)]
    for a, b, metric, attr, higher in comparisons:
        if a not in run.methods or b not in run.methods:
            continue
        stat = rm.abs_nanmean if higher is None else (lambda v: torch.nanmean(v, dim=-1))
        ci = rm.paired_bootstrap(_pooled(run, a, attr), _pooled(run, b, attr), n_boot, seed,
                                 stat=stat)
        acc_gap = _value(means, a, "Accuracy") - _value(means, b, "Accuracy")
        bits_gap = _value(means, a, "Bit_cost") - _value(means, b, "Bit_cost")
        sign = 1.0 if higher else -1.0         # the direction a "better" difference takes
        label = f"|{metric}|" if higher is None else metric
        shown = abs if higher is None else float      # |CRG| is what is compared
        rows.append({
            "expectation": f"{label}: {a} - {b} (paired 95 % CI)",
            "direction": {True: "↑", False: "↓", None: "↓"}[higher], "method": a,
            "value": shown(_value(means, a, metric)), "other": b,
            "other value": shown(_value(means, b, metric)),
            "difference": ci.estimate, "ci_low": ci.low, "ci_high": ci.high,
            "accuracy gap": acc_gap, "bits gap": bits_gap,
            "matched": bool(abs(acc_gap) <= 0.01 and abs(bits_gap) <= 0.25),
            "holds": bool(sign * ci.estimate >= 0),
            "significant": bool(sign * ci.low > 0 if higher else sign * ci.high > 0),
        })
    cols = ["expectation", "direction", "method", "value", "other", "other value", "difference",
            "ci_low", "ci_high", "accuracy gap", "bits gap", "matched", "holds", "significant"]
    out = pd.DataFrame(rows)
    return out.reindex(columns=cols)


__all__ = ["run_quant", "run_quant_table", "QuantRun", "RowRecourse", "QuantContext",
           "summarise", "shape_checks", "overhead", "check_table", "quant_queries",
           "quant_pair", "QUANT_PAIR", "QUANT_ROWS", "QUANT_METRICS", "check_arguments",
           "check_methods", "check_device", "solver_config", "evaluate"]
