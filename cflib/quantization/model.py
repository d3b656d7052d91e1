"""``QuantSmallCNN``: the fake-quantized SmallCNN of the public code of Yahyati et al. (2026).

The same layers as :class:`cflib.models.SmallCNN`, with the FP weights copied in, in
module order (the code's ``copy_fp_to_quantized``).  Seven quantizers: the four weight
tensors (symmetric per tensor) and the activations after pool1, after pool2 and after
fc1's ReLU (unsigned).  The input, the biases and the logits are never quantized.
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from cflib.quantization.fake import BIT_CHOICES, INIT_MODES, Quantizer, bit_cost, check_bit_set

#: the expected FP layout, named in the TypeError for other architectures
SMALL_CNN_LAYOUT = ("SmallCNN: features = [Conv2d(1, 32, 3, padding=1), ReLU, MaxPool2d(2), "
                    "Conv2d(32, 64, 3, padding=1), ReLU, MaxPool2d(2)], classifier = [Flatten, "
                    "Linear(3136, width), ReLU, Linear(width, n_classes)]")
#: quantizer names as the bits table spells them
WEIGHT_NAMES = ("conv1.w", "conv2.w", "fc1.w", "fc2.w")
ACT_NAMES = ("act1", "act2", "act3")


def _layout_error(model: nn.Module, where: str, found) -> TypeError:
    return TypeError(f"QuantSmallCNN.from_fp needs a SmallCNN; {type(model).__name__} has "
                     f"{where} = {found} where the layout expects otherwise. Expected "
                     f"{SMALL_CNN_LAYOUT}")


def check_small_cnn(model: nn.Module) -> tuple[nn.Conv2d, nn.Conv2d, nn.Linear, nn.Linear]:
    """The four weight layers of a SmallCNN, in module order, or a TypeError naming the
    first module that does not fit the layout."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"QuantSmallCNN.from_fp needs a SmallCNN module, got "
                        f"{type(model).__name__}. Expected {SMALL_CNN_LAYOUT}")
    children = dict(model.named_children())
    for name, child in children.items():
        if name not in ("features", "classifier"):
            raise _layout_error(model, f"module {name!r}", type(child).__name__)
    expected = {
        "features": [(nn.Conv2d, (1, 32)), (nn.ReLU, None), (nn.MaxPool2d, None),
                     (nn.Conv2d, (32, 64)), (nn.ReLU, None), (nn.MaxPool2d, None)],
        "classifier": [(nn.Flatten, None), (nn.Linear, (3136, None)), (nn.ReLU, None),
                       (nn.Linear, (None, None))],
    }
    for part, layers in expected.items():
        seq = children.get(part)
        if not isinstance(seq, nn.Sequential) or len(seq) != len(layers):
            found = ("missing" if seq is None else f"a Sequential of {len(seq)} modules"
                     if isinstance(seq, nn.Sequential) else type(seq).__name__)
            raise _layout_error(model, f"module {part!r}", found)
        for i, ((cls, shape), layer) in enumerate(zip(layers, seq)):
            if type(layer) is not cls:
                raise _layout_error(model, f"module '{part}.{i}'", repr(layer))
            if isinstance(layer, nn.Conv2d):
                ok = ((layer.in_channels, layer.out_channels) == shape
                      and layer.kernel_size == (3, 3) and layer.padding == (1, 1)
                      and layer.stride == (1, 1) and layer.bias is not None)
            elif isinstance(layer, nn.Linear):
                ok = layer.bias is not None and (shape[0] is None or layer.in_features == shape[0])
            elif isinstance(layer, nn.MaxPool2d):
                ok = layer.kernel_size == 2
            else:
                ok = True
            if not ok:
                raise _layout_error(model, f"module '{part}.{i}'", repr(layer))
    f, c = children["features"], children["classifier"]
    if c[1].out_features != c[3].in_features:
        raise _layout_error(model, "module 'classifier.3'", repr(c[3]))
    return f[0], f[3], c[1], c[3]


