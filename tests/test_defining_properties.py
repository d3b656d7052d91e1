"""What defines each method of the catalog, on tiny data with tiny networks.

Two tests per method:

* its **success on a toy pair** (the bars, query class 0, target 1): every catalog entry
  built by :func:`cflib.bench.catalog.build` at the smoke profile (sizes raised where the
  bars need more steps: a profile changes sizes only) with networks trained on the bars,
  its validity above the floor stated for it in :data:`FLOORS`, its success mask what an
  independent pass of the classifier says, and every successful image changed;
* the **property that makes it that method** (:data:`DEFINED_BY` names the test of each
  entry, here or in the method's own test file), checked by an oracle of its own:
  values worked out by hand on tiny tensors, a stub network whose answer is known, or a
  property measured outside the method's code.  Never the method's own formula.
"""
from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from cflib.bench import catalog
from cflib.bench.catalog import CATALOG
from cflib.bench.profiles import get_profile
from cflib.explainers import (
    C3LT,
    CEM,
    PSCE,
    ROAR,
    AdvAttack,
    BayesCF,
    C3LTInverted,
    CEMPaperBudget,
    CEMTargeted,
    ExpGAN,
    LatentSearch,
    OriginalData,
    QueryUnchanged,
    Schut,
    Wachter,
)
from cflib.models.dcgan import Discriminator


# -- tiny networks -------------------------------------------------------------------------
class LinearEncoder(nn.Module):
    """Image -> (N, 100, 1, 1) code (a stand-in for C3LT's encoder)."""

    def __init__(self, d=100):
        super().__init__()
        self.fc = nn.Linear(784, d)

    def forward(self, x):
        return self.fc(x.flatten(1))[:, :, None, None]


class LinearDecoder(nn.Module):
    """Code -> 1x28x28 image in [-1, 1] (a stand-in for C3LT's DCGAN generator)."""

    def __init__(self, d=100):
        super().__init__()
        self.fc = nn.Linear(d, 784)

    def forward(self, z):
        return torch.tanh(self.fc(z.flatten(1))).view(-1, 1, 28, 28)


class Recording(nn.Module):
    """A generator that keeps every code it is given and every image it returns."""

    def __init__(self, generator):
        super().__init__()
        self.generator = generator
        self.codes, self.images = [], []

    def forward(self, z):
        img = self.generator(z)
        self.codes.append(z.detach().clone())
        self.images.append(img.detach().clone())
        return img


