"""Tensors in, tensors out: the image range, devices, targets and the classifier's scores.

Every image in cflib lives in [-1, 1] (black is -1), batch-first ``(N, C, H, W)``.
The checks here run before any compute and name the fix; none of them changes its
input.  They refuse only what is certain to be wrong (values outside [-1, 1], NaN,
infinity, a ``meta`` tensor, a device this machine lacks); what merely looks wrong (a
batch with no value below 0, as [0, 1] data would be) is a warning.  A classifier is
any ``nn.Module`` whose output is one score per class (logits or log-probabilities);
:func:`scores` also accepts the outputs users' models often have (a tuple or dict whose
first entry, or ``"logits"`` entry, holds them).
"""
from __future__ import annotations

import math
import warnings
from numbers import Integral

import torch
from torch import nn

from cflib.scopes import frozen

X_MIN, X_MAX = -1.0, 1.0  # every image in the project lives in [-1, 1]
#: how far outside [-1, 1] a pixel may be and still count as inside (float rounding)
RANGE_TOL = 1e-4
#: the floating dtypes the explainers run in at half precision
HALF_DTYPES = (torch.float16, torch.bfloat16)


class RangeWarning(UserWarning):
    """A batch that may not be in [-1, 1] (no value below 0): it is used as it is."""


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device`` this machine has, or a ValueError naming the fix.

    Accepted: ``"cpu"``, ``"cuda"``, ``"cuda:N"`` (or a ``torch.device``).  Refused:
    text torch cannot read, another device type (``meta`` holds no data), ``cuda`` where
    CUDA is not available, a CUDA index this machine does not have.  Every runner and
    :mod:`cflib.bench.zoo` function calls it first, so a wrong device fails before any
    data is read or any network is trained.
    """
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as err:
        raise ValueError(f"cannot read device {device!r} ({err}); use device='cpu' or 'cuda'"
                         ) from None
    if dev.type == "meta":
        raise ValueError("device='meta' holds no data (shapes only); use device='cpu' or "
                         "'cuda'")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device {str(device)!r} is not supported; use device='cpu' or 'cuda'")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={str(device)!r}: CUDA is not available here; use "
                             "device='cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device={str(device)!r}: this machine has "
                             f"{torch.cuda.device_count()} CUDA device(s); use 'cuda:0'.."
                             f"'cuda:{torch.cuda.device_count() - 1}' or device='cpu'")
    return dev


def check_model(model: nn.Module, name: str = "classifier") -> None:
    """A network cflib can run: not on the ``meta`` device (parameters without data)."""
    if model_device(model).type == "meta":
        raise ValueError(f"the {name} is on the 'meta' device: its parameters have shapes but "
                         "no values (an empty-weights build); materialise it first, e.g. "
                         f"{name}.to_empty(device='cpu') then load_state_dict(...)")


def working(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the precision losses and optimiser states are computed in: float32 for a
    half-precision tensor (float16 / bfloat16), ``t`` itself otherwise (float32 and
    float64 are unchanged: this is a no-op on them, so it changes no float32 result).

    Why: a softmax probability or a squared gradient below float16's smallest number
    (6e-8) is 0, whose log is -inf; the methods that search with losses or Adam moments
    run the classifier in its own dtype and compute those terms here."""
    return t.float() if t.dtype in HALF_DTYPES else t


def model_device(model: nn.Module) -> torch.device:
    """The device of a model's first parameter or buffer (CPU if it has none)."""
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def model_dtype(model: nn.Module) -> torch.dtype:
    """The floating dtype of a model's first floating parameter (float32 if none)."""
    for t in model.parameters():
        if t.is_floating_point():
            return t.dtype
    return torch.float32