class QuantSmallCNN(nn.Module):
    """SmallCNN with seven fake quantizers (four weight, three activation).

    ``bits`` are the candidate widths of every quantizer's policy, ``init_bit`` the one
    it starts on, ``fixed_bits`` a width used by every quantizer (PTQ).  Build it from
    a trained FP model with :meth:`from_fp`; a bare instance (random weights) is what
    the weight cache loads a trained one into.
    """

    def __init__(self, n_classes: int = 10, width: int = 64,
                 bits: Sequence[int] = BIT_CHOICES, init_bit: int = 4,
                 fixed_bits: int | None = None):
        super().__init__()
        self.bits = check_bit_set(bits, init_bit, fixed_bits)
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, width)
        self.fc2 = nn.Linear(width, n_classes)
        self.weight_quantizers = nn.ModuleDict(
            {n.replace(".w", ""): Quantizer("weight", self.bits, init_bit, fixed_bits)
             for n in WEIGHT_NAMES})
        self.act_quantizers = nn.ModuleDict(
            {n: Quantizer("act", self.bits, init_bit, fixed_bits) for n in ACT_NAMES})

    # -- construction -----------------------------------------------------------------------
    @classmethod
    def from_fp(cls, fp: nn.Module, bits: Sequence[int] = BIT_CHOICES, init_bit: int = 4,
                fixed_bits: int | None = None, *, calib_x: torch.Tensor | None = None,
                init: str = "mse", grid: int = 40, enabled: bool = True) -> "QuantSmallCNN":
        """A QuantSmallCNN holding a copy of ``fp``'s weights (``fp`` is not changed).

        ``init="mse"`` sets every step and clip by the MSE grid search (deviation (a));
        the activation clips need calibration images ``calib_x``.  ``init="repo"`` is the
        code's rule.  ``enabled=False`` turns every quantizer off: the logits are then
        exactly ``fp``'s.  A model that is not a SmallCNN raises a TypeError naming the
        module that does not fit.
        """
        conv1, conv2, fc1, fc2 = check_small_cnn(fp)
        if init not in INIT_MODES:
            raise ValueError(f"init must be one of {INIT_MODES}, got {init!r}")
        q = cls(fc2.out_features, fc1.out_features, bits, init_bit, fixed_bits)
        q.to(conv1.weight.device)
        q.load_fp(fp)
        q.initialise(calib_x, init, grid)
        q.set_enabled(enabled)
        return q

    @torch.no_grad()
    def load_fp(self, fp: nn.Module) -> "QuantSmallCNN":
        """Copy the weights and biases of a SmallCNN in module order."""
        for src, dst in zip(check_small_cnn(fp), (self.conv1, self.conv2, self.fc1, self.fc2)):
            if src.weight.shape != dst.weight.shape:
                raise TypeError(f"cannot copy {src} into {dst}: shapes differ. Expected "
                                f"{SMALL_CNN_LAYOUT}")
            dst.weight.copy_(src.weight)
            dst.bias.copy_(src.bias)
        return self

    @torch.no_grad()
    def fp_activations(self, x: torch.Tensor, batch_size: int = 256) -> dict[str, torch.Tensor]:
        """The unquantized inputs of the three activation quantizers on ``x``."""
        out: dict[str, list] = {n: [] for n in ACT_NAMES}
        dev = self.conv1.weight.device
        for i in range(0, len(x), batch_size):
            h = F.max_pool2d(F.relu(self.conv1(x[i:i + batch_size].to(dev))), 2)
            out["act1"].append(h)
            h = F.max_pool2d(F.relu(self.conv2(h)), 2)
            out["act2"].append(h)
            out["act3"].append(F.relu(self.fc1(h.flatten(1))))
        return {n: torch.cat(v) for n, v in out.items()}

    @torch.no_grad()
    def initialise(self, calib_x: torch.Tensor | None, init: str = "mse",
                   grid: int = 40) -> "QuantSmallCNN":
        """Steps and clips of every quantizer and candidate width (see :meth:`from_fp`)."""
        if init == "mse" and calib_x is None:
            raise ValueError("MSE initialisation of the activation clips needs calibration "
                             "images: pass calib_x (e.g. the validation images) or init='repo'")
        if init == "mse" and len(calib_x) == 0:
            raise ValueError("the calibration set is empty; pass at least one image")
        layers = dict(zip(self.weight_quantizers, (self.conv1, self.conv2, self.fc1, self.fc2)))
        for name, q in self.weight_quantizers.items():
            q.initialise(layers[name].weight, init, grid)
        acts = self.fp_activations(calib_x) if init == "mse" else {}
        for name, q in self.act_quantizers.items():
            q.initialise(acts.get(name), init, grid)
        return self

    # -- forward ----------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wq, aq = self.weight_quantizers, self.act_quantizers
        h = F.conv2d(x, wq["conv1"](self.conv1.weight), self.conv1.bias, padding=1)
        h = aq["act1"](F.max_pool2d(F.relu(h), 2))
        h = F.conv2d(h, wq["conv2"](self.conv2.weight), self.conv2.bias, padding=1)
        h = aq["act2"](F.max_pool2d(F.relu(h), 2))
        h = F.relu(F.linear(h.flatten(1), wq["fc1"](self.fc1.weight), self.fc1.bias))
        h = aq["act3"](h)
        return F.linear(h, wq["fc2"](self.fc2.weight), self.fc2.bias)

    # -- the quantizers ---------------------------------------------------------------------
    def quantizers(self) -> dict[str, Quantizer]:
        """Name -> quantizer, names as in the bits table (``conv1.w`` ... ``act3``)."""
        return {**{f"{k}.w": q for k, q in self.weight_quantizers.items()},
                **dict(self.act_quantizers.items())}

    def weight_layers(self) -> dict[str, nn.Module]:
        return {"conv1": self.conv1, "conv2": self.conv2, "fc1": self.fc1, "fc2": self.fc2}

    def set_enabled(self, enabled: bool) -> "QuantSmallCNN":
        for q in self.quantizers().values():
            q.enabled = bool(enabled)
        return self

    def set_temperature(self, tau: float) -> "QuantSmallCNN":
        for q in self.quantizers().values():
            q.temperature.fill_(float(tau))
        return self

    def scale_parameters(self) -> list[nn.Parameter]:
        """The raw steps and clips (what PTQ calibration trains)."""
        return [q.raw for q in self.quantizers().values()]

    def policy_parameters(self) -> list[nn.Parameter]:
        return [q.logits for q in self.quantizers().values()]

    def bit_cost(self) -> torch.Tensor:
        """The code's bit cost of the latest forward pass's selections (see
        :func:`cflib.quantization.fake.bit_cost`)."""
        layers = self.weight_layers()
        return bit_cost([(q, layers[k].weight.numel()) for k, q in self.weight_quantizers.items()],
                        list(self.act_quantizers.values()))

    def bit_allocation(self) -> dict[str, int]:
        """The width each quantizer uses in evaluation."""
        return {n: q.chosen_bits() for n, q in self.quantizers().items()}

    def bit_summary(self) -> dict[str, float]:
        """Average weight bits (parameter-weighted), average activation bits and the bit
        cost (their 1/2-1/2 mix) of the evaluation allocation."""
        alloc, layers = self.bit_allocation(), self.weight_layers()
        n = {k: layers[k].weight.numel() for k in layers}
        w = sum(alloc[f"{k}.w"] * n[k] for k in n) / sum(n.values())
        a = sum(alloc[k] for k in ACT_NAMES) / len(ACT_NAMES)
        return {"avg_weight_bits": float(w), "avg_act_bits": float(a),
                "bit_cost": float(0.5 * w + 0.5 * a)}

    def sparsity(self) -> float:
        """Share of exactly-zero entries over the four weight tensors."""
        ws = [m.weight for m in self.weight_layers().values()]
        return float(sum((w == 0).sum().item() for w in ws) / sum(w.numel() for w in ws))
