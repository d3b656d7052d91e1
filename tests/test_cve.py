import pytest
import torch

from cflib.explainers.cve import CVE


@pytest.fixture(scope="module")
def split(bars):
    x, y = bars
    xq = x[y == 0][:12]
    return xq, x[y == 1], y[y == 1]


@pytest.fixture(scope="module")
def result(tiny_classifier, split):
    xq, xp, yp = split
    ex = CVE(tiny_classifier, n_distractors=3, paste="receptive_field").fit(xp, yp)
    return ex, ex.explain(xq, target=1, seed=0)


def _changed_cells(x_cf, xq):
    """(N, 16) mask of the 7x7 patches where the counterfactual differs from the query."""
    diff = (x_cf != xq).reshape(len(xq), 1, 4, 7, 4, 7).permute(0, 2, 4, 1, 3, 5)
    return diff.reshape(len(xq), 16, -1).any(2)


def test_cve_feature_search_reaches_target(result):
    ex, cf = result
    edits = cf.meta["n_edits"]
    assert cf.meta["feature_success"].float().mean() >= 0.9
    assert cf.meta["feature_validity"] >= 0.9
    assert edits.shape == (len(cf),)
    assert (edits >= 1).all() and (edits <= 16).all()
    # the number of edits against a hand count: test_cve_replaces_the_fewest_cells_...
    assert not hasattr(ex, "last_n_edits")   # per-call results are returned, not stored


class CellCounter(torch.nn.Module):
    """A CVE-shaped classifier on 28x28 images: its feature map is the 4x4 grid of 7x7 tile
    means, its head says class 1 when the cells sum above -11.  A black query sums to -16;
    each white (+1) cell pasted in adds 2, so exactly 3 edits flip it (-16 + 6 > -11)."""

    def __init__(self):
        super().__init__()
        self.head = torch.nn.Linear(16, 2)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.weight[1] = 1.0
            self.head.bias.copy_(torch.tensor([0.0, 11.0]))
        self.requires_grad_(False)

    def features(self, x):
        return torch.nn.functional.avg_pool2d(x, 7)

    def classify_features(self, f):
        return self.head(f.flatten(1))

    def forward(self, x):
        return self.classify_features(self.features(x))


def _white_tiles(n, tiles):
    x = torch.full((n, 1, 28, 28), -1.0)
    for t in tiles:
        r, c = divmod(t, 4)
        x[:, :, 7 * r:7 * r + 7, 7 * c:7 * c + 7] = 1.0
    return x


def test_cve_replaces_the_fewest_cells_that_flip_the_head():
    """Hand count: 3 edits for every query, the image is the query with 3 of the
    distractor's white tiles pasted in (and nothing else changed)."""
    model = CellCounter()
    xq = _white_tiles(3, [])
    pool = _white_tiles(4, [0, 5, 10, 15])                 # 4 white tiles: class 1 (-8 > -11)
    assert model(xq).argmax(1).tolist() == [0] * 3 and model(pool).argmax(1).tolist() == [1] * 4
    cf = CVE(model, n_distractors=2).fit(pool, torch.ones(4)).explain(xq, 1, seed=0)
    assert cf.meta["n_edits"].tolist() == [3, 3, 3] and cf.meta["mean_edits"] == 3.0
    assert cf.meta["feature_success"].all() and cf.meta["feature_validity"] == 1.0
    white = (cf.x_cf == 1.0).flatten(1).sum(1)
    assert white.tolist() == [3 * 49] * 3                  # three whole tiles ...
    assert ((cf.x_cf == 1.0) | (cf.x_cf == -1.0)).all()     # ... and the rest as it was
    assert cf.validity == 1.0                               # the pasted image flips as well