def check_images(x, name: str = "x", assume_range: bool = False) -> None:
    """Clear errors for the wrong type, shape, dtype, device or range; the input is untouched.

    Refused (ValueError): a ``meta`` tensor, NaN or infinite values, values outside
    [-1, 1] (beyond :data:`RANGE_TOL`).  A batch with no value below 0 is valid [-1, 1]
    data (a bright image, a crop without background) but is also what [0, 1] data looks
    like: it gets a :class:`RangeWarning` saying so, and is used as it is;
    ``assume_range=True`` (the caller knows its batch is in [-1, 1]) silences it.
    """
    if not torch.is_tensor(x):
        raise TypeError(f"{name} must be a torch.Tensor of images (N, C, H, W) in [-1, 1], got "
                        f"{type(x).__name__}")
    if x.device.type == "meta":
        raise ValueError(f"{name} is on the 'meta' device: it has a shape but no values; pass "
                         "the images themselves (on 'cpu' or 'cuda')")
    if x.dim() != 4:
        raise ValueError(
            f"{name} must be a batch of images of shape (N, C, H, W); got shape "
            f"{tuple(x.shape)} (add a batch dimension with x.unsqueeze(0))"
        )
    if not x.is_floating_point():
        raise ValueError(f"{name} must be a float tensor scaled to [-1, 1], got {x.dtype} "
                         "(for uint8 images in 0..255: x.float() / 127.5 - 1)")
    if len(x) == 0:
        raise ValueError(f"{name} is an empty batch")
    bad = (~torch.isfinite(x)).sum().item()
    if bad:
        raise ValueError(f"{name} holds {bad} NaN or infinite value(s); every pixel must be a "
                         "number in [-1, 1]")
    lo, hi = x.min().item(), x.max().item()
    if lo < X_MIN - RANGE_TOL or hi > X_MAX + RANGE_TOL:
        raise ValueError(f"{name} must be scaled to [-1, 1]; its values span "
                         f"[{_edge(lo)}, {_edge(hi)}] ({_range_hint(lo, hi)})")
    if lo >= 0.0 and hi > lo and not assume_range:
        # valid [-1, 1] data can lack dark pixels, so this is only a warning
        warnings.warn(
            f"{name} has no value below 0: it looks like [0, 1] data, but cflib expects "
            "[-1, 1] (black is -1). If it is [0, 1] data pass x * 2 - 1; if it is already in "
            "[-1, 1] pass assume_range=True to silence this warning", RangeWarning,
            stacklevel=3)


def _edge(v: float) -> str:
    """A range's end as it is: 3 significant digits unless they would round a value just
    outside [-1, 1] onto its edge (1.0001 is not 1)."""
    short = f"{v:.3g}"
    return short if (X_MIN <= float(short) <= X_MAX) == (X_MIN <= v <= X_MAX) else f"{v:.7g}"


def _range_hint(lo: float, hi: float) -> str:
    """The likely fix for a batch outside [-1, 1], read from where its values lie."""
    if lo >= 0 and hi > 1.5:
        return "x / 127.5 - 1 for images in 0..255"
    if lo >= X_MIN - 0.01 and hi <= X_MAX + 0.01:
        return ("it overshoots [-1, 1] slightly, as a step or a rounding can: "
                "x.clamp(-1, 1)")
    if lo >= 0:
        return "x * 2 - 1 for images in [0, 1]"
    return "rescale it to [-1, 1]: (x - x.min()) / (x.max() - x.min()) * 2 - 1"


def _show(t: torch.Tensor) -> str:
    u = t.unique().tolist()
    return f"class {u[0]}" if len(u) == 1 else f"classes {u[:5]}"