@pytest.fixture(scope="module")
def toy_gan(bars):
    """(G, E, D): a linear autoencoder trained on the bars as C3LT's generator and encoder,
    and a small untrained discriminator (its loss weight is 0.001)."""
    torch.manual_seed(0)
    enc, dec = LinearEncoder(), LinearDecoder()
    x, _ = bars
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()], lr=3e-3)
    for _ in range(60):
        loss = ((dec(enc(x)) - x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    for p in [*enc.parameters(), *dec.parameters()]:
        p.requires_grad_(False)
    return dec.eval(), enc.eval(), Discriminator(ndf=8).eval()


@pytest.fixture(scope="module")
def queries(bars):
    x, y = bars
    return x[y == 0][:8]


def _decision(model, x):
    with torch.no_grad():
        return model(x).argmax(1)


def _l0(x, x_cf, threshold=0.2):
    """Pixels moved by more than ``threshold`` on the [-1, 1] scale, per image."""
    return ((x_cf - x).abs() > threshold).flatten(1).sum(1)


def _l1(x, x_cf):
    return (x_cf - x).abs().flatten(1).sum(1)


# -- 1. success on the toy pair, every catalog entry -------------------------------------------
#: the smoke profile with the sizes the bars need (the bars' classes differ by a whole bar,
#: a bigger change than the digits'; smoke's 20 Latent-search steps or 40 Schut iterations
#: do not get there)
TOY = get_profile("smoke",
                  c3lt=dict(c3lt_batch=32, c3lt_epochs=4, cve_n_distractors=4,
                            cem_max_iterations=60, cem_c_steps=3, expgan_epochs=8,
                            latent_search_steps=300),
                  bayes=dict(schut_max_iters=600),
                  quant=dict(eval_steps=40, eval_restarts=2))

#: the validity each entry reaches at least on 8 bars queries (4 for Schut, whose
#: one-pixel-at-a-time search needs about 300 passes each), and why where it is not a
#: search's plain floor
FLOORS = {
    "Original Data": 1.0,          # = the classifier's accuracy on real target images: 1 here
    "Query (unchanged)": 0.0,      # exactly 0, asserted as such
    "Adv. Attack": 0.75,           # on the SmallCNN: see CLASSIFIER
    "CEM": None,                   # untargeted: leaves the query's class (LEAVES), any class
    "CEM (targeted)": 0.75,
    "CEM (paper budget)": None,    # untargeted, as CEM
    "CVE": None,                   # searches the feature map: FEATURE_FLOOR, not the image
    "CVE (receptive field)": 0.75,
    "ExpGAN": 0.75,
    "C3LT": 0.75,
    "C3LT (reconstruction)": None,  # G(E(x)) keeps the query's class: at most KEEPS
    "C3LT (inverted)": 0.75,
    "Latent search": 0.75,
    "Wachter": 0.75,
    "BayesCF": 0.75,
    "ROAR": 0.75,
    "Schut": 0.75,
    "PSCE": 0.75,
    "Latent PGD": 0.75,
}
LEAVES = 0.75          # CEM, CEM (paper budget): share of queries out of the query's class
FEATURE_FLOOR = 0.9    # CVE: share whose edited feature map the head assigns to the target
KEEPS = 0.25           # C3LT (reconstruction): validity at most this
#: the classifier each entry explains here: the C3LT CNN (tiny_classifier), but the SmallCNN
#: for the quantization table's Latent PGD, for Schut (the C3LT CNN needs 1000 of its
#: one-pixel passes) and for the Adv. Attack, whose eps = 0.6 ball does not flip the C3LT
#: CNN on the bars (its bright left bar stays brighter than anything the ball allows)
CLASSIFIER = {"Adv. Attack": "small_cnn_bars", "Latent PGD": "small_cnn_bars",
              "Schut": "small_cnn_bars"}


def test_every_catalog_entry_has_a_floor_and_a_defining_test():
    assert list(FLOORS) == list(CATALOG) == list(DEFINED_BY)
    names = {n for n in globals() if n.startswith("test_")}
    import importlib

    for method, where in DEFINED_BY.items():
        module, _, test = where.rpartition("::")
        if module == __name__:
            assert test in names, (method, where)
        else:
            assert callable(getattr(importlib.import_module(module), test, None)), (method, where)


@pytest.mark.parametrize("name", list(CATALOG))
def test_every_entry_succeeds_on_the_bars_above_its_floor(name, request, bars, toy_gan,
                                                          latent_ae_bars):
    clf = request.getfixturevalue(CLASSIFIER.get(name, "tiny_classifier"))
    x, y = bars
    G, E, D = toy_gan
    n = 4 if name == "Schut" else 8
    xq = x[y == 0][:n]
    data = dict(train=bars, pool=bars, autoencoder=None, generator=G, encoder=E,
                discriminator=D, cache=False, latent_autoencoder=latent_ae_bars)
    if name.startswith("C3LT"):
        data["c3lt_config"] = {"lr": 5e-3}      # 4 epochs of 4 updates: a faster mapping
    ex = catalog.build(name, clf, dataset="mnist", profile=TOY, seeds=0, pair=(0, 1), **data)
    cf = ex.explain(xq, 1, seed=0)
    # the success mask is what the classifier says, asked again here
    pred, pred_cf = _decision(clf, xq), _decision(clf, cf.x_cf)
    assert torch.equal(cf.success, (pred_cf == 1) & (pred != 1))
    assert (pred == 0).all()                                  # the toy's queries are class 0
    # every successful image changed by more than rounding
    change = (cf.x_cf - xq).abs().flatten(1).amax(1)
    assert (change[cf.success] > 0.1).all()
    floor = FLOORS[name]
    if name == "Original Data":
        acc = (_decision(clf, x[y == 1]) == 1).float().mean().item()
        assert acc == 1.0 and cf.validity == acc
    elif name == "Query (unchanged)":
        assert cf.validity == 0.0 and change.max() == 0
    elif name in ("CEM", "CEM (paper budget)"):
        assert (pred_cf != pred).float().mean() >= LEAVES
    elif name == "CVE":
        assert cf.meta["feature_validity"] >= FEATURE_FLOOR
    elif name == "C3LT (reconstruction)":
        assert cf.validity <= KEEPS
    else:
        assert cf.validity >= floor, (name, cf.validity)


# -- 2. what defines each method ------------------------------------------------------------------
def test_original_data_returns_distinct_real_images_of_the_target(tiny_classifier, bars,
                                                                   queries):
    x, y = bars
    cf = OriginalData(tiny_classifier).fit(x, y).explain(queries, 1, seed=0)
    pool = x[y == 1]
    hit = (cf.x_cf.flatten(1)[:, None] == pool.flatten(1)[None]).all(2)   # (8, 128)
    assert (hit.sum(1) == 1).all()                     # each is exactly one real image
    assert len(set(hit.float().argmax(1).tolist())) == len(queries)   # drawn without repeats


def test_query_unchanged_is_the_query_itself(tiny_classifier, queries):
    cf = QueryUnchanged(tiny_classifier).explain(queries, 1)
    assert torch.equal(cf.x_cf, queries) and cf.validity == 0.0


def test_adv_attack_stays_in_its_linf_ball_and_uses_it(small_cnn_bars, queries):
    cf = AdvAttack(small_cnn_bars, eps=0.3, alpha=0.02, steps=40).explain(queries, 1, seed=0)
    d = (cf.x_cf - queries).abs().flatten(1).amax(1)
    assert (d <= 0.3 + 1e-6).all() and (d > 0.29).all()


class ThreeWay(nn.Module):
    """A linear 3-class model on 1x2x2 images (u = x + 1, 0 on a black image): z0 = 6,
    z1 = 5 + u_a (pixel (0, 0)), z2 = 5.5 + 4 u_b (pixel (0, 1)).  A black image is class 0;
    the nearest other class is 2 (u_b > 0.15 with kappa 0.1), class 1 needs u_a > 1.1."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        with torch.no_grad():
            self.fc.weight.copy_(torch.tensor([[0.0, 0, 0, 0], [1, 0, 0, 0], [0, 4, 0, 0]]))
            self.fc.bias.copy_(torch.tensor([6.0, 6.0, 9.5]))   # u = x + 1 folded into b
        self.requires_grad_(False)

    def forward(self, x):
        return self.fc(x.flatten(1))


BLACK = torch.full((2, 1, 2, 2), -1.0)
CEM_KW = dict(kappa=0.1, c_init=10.0, c_steps=3, max_iterations=200, lr_init=0.05)


def test_cem_is_the_pertinent_negative_into_the_nearest_class_targeted_into_the_target():
    """Untargeted CEM leaves the query's class for the nearest one (class 2: ink on pixel b),
    the targeted variant reaches the class asked for (1: ink on pixel a); both only add
    ink (no pixel moves towards -1) and leave the other pixels exactly as they were."""
    model = ThreeWay()
    assert model(BLACK).argmax(1).tolist() == [0, 0]
    pn = CEM(model, **CEM_KW).explain(BLACK, 1)
    tg = CEMTargeted(model, **CEM_KW).explain(BLACK, 1)
    assert pn.pred_cf.tolist() == [2, 2] and not pn.success.any()
    assert tg.pred_cf.tolist() == [1, 1] and tg.success.all()
    for cf, moved in ((pn, (0, 1)), (tg, (0, 0))):
        d = (cf.x_cf - BLACK)[:, 0]
        assert (d >= 0).all()                                  # only adds
        assert (d[:, moved[0], moved[1]] > 0.1).all()
        rest = torch.ones(2, 2, dtype=torch.bool)
        rest[moved] = False
        assert (d[:, rest] == 0).all()                         # sparse: one pixel of four


def test_cem_change_is_sparse_and_only_adds_on_the_bars(tiny_classifier, small_cnn_bars,
                                                         queries):
    pn = CEMTargeted(tiny_classifier, kappa=1.0, c_init=100.0, c_steps=2,
                     max_iterations=40).explain(queries, 1)
    dense = AdvAttack(tiny_classifier, alpha=0.05, steps=40).explain(queries, 1, seed=0)
    assert pn.validity >= 0.75
    assert ((pn.x_cf - queries) >= 0).all()                   # no pixel towards -1
    l0_pn, l0_dense = _l0(queries, pn.x_cf), _l0(queries, dense.x_cf)
    assert (l0_pn < 784 / 4).all() and l0_pn.float().mean() < l0_dense.float().mean() / 4


def test_cem_paper_budget_is_cem_at_the_papers_budget(tiny_classifier, queries):
    kw = dict(kappa=1.0, c_init=100.0, c_steps=2, max_iterations=15)
    a = CEMPaperBudget(tiny_classifier, **kw).explain(queries[:3], 1)
    b = CEM(tiny_classifier, **kw).explain(queries[:3], 1)
    assert torch.equal(a.x_cf, b.x_cf)                        # the same solver
    cfg = CEMPaperBudget.Config()
    assert (cfg.max_iterations, cfg.c_steps, cfg.targeted) == (1000, 10, False)
    for profile in ("standard", "paper"):
        ex = catalog.build("CEM (paper budget)", tiny_classifier, dataset="mnist",
                           profile=profile, autoencoder=None)
        assert (ex.config.max_iterations, ex.config.c_steps) == (1000, 10)


class WindowCounter(nn.Module):
    """A CVE-shaped classifier whose cells see overlapping windows: the 3x3 map of 14x14
    means at stride 7 (cell (r, c) sees rows 7r..7r+13, columns 7c..7c+13).  Its head says
    class 1 when the cells (cell 4, the centre, weighted 1.1) sum above -8: a black query
    (-9.1) needs one edit, and the best is the centre cell given a white (+1) cell."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(9, 2)
        with torch.no_grad():
            self.head.weight.zero_()
            self.head.weight[1] = 1.0
            self.head.weight[1, 4] = 1.1
            self.head.bias.copy_(torch.tensor([0.0, 8.0]))
        self.requires_grad_(False)

    def features(self, x):
        return nn.functional.avg_pool2d(x, 14, stride=7)

    def classify_features(self, f):
        return self.head(f.flatten(1))

    def forward(self, x):
        return self.classify_features(self.features(x))


def test_cve_receptive_field_pastes_the_window_a_cell_sees():
    """One edit, centre cell <- the distractor's white top-left cell: its 14x14 window is
    pasted over the centre window (rows and columns 7..20), nothing else changes."""
    from cflib.explainers import CVEReceptiveField

    model = WindowCounter()
    xq = torch.full((2, 1, 28, 28), -1.0)
    pool = xq.clone()
    pool[:, :, :14, :14] = 1.0                           # cell 0 white: class 1 (-4.55 > -8)
    ex = CVEReceptiveField(model, n_distractors=1).fit(pool, torch.ones(2))
    boxes = ex.receptive_fields((1, 28, 28))
    assert boxes.tolist() == [[7 * r, 7 * c, 7 * r + 14, 7 * c + 14]
                              for r in range(3) for c in range(3)]
    cf = ex.explain(xq, 1, seed=0)
    want = xq.clone()
    want[:, :, 7:21, 7:21] = 1.0
    assert cf.meta["n_edits"].tolist() == [1, 1] and torch.equal(cf.x_cf, want)
    assert cf.validity == 1.0                            # the centre window flips it too


def test_a_trained_expgans_change_is_bounded_by_its_mask(tiny_classifier, bars, queries):
    """|x_cf - x| = m |x_tr - x| <= 2 m pixel by pixel, whatever mask m it learned."""
    x, y = bars
    ex = ExpGAN(tiny_classifier, epochs=2, batch_size=32, lr=2e-3, width=8,
                kappa=0.3).fit(x[y == 0][:64], x[y == 1][:64], pair=(0, 1))
    _, _, mask = ex.transform(queries, 1)
    cf = ex.explain(queries, 1)
    change = (cf.x_cf - queries).abs()
    assert (change <= 2 * mask + 1e-6).all() and change.max() > 0.1


def _c3lt(clf, G, E, D, bars, **kw):
    x, y = bars
    cfg = dict(epochs=1, batch_size=32, seed=0, **kw)
    return C3LT(clf, generator=G, encoder=E, discriminator=D, **cfg).fit(
        x[y == 0][:64], x[y == 1][:64])


def test_c3lt_maps_the_code_on_the_sphere_of_its_norm(tiny_classifier, toy_gan, bars,
                                                     queries):
    """The code C3LT renders, g^n(E(x)), has the norm of E(x) (asked of the encoder here),
    and it moved: the mapping is not the identity."""
    G, E, D = toy_gan
    rec = Recording(G)
    ex = _c3lt(tiny_classifier, rec, E, D, bars, n_steps=2)
    rec.codes.clear()
    rec.images.clear()
    cf = ex.explain(queries, 1)
    (z,) = rec.codes                                  # one batch: [z_cf; z]
    z_cf, z0 = z[:len(queries)], z[len(queries):]
    with torch.no_grad():
        e = E(queries)
    assert torch.allclose(z0, e)
    norm = e.flatten(1).norm(dim=1)
    assert torch.allclose(z_cf.flatten(1).norm(dim=1), norm, rtol=1e-5)
    assert ((z_cf - e).flatten(1).norm(dim=1) > 1e-3 * norm).all()
    assert torch.equal(cf.x_cf, rec.images[0][:len(queries)])


def test_c3lt_inverted_starts_from_a_code_that_renders_the_query_better(tiny_classifier,
                                                                        toy_gan, bars,
                                                                        queries):
    G, E, D = toy_gan
    base = _c3lt(tiny_classifier, G, E, D, bars)
    inv = C3LTInverted.from_fitted(base, invert_steps=30, invert_lr=0.05)
    a, b = base.explain(queries, 1), inv.explain(queries, 1)
    # meta["reconstruction"] is G of the code each maps: E(x), then the refined code
    assert (_l1(queries, b.meta["reconstruction"]) < _l1(queries, a.meta["reconstruction"])).all()
    assert inv.maps is not None and all(torch.equal(p, q) for p, q in zip(
        inv.maps.parameters(), base.maps.parameters()))          # the same mappings


def test_latent_search_renders_a_code_of_the_norm_of_e_x(tiny_classifier, toy_gan, queries):
    """Every code the search gives the generator (REVISE projected on C3LT's sphere) has
    the norm of E(x), and each counterfactual is the generator's image of one of them."""
    G, E, _ = toy_gan
    rec = Recording(G)
    cf = LatentSearch(tiny_classifier, steps=60, lr=0.2, generator=rec,
                      encoder=E).explain(queries, 1)
    assert cf.validity >= 0.75
    with torch.no_grad():
        norm = E(queries).flatten(1).norm(dim=1)
    search = rec.codes[:-1]                          # the last call renders G(E(x))
    assert len(search) == 61
    for z in search:
        assert torch.allclose(z.flatten(1).norm(dim=1), norm, rtol=1e-5)
    images = torch.stack(rec.images[:-1], 1)         # (N, steps + 1, 1, 28, 28)
    same = (images == cf.x_cf[:, None]).flatten(2).all(2)
    assert same.any(1).all()


def test_latent_search_gets_closer_as_lambda_grows(tiny_classifier, toy_gan, queries):
    G, E, _ = toy_gan
    prox = {}
    for lam in (0.0, 30.0):
        cf = LatentSearch(tiny_classifier, lambda_=lam, steps=100, lr=0.2, generator=G,
                          encoder=E).explain(queries, 1)
        assert cf.validity == 1.0
        prox[lam] = (cf.x_cf - queries).abs().flatten(1).mean(1)
    assert prox[30.0].mean() < prox[0.0].mean()


def test_wachters_l1_term_keeps_it_close_and_lambda_trades_it_away(tiny_classifier, queries):
    """lambda weighs the prediction loss against the L1 distance (Wachter's Eq. 2): with a
    small lambda the distance term holds the image at the query (no counterfactual), a
    large one buys validity with a larger distance, and the schedule (lambda times 10 while
    invalid) stops at a distance below the large lambda's."""
    kw = dict(steps=60, lr=0.05)
    q = queries[:4]
    small = Wachter(tiny_classifier, lam_init=0.1, lam_steps=1, **kw).explain(q, 1)
    mid = Wachter(tiny_classifier, lam_init=10.0, lam_steps=1, **kw).explain(q, 1)
    big = Wachter(tiny_classifier, lam_init=1000.0, lam_steps=1, **kw).explain(q, 1)
    sched = Wachter(tiny_classifier, lam_init=1.0, lam_steps=4, **kw).explain(q, 1)
    assert small.validity == 0.0 and big.validity == 1.0 and sched.validity == 1.0
    assert (_l1(q, small.x_cf) < 10).all()                  # 784 pixels, an L1 under 10
    assert (_l1(q, mid.x_cf) < _l1(q, big.x_cf)).all()
    assert (_l1(q, sched.x_cf) < _l1(q, big.x_cf)).all()


class Disagreeing(nn.Module):
    """A posterior on 1x2x2 images (u = x + 1) whose deterministic pass and posterior mean
    disagree: the deterministic pass says class 1 when pixel a is bright (logit 4 (u_a - 1)),
    every posterior sample when pixel b is (4 (u_b - 1) + c_s, c_s in -1, -0.5, 0.5, 1).
    ``forward`` is the log posterior mean, as the Bayesian CNNs'."""

    SHIFT = torch.tensor([-1.0, -0.5, 0.5, 1.0])

    def __init__(self):
        super().__init__()
        self.read = nn.Linear(4, 2)
        with torch.no_grad():
            self.read.weight.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0]]))
            self.read.bias.fill_(1.0)
        self.requires_grad_(False)

    def deterministic_logits(self, x):
        u = self.read(x.flatten(1))
        return torch.stack([torch.zeros_like(u[:, 0]), 4 * (u[:, 0] - 1)], 1)

    def sample_probs(self, x, n_samples=None):
        u = self.read(x.flatten(1))
        z1 = 4 * (u[:, 1] - 1)[None] + self.SHIFT.to(x)[:, None]          # (S, N)
        return torch.softmax(torch.stack([torch.zeros_like(z1), z1], -1), -1)

    def forward(self, x):
        return self.sample_probs(x).mean(0).log()