def test_cve_grid_paste_copies_distractor_tiles(tiny_classifier, split):
    xq, xp, yp = split
    ex = CVE(tiny_classifier, n_distractors=3, paste="grid").fit(xp, yp)
    cf = ex.explain(xq, target=1, seed=0)
    changed = _changed_cells(cf.x_cf, xq)
    # only inside pasted patches: at most one patch per edit
    assert (changed.sum(1) <= cf.meta["n_edits"]).all()
    # each changed patch is a 7x7 patch of the chosen distractor image
    d = xp[cf.meta["distractor"]]
    dp = d.reshape(len(d), 1, 4, 7, 4, 7).permute(0, 2, 4, 1, 3, 5).reshape(len(d), 16, 49)
    cp = cf.x_cf.reshape(len(d), 1, 4, 7, 4, 7).permute(0, 2, 4, 1, 3, 5).reshape(len(d), 16, 49)
    for n in range(len(d)):
        for i in changed[n].nonzero().flatten():
            assert (dp[n] == cp[n, i]).all(1).any()


def test_cve_reproducible(tiny_classifier, split):
    xq, xp, yp = split
    ex = CVE(tiny_classifier, n_distractors=2, distractor_selection="random").fit(xp, yp)
    a = ex.explain(xq[:4], 1, seed=5)
    b = ex.explain(xq[:4], 1, seed=5)
    assert torch.equal(a.x_cf, b.x_cf) and torch.equal(a.meta["n_edits"], b.meta["n_edits"])


def test_cve_more_distractors_never_need_more_edits(tiny_classifier, split):
    xq, xp, yp = split
    for sel in ("nearest", "random"):  # both nest: the K=1 candidate is among the K=4 ones
        e1 = CVE(tiny_classifier, n_distractors=1, distractor_selection=sel).fit(xp, yp)
        m1 = e1.explain(xq[:4], 1).meta
        e4 = CVE(tiny_classifier, n_distractors=4, distractor_selection=sel).fit(xp, yp)
        m4 = e4.explain(xq[:4], 1).meta
        ok = m1["feature_success"]
        assert (m4["n_edits"][ok] <= m1["n_edits"][ok]).all()


def test_cve_generic_head_matches_fast_path(tiny_classifier, split):
    # the low-rank first-layer shortcut gives the same edits as full head forwards
    xq, xp, yp = split
    fast = CVE(tiny_classifier, n_distractors=2).fit(xp, yp)
    a = fast.explain(xq[:4], 1)
    slow = CVE(tiny_classifier, n_distractors=2).fit(xp, yp)
    slow._linear_head = lambda: None
    b = slow.explain(xq[:4], 1)
    assert torch.equal(a.meta["n_edits"], b.meta["n_edits"])
    assert torch.equal(a.x_cf, b.x_cf)


def test_cve_receptive_fields_of_the_c3lt_cnn(tiny_classifier, bars):
    # conv5, pool2, conv5, pool2: cell (r, c) sees pixels 4r..4r+15 x 4c..4c+15
    ex = CVE(tiny_classifier).fit(*bars)
    boxes = ex.receptive_fields((1, 28, 28))
    expected = torch.tensor([[4 * r, 4 * c, 4 * r + 16, 4 * c + 16]
                             for r in range(4) for c in range(4)])
    assert torch.equal(boxes, expected)


def test_cve_receptive_field_paste(result, split):
    ex, cf = result
    xq, xp, _ = split
    boxes = ex.receptive_fields(xq.shape[1:])
    d = xp[cf.meta["distractor"]]
    changed = cf.x_cf != xq
    assert changed.flatten(1).any(1).all()          # every query got at least one edit
    for n in range(len(xq)):
        # a changed pixel lies in the window of an edited cell and equals the distractor
        # pixel at the same place relative to some distractor cell's window
        in_some = torch.zeros(28, 28, dtype=torch.bool)
        for t, l, b, r in boxes.tolist():
            in_some[t:b, l:r] = True
        assert in_some[changed[n, 0]].all()
        vals = cf.x_cf[n, 0][changed[n, 0]]
        assert torch.isin(vals, d[n, 0]).all()
    # the pasted area is at most n_edits windows of 16x16 pixels
    assert (changed.flatten(1).sum(1) <= cf.meta["n_edits"] * 256).all()


