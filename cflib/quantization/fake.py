"""Fake-quantization primitives of Yahyati et al. (2026)'s public code, written in cflib.

Quantized values are computed in float with straight-through rounding, so every
quantized network keeps gradients for QAT, for calibration and for the recourse
solver's input gradients.  The recipes follow the public code of Yahyati et al.
(2026), ``cfq/quantization.py``:

* weights, symmetric per tensor (LSQ-style learned step, no LSQ gradient scaling)::

      q_b(w; s) = s * round_ste(clamp(w / s, -2^(b-1), 2^(b-1) - 1)),   s = softplus(rho) + 1e-8

* activations, unsigned (PACT-style learned clip)::

      p_b(a; c) = (c / (2^b - 1)) * round_ste(min(max(a, 0), c) * (2^b - 1) / c),
      c = softplus(kappa) + 1e-8

* mixed precision: quantizer k holds policy logits pi_k over the candidate bits B
  (0, with +2.0 on the initial bit).  Training: a hard Gumbel-softmax draw g at
  temperature tau, fresh on every forward pass; evaluation: g = onehot(argmax pi_k)
  with a straight-through softmax(pi_k / tau) gradient.  The output is
  ``sum_j g_j q_{b_j}(x)`` and the expected bit ``E_k = sum_j g_j b_j``;
* bit cost ``C = 1/2 sum_l n_l E_l / sum_l n_l + 1/2 mean_{k in act} E_k`` and the budget
  penalty ``lambda_b * max(0, C - B)^2``;
* temperature per epoch ``tau_e = max(end, start * (end / start)^(e / max(E - 1, 1)))``;
* initialisation (deviation (a)): per quantizer and candidate bit, the clip that
  minimises the quantization MSE over a grid of ``grid`` values from max/grid to max;
  ``init="repo"`` keeps the code's rule (step ``2 mean|w| / sqrt(2^(b-1) - 1)``,
  activation clip 6.0).
"""
from __future__ import annotations

import math
import numbers
from typing import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

#: the candidate bit widths of the code's mixed-precision policy
BIT_CHOICES: tuple[int, ...] = (2, 3, 4, 8)
MIN_BITS, MAX_BITS = 2, 8
INIT_BIT_LOGIT = 2.0      # the code's +2.0 on the initial bit (cfq/quantization.py:51)
REPO_ACT_CLIP = 6.0       # the code's activation clip initialisation (:114)
INIT_MODES = ("mse", "repo")
EPS = 1e-8                # the floor of softplus-parameterised steps and clips


# -- validation --------------------------------------------------------------------------
def check_bits(bits, name: str = "bits") -> int:
    """An int bit width in 2..8, or a ValueError naming the allowed range."""
    if isinstance(bits, bool) or not isinstance(bits, numbers.Integral) \
            or not MIN_BITS <= int(bits) <= MAX_BITS:
        raise ValueError(f"{name} must be an int in {MIN_BITS}..{MAX_BITS}, got {bits!r}")
    return int(bits)


def check_bit_set(bits: Iterable[int], init_bit: int | None = None,
                  fixed_bits: int | None = None) -> tuple[int, ...]:
    """The candidate set as a tuple: non-empty, no duplicates, every entry a valid width;
    ``init_bit`` and ``fixed_bits`` (when given) must be candidates."""
    if isinstance(bits, (int, str)) or not isinstance(bits, Iterable):
        raise ValueError(f"bits must be a sequence of candidate widths such as (2, 3, 4, 8), "
                         f"got {bits!r}")
    out = tuple(check_bits(b, "every candidate bit") for b in bits)
    if not out:
        raise ValueError("the candidate bit set is empty; give at least one width, e.g. (4,)")
    if len(set(out)) != len(out):
        raise ValueError(f"the candidate bit set {out} has duplicates; list each width once")
    for name, b in (("init_bit", init_bit), ("fixed_bits", fixed_bits)):
        if b is not None and check_bits(b, name) not in out:
            raise ValueError(f"{name}={b} is not among the candidate bits {out}; add it to bits "
                             "or choose one of them")
    return out