def test_bayescf_follows_the_posterior_mean_where_the_deterministic_pass_disagrees():
    model = Disagreeing()
    x = torch.full((2, 1, 2, 2), -1.0)
    kw = dict(steps=200, lr=0.05, lam_steps=3)
    w = Wachter(model, **kw).explain(x, 1)
    b = BayesCF(model, **kw).explain(x, 1)
    dw, db = (w.x_cf - x).flatten(1), (b.x_cf - x).flatten(1)
    # Wachter moved pixel a only, BayesCF pixel b only
    assert (dw[:, 0] > 0.5).all() and (dw[:, 1:] == 0).all()
    assert (db[:, 1] > 0.5).all() and (db[:, [0, 2, 3]] == 0).all()

    def posterior_mean_p1(img):                 # by hand from pixel b
        ub = img.flatten(1)[:, 1] + 1
        return torch.sigmoid(4 * (ub - 1)[:, None] + Disagreeing.SHIFT[None]).mean(1)

    assert (posterior_mean_p1(b.x_cf) > 0.5).all() and b.success.all()
    assert (posterior_mean_p1(w.x_cf) < 0.5).all() and not w.success.any()
    assert (model.deterministic_logits(w.x_cf).argmax(1) == 1).all()   # what Wachter reached


def _perturbed_validity(model, x_cf, target, sigma, draws=20):
    """Share of (draw, image) pairs still assigned to ``target`` when N(0, sigma^2) noise is
    added to the last linear layer's weights and bias (written here, not the library's)."""
    g = torch.Generator().manual_seed(0)
    hits = []
    for _ in range(draws):
        m = copy.deepcopy(model)
        last = m.head[-1]
        with torch.no_grad():
            last.weight += sigma * torch.randn(last.weight.shape, generator=g)
            last.bias += sigma * torch.randn(last.bias.shape, generator=g)
            hits.append((m(x_cf).argmax(1) == target).float())
    return torch.stack(hits).mean().item()


