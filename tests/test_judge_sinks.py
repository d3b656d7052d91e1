"""The sink probe of the judges (`python -m cflib.bench.tuning judge_sinks`), as functions
on networks built to have a sink and not to."""
import torch
from torch import nn

from cflib.bench.tuning import SINK_EPS, sink_probes, sink_share


class Constant(nn.Module):
    """Class ``c`` for every image: a sink of share 1."""

    def __init__(self, c: int, n: int = 10):
        super().__init__()
        self.c, self.n = c, n

    def forward(self, x):
        out = torch.zeros(len(x), self.n)
        out[:, self.c] = 1
        return out


class MeanBins(nn.Module):
    """Class = the image's first pixel binned into ten: no sink on uniform noise."""

    def forward(self, x):
        b = ((x.flatten(1)[:, 0] + 1) / 2 * 10).clamp(0, 9).long()
        return nn.functional.one_hot(b, 10).float()


def test_a_network_with_a_sink_shows_it_and_one_without_does_not():
    x = torch.rand(500, 1, 28, 28) * 2 - 1
    probes = sink_probes(x, seed=3)
    assert sink_share(Constant(8), probes["sign noise"]) == (8, 1.0)
    c, share = sink_share(MeanBins(), probes["uniform noise"])
    assert share < 0.2


def test_the_probes_are_the_attacks_noise_on_the_images_and_uniform_noise():
    x = torch.zeros(50, 1, 28, 28)
    probes = sink_probes(x, seed=0)
    sign = probes["sign noise"]
    assert sign.shape == x.shape
    assert torch.allclose(sign.unique(), torch.tensor([-SINK_EPS, SINK_EPS]))
    assert probes["uniform noise"].min() >= -1 and probes["uniform noise"].max() <= 1
    near_edge = sink_probes(torch.full((4, 1, 2, 2), 0.9), seed=0)["sign noise"]
    assert near_edge.max() <= 1                     # clamped to the images' range
    assert torch.equal(sink_probes(x, seed=0)["uniform noise"], probes["uniform noise"])