def as_target(target, n: int, device, n_classes: int) -> torch.Tensor:
    """Broadcast a class index, or one per image, to a ``(n,)`` int64 tensor on ``device``.

    ``n_classes`` is the classifier's output width: targets must be integers in
    ``0 .. n_classes - 1``.  A string, a float that is not a whole number, a bool or a
    wrong shape is a ValueError that says what is accepted.
    """
    allowed = (f"an int in 0..{n_classes - 1}, or a sequence / int tensor of {n} of them "
               "(one per image)")
    if isinstance(target, (str, bytes, bool)) or target is None:
        raise ValueError(f"target must be {allowed}; got {type(target).__name__} {target!r}")
    if isinstance(target, (list, tuple)) and any(
            isinstance(v, (str, bytes, bool)) or v is None for v in target):
        bad = next(v for v in target if isinstance(v, (str, bytes, bool)) or v is None)
        raise ValueError(f"target must be {allowed}; it holds {type(bad).__name__} {bad!r}")
    try:
        t = torch.as_tensor(target, device=device)
    except (TypeError, ValueError, RuntimeError) as err:
        raise ValueError(f"target must be {allowed}; got {target!r} ({err})") from None
    if t.dtype == torch.bool or t.is_complex():
        raise ValueError(f"target must be {allowed}; got a {t.dtype} tensor")
    if t.is_floating_point():
        if not torch.isfinite(t).all() or not torch.equal(t, t.round()):
            raise ValueError(f"target must hold class indices ({allowed}), got {target!r}")
    t = t.long()
    if t.dim() == 0:
        t = t.expand(n).clone()
    if t.shape != (n,):
        raise ValueError(f"target must be {allowed}; got shape {tuple(t.shape)} where () or "
                         f"shape ({n},) is needed")
    if (t < 0).any() or (t >= n_classes).any():
        raise ValueError(f"target classes must be in 0..{n_classes - 1} (the classifier has "
                         f"{n_classes} outputs), got {t.unique().tolist()}")
    return t