def test_roar_is_more_robust_than_wachter_under_the_same_weight_perturbation(tiny_classifier,
                                                                            queries):
    w = Wachter(tiny_classifier, steps=20).explain(queries, 1)
    r = ROAR(tiny_classifier, max_iter=100).explain(queries, 1)
    assert w.validity == 1.0 and r.validity == 1.0
    for sigma in (0.03, 0.1):
        pw = _perturbed_validity(tiny_classifier, w.x_cf, 1, sigma)
        pr = _perturbed_validity(tiny_classifier, r.x_cf, 1, sigma)
        assert pr >= pw + 0.15, (sigma, pr, pw)


class RightHalf(nn.Module):
    """A 2-class linear model on 1x2x4 images: logit 1 = the ink (u = x + 1) of the four
    right-hand pixels, minus 3.  From black, confidence 0.99 (logit ln 99 = 4.595) needs
    7.6 of ink: 19 of Schut's 0.4 steps, on the right half only."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 2)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.weight[1] = torch.tensor([0, 0, 1, 1, 0, 0, 1, 1.0])
            self.fc.bias.copy_(torch.tensor([0.0, 4 - 3.0]))     # sum(u) = sum(x) + 4
        self.requires_grad_(False)

    def forward(self, x):
        return self.fc(x.flatten(1))


def test_schut_changes_salient_pixels_by_its_step_until_confident():
    x = torch.full((1, 1, 2, 4), -1.0)
    cf = Schut(RightHalf(), max_iters=100).explain(x, 1)
    d = (cf.x_cf - x).flatten(1)[0]
    left, right = d[[0, 1, 4, 5]], d[[2, 3, 6, 7]]
    assert (left == 0).all()
    assert right.sum().item() == pytest.approx(19 * 0.4, abs=1e-5)
    steps = right / 0.4
    assert torch.allclose(steps, steps.round(), atol=1e-5) and (steps <= 5).all()
    p = torch.softmax(RightHalf()(cf.x_cf), 1)[0, 1].item()
    assert p >= 0.99 and cf.success.all()
    assert cf.meta["model_passes"] == 20                # 19 steps and the pass that stops


def test_psce_treats_each_row_on_its_own(tiny_classifier, bars):
    """A query's counterfactual does not depend on the other rows of its batch.  In float64:
    in float32 the classifier's sums round differently for another batch size, and Adam's
    normalised steps turn a rounding-level gradient on a background pixel into a full step
    (a difference of 1e-2 after 20 steps), which says nothing about the rows' coupling."""
    x, y = bars
    clf = copy.deepcopy(tiny_classifier).double()
    q = x[y == 0][:6].double()
    ex = PSCE(clf, inner_steps=10, outer_iters=2, lr=0.05, delta=0.8)
    whole = ex.explain(q[:4], 1, seed=0)
    assert whole.validity == 1.0                            # it searched, and got there
    other = ex.explain(torch.cat([q[4:], q[:1]]), 1, seed=0).x_cf[-1]
    assert torch.allclose(other, whole.x_cf[0], rtol=0, atol=1e-10)
    for i in range(4):
        one = ex.explain(q[i:i + 1], 1, seed=0).x_cf[0]
        assert torch.allclose(one, whole.x_cf[i], rtol=0, atol=1e-10)


