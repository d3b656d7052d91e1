"""``CVE``: Counterfactual Visual Explanations (Goyal et al. 2019, arXiv 1904.07451).

Goyal, Wu, Ernst, Batra, Parikh, Lee, ICML 2019.  The classifier is split into a
spatial feature extractor ``f`` (here ``classifier.features``: a 64 x 4 x 4 map for
the C3LT CNN, i.e. ``hw = 16`` cells of ``d = 64`` features) and a decision head
``g`` (``classifier.classify_features``).  For a query ``I`` of class ``c`` and a
distractor ``I'`` of the target class ``c'`` the counterfactual's features are
(Sec. 3, eq. 1)::

    f(I*) = (1 - a) o f(I) + a o P f(I'),    a in {0, 1}^hw,  P a permutation,

and the explanation is the smallest gate ``a`` (fewest replaced cells) for which
``g`` decides ``c'``.  We implement the paper's *greedy sequential exhaustive
search* (Sec. 3.1): at every step, over all pairs (query cell ``i`` not yet
replaced, distractor cell ``j`` not yet used -- ``P`` is a permutation), pick the
pair whose replacement ``f(I)[:, i] <- f(I')[:, j]`` gives the largest target
log-probability ``log g_{c'}``, apply it, and stop as soon as the decision is
``c'`` (or when ``max_edits`` cells are replaced).  All ``hw x hw`` candidates of
all (query, distractor) pairs of a batch go through the head in batched forwards.

Distractors: the paper explains a query with the distractor that needs the fewest
edits.  Searching every image of class ``c'`` is too costly, so each query gets
``n_distractors`` candidate distractors drawn from the pool images of class ``c'``
that the classifier itself predicts as ``c'`` (the paper's distractor is an image
"the system predicts as c'"): by default a seeded random draw, or (``"nearest"``)
the query's nearest neighbours in the classifier's feature space.  On MNIST
random candidates need fewer edits than nearest neighbours (3.0 vs 4.1 on 4->9
with 5 candidates): a close neighbour is itself an ambiguous, query-like image of
``c'``.  The search runs for every (query, candidate) pair at once and the
candidate with the fewest edits is kept (ties: the higher final target
log-probability; if no candidate reaches ``c'``, the one with the highest target
log-probability after ``max_edits``).

The counterfactual *image* is the query with, for each edit ``i <- j``, the image
region that distractor cell ``j`` encodes pasted at the region of query cell ``i``.
The paper shows an explanation as the highlighted grid regions of both images (its
figures cut the image into the feature map's grid); ``CVE`` does the same
(``paste="grid"``, the default): the image is cut into the map's ``h x w`` grid of
equal tiles (7 x 7-pixel tiles for 28 x 28 images and a 4 x 4 map) and tile ``j`` of
the distractor replaces tile ``i`` of the query.  ``CVE (receptive field)``
(``paste="receptive_field"``, our variant) pastes each cell's *receptive field*
instead, found once by back-propagating each cell of the feature map to the input:
for the C3LT CNN a 4 x 4-map cell ``(r, c)`` sees the 16 x 16 window of pixels
``4r .. 4r+15``, ``4c .. 4c+15``, at stride 4; windows overlap, so edits are pasted in
the order the search made them and later ones overwrite the overlap.  It changes far
more pixels and flips the decision far more often.  Either way the image is a
visualisation of the feature-level explanation, not an image the search optimised:
its validity is whatever the classifier says about it (the C3LT paper reports 0.23
on MNIST) and nothing forces it.  ``explain`` records in ``meta`` the number of edits
per image (``n_edits``, and their mean ``mean_edits``), the feature-level success
(``feature_success``, mean ``feature_validity``) and the chosen pool image
(``distractor``).

Half precision: a float16 / bfloat16 classifier runs in its own dtype (the pool's
features, the search's candidates and the pasted images are in it); the search is
greedy and keeps no optimiser state, so nothing is kept in float32.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from cflib.explainers.base import Explainer, ExplainerConfig, check_images, model_dtype
from cflib.progress import progress
from cflib.scopes import frozen

_SELECTIONS = ("nearest", "random")
_PASTES = ("receptive_field", "grid")


@dataclass(frozen=True)
class CVEConfig(ExplainerConfig):
    n_distractors: int = 10           # candidate distractors per query; the fewest-edit one is kept
    max_edits: int = 16               # cap on greedy steps (16 = every cell of the 4x4 map)
    distractor_selection: str = "random"   # "random" (seeded draw) or "nearest" (feature space)
    search_chunk: int = 128           # (query, distractor) pairs whose hw*hw candidates share one head forward
    paste: str = "grid"               # image region of a cell: "grid" tiles, or its "receptive_field"

    def __post_init__(self):
        super().__post_init__()
        if self.n_distractors < 1 or self.max_edits < 1 or self.search_chunk < 1:
            raise ValueError("n_distractors, max_edits and search_chunk must be at least 1")
        if self.distractor_selection not in _SELECTIONS:
            raise ValueError(f"distractor_selection must be one of {_SELECTIONS}, "
                             f"got {self.distractor_selection!r}")
        if self.paste not in _PASTES:
            raise ValueError(f"paste must be one of {_PASTES}, got {self.paste!r}")


class CVE(Explainer):
    """Counterfactual Visual Explanations on the classifier's spatial feature map.

    Call :meth:`fit` with a pool of images (the factory passes the TRAIN images of
    the target class) to draw distractors from.
    """

    name = "CVE"
    Config = CVEConfig
    needs_fit = True  # needs a distractor pool (nothing is trained)

    def __init__(self, classifier: nn.Module, config: CVEConfig | None = None, **kwargs):
        super().__init__(classifier, config, **kwargs)
        for attr in ("features", "classify_features"):
            if not callable(getattr(classifier, attr, None)):
                raise TypeError(f"CVE needs a classifier with a .{attr}() method "
                                "(e.g. cflib.models.C3LTClassifier)")
        self._windows: tuple | None = None   # receptive fields, computed once per image shape

    # -- the distractor pool ---------------------------------------------------------------

    @torch.no_grad()
    def fit(self, x_pool: torch.Tensor, y_pool, *, assume_range: bool = False) -> "CVE":
        """Keep the pool of candidate distractors: images whose label the classifier
        also predicts (a distractor is an image the system predicts as ``c'``), in the
        classifier's dtype.  ``assume_range``: as in
        :meth:`~cflib.explainers.Explainer.explain`."""
        check_images(x_pool, "x_pool", assume_range=assume_range)
        y_pool = torch.as_tensor(y_pool).long().flatten()
        if len(y_pool) != len(x_pool):
            raise ValueError(f"x_pool has {len(x_pool)} images but y_pool {len(y_pool)} labels")
        dev, dt = self.device, model_dtype(self.classifier)
        feats, preds = [], []
        bs = self.config.batch_size
        with frozen(self.classifier):
            for i in range(0, len(x_pool), bs):
                f = self.classifier.features(x_pool[i:i + bs].to(dev, dt))
                feats.append(f)
                preds.append(self.classifier.classify_features(f).argmax(1))
        feats, preds = torch.cat(feats), torch.cat(preds)
        keep = (preds == y_pool.to(dev)).nonzero().squeeze(1)
        if len(keep) == 0:
            raise ValueError("the classifier predicts the label of none of the pool images; "
                             "pass correctly classified images of the target class to fit()")
        return self._adopt(self._new_record({
            "pool_index": keep.cpu(),              # row in the x_pool given to fit()
            "pool_x": x_pool[keep.cpu()].to(dev, dt),
            "pool_y": y_pool[keep.cpu()].to(dev),
            "pool_f": feats[keep],                 # the classifier's features of the pool
        }), check=False)

    def _pool(self, name: str) -> torch.Tensor | None:
        return self.fit_record.tensors[name] if self.fit_record else None

    pool_index = property(lambda self: self._pool("pool_index"),
                          doc="Each distractor's row in the pool given to :meth:`fit`.")
    pool_x = property(lambda self: self._pool("pool_x"), doc="The distractor images.")
    pool_y = property(lambda self: self._pool("pool_y"), doc="Their labels.")
    pool_f = property(lambda self: self._pool("pool_f"),
                      doc="The classifier's feature maps of the distractors.")

    def _candidates(self, fq: torch.Tensor, target: torch.Tensor,
                    generator: torch.Generator | None) -> torch.Tensor:
        """(n, K) pool rows of class ``target`` per query: nearest in feature space or random."""
        in_class = self.pool_y[None, :] == target[:, None]            # (n, P)
        missing = (~in_class.any(1)).nonzero().squeeze(1)
        if len(missing):
            raise ValueError(f"no distractor of class {target[missing[0]].item()} in the pool "
                             "given to fit() (pass correctly classified target-class images)")
        if self.config.distractor_selection == "nearest":
            score = -torch.cdist(fq.flatten(1), self.pool_f.flatten(1))
        else:
            g = generator if generator is not None else torch.Generator().manual_seed(0)
            score = torch.rand(in_class.shape, generator=g).to(fq.device)
        score = score.masked_fill(~in_class, float("-inf"))
        k = min(self.config.n_distractors, self.pool_y.shape[0])
        top, idx = score.topk(k, dim=1)
        # a class with fewer than K pool images: repeat its best candidate (same result)
        return torch.where(torch.isfinite(top), idx, idx[:, :1])

    # -- the greedy sequential exhaustive search (Sec. 3.1) --------------------------------

    def _linear_head(self):
        """``(first Linear, rest of the head)`` when the head is the C3LT one
        (Flatten, Linear, ...), else None."""
        from cflib.models.classifier import C3LTClassifier

        clf = self.classifier
        head = getattr(clf, "head", None)
        if (type(clf).classify_features is C3LTClassifier.classify_features
                and isinstance(head, nn.Sequential) and len(head) >= 2
                and isinstance(head[0], nn.Flatten) and isinstance(head[1], nn.Linear)):
            return head[1], head[2:]
        return None

    def _candidate_logp(self, f: torch.Tensor, fd: torch.Tensor, target: torch.Tensor,
                        shape) -> torch.Tensor:
        """``log g_{c'}`` of every single-cell edit: (b, Li, Lj) for maps (b, d, L).

        Candidate (i, j) is ``f`` with cell i replaced by cell j of ``fd``.  With the
        C3LT head (Flatten, Linear, ...) the first layer is linear in the map, so its
        output for candidate (i, j) is ``h - W_i f_i + W_i fd_j`` (``W_i`` the columns of
        cell i): the same numbers as the full forward at a sixteenth of the cost.
        Any other head gets the full forward of all ``L * L`` edited maps.
        """
        b, d, L = f.shape
        lin = self._linear_head()
        if lin is not None:
            first, rest = lin
            # cell-major contiguous layouts keep these batched matmuls fast on the CPU
            w = first.weight.view(-1, d, L).permute(2, 1, 0).contiguous()  # (L, d, hid): W_i^T
            h = first(f.flatten(1))                                        # (b, hid)
            wq = torch.bmm(f.permute(2, 0, 1).contiguous(), w)            # (Li, b, hid): W_i f_i
            wd = torch.matmul(fd.transpose(1, 2).reshape(1, b * L, d), w)  # (Li, b*Lj, hid): W_i fd_j
            pre = wd.view(L, b, L, -1) + (h[None] - wq)[:, :, None, :]     # (Li, b, Lj, hid)
            logits = rest(pre.view(L * b * L, -1))
            t = target.repeat_interleave(L)[None].expand(L, -1).reshape(-1)
            logp = torch.log_softmax(logits, 1).gather(1, t[:, None]).view(L, b, L)
            return logp.permute(1, 0, 2)                                   # (b, Li, Lj)
        cand = f[:, None, None].expand(b, L, L, d, L).clone()              # (b, Li, Lj, d, L)
        src = fd.transpose(1, 2)                                           # (b, Lj, d)
        for cell in range(L):
            cand[:, cell, :, :, cell] = src
        logits = self.classifier.classify_features(cand.reshape(b * L * L, *shape))
        t = target.repeat_interleave(L * L)
        logp = torch.log_softmax(logits, 1).gather(1, t[:, None]).squeeze(1)
        return logp.view(b, L, L)

    @torch.no_grad()
    def _search(self, fq: torch.Tensor, fd: torch.Tensor, target: torch.Tensor, grid):
        """Greedy search for B (query, distractor) pairs of flat maps (B, d, hw).

        Returns ``order`` (B, max_edits): the query cell edited at each step (-1: no
        edit), ``assign`` (B, hw): the distractor cell pasted into each query cell
        (-1: kept), ``n_edits`` (B,), feature-level ``success`` (B,) and the final
        target log-probability (B,).
        """
        B, d, L = fq.shape
        shape = (d,) + tuple(grid)
        dev = fq.device
        f = fq.clone()
        assign = torch.full((B, L), -1, dtype=torch.long, device=dev)
        used_d = torch.zeros(B, L, dtype=torch.bool, device=dev)
        n_edits = torch.zeros(B, dtype=torch.long, device=dev)
        steps = min(self.config.max_edits, L)
        order = torch.full((B, steps), -1, dtype=torch.long, device=dev)
        logits = self.classifier.classify_features(f.reshape(B, *shape))
        done = logits.argmax(1) == target
        logp = torch.log_softmax(logits, 1).gather(1, target[:, None]).squeeze(1)
        for step in progress(range(steps), desc=f"{self.name} edits"):
            active = (~done).nonzero().squeeze(1)
            if len(active) == 0:
                break
            for s in range(0, len(active), self.config.search_chunk):
                a = active[s:s + self.config.search_chunk]
                b = len(a)
                cl = self._candidate_logp(f[a], fd[a], target[a], shape)
                cl = cl.masked_fill((assign[a] >= 0)[:, :, None], float("-inf"))
                cl = cl.masked_fill(used_d[a][:, None, :], float("-inf"))
                best = cl.flatten(1).argmax(1)
                i, j = best // L, best % L
                f[a, :, i] = fd[a, :, j]
                assign[a, i] = j
                order[a, step] = i
                used_d[a, j] = True
                n_edits[a] += 1
                logits = self.classifier.classify_features(f[a].reshape(b, *shape))
                done[a] = logits.argmax(1) == target[a]
                logp[a] = torch.log_softmax(logits, 1).gather(1, target[a, None]).squeeze(1)
        return order, assign, n_edits, done, logp

    # -- counterfactual images ---------------------------------------------------------------

    @staticmethod
    def _paste_grid(xq: torch.Tensor, xd: torch.Tensor, assign: torch.Tensor, grid) -> torch.Tensor:
        """Paste the grid tile of distractor cell ``j`` at query cell ``i`` for every edit."""
        n, c, H, W = xq.shape
        h, w = grid
        ph, pw = H // h, W // w

        def cells(img):  # (n, c, H, W) -> (n, hw, c, ph, pw), row-major like the feature map
            return img.reshape(n, c, h, ph, w, pw).permute(0, 2, 4, 1, 3, 5).reshape(n, h * w, c, ph, pw)

        pq, pd = cells(xq), cells(xd)
        src = pd.gather(1, assign.clamp(min=0)[:, :, None, None, None].expand_as(pd))
        out = torch.where((assign >= 0)[:, :, None, None, None], src, pq)
        return out.reshape(n, h, w, c, ph, pw).permute(0, 3, 1, 4, 2, 5).reshape(n, c, H, W)

    def receptive_fields(self, image_shape) -> torch.Tensor:
        """``(h*w, 4)`` integer boxes ``(top, left, bottom, right)`` (exclusive ends):
        the input pixels each cell of the feature map depends on.

        Found by back-propagating every cell to a batch of random inputs (the union
        of non-zero gradients), once per image shape; for the C3LT CNN and 28 x 28
        images, cell ``(r, c)`` gets ``(4r, 4c, 4r + 16, 4c + 16)``.
        """
        if self._windows is not None and self._windows[0] == tuple(image_shape):
            return self._windows[1]
        clf, dev = self.classifier, self.device
        g = torch.Generator().manual_seed(0)
        x = (torch.rand((8,) + tuple(image_shape), generator=g) * 2 - 1).to(
            dev, model_dtype(clf)).requires_grad_(True)
        with torch.enable_grad(), frozen(clf):
            f = clf.features(x)
            _, _, h, w = f.shape
            boxes = []
            for cell in range(h * w):
                grad, = torch.autograd.grad(f[:, :, cell // w, cell % w].sum(), x,
                                            retain_graph=cell < h * w - 1)
                hit = grad.abs().sum((0, 1)) > 0                         # (H, W)
                rows, cols = hit.any(1).nonzero().flatten(), hit.any(0).nonzero().flatten()
                if len(rows) == 0:
                    raise ValueError(f"cell {cell} of the feature map depends on no input "
                                     "pixel; use paste='grid'")
                boxes.append([rows.min().item(), cols.min().item(),
                              rows.max().item() + 1, cols.max().item() + 1])
        boxes = torch.tensor(boxes, dtype=torch.long)
        self._windows = (tuple(image_shape), boxes)
        return boxes

    def _paste_receptive(self, xq: torch.Tensor, xd: torch.Tensor, order: torch.Tensor,
                         assign: torch.Tensor) -> torch.Tensor:
        """Paste, edit by edit, distractor window ``j`` over query window ``i``.

        The source pixel of target pixel ``p`` in window ``i`` is ``p - (top_i - top_j,
        left_i - left_j)``; target pixels whose source falls outside the image (clipped
        windows of a padded network) keep the query's value.
        """
        n, c, H, W = xq.shape
        boxes = self.receptive_fields(xq.shape[1:]).to(xq.device)
        rr = torch.arange(H, device=xq.device)[None, :, None]
        cc = torch.arange(W, device=xq.device)[None, None, :]
        out = xq.clone()
        flat_d = xd.reshape(n, c, H * W)
        for step in range(order.shape[1]):
            i = order[:, step]
            edit = i >= 0
            if not edit.any():
                break
            i = i.clamp(min=0)
            j = assign.gather(1, i[:, None]).squeeze(1).clamp(min=0)
            bi, bj = boxes[i], boxes[j]                                        # (n, 4)
            dr, dc = (bi[:, 0] - bj[:, 0])[:, None, None], (bi[:, 1] - bj[:, 1])[:, None, None]
            inside = ((rr >= bi[:, 0, None, None]) & (rr < bi[:, 2, None, None])
                      & (cc >= bi[:, 1, None, None]) & (cc < bi[:, 3, None, None]))
            sr, sc = rr - dr, cc - dc
            ok = inside & (sr >= 0) & (sr < H) & (sc >= 0) & (sc < W) & edit[:, None, None]
            src = (sr.clamp(0, H - 1) * W + sc.clamp(0, W - 1)).reshape(n, 1, H * W)
            moved = flat_d.gather(2, src.expand(n, c, H * W)).view(n, c, H, W)
            out = torch.where(ok[:, None], moved, out)
        return out

    @torch.no_grad()
    def _generate(self, x, target, query, generator):
        cfg = self.config
        out = torch.empty_like(x)
        n_edits = torch.empty(len(x), dtype=torch.long)
        success = torch.empty(len(x), dtype=torch.bool)
        chosen = torch.empty(len(x), dtype=torch.long)
        for s in range(0, len(x), cfg.batch_size):
            xb, tb = x[s:s + cfg.batch_size], target[s:s + cfg.batch_size]
            fq = self.classifier.features(xb)
            n, d, h, w = fq.shape
            H, W = xb.shape[-2:]
            if cfg.paste == "grid" and (H % h or W % w):   # fail before the search, not after
                raise ValueError(f"paste='grid' cuts the image into the {h}x{w} feature grid; "
                                 f"the image size {H}x{W} must be a multiple of it")
            idx = self._candidates(fq, tb, generator)                     # (n, K)
            K = idx.shape[1]
            fd = self.pool_f[idx.flatten()].flatten(2)                    # (n*K, d, hw)
            order, assign, edits, ok, logp = self._search(
                fq.flatten(2).repeat_interleave(K, 0), fd, tb.repeat_interleave(K), (h, w))
            # the distractor needing the fewest edits; ties: higher target log-probability
            key = (~ok).double() * 1e6 + edits.double() * 1e3 - logp.double().clamp(-500, 0)
            pick = key.view(n, K).argmin(1)
            rows = torch.arange(n, device=x.device) * K + pick
            best = idx[torch.arange(n, device=x.device), pick]
            if cfg.paste == "grid":
                out[s:s + n] = self._paste_grid(xb, self.pool_x[best], assign[rows], (h, w))
            else:
                out[s:s + n] = self._paste_receptive(xb, self.pool_x[best], order[rows], assign[rows])
            n_edits[s:s + n] = edits[rows].cpu()
            success[s:s + n] = ok[rows].cpu()
            chosen[s:s + n] = self.pool_index.cpu()[best.cpu()]
        return out, {"n_edits": n_edits, "mean_edits": n_edits.float().mean().item(),
                     "feature_success": success,
                     "feature_validity": success.float().mean().item(),
                     "distractor": chosen}


@dataclass(frozen=True)
class CVEReceptiveFieldConfig(CVEConfig):
    paste: str = "receptive_field"


class CVEReceptiveField(CVE):
    """``CVE (receptive field)``: the same search, each edited cell's receptive field
    pasted instead of its grid tile (our variant)."""

    name = "CVE (receptive field)"
    Config = CVEReceptiveFieldConfig