# -- primitives ----------------------------------------------------------------------------
def round_ste(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest integer with an identity (straight-through) gradient."""
    return x + (x.round() - x).detach()


def weight_qmax(bits: int) -> int:
    """Largest positive integer level of a signed ``bits``-bit weight, ``2^(b-1) - 1``."""
    return 2 ** (bits - 1) - 1


def quantize_weight(w: torch.Tensor, step: torch.Tensor, bits: int) -> torch.Tensor:
    """``q_b(w; s) = s * round_ste(clamp(w / s, -2^(b-1), 2^(b-1) - 1))`` (symmetric, per tensor)."""
    lo, hi = -(2 ** (bits - 1)), weight_qmax(bits)
    return round_ste((w / step).clamp(lo, hi)) * step


def quantize_act(a: torch.Tensor, clip: torch.Tensor, bits: int) -> torch.Tensor:
    """``p_b(a; c) = (c / (2^b - 1)) * round_ste(min(max(a, 0), c) * (2^b - 1) / c)`` (PACT-style).

    ``torch.minimum`` with the clip passes the clip's gradient where ``a > c`` (PACT).
    """
    levels = 2 ** bits - 1
    step = clip / levels
    return round_ste(torch.minimum(a.clamp_min(0), clip) / step) * step


def positive(raw: torch.Tensor) -> torch.Tensor:
    """``softplus(raw) + 1e-8``: the parameterisation of every step and clip."""
    return F.softplus(raw) + EPS


def inverse_positive(value: torch.Tensor) -> torch.Tensor:
    """``raw`` with ``positive(raw) == value`` (numerically stable inverse softplus)."""
    v = (value - EPS).clamp_min(1e-12)
    return v + torch.log(-torch.expm1(-v))


def temperature(epoch: int, epochs: int, start: float = 5.0, end: float = 0.25) -> float:
    """The code's per-epoch Gumbel temperature, geometric from ``start`` to ``end``:
    ``max(end, start * (end / start)^(e / max(E - 1, 1)))`` (5 -> 0.25 by default)."""
    return max(end, start * (end / start) ** (epoch / max(epochs - 1, 1)))


# -- initialisation ------------------------------------------------------------------------
def _grid(maximum: float, grid: int) -> torch.Tensor:
    m = max(float(maximum), 1e-8)
    return torch.arange(1, grid + 1, dtype=torch.float64) * (m / grid)


def _strided(x: torch.Tensor, max_values: int) -> torch.Tensor:
    """At most ``max_values`` entries of ``x`` (flattened), evenly strided: deterministic."""
    x = x.detach().flatten()
    stride = max(1, math.ceil(len(x) / max_values))
    return x[::stride]


@torch.no_grad()
def mse_weight_step(w: torch.Tensor, bits: int, grid: int = 40,
                    max_values: int = 1 << 20) -> float:
    """The step of the clip ``alpha`` in ``{max|w| k / grid : k = 1..grid}`` that minimises
    ``mean (q_b(w; alpha / (2^(b-1) - 1)) - w)^2`` (first minimum on ties)."""
    w = _strided(w, max_values).double()
    steps = _grid(w.abs().max().item(), grid).to(w.device) / weight_qmax(bits)
    err = torch.stack([(quantize_weight(w, s, bits) - w).pow(2).mean() for s in steps])
    return float(steps[int(err.argmin())])


@torch.no_grad()
def mse_act_clip(a: torch.Tensor, bits: int, grid: int = 40, max_values: int = 1 << 18) -> float:
    """The clip ``c`` in ``{max(a) k / grid : k = 1..grid}`` that minimises
    ``mean (p_b(a; c) - a)^2`` over the activation values ``a`` (first minimum on ties)."""
    a = _strided(a, max_values).double().clamp_min(0)
    clips = _grid(a.max().item(), grid).to(a.device)
    err = torch.stack([(quantize_act(a, c, bits) - a).pow(2).mean() for c in clips])
    return float(clips[int(err.argmin())])


@torch.no_grad()
def repo_weight_step(w: torch.Tensor, bits: int) -> float:
    """The code's rule (``cfq/quantization.py:83``): ``2 mean|w| / sqrt(2^(b-1) - 1)``."""
    return float(2.0 * w.detach().abs().mean().clamp_min(1e-6) / math.sqrt(max(weight_qmax(bits), 1)))


# -- the quantizer module ------------------------------------------------------------------
class Quantizer(nn.Module):
    """One fake quantizer with a mixed-precision bit policy.

    ``kind`` is ``"weight"`` (signed, learned step) or ``"act"`` (unsigned, learned clip);
    ``bits`` the candidate widths, ``init_bit`` the one the policy starts on,
    ``fixed_bits`` a width that is always used (PTQ; the policy is then ignored).
    ``raw`` holds one softplus-parameterised step (or clip) per candidate width and
    ``logits`` the policy.  With ``enabled = False`` the input passes unchanged.
    """

    def __init__(self, kind: str, bits: Sequence[int] = BIT_CHOICES, init_bit: int = 4,
                 fixed_bits: int | None = None):
        super().__init__()
        if kind not in ("weight", "act"):
            raise ValueError(f"kind must be 'weight' or 'act', got {kind!r}")
        self.kind = kind
        self.bits = check_bit_set(bits, init_bit, fixed_bits)
        self.init_bit = int(init_bit)
        self.fixed_bits = None if fixed_bits is None else int(fixed_bits)
        self.enabled = True
        logits = torch.zeros(len(self.bits))
        logits[self.bits.index(self.init_bit)] = INIT_BIT_LOGIT
        self.logits = nn.Parameter(logits)
        start = 1.0 if kind == "weight" else REPO_ACT_CLIP
        self.raw = nn.Parameter(inverse_positive(torch.full((len(self.bits),), start)))
        self.register_buffer("temperature", torch.tensor(1.0))
        self.register_buffer("bit_values", torch.tensor(self.bits, dtype=torch.float32))
        self._last: torch.Tensor | None = None   # selection of the latest forward pass

    def train(self, mode: bool = True) -> "Quantizer":
        # a mode change starts afresh: the bit cost reads this mode's selections, and no
        # graph of a past training step is kept alive (or copied by deepcopy)
        self._last = None
        return super().train(mode)

    def extra_repr(self) -> str:
        fixed = f", fixed_bits={self.fixed_bits}" if self.fixed_bits is not None else ""
        return f"kind={self.kind!r}, bits={self.bits}, init_bit={self.init_bit}{fixed}"

    # -- the bit policy ---------------------------------------------------------------------
    def selection(self) -> torch.Tensor:
        """The one-hot selection ``g`` over the candidates, exact 0/1 values.

        Fixed bits: a constant one-hot.  Training: a hard Gumbel-softmax draw at
        ``temperature`` (the global RNG, as ``F.gumbel_softmax``).  Evaluation:
        ``onehot(argmax logits)``.  Both carry the straight-through gradient of the
        soft probabilities; ``hard + (soft - soft.detach())`` keeps the values exactly
        0 and 1, so a selected branch comes out bit for bit.
        """
        n = len(self.bits)
        if self.fixed_bits is not None:
            return F.one_hot(torch.tensor(self.bits.index(self.fixed_bits)), n).to(
                self.logits.dtype).to(self.logits.device)
        tau = float(self.temperature)
        if self.training:
            gumbels = -torch.empty_like(self.logits).exponential_().log()
            soft = torch.softmax((self.logits + gumbels) / tau, dim=0)
        else:
            soft = torch.softmax(self.logits / tau, dim=0)
        hard = F.one_hot(soft.argmax(), n).to(soft.dtype)
        return hard + (soft - soft.detach())

    def scale(self, index: int) -> torch.Tensor:
        """The step (weights) or clip (activations) of candidate ``index``."""
        return positive(self.raw[index])

    def quantize_at(self, x: torch.Tensor, index: int) -> torch.Tensor:
        """``x`` quantized with candidate ``index``'s width and step/clip."""
        fn = quantize_weight if self.kind == "weight" else quantize_act
        return fn(x, self.scale(index), self.bits[index])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        g = self.selection()
        self._last = g
        if not g.requires_grad:
            # a constant one-hot: only the selected branch contributes (same value)
            return self.quantize_at(x, int(g.argmax()))
        return sum(g[j] * self.quantize_at(x, j) for j in range(len(self.bits)))

    # -- bits -------------------------------------------------------------------------------
    def expected_bits(self) -> torch.Tensor:
        """``E_k = sum_j g_j b_j`` for the selection of the latest forward pass (the
        deterministic one before any), with the straight-through gradient."""
        g = self._last if self._last is not None else self.selection()
        return (g * self.bit_values.to(g.dtype)).sum()

    def chosen_bits(self) -> int:
        """The width used in evaluation: ``fixed_bits``, else the argmax of the policy."""
        if self.fixed_bits is not None:
            return self.fixed_bits
        return self.bits[int(self.logits.detach().argmax())]

    # -- initialisation ---------------------------------------------------------------------
    @torch.no_grad()
    def initialise(self, values: torch.Tensor | None, init: str = "mse", grid: int = 40) -> None:
        """Set every candidate's step or clip.

        ``init="mse"``: the grid minimiser of the quantization MSE on ``values`` (the
        weight tensor, or activation values of a calibration batch); ``init="repo"``: the
        code's rule (weights need ``values``; activation clips are 6.0).
        """
        if init not in INIT_MODES:
            raise ValueError(f"init must be one of {INIT_MODES}, got {init!r}")
        if values is None and (init == "mse" or self.kind == "weight"):
            raise ValueError(f"{init} initialisation of a {self.kind} quantizer needs its values")
        out = []
        for b in self.bits:
            if self.kind == "weight":
                out.append(mse_weight_step(values, b, grid) if init == "mse"
                           else repo_weight_step(values, b))
            else:
                out.append(mse_act_clip(values, b, grid) if init == "mse" else REPO_ACT_CLIP)
        self.raw.copy_(inverse_positive(torch.tensor(out, dtype=self.raw.dtype)).to(self.raw.device))


def bit_cost(weights: Sequence[tuple[Quantizer, int]], acts: Sequence[Quantizer]) -> torch.Tensor:
    """``C = 1/2 sum_l n_l E_l / sum_l n_l + 1/2 mean_k E_k`` (``cfq/quantization.py:281``):
    ``weights`` pairs each weight quantizer with its tensor's parameter count ``n_l``."""
    n = sum(c for _, c in weights)
    w = sum(q.expected_bits() * c for q, c in weights) / n
    a = torch.stack([q.expected_bits() for q in acts]).mean()
    return 0.5 * w + 0.5 * a


def budget_penalty(cost: torch.Tensor, target_avg_bits: float, bit_lambda: float) -> torch.Tensor:
    """``lambda_b * max(0, C - B)^2``: zero at or below the budget."""
    return bit_lambda * F.relu(cost - target_avg_bits).pow(2)