#: each catalog entry -> the test of what defines it
DEFINED_BY = {
    "Original Data": f"{__name__}::test_original_data_returns_distinct_real_images_of_the_target",
    "Query (unchanged)": f"{__name__}::test_query_unchanged_is_the_query_itself",
    "Adv. Attack": f"{__name__}::test_adv_attack_stays_in_its_linf_ball_and_uses_it",
    "CEM": f"{__name__}::test_cem_is_the_pertinent_negative_into_the_nearest_class_targeted"
           "_into_the_target",
    "CEM (targeted)": f"{__name__}::test_cem_change_is_sparse_and_only_adds_on_the_bars",
    "CEM (paper budget)": f"{__name__}::test_cem_paper_budget_is_cem_at_the_papers_budget",
    "CVE": "test_cve::test_cve_replaces_the_fewest_cells_that_flip_the_head",
    "CVE (receptive field)": f"{__name__}::test_cve_receptive_field_pastes_the_window_a_cell_"
                             "sees",
    "ExpGAN": "test_expgan::test_masked_out_pixels_are_the_querys_exactly",
    "C3LT": f"{__name__}::test_c3lt_maps_the_code_on_the_sphere_of_its_norm",
    "C3LT (reconstruction)": "test_fidelity::test_c3lt_reconstruction_is_g_of_e_by_hand",
    "C3LT (inverted)": f"{__name__}::test_c3lt_inverted_starts_from_a_code_that_renders_the_"
                       "query_better",
    "Latent search": f"{__name__}::test_latent_search_renders_a_code_of_the_norm_of_e_x",
    "Wachter": f"{__name__}::test_wachters_l1_term_keeps_it_close_and_lambda_trades_it_away",
    "BayesCF": f"{__name__}::test_bayescf_follows_the_posterior_mean_where_the_deterministic_"
               "pass_disagrees",
    "ROAR": f"{__name__}::test_roar_is_more_robust_than_wachter_under_the_same_weight_"
            "perturbation",
    "Schut": f"{__name__}::test_schut_changes_salient_pixels_by_its_step_until_confident",
    "PSCE": f"{__name__}::test_psce_treats_each_row_on_its_own",
    "Latent PGD": "test_latent_recourse::test_one_step_and_its_cost_by_hand",
}