def check_class(value, n_classes: int, name: str = "class") -> int:
    """A single class index in ``0 .. n_classes - 1``, as an int."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        if not (isinstance(value, float) and math.isfinite(value) and value == int(value)):
            raise ValueError(f"{name} must be an int in 0..{n_classes - 1}, got "
                             f"{type(value).__name__} {value!r}")
    v = int(value)
    if not 0 <= v < n_classes:
        raise ValueError(f"{name} {v} is not a class of this classifier (0..{n_classes - 1})")
    return v


# -- the classifier's scores ---------------------------------------------------------------
def _unwrap(out, where: str = "the classifier"):
    """The score tensor of a model output: a tensor, the first entry of a tuple/list, or
    the ``"logits"`` entry of a dict (the forms users' models return)."""
    if torch.is_tensor(out):
        return out
    if isinstance(out, dict):
        for key in ("logits", "scores", "out", "output"):
            if key in out and torch.is_tensor(out[key]):
                return out[key]
        raise TypeError(f"{where} returns a dict with keys {sorted(out)} and no 'logits' "
                        "entry; wrap it: nn.Sequential is not enough, e.g. "
                        "`class Wrapped(nn.Module): forward = lambda self, x: model(x)[KEY]`")
    if isinstance(out, (tuple, list)) and out and torch.is_tensor(out[0]):
        return out[0]
    raise TypeError(f"{where} returns {type(out).__name__}; cflib needs a tensor of scores "
                    "(N, K), or a tuple/dict whose first / 'logits' entry is one")


def scores(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``model(x)`` as a ``(N, K)`` score tensor (tuple and dict outputs unwrapped)."""
    return _unwrap(model(x))


def check_scores(out: torch.Tensor, where: str = "on these images") -> None:
    """A ValueError when the classifier's output holds NaN or infinite scores: a
    counterfactual search on them would report validity 0 instead of the fault."""
    bad = ~torch.isfinite(out)
    if bad.any():
        raise ValueError(
            f"the classifier's output holds {int(bad.sum())} NaN or infinite score(s) "
            f"{where} (of its {out.numel()} scores); cflib needs finite logits: check the "
            "model's weights (a diverged training, a bad load) and its forward (e.g. log(0); "
            "a float16 model whose logits overflow: run it in float32)")


def _probability_kind(out: torch.Tensor) -> str | None:
    """"softmax" / "sigmoid" when the scores look like probabilities, else None."""
    if not ((out >= 0) & (out <= 1)).all():
        return None
    if torch.allclose(out.sum(1), torch.ones(len(out), dtype=out.dtype, device=out.device),
                      atol=1e-4):
        return "softmax"
    return "sigmoid"


class ScoresOf(nn.Module):
    """A view of a model whose output is a tuple or dict: ``forward`` returns the score
    tensor (:func:`scores`); every other attribute is the wrapped model's."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.inner = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _unwrap(self.inner(x))

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("inner"), name)


@torch.no_grad()
def check_classifier(model: nn.Module, x: torch.Tensor) -> tuple[int, bool]:
    """Check that ``model`` takes images like ``x`` and returns scores.

    Returns ``(K, wrapped)``: the output width, and whether the output is a tuple or
    dict (then :class:`ScoresOf` reads the scores out of it).  Refused, each with the
    fix: a model on the ``meta`` device, a model that fails on these images, an output
    that is not ``(N, K)`` with K >= 2, NaN or infinite scores, and probabilities (each
    row in [0, 1]: a final softmax or sigmoid), because the methods need logits or
    log-probabilities.
    """
    check_model(model)
    try:
        with frozen(model):
            out = model(x[:16].to(model_device(model), dtype=model_dtype(model)))
    except Exception as err:
        raise ValueError(f"the classifier cannot take images of shape {tuple(x.shape[1:])} "
                         f"({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
                         "; pass images of the shape it was trained on") from None
    wrapped = not torch.is_tensor(out)
    out = _unwrap(out)
    if out.dim() != 2:
        raise ValueError(f"the classifier must return one score per class, shape (N, K); it "
                         f"returns {tuple(out.shape)}")
    if out.shape[1] < 2:
        raise ValueError(f"the classifier returns {out.shape[1]} score per image; a "
                         "counterfactual needs at least two classes")
    if not out.is_floating_point():
        raise ValueError(f"the classifier returns {out.dtype} scores; it must return float "
                         "logits")
    check_scores(out, f"on the first {len(out)} images")
    kind = _probability_kind(out.float())
    if kind == "softmax":
        raise ValueError("the classifier returns probabilities (each row is in [0, 1] and sums "
                         "to 1); the methods need its logits (or log-probabilities): drop the "
                         "final softmax")
    if kind == "sigmoid" and out.shape[1] > 1:
        raise ValueError("the classifier returns one-vs-rest probabilities (every score in "
                         "[0, 1], rows not summing to 1: a final sigmoid); the methods need "
                         "its logits: drop the final sigmoid (logit = log(p / (1 - p)))")
    return int(out.shape[1]), wrapped


@torch.no_grad()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = 1024,
            finite: bool = False) -> torch.Tensor:
    """Batched softmax probabilities of a classifier (evaluation mode, restored after).

    ``finite=True``: NaN or infinite scores are a ValueError (:func:`check_scores`)
    instead of NaN probabilities (what :meth:`~cflib.explainers.Explainer.explain` asks
    for its first prediction)."""
    out = []
    with frozen(model):
        dev, dt = model_device(model), model_dtype(model)
        for i in range(0, len(x), batch_size):
            s = scores(model, x[i:i + batch_size].to(dev, dtype=dt))
            if finite:
                check_scores(s, "on the query images")
            out.append(torch.softmax(s.float(), dim=1))
    return torch.cat(out)


@torch.no_grad()
def logits_on(model: nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """The model's scores on ``x`` on the CPU (evaluation mode; the caller's state restored)."""
    with frozen(model):
        dev, dt = model_device(model), model_dtype(model)
        return torch.cat([scores(model, x[i:i + batch_size].to(dev, dtype=dt)).float().cpu()
                          for i in range(0, len(x), batch_size)])


def n_classes_of(model: nn.Module, x: torch.Tensor) -> int:
    """The classifier's output width, read off one forward pass on ``x[:1]``."""
    with torch.no_grad(), frozen(model):
        return int(scores(model, x[:1].to(model_device(model), dtype=model_dtype(model)))
                   .shape[1])
