"""Reference rows scored like counterfactuals: they show each metric's range.

* ``Original Data`` (the C3LT table's row): real test images of the target class,
  what the best counterfactual could look like to a realism metric (IM1, FID, ...);
* ``Query (unchanged)`` (ours): the query itself, no change at all, what a metric
  gives an image that has not moved towards the target.

Both return their images in the classifier's dtype (float16 / bfloat16 included).
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
    needs_fit = True

    def fit(self, x_real: torch.Tensor, y_real: torch.Tensor, *,
            assume_range: bool = False) -> "OriginalData":
        """Keep the pool of real images (e.g. the test split) to draw from; they are
        returned in the classifier's dtype.  ``assume_range``: as in
        :meth:`~cflib.explainers.Explainer.explain`."""
        check_images(x_real, "x_real", assume_range=assume_range)
        y_real = torch.as_tensor(y_real).long().flatten()
        if len(y_real) != len(x_real):
            raise ValueError(f"x_real has {len(x_real)} images but y_real {len(y_real)} labels")
        return self._adopt(self._new_record({"pool_x": x_real, "pool_y": y_real}),
                           check=False)

    @property
    def pool_x(self) -> torch.Tensor | None:
        return self.fit_record.tensors["pool_x"] if self.fit_record else None

    @property
    def pool_y(self) -> torch.Tensor | None:
        return self.fit_record.tensors["pool_y"] if self.fit_record else None

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
            out[rows] = self.pool_x[pool[pick]].to(x.device, x.dtype)   # the model's dtype
        return out



class QueryUnchanged(Explainer):
    """Returns every query unchanged: the other end of each metric's range."""

    name = "Query (unchanged)"
    Config = OriginalDataConfig

    def _generate(self, x, target, query, generator):
        return x.clone()