def test_cve_receptive_paste_single_edit_is_a_shifted_window():
    xq = torch.zeros(1, 1, 8, 8)
    xd = torch.arange(64.).view(1, 1, 8, 8)
    ex = CVE.__new__(CVE)
    ex._windows = ((1, 8, 8), torch.tensor([[0, 0, 4, 4], [4, 4, 8, 8]]))
    ex.classifier = torch.nn.Identity()
    out = ex._paste_receptive(xq, xd, order=torch.tensor([[1]]), assign=torch.tensor([[-1, 0]]))
    expected = torch.zeros(1, 1, 8, 8)
    expected[0, 0, 4:, 4:] = xd[0, 0, :4, :4]          # window of cell 0 moved onto cell 1
    assert torch.equal(out, expected)


def test_cve_max_edits_caps_search(tiny_classifier, split):
    xq, xp, yp = split
    ex = CVE(tiny_classifier, n_distractors=1, max_edits=1, paste="grid").fit(xp, yp)
    cf = ex.explain(xq[:4], 1)
    assert (cf.meta["n_edits"] <= 1).all()
    assert (_changed_cells(cf.x_cf, xq[:4]).sum(1) <= 1).all()


def test_cve_needs_fit_and_distractors(tiny_classifier, split):
    xq, xp, yp = split
    with pytest.raises(RuntimeError, match="fit"):
        CVE(tiny_classifier).explain(xq[:2], 1)
    ex = CVE(tiny_classifier).fit(xp, yp)
    with pytest.raises(ValueError, match="no distractor of class 0"):
        ex.explain(xp[:2], 0)


@pytest.mark.parametrize("kw, msg", [
    (dict(n_distractors=0), "n_distractors"),
    (dict(distractor_selection="best"), "distractor_selection"),
    (dict(paste="pixels"), "paste"),
])
def test_cve_bad_config(tiny_classifier, kw, msg):
    with pytest.raises(ValueError, match=msg):
        CVE(tiny_classifier, **kw)


def test_cve_bad_pool(tiny_classifier, split):
    xq, xp, yp = split
    with pytest.raises(ValueError, match="labels"):
        CVE(tiny_classifier).fit(xp, yp[:3])
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        CVE(tiny_classifier).fit(xp * 255, yp)
    with pytest.raises(TypeError, match="features"):
        CVE(torch.nn.Linear(3, 2))


def test_cve_from_the_catalog_uses_target_class_train_images(tiny_classifier, bars,
                                                             monkeypatch):
    from cflib.bench import catalog

    x, y = bars
    splits = []

    def fake_load_split(dataset, split="test"):
        splits.append((dataset, split))
        return x, y

    monkeypatch.setattr(catalog, "load_split", fake_load_split)
    ex = catalog.build("CVE", tiny_classifier, dataset="mnist", profile="smoke", pair="0->1")
    assert splits == [("mnist", "train")]
    from cflib.bench.profiles import get_profile
    assert ex.config.n_distractors == get_profile("smoke").c3lt.cve_n_distractors
    assert (ex.pool_y == 1).all() and len(ex.pool_y) > 100


def test_cve_grid_paste_refuses_a_non_multiple_image_before_searching(tiny_classifier, split):
    # 30x30 images give a 4x4 map too (conv5, pool2, conv5, pool2: 30->26->13->9->4)
    xq, xp, yp = split
    pad = torch.nn.functional.pad
    ex = CVE(tiny_classifier, n_distractors=1, paste="grid").fit(pad(xp, (1, 1, 1, 1), value=-1.0), yp)
    ex._search = lambda *a, **k: pytest.fail("the search ran before the size check")
    with pytest.raises(ValueError, match="multiple"):
        ex.explain(pad(xq[:2], (1, 1, 1, 1), value=-1.0), 1)
