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


def test_the_judges_noise_augmentation_draws_one_radius_per_image_up_to_the_probes():
    from cflib.bench.tuning import sign_noised

    x = torch.zeros(400, 1, 6, 6)
    noisy = sign_noised(x, torch.Generator().manual_seed(0))
    radius = noisy.abs().flatten(1)
    # one radius per image: every pixel moved by the same amount, in either direction
    assert torch.allclose(radius.max(1).values, radius.min(1).values)
    assert radius.max() <= SINK_EPS and radius.min() >= 0
    # drawn across (0, SINK_EPS): both halves of the range are met
    r = radius[:, 0]
    assert (r < SINK_EPS / 4).any() and (r > 3 * SINK_EPS / 4).any()
    signs = torch.sign(noisy[r > 0.05])
    assert 0.4 < (signs > 0).float().mean() < 0.6
    # clamped to the images' range; seeded
    edge = sign_noised(torch.full((50, 1, 2, 2), 0.95), torch.Generator().manual_seed(1))
    assert edge.max() <= 1 and edge.min() >= 0.95 - SINK_EPS
    again = sign_noised(x, torch.Generator().manual_seed(0))
    assert torch.equal(again, noisy)
