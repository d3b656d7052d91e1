"""The compression recipes of the quantization table (Yahyati et al. 2026, public code).

Configs are frozen dataclasses with the public code's argument names and defaults
(``cfq/experiments/image.py``); :data:`RECIPES` maps each row, spelled as the
leaderboard listing spells it, to its config; :func:`with_epochs` changes the epoch
counts and nothing else.  :func:`compress` runs a recipe on a bare
:class:`~cflib.quantization.model.QuantSmallCNN` (what the weight cache builds).

| row | recipe |
|---|---|
| PTQ INT8 / INT4 | FP weights, all 7 quantizers fixed at 8 / 4 bits, MSE initialisation, then Adam (5e-3) on the steps and clips only, MSE to the FP logits on the validation images |
| CF-PTQ | INT4, calibrated on the non-target validation images plus all their teacher counterfactuals |
| MixedPrec-QAT | Gumbel bit policy over {2, 3, 4, 8} from 4, AdamW over every parameter, CE + budget penalty |
| CFQ-QAT | + eta * CE of the teacher points the FP model already puts in the target class |
| Prune+Quant | global magnitude pruning at the 0.30 quantile, mask re-applied after every step, then MixedPrec-QAT |
| KD+Quant | a fresh student trained on alpha CE + (1 - alpha) T^2 KL, then MixedPrec-QAT from it |
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from cflib.explainers.latent import LatentRecourse, LatentRecourseConfig
from cflib.progress import progress
from cflib.quantization.fake import (
    BIT_CHOICES,
    INIT_MODES,
    budget_penalty,
    check_bit_set,
    check_bits,
    temperature,
)
from cflib.quantization.model import QuantSmallCNN
from cflib.scopes import frozen
from cflib.tensors import model_device
from cflib.training import BestEpoch, accuracy, batches


def _check_common(cfg) -> None:
    if cfg.init not in INIT_MODES:
        raise ValueError(f"init must be one of {INIT_MODES}, got {cfg.init!r}")
    if not cfg.lr > 0:
        raise ValueError(f"lr must be > 0, got {cfg.lr}")
    if int(cfg.epochs) < 0 or int(cfg.batch_size) < 1 or int(cfg.init_grid) < 1 \
            or int(cfg.init_batch) < 1:
        raise ValueError("epochs must be >= 0 and batch_size, init_grid, init_batch >= 1")
    if int(cfg.teacher_steps) < 1 or not cfg.teacher_step_size > 0:
        raise ValueError(f"teacher_steps must be >= 1 and teacher_step_size > 0, got "
                         f"{cfg.teacher_steps} and {cfg.teacher_step_size}")


@dataclass(frozen=True)
class PTQConfig:
    """Post-training quantization (``_calibrate_image_ptq``): W = A = ``bits`` everywhere."""

    bits: int = 8
    cf_aware: bool = False          # CF-PTQ: calibrate on teacher counterfactuals too
    teacher_steps: int = 2          # CF-PTQ's teacher (latent PGD on the FP model)
    teacher_step_size: float = 0.12
    lr: float = 5e-3                # Adam on the raw steps and clips only
    epochs: int = 3                 # calibration epochs
    batch_size: int = 128
    init: str = "mse"               # "mse" (deviation (a)) or "repo" (the code's rule)
    init_grid: int = 40             # clip values of the MSE grid search
    init_batch: int = 256           # validation images whose activations set the clips

    def __post_init__(self):
        check_bits(self.bits, "bits")
        _check_common(self)


@dataclass(frozen=True)
class QATConfig:
    """Quantization-aware training (``_train_quantized_image``) and its variants."""

    bits: tuple[int, ...] = BIT_CHOICES   # candidate widths of every quantizer's policy
    init_bit: int = 4
    eta: float = 0.0                # weight of the teacher-recourse CE (CFQ: 1)
    target_avg_bits: float = 4.0    # budget B of the bit cost
    bit_lambda: float = 0.01        # lambda_b of the budget penalty
    policy_lr: float | None = None  # learning rate of the bit-policy logits (None: ``lr``,
                                    # the code's; at 1e-3 for a few hundred steps they never
                                    # leave their initial bit)
    temperature_start: float = 5.0
    temperature_end: float = 0.25
    lr: float = 1e-3                # AdamW over every parameter
    weight_decay: float = 1e-4
    grad_clip: float = 10.0         # global gradient-norm clip
    batch_size: int = 128
    epochs: int = 4                 # QAT epochs
    teacher_steps: int = 2          # CFQ's teacher: latent PGD on the FP model
    teacher_step_size: float = 0.12
    teacher_restarts: int = 1
    prune_fraction: float = 0.0     # Prune+Quant: 0.30
    kd_temperature: float | None = None  # KD+Quant: 2.0 (None: no distillation)
    kd_alpha: float = 0.5
    student_epochs: int = 5         # KD student epochs
    init: str = "mse"
    init_grid: int = 40
    init_batch: int = 256

    def __post_init__(self):
        object.__setattr__(self, "bits", check_bit_set(self.bits, self.init_bit))
        _check_common(self)
        lo, hi = min(self.bits), max(self.bits)
        if not lo <= self.target_avg_bits <= hi:
            raise ValueError(f"target_avg_bits must lie in [{lo}, {hi}] (the candidate bits), "
                             f"got {self.target_avg_bits}")
        if self.bit_lambda < 0:
            raise ValueError(f"bit_lambda must be >= 0, got {self.bit_lambda}")
        if self.policy_lr is not None and not self.policy_lr > 0:
            raise ValueError(f"policy_lr must be > 0 (or None for lr), got {self.policy_lr}")
        if self.eta < 0:
            raise ValueError(f"eta must be >= 0, got {self.eta}")
        if not 0 < self.temperature_end <= self.temperature_start:
            raise ValueError("temperatures must satisfy 0 < temperature_end <= "
                             f"temperature_start, got {self.temperature_start} -> "
                             f"{self.temperature_end}")
        if not self.grad_clip > 0 or self.weight_decay < 0:
            raise ValueError("grad_clip must be > 0 and weight_decay >= 0")
        if int(self.teacher_restarts) < 1:
            raise ValueError(f"teacher_restarts must be >= 1, got {self.teacher_restarts}")
        if not 0 <= self.prune_fraction < 1:
            raise ValueError(f"prune_fraction must be in [0, 1), got {self.prune_fraction}")
        if self.kd_temperature is not None and not self.kd_temperature > 0:
            raise ValueError(f"kd_temperature must be > 0 (or None for no distillation), got "
                             f"{self.kd_temperature}")
        if not 0 <= self.kd_alpha <= 1:
            raise ValueError(f"kd_alpha must be in [0, 1], got {self.kd_alpha}")
        if int(self.student_epochs) < 0:
            raise ValueError(f"student_epochs must be >= 0, got {self.student_epochs}")

    @property
    def kd(self) -> bool:
        return self.kd_temperature is not None


#: the rows of the listing, in its order -> their recipe (the code's values)
RECIPES: dict[str, PTQConfig | QATConfig] = {
    "PTQ INT8": PTQConfig(bits=8),
    "CFQ-QAT": QATConfig(eta=1.0),
    "CF-PTQ": PTQConfig(bits=4, cf_aware=True),
    "MixedPrec-QAT": QATConfig(),
    "KD+Quant": QATConfig(kd_temperature=2.0, kd_alpha=0.5),
    "PTQ INT4": PTQConfig(bits=4),
    "Prune+Quant": QATConfig(prune_fraction=0.30),
}


def get_recipe(name: str) -> PTQConfig | QATConfig:
    """The config of a row of the listing, or a ValueError listing the 7 names."""
    if name not in RECIPES:
        raise ValueError(f"unknown compression recipe {name!r}; choose from {list(RECIPES)}")
    return RECIPES[name]


def with_epochs(config: PTQConfig | QATConfig, epochs: int,
                student_epochs: int | None = None) -> PTQConfig | QATConfig:
    """A recipe with other epoch counts (calibration or QAT epochs; the KD student's)."""
    if isinstance(config, PTQConfig):
        return replace(config, epochs=int(epochs))
    out = replace(config, epochs=int(epochs))
    return out if student_epochs is None else replace(out, student_epochs=int(student_epochs))


def build_quant_model(config: PTQConfig | QATConfig, n_classes: int = 10) -> QuantSmallCNN:
    """The bare QuantSmallCNN a recipe trains: PTQ fixes every quantizer at ``bits``."""
    if isinstance(config, PTQConfig):
        return QuantSmallCNN(n_classes, bits=(config.bits,), init_bit=config.bits,
                             fixed_bits=config.bits)
    return QuantSmallCNN(n_classes, bits=config.bits, init_bit=config.init_bit)


class Pool(NamedTuple):
    """The training pool: ``(x_train, y_train)`` for training, ``(x_val, y_val)`` for
    calibration and initialisation."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


# -- the teacher -------------------------------------------------------------------------------
def teacher(fp: nn.Module, autoencoder: nn.Module, steps: int = 2, step_size: float = 0.12,
            restarts: int = 1, batch_size: int = 256):
    """The code's teacher: :class:`~cflib.explainers.latent.LatentRecourse` with
    ``steps`` x ``step_size``, ``restarts`` restarts, on the frozen FP model."""
    cfg = LatentRecourseConfig.teacher(steps=steps, step_size=step_size, restarts=restarts,
                                       batch_size=batch_size)
    return LatentRecourse(fp, cfg, autoencoder=autoencoder)


class TeacherPoints(NamedTuple):
    """Teacher points aligned with a training set: ``x_cf[i]`` is image i's teacher point
    and ``success[i]`` is True iff ``y_i != t`` and the FP model puts ``x_cf[i]`` in t
    (the set S of the CFQ loss)."""

    x_cf: torch.Tensor
    success: torch.Tensor


def teacher_points(fp: nn.Module, autoencoder: nn.Module, x: torch.Tensor, y: torch.Tensor,
                   target: int, steps: int = 2, step_size: float = 0.12,
                   restarts: int = 1) -> TeacherPoints:
    """The teacher on every image of ``x`` outside the target class, once.

    The code recomputes the teacher per batch; the teacher is deterministic (frozen f and
    AE, delta_0 = 0, one restart) and batch-independent, so computing it once per
    training image gives the same points (the teacher is deterministic).  No
    seed is set: the caller's random stream (the Gumbel draws) is untouched.
    """
    keep = y != target
    x_cf, success = x.clone(), torch.zeros(len(x), dtype=torch.bool)
    if keep.any():
        sol = teacher(fp, autoencoder, steps, step_size, restarts).solve(x[keep], int(target))
        x_cf[keep] = sol.x_cf.detach().to(x_cf)
        success[keep] = sol.success.cpu()
    return TeacherPoints(x_cf, success)


def cf_calibration_set(fp: nn.Module, autoencoder: nn.Module, x_val: torch.Tensor,
                       y_val: torch.Tensor, target: int, steps: int = 2,
                       step_size: float = 0.12) -> tuple[torch.Tensor, float]:
    """CF-PTQ's calibration set (``image.py:216-228``): the validation images outside the
    target class plus *all* their teacher counterfactuals, successful or not.  Returns
    ``(images, teacher success rate)``."""
    keep = y_val != target
    if not keep.any():
        raise ValueError("the CF-PTQ calibration set is empty: no validation image lies outside "
                         f"the target class {target}; pass more validation images")
    sol = teacher(fp, autoencoder, steps, step_size).solve(x_val[keep], int(target))
    return (torch.cat([x_val[keep], sol.x_cf.detach().cpu().to(x_val)]),
            float(sol.success.float().mean()))


# -- PTQ ---------------------------------------------------------------------------------------
def calibrate_ptq(q: QuantSmallCNN, fp: nn.Module, x_cal: torch.Tensor, cfg: PTQConfig,
                  seed: int = 0, desc: str = "PTQ calibration") -> None:
    """Adam (``cfg.lr``) on the raw steps and clips only, MSE between ``q``'s and ``fp``'s
    logits on ``x_cal``, ``cfg.epochs`` epochs of batches of ``cfg.batch_size``.  The
    weights and biases are not touched (bitwise)."""
    if len(x_cal) == 0:
        raise ValueError("the calibration set is empty; pass calibration images")
    dev = model_device(q)
    with torch.no_grad(), frozen(fp):
        ref = torch.cat([fp(x_cal[i:i + 1024].to(dev)) for i in range(0, len(x_cal), 1024)])
    params = q.scale_parameters()
    flags = [(p, p.requires_grad) for p in q.parameters()]
    for p in q.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    opt = torch.optim.Adam(params, lr=cfg.lr)
    q.train()
    try:
        for ep in progress(range(cfg.epochs), desc=desc):
            for idx in batches(len(x_cal), cfg.batch_size, seed + ep):
                loss = F.mse_loss(q(x_cal[idx].to(dev)), ref[idx.to(dev)])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
    finally:
        for p, f in flags:
            p.requires_grad_(f)
        q.eval()


# -- QAT ---------------------------------------------------------------------------------------
def qat_loss(q: QuantSmallCNN, x: torch.Tensor, y: torch.Tensor, cfg: QATConfig,
             cf_x: torch.Tensor | None = None, target: int | None = None):
    """The code's QAT loss on one batch (``image.py:72``)::

        L = CE(f_q(x), y) + eta * mean_{i in S} CE(f_q(x_tilde_i), t)
            + lambda_b * max(0, C - B)^2

    ``cf_x`` holds the batch's teacher points in S (already filtered); with ``eta = 0``
    or an empty S the CF term and its forward pass are left out, so the loss and the
    Gumbel draws are MixedPrec's.  The bit cost C reads the selections of the latest
    forward pass, as the code's.  Returns ``(loss, parts)``.
    """
    task = F.cross_entropy(q(x), y)
    loss = task
    cf = task.new_zeros(())
    if cfg.eta > 0 and cf_x is not None and len(cf_x):
        t = torch.full((len(cf_x),), int(target), dtype=torch.long, device=x.device)
        cf = F.cross_entropy(q(cf_x), t)
        loss = loss + cfg.eta * cf
    cost = q.bit_cost()
    penalty = budget_penalty(cost, cfg.target_avg_bits, cfg.bit_lambda)
    loss = loss + penalty
    return loss, {"task": task.detach(), "cf": cf.detach(), "bit_cost": cost.detach(),
                  "penalty": penalty.detach()}


@torch.no_grad()
def magnitude_prune(model: nn.Module, fraction: float) -> dict[str, torch.Tensor]:
    """Global magnitude pruning in place (``cfq/training.py:414``): the threshold is the
    ``fraction``-quantile of |w| over every parameter with ``ndim > 1`` (conv and linear
    weights); the ``floor(fraction * N)`` smallest entries are zeroed (ties at the
    threshold too).  Returns the keep-masks by parameter name."""
    if not 0 <= fraction < 1:
        raise ValueError(f"prune_fraction must be in [0, 1), got {fraction}")
    params = {n: p for n, p in model.named_parameters() if p.dim() > 1}
    masks = {n: torch.ones_like(p, dtype=torch.bool) for n, p in params.items()}
    mags = torch.cat([p.detach().abs().flatten() for p in params.values()])
    k = int(fraction * len(mags))
    if k == 0:
        return masks
    threshold = mags.kthvalue(k).values
    for n, p in params.items():
        masks[n] = p.abs() > threshold
        p.mul_(masks[n])
    return masks


@torch.no_grad()
def apply_masks(model: nn.Module, masks: dict[str, torch.Tensor]) -> None:
    """Zero the pruned entries again (after every optimizer step: the mask is kept,
    deviation (c); the code lets AdamW regrow them)."""
    params = dict(model.named_parameters())
    for n, m in masks.items():
        params[n].mul_(m)


def train_qat(q: QuantSmallCNN, x: torch.Tensor, y: torch.Tensor, cfg: QATConfig, *,
              target: int = 0, teacher: TeacherPoints | None = None,
              masks: dict[str, torch.Tensor] | None = None, seed: int = 0,
              desc: str = "QAT") -> None:
    """The code's QAT loop: AdamW over every parameter (weights, biases, steps, clips,
    policy logits), hard Gumbel draws at the epoch's temperature, gradient-norm clip,
    no best-epoch selection; the final model runs at ``temperature_end``, in
    evaluation mode (deterministic bits).  ``teacher`` (aligned with ``x``) adds the CF
    term; ``masks`` are re-applied after every optimizer step.  ``cfg.policy_lr`` gives
    the bit-policy logits their own learning rate (no weight decay)."""
    dev = model_device(q)
    params = [p for p in q.parameters() if p.requires_grad]
    if cfg.policy_lr is None:
        opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    else:
        policy = {id(p) for p in q.policy_parameters()}
        opt = torch.optim.AdamW(
            [{"params": [p for p in params if id(p) not in policy]},
             {"params": [p for p in params if id(p) in policy], "lr": cfg.policy_lr,
              "weight_decay": 0.0}], lr=cfg.lr, weight_decay=cfg.weight_decay)
    q.train()
    for ep in progress(range(cfg.epochs), desc=desc):
        q.set_temperature(temperature(ep, cfg.epochs, cfg.temperature_start,
                                      cfg.temperature_end))
        for idx in batches(len(x), cfg.batch_size, seed + ep):
            xb, yb = x[idx].to(dev), y[idx].to(dev)
            cf_x = None
            if teacher is not None and cfg.eta > 0:
                s = teacher.success[idx]
                cf_x = teacher.x_cf[idx][s].to(dev)
            loss, _ = qat_loss(q, xb, yb, cfg, cf_x, target)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            opt.step()
            if masks:
                apply_masks(q, masks)
    q.set_temperature(cfg.temperature_end)
    q.eval()


# -- KD ----------------------------------------------------------------------------------------
def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, y: torch.Tensor,
            temperature: float = 2.0, alpha: float = 0.5) -> torch.Tensor:
    """``alpha CE(s(x), y) + (1 - alpha) T^2 KL(softmax(f(x)/T) || softmax(s(x)/T))``
    (``cfq/training.py:357``), the KL averaged over the batch."""
    ce = F.cross_entropy(student_logits, y)
    kl = F.kl_div(F.log_softmax(student_logits / temperature, 1),
                  F.softmax(teacher_logits / temperature, 1), reduction="batchmean")
    return alpha * ce + (1 - alpha) * temperature ** 2 * kl


def train_kd_student(student: nn.Module, teacher_model: nn.Module, x: torch.Tensor,
                     y: torch.Tensor, epochs: int, temperature: float = 2.0, alpha: float = 0.5,
                     lr: float = 1e-3, weight_decay: float = 1e-4, batch_size: int = 128,
                     seed: int = 0, desc: str = "KD student", x_val: torch.Tensor | None = None,
                     y_val: torch.Tensor | None = None, patience: int | None = None) -> dict:
    """A fresh student trained on :func:`kd_loss` against the frozen FP model, with the
    FP recipe's optimiser (AdamW 1e-3, weight decay 1e-4, batch 128).  With
    ``x_val``/``y_val`` the epoch of best validation accuracy is kept, as the public code
    keeps its student's best epoch, and ``patience`` stops training after that many epochs
    without improvement.  Returns the best epoch, its accuracy and the epochs run (or {})."""
    dev = model_device(student)
    opt = torch.optim.AdamW(student.parameters(), lr=lr, weight_decay=weight_decay)
    keep, ran = BestEpoch(student, higher=True, patience=patience or None), 0
    with frozen(teacher_model):
        for ep in progress(range(epochs), desc=desc):
            ran = ep + 1
            student.train()
            for idx in batches(len(x), batch_size, seed + ep):
                xb, yb = x[idx].to(dev), y[idx].to(dev)
                with torch.no_grad():
                    t_logits = teacher_model(xb)
                loss = kd_loss(student(xb), t_logits, yb, temperature, alpha)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            if x_val is not None and keep.update(accuracy(student, x_val, y_val), ep + 1):
                break
    keep.restore()
    student.eval()
    return {} if x_val is None else {"best_epoch": keep.epoch, "val_accuracy": keep.best,
                                     "epochs_run": ran}


# -- one recipe, end to end ----------------------------------------------------------------------
def compress(q: QuantSmallCNN, config: PTQConfig | QATConfig, fp: nn.Module, pool: Pool, *,
             autoencoder: nn.Module | None = None, target: int = 0, seed: int = 0,
             student: nn.Module | None = None, desc: str = "") -> dict:
    """Run ``config``'s recipe on the bare ``q`` (built by :func:`build_quant_model`).

    ``fp`` is the trained FP model (never changed), ``autoencoder`` the latent AE of the
    teacher (CF-PTQ, CFQ-QAT), ``student`` the trained KD student (KD+Quant).  Returns
    an info dict with ``compress_seconds`` (initialisation, teacher, pruning,
    calibration or QAT; the student's training is added by the caller, who cached it)
    and, where they apply, ``teacher_success`` and ``sparsity``.
    """
    desc = desc or type(config).__name__
    dev = model_device(q)
    if (getattr(config, "cf_aware", False) or getattr(config, "eta", 0) > 0) \
            and autoencoder is None:
        raise ValueError(f"{desc} needs the latent autoencoder of its teacher (autoencoder=)")
    if isinstance(config, QATConfig) and config.kd and student is None:
        raise ValueError(f"{desc} distils into a student: pass student= (a SmallCNN trained by train_kd_student)")
    if len(pool.x_val) == 0:
        raise ValueError("the calibration set is empty; pass calibration images")
    info: dict = {}
    x_init = pool.x_val[:config.init_batch]
    t0 = time.perf_counter()
    if isinstance(config, PTQConfig):
        q.load_fp(fp)
        q.initialise(x_init, config.init, config.init_grid)
        x_cal = pool.x_val
        if config.cf_aware:
            x_cal, info["teacher_success"] = cf_calibration_set(
                fp, autoencoder, pool.x_val, pool.y_val, target, config.teacher_steps,
                config.teacher_step_size)
        calibrate_ptq(q, fp, x_cal, config, seed, desc=f"{desc} calibration")
    else:
        start = student if config.kd else fp
        q.load_fp(start)
        masks = None
        if config.prune_fraction > 0:
            masks = magnitude_prune(q, config.prune_fraction)
        q.initialise(x_init, config.init, config.init_grid)
        tp = None
        if config.eta > 0:
            tp = teacher_points(fp, autoencoder, pool.x_train, pool.y_train, target,
                                config.teacher_steps, config.teacher_step_size,
                                config.teacher_restarts)
            nontarget = (pool.y_train != target).sum().item()
            info["teacher_success"] = float(tp.success.sum().item() / max(nontarget, 1))
        train_qat(q, pool.x_train, pool.y_train, config, target=target, teacher=tp,
                  masks=masks, seed=seed, desc=desc)
        if masks is not None:
            info["sparsity"] = q.sparsity()
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    info["compress_seconds"] = time.perf_counter() - t0
    q.eval()
    return {**info, **q.bit_summary(), "bits": q.bit_allocation(), "config": asdict(config)}
