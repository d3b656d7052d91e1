"""``Original Data``: real target-class images scored like counterfactuals.

The reference row of the C3LT table: the best a realism metric (IM1, FID, ...)
can do is what real images of the target class get.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from cflib.explainers.base import Explainer, ExplainerConfig, check_images


@dataclass(frozen=True)
class OriginalDataConfig(ExplainerConfig):
    pass


class OriginalData(Explainer):
    """Returns, for each query, a real test image of the target class (drawn with the seed)."""

    name = "Original Data"
    Config = OriginalDataConfig
    learned = True

    def fit(self, x_real: torch.Tensor, y_real: torch.Tensor) -> "OriginalData":
        """Keep the pool of real images (e.g. the test split) to draw from."""
        check_images(x_real, "x_real")
        self.pool_x = x_real
        self.pool_y = torch.as_tensor(y_real).long()
        self.fitted = True
        return self

    def _generate(self, x, target, query, generator):
        out = torch.empty_like(x)
        g = generator if generator is not None else torch.Generator().manual_seed(0)
        for c in target.unique().tolist():
            rows = (target == c).nonzero().squeeze(1)
            pool = (self.pool_y == c).nonzero().squeeze(1)
            if len(pool) == 0:
                raise ValueError(f"no real image of class {c} in the pool given to fit()")
            replace = len(pool) < len(rows)
            pick = (torch.randint(len(pool), (len(rows),), generator=g) if replace
                    else torch.randperm(len(pool), generator=g)[:len(rows)])
            out[rows] = self.pool_x[pool[pick]].to(x.device)
        return out


def from_profile(classifier, dataset, pair, profile, seed: int = 0, pool=None) -> OriginalData:
    """Original Data drawing from ``pool`` = (x, y) (default: the dataset's test split)."""
    from cflib.data import load_split

    x, y = pool if pool is not None else load_split(dataset, "test")
    return OriginalData(classifier).fit(x, y)
