"""The chapters' discussions: prose whose every number is read from the results files when
the page is built.

``book/discussion/<chapter>.md`` is a Jinja2 template.  When a chapter has been executed
(and again when only its prose changed), :func:`render` fills it from the results the run
wrote, the sweep over training seeds when one exists, and the papers' numbers, and the
text replaces the chapter's ``<!-- discussion -->`` marker.  In a template::

    C3LT moves the query by {{ m("C3LT", "Proximity") | f }} per pixel
    ({{ spread("C3LT", "Proximity") }}; the paper: {{ paper("C3LT", "Proximity") | f }}),
    {{ below("C3LT", "Proximity", "Original Data") }} less than a real image of the target.

Functions of the context (:class:`Readings`):

* ``v(method, metric, pair=None, variant="", model="")``: this run's value (the mean over
  pairs and repeats unless a pair is named);
* ``m(...)``: the mean over training seeds when a sweep exists, else ``v``; ``sd(...)`` its
  standard deviation, ``spread(...)`` ``"± sd over n seeds"`` (or ``"one training seed"``);
* ``paper(method, metric, model="")``: the paper's value on our scale (NaN when none);
* ``seeds_where(test)``: ``(k, n)``, in how many training seeds ``test(values)`` holds,
  ``values(method, metric, ...)`` reading each seed; ``in_seeds(test)`` the phrase
  ``"in k of n seeds"``; ``better(a, b, metric)`` the phrase for a comparison in the
  metric's own direction;
* ``claim(a, b, metric, ...)``: ``a`` better than ``b``, seed by seed (or repeat by
  repeat), a :class:`~cflib.book.report.claims.Claim` worded by ``.say(yes, no)`` with
  the seeds it holds in; ``top(metric, rows, k)`` the best ``k`` rows with the seeds they
  are the best in; ``leads(...)`` the metrics led in every seed.  Every comparative
  sentence reads one: each is kept in ``readings.claims`` and re-checked against the
  results files by ``tests/test_claims.py``;
* filters ``f`` (3 significant digits), ``d`` (a signed difference, 3 decimals),
  ``pct`` (a percentage), ``n0`` (an integer).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import pandas as pd

from cflib.bench.data import DATASET_TITLES
from cflib.bench.reference import reported_value
from cflib.bench.results import MEAN_OVER_PAIRS, read_results, tidy
from cflib.bench.tables.registry import SPECS, spec_of_chapter, specs_of
from cflib.book.chapters import DISCUSSION, get_chapter
from cflib.book.report.claims import Claim, Reached, Top, holds, seeds_phrase
from cflib.book.report.claims import reaches as claim_reaches
from cflib.book.report.display import fmt
from cflib.book.spread import mean_of_seeds, read_sweep
from cflib.metrics.spec import get_spec

MARKER = "<!-- discussion -->"


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def d(v, decimals: int = 3) -> str:
    """A signed difference at fixed ``decimals`` (``+0.004``, ``−0.005``; ``–`` when missing)."""
    if _missing(v):
        return "–"
    s = f"{abs(v):.{decimals}f}"
    if float(s) == 0:
        return s
    return ("+" if v > 0 else "−") + s


#: values a rounding must never turn a number into: "100 %", "0", "1×" read as claims
#: (every query flipped, none, exactly as far) that only the exact value may make
_BOUNDS = (0.0, 1.0, -1.0)


def f(v, digits: int = 3) -> str:
    """A number in prose: ``digits`` significant digits, rounded as every table of the
    book rounds it, trailing zeros dropped (:func:`cflib.book.report.display.fmt`; ``–``
    when missing).  A value that is not exactly 0 or ±1 never prints as one: it gets the
    digits it needs (0.9967 at two digits is ``0.997``, not ``1``)."""
    out = fmt(v, digits, trim=True)
    for extra in range(1, 5):
        try:
            shown, x = float(out.replace(",", "")), float(v)
        except (TypeError, ValueError):
            return out
        if shown not in _BOUNDS or x == shown:
            return out
        out = fmt(v, digits + extra, trim=True)
    return out


def pct(v, digits: int = 1) -> str:
    """A share as a percentage at ``digits`` decimals; a share that is not exactly 1 or 0
    never prints as ``100 %`` or ``0 %`` (99.67 % at no decimals is ``99.7 %``)."""
    if v is None or not math.isfinite(v):
        return "–"
    for places in range(digits, digits + 5):
        # rounded on the share itself, as a table rounds it (0.8455: 84.6 % beside 0.846)
        shown = float(f"{v:.{places + 2}f}")
        if shown not in _BOUNDS or shown == v:
            break
    return f"{100 * shown:.{places}f} %"


def n0(v) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{int(round(v)):,}"


class Readings:
    """The numbers a discussion may quote, from one run's results (and its sweep)."""

    def __init__(self, results: pd.DataFrame, table: str, dataset: str,
                 per_seed: dict[int, pd.DataFrame] | None = None, extra: dict | None = None,
                 source: str = "", claims: list[Claim] | None = None):
        self.results, self.table, self.dataset = results, table, dataset
        self.per_seed = per_seed or {int(results["train_seed"].iloc[0]): results}
        self.extra = extra or {}
        #: every cell's mean over the training seeds (this run's results with one seed):
        #: what an ordering, a rank or a check of the page reads, as its tables do
        self.means = mean_of_seeds(self.per_seed) if len(self.per_seed) > 1 else results
        #: every claim a rendering made (:mod:`cflib.book.report.claims`), in order; a
        #: page's :meth:`frame` of another chapter adds to the page's own
        self.claims: list[Claim] = [] if claims is None else claims
        #: the chapter these results are another chapter's (:meth:`frame`); ``""``: own
        self.source = source

    # -- one table ------------------------------------------------------------------------
    @staticmethod
    def _value(df: pd.DataFrame, method: str, metric: str, pair=None, variant: str = "",
               model: str = "") -> float:
        d = df[(df["method"] == method) & (df["metric"] == metric) & (df["variant"] == variant)
               & (df["model"] == model)]
        if pair is None:
            means = d[d["aggregate"] == MEAN_OVER_PAIRS]
            d = means if len(means) else d[d["aggregate"] == ""]
        else:
            d = d[(d["pair"] == pair) & (d["aggregate"] == "")]
        if "repeat" in d.columns:
            d = d[d["repeat"] >= 0] if (d["repeat"] >= 0).any() else d
        v = pd.to_numeric(d["value"], errors="coerce")
        return float(v.mean()) if len(v) else math.nan

    def v(self, method: str, metric: str, pair=None, variant: str = "", model: str = "") -> float:
        return self._value(self.results, method, metric, pair, variant, model)

    def values(self, method: str, metric: str, pair=None, variant: str = "",
               model: str = "") -> list[float]:
        """The value in each training seed (one seed without a sweep)."""
        return [self._value(df, method, metric, pair, variant, model)
                for _, df in sorted(self.per_seed.items())]

    @property
    def n_seeds(self) -> int:
        return len(self.per_seed)

    def m(self, *args, **kw) -> float:
        vals = [v for v in self.values(*args, **kw) if math.isfinite(v)]
        return sum(vals) / len(vals) if vals else math.nan

    def sd(self, *args, **kw) -> float:
        vals = [v for v in self.values(*args, **kw) if math.isfinite(v)]
        if len(vals) < 2:
            return math.nan
        mu = sum(vals) / len(vals)
        return math.sqrt(sum((v - mu) ** 2 for v in vals) / (len(vals) - 1))

    def spread(self, *args, **kw) -> str:
        if self.n_seeds < 2:
            return "one training seed"
        return f"± {f(self.sd(*args, **kw), 2)} over {self.n_seeds} training seeds"

    def paper(self, method: str, metric: str, model: str = "") -> float:
        return reported_value(self.table, self.dataset, method, metric, model)

    # -- orderings over seeds --------------------------------------------------------------
    def seeds_where(self, test: Callable[[Callable], bool]) -> tuple[int, int]:
        """``(k, n)``: ``test(value)`` holds in k of the n training seeds, where ``value``
        reads that seed's results like :meth:`v`."""
        k = 0
        for _, df in sorted(self.per_seed.items()):
            def value(method, metric, pair=None, variant="", model="", _df=df):
                return self._value(_df, method, metric, pair, variant, model)
            k += bool(test(value))
        return k, self.n_seeds

    def in_seeds(self, test) -> str:
        return seeds_phrase(*self.seeds_where(test))

    def better_in(self, a: str, b: str, metric: str, pair=None, variant_a: str = "",
                  variant_b: str = "", model: str = "") -> str:
        """``"in k of n training seeds"``: where ``a`` is at least as good as ``b`` on
        ``metric``, in the metric's own direction."""
        return self.claim(a, b, metric, pair, variant_a, variant_b, model, strict=False).seeds

    def claim(self, a: str, b: str, metric: str, pair=None, variant_a: str = "",
              variant_b: str = "", model: str = "", strict: bool = True,
              metric_b: str = "", over: str = "training seeds") -> Claim:
        """``a`` better than ``b`` on ``metric`` (its own direction; ``strict=False``: at
        least as good; ``metric_b``: ``b``'s value read from that metric, on the same
        scale), seed by seed (``over="repeats"``: repeat by repeat of this run), kept in
        :attr:`claims`."""
        spec = get_spec(metric)
        if over == "repeats":
            va, vb = (tuple(self.rv(row, mt, rep, model, var) for rep in self.repeats())
                      for row, mt, var in ((a, metric, variant_a),
                                           (b, metric_b or metric, variant_b)))
        else:
            va = tuple(self.values(a, metric, pair, variant_a, model))
            vb = tuple(self.values(b, metric_b or metric, pair, variant_b, model))
        c = Claim(a, b, metric, va, vb, tuple(holds(spec, x, y, strict) for x, y in zip(va, vb)),
                  pair, model, variant_a, variant_b, strict, metric_b, over,
                  source=self.source)
        self.claims.append(c)
        return c

    def reaches(self, method: str, metric: str, threshold: float, pair=None,
                variant: str = "", model: str = "") -> Claim:
        """``method``'s ``metric`` at ``threshold`` or past it on the metric's worse side
        (a proximity ratio of at least the redraw ratio), seed by seed, kept in
        :attr:`claims`."""
        spec = get_spec(metric)
        va = tuple(self.values(method, metric, pair, variant, model))
        vb = (float(threshold),) * len(va)
        c = Claim(method, repr(float(threshold)), metric, va, vb,
                  tuple(claim_reaches(spec, x, y) for x, y in zip(va, vb)), pair, model,
                  variant, relation="reaches", source=self.source)
        self.claims.append(c)
        return c

    def redraws(self, method: str = "C3LT") -> Reached:
        """The pairs where ``method`` moves a query as far as a redraw (its proximity
        ratio to a real target image at the C3LT table's redraw ratio or more), seed by
        seed: the page's "an edit or a redraw"."""
        ratio = specs_of("c3lt")[0].redraw_ratio
        return Reached(tuple(self.reaches(method, "Proximity_vs_real", ratio, pair=p)
                             for p in self.pairs()))

    def seeds_of(self, method: str, metric: str, model: str = "") -> str:
        """Over which training seeds ``m(method, metric)`` is a mean: ``""`` when over every
        seed of the page, else ``" (training seed 0 alone: the sweep's other seeds predate
        this metric)"`` or ``" (k of n training seeds: ...)"`` (a leading space)."""
        have = [s for s, df in sorted(self.per_seed.items())
                if math.isfinite(self._value(df, method, metric, model=model))]
        if len(have) == self.n_seeds:
            return ""
        if len(have) == 1:
            return (f" (training seed {have[0]} alone: the sweep's other seeds predate this "
                    "metric)")
        return (f" ({len(have)} of {self.n_seeds} training seeds: the others predate this "
                "metric)")

    def judge_gap(self, method: str = "Original Data", model: str = "") -> float:
        """The largest |judge's validity - the explained classifier's| of ``method`` over
        the judges (:data:`cflib.metrics.basic.JUDGE_NAMES`), on the means over the
        training seeds as the page's tables."""
        from cflib.metrics.basic import JUDGE_NAMES

        own = self.m(method, "Validity", model=model)
        gaps = [abs(self.m(method, f"Validity ({j} judge)", model=model) - own)
                for j in JUDGE_NAMES]
        gaps = [g for g in gaps if math.isfinite(g)]
        return max(gaps) if gaps else math.nan

    def like_explained(self, rows, ratio: float = 2.0, model: str = "") -> list[str]:
        """The rows whose validity holds only for networks like the explained one: the
        SmallCNN judge (the closest to the explained CNN) grants at least ``ratio`` times
        what the residual network or the perceptron grants (on the means over the training
        seeds, as the page's tables)."""
        out = []
        for row in rows:
            near = self.m(row, "Validity (SmallCNN judge)", model=model)
            far = min(self.m(row, "Validity (ResNet judge)", model=model),
                      self.m(row, "Validity (MLP judge)", model=model))
            if math.isfinite(near) and math.isfinite(far) and near > 0 and near >= ratio * far:
                out.append(row)
        return out

    def validity_shortfalls(self, method: str, floor: float,
                            n_queries: int | None) -> list[dict]:
        """Every (pair, training seed) where ``method``'s validity is below ``floor``:
        ``pair, seed, value, already`` (queries the classifier already assigns to the
        target, which never count as valid) and, with ``n_queries`` per pair known,
        ``ceiling`` (one minus their share: no method exceeds it) and ``at_ceiling``
        (the method flipped every other query; float32 values, so within half a query)."""
        out = []
        for pair in self.pairs():
            for seed, df in sorted(self.per_seed.items()):
                value = self._value(df, method, "Validity", pair)
                if not value < floor:
                    continue
                already = self._value(df, method, "N_already_target", pair)
                row = {"pair": pair, "seed": seed, "value": value, "already": int(already)}
                if n_queries:
                    row["ceiling"] = 1 - already / n_queries
                    row["at_ceiling"] = value >= row["ceiling"] - 0.5 / n_queries
                out.append(row)
        return out

    def order(self, metric: str, rows, model: str = "") -> list[str]:
        """``rows`` best first on ``metric`` (its own direction), by the means over the
        training seeds; a row without the metric is left out."""
        spec = get_spec(metric)
        vals = {r: self.m(r, metric, model=model) for r in rows}
        return sorted((r for r, x in vals.items() if math.isfinite(x)),
                      key=lambda r: spec.key(vals[r]))

    def top(self, metric: str, rows, k: int = 3, model: str = "",
            over: str = "training seeds") -> Top:
        """The ``k`` best of ``rows`` on ``metric`` by the means over the training seeds
        (``over="repeats"``: over this run's repeats), with the seeds (repeats) in which
        they are the best ``k`` (claims against every row left out, kept in
        :attr:`claims`)."""
        best = self.order(metric, rows, model)[:k]
        rest = [r for r in rows if r not in best]
        return Top(tuple(best), tuple(self.claim(a, b, metric, model=model, strict=False,
                                                 over=over)
                                      for a in best for b in rest))

    def leads(self, method: str, metrics, rows, model: str = "") -> list[str]:
        """The ``metrics`` on which ``method`` is at least as good as every other row of
        ``rows`` in every training seed (each comparison a claim of the ledger)."""
        out = []
        for mt in metrics:
            held = [self.claim(method, r, mt, model=model, strict=False) for r in rows
                    if r != method]
            if held and all(c.everywhere for c in held):
                out.append(mt)
        return out

    # -- what a table's discussion also reads ----------------------------------------------
    def main_means(self, df: pd.DataFrame | None = None) -> pd.DataFrame:
        """The table's rows (no variant), means over pairs (and repeats), of ``df``
        (default: the means over the training seeds, as the page's tables)."""
        df = self.means if df is None else df
        df = df[df["variant"].fillna("") == ""]
        means = df[df["aggregate"] == MEAN_OVER_PAIRS]
        return means if len(means) else df

    def tau(self, metric: str, model: str = "") -> float:
        """Kendall's tau of our ordering of the paper's methods on ``metric`` against the
        paper's (NaN when fewer than three methods have both values)."""
        from cflib.book.report.tables import ranking_agreement

        d = self.main_means()
        if model:
            d = d[d["model"] == model]
        t = ranking_agreement(d, self.table, self.dataset, [metric], model=model)
        return float(t.loc[metric, "Kendall tau"]) if metric in t.index else math.nan

    def checks(self) -> pd.DataFrame:
        """The table's shape checks (:func:`cflib.bench.runner.shape_checks`) in every
        training seed: one row per expectation, its values those of the seed means,
        ``holds_in`` the number of seeds where it holds
        (:func:`~cflib.bench.runner.shape_checks_by_seed`) and ``verdict`` ``holds`` only
        where it holds in every seed, the seed means' verdict (``fails``, ``not tested``)
        where it holds in none, else ``holds in k of n seeds`` (one seed: its verdict)."""
        from cflib.bench.runner import shape_checks, shape_checks_by_seed

        by = ["model"] if self.table == "bayes" else None
        out = shape_checks(self.main_means(), self.table, by=by)
        if out.empty:
            return out
        if self.n_seeds < 2:
            return out.assign(holds_in=(out["verdict"] == "holds").astype(int))
        keys = (by or []) + ["expectation"]
        seeds = shape_checks_by_seed(self.per_seed, self.table, by=by, select=self.main_means)
        out = out.merge(seeds[keys + ["holds_in"]], on=keys, how="left")
        out["holds_in"] = out["holds_in"].fillna(0).astype(int)
        n = self.n_seeds
        # held in every seed; else, held in none, the seed means' own verdict (fails, not
        # tested); else in how many
        out["verdict"] = ["holds" if h == n else v if h == 0 and v != "holds" else
                          f"holds in {h} of {n} seeds"
                          for h, v in zip(out["holds_in"], out["verdict"])]
        return out

    def claim_checks(self, method: str) -> dict:
        """The papers' claims about ``method`` (checks whose source is a paper, not our
        protocol) on this run: ``n`` checks, how many ``holds``, and each one that fails,
        named with its model (a page says plainly which of a paper's headline claims
        fail)."""
        from cflib.book.report.display import PROTOCOL_SOURCES

        ch = self.checks()
        if ch.empty:
            return {"n": 0, "holds": 0, "fails": []}
        src = ch["source"].astype(str).str.lower()
        d = ch[(ch["method"] == method) & ~src.str.startswith(PROTOCOL_SOURCES)]
        fails = d[d["verdict"] == "fails"]
        where = (fails["model"].map(lambda mo: f" ({mo.replace('_', ' ')})")
                 if "model" in fails.columns else pd.Series("", index=fails.index))
        return {"n": len(d), "holds": int((d["verdict"] == "holds").sum()),
                "fails": [f"{e}{w}" for e, w in zip(fails["expectation"], where)]}

    def ranks(self) -> pd.DataFrame:
        """The cross-dataset page's mean ranks (rows: methods; columns: MNIST,
        Fashion-MNIST, change), from the two C3LT chapters' results as
        :func:`readings_for` read them (the means over their training seeds where this
        page declares their sweep among its reads, as its heatmaps)."""
        return _mean_ranks({DATASET_TITLES[c.dataset]: self.extra[c.chapter]
                            for c in specs_of("c3lt") if c.chapter in self.extra})

    def best_rank_seeds(self, method: str) -> dict[str, str]:
        """Per dataset of the cross-dataset page, in how many training seeds ``method``
        has the best mean rank among the methods (the reference rows left out, a tie
        holding): the ranks of each seed's own results, as :meth:`ranks` ranks the means."""
        from cflib.book.report.tables import REFERENCE_ROWS

        out = {}
        for c in specs_of("c3lt"):
            seeds = self.extra.get(f"{c.chapter} per seed") or (
                {0: self.extra[c.chapter]} if c.chapter in self.extra else {})
            k = 0
            for _, df in sorted(seeds.items()):
                r = _mean_ranks({"d": df})["d"].drop(list(REFERENCE_ROWS), errors="ignore")
                k += bool(method in r.index and r[method] <= r.min())
            if seeds:
                out[DATASET_TITLES[c.dataset]] = seeds_phrase(k, len(seeds))
        return out

    def frame(self, name: str) -> "Readings":
        """Readings of another chapter's results read beside this one (cross-dataset)."""
        c = spec_of_chapter(name)
        return Readings(self.extra[name], c.kind, c.dataset, self.extra.get(f"{name} per seed"),
                        source=name, claims=self.claims)

    def rv(self, method: str, metric: str, repeat: int, model: str = "",
           variant: str = "") -> float:
        """The value of one repeat (the Bayesian chapter's rows come per repeat)."""
        d = self.results
        d = d[(d["method"] == method) & (d["metric"] == metric) & (d["model"] == model)
              & (d["variant"] == variant) & (d["repeat"] == repeat)]
        v = pd.to_numeric(d["value"], errors="coerce")
        return float(v.mean()) if len(v) else math.nan

    def better_in_repeats(self, a: str, b: str, metric: str, model: str = "") -> str:
        """``"in k of n repeats"``: where ``a`` is at least as good as ``b`` on ``metric``."""
        return self.claim(a, b, metric, model=model, strict=False, over="repeats").seeds

    def repeats(self) -> list[int]:
        """This run's repeats (the Bayesian chapter's), in order."""
        if "repeat" not in self.results.columns:
            return []
        return sorted(int(x) for x in set(self.results["repeat"].dropna()) if int(x) >= 0)

    def pairs(self) -> list[str]:
        """The class pairs of a C3LT table, in the results' order."""
        return [p for p in dict.fromkeys(self.results["pair"]) if p]

    def evidence(self, name: str, dataset: str | None = None, **where) -> pd.DataFrame:
        """The rows of the committed evidence ``results/tuning/<name>.csv`` of this dataset
        (unless ``dataset`` is given) whose columns equal ``where``; empty when absent."""
        from cflib.bench.results import read_table
        from cflib.bench.tuning import TUNING_DIR

        f = Path(self.extra.get("tuning_dir", TUNING_DIR)) / f"{name}.csv"
        if not f.exists():
            return pd.DataFrame(columns=["dataset", "candidate", "metric", "value"])
        d = read_table(f)
        d = d[d["dataset"] == (dataset or self.dataset)]
        for k, v in where.items():
            if k in d.columns:
                d = d[d[k].astype(str) == str(v)]
        return d

    def tuning(self, name: str, candidate: str, metric: str, dataset: str | None = None,
               **where) -> float:
        """A value of the committed evidence ``results/tuning/<name>.csv`` (this
        dataset's unless ``dataset`` is given, the rows whose columns equal ``where``);
        NaN when absent."""
        d = self.evidence(name, dataset, **where)
        d = d[(d["candidate"] == candidate) & (d["metric"] == metric)]
        return float(pd.to_numeric(d["value"]).mean()) if len(d) else math.nan

    def budget_rule(self) -> str:
        """The budget :func:`cflib.bench.tuning.best_c3lt_budget` picks on the committed
        curve of both validation pairs (``results/tuning/c3lt_budget.csv``, the rows of
        the chapter's generator); "" when the curve is absent."""
        from cflib.bench.tuning import best_c3lt_budget

        ev = pd.concat([self.evidence("c3lt_budget", d, dcgan_epochs=1)
                        for d in ("mnist", "fmnist")], ignore_index=True)
        return best_c3lt_budget(ev) if len(ev) else ""

    def generator_reading(self, name: str, dataset: str | None = None) -> float:
        """:func:`cflib.book.report.tables.generator_reading` of an evidence file."""
        from cflib.book.report.tables import generator_reading

        return generator_reading(self.evidence(name, dataset))

    def candidates(self, name: str, dataset: str | None = None, **where) -> list[str]:
        """The candidates of an evidence file, in its order."""
        d = self.evidence(name, dataset, **where)
        return list(dict.fromkeys(d["candidate"]))


def _mean_ranks(frames: dict) -> pd.DataFrame:
    """The cross-dataset page's mean ranks of C3LT results (``{column: results}``): every
    metric of the table, the paper's rows ranked (:func:`~cflib.book.report.tables.rank_methods`)."""
    from cflib.book.report.tables import paper_rows, rank_methods, rank_summary

    return rank_summary(rank_methods(frames, [s.name for s in specs_of("c3lt")[0].metrics],
                                     paper_rows("c3lt")))


def environment():
    """The Jinja2 environment of the templates: undefined names are errors."""
    import jinja2  # the book's extra, not the library's

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(f=f, d=d, pct=pct, n0=n0)
    return env


def _constants(readings: Readings, profile) -> dict:
    """The settings and constants the templates quote, each read from where the code
    keeps it (the profiles, the choices, the tuning, the methods' configs)."""
    from cflib.bench.choices import LATENT_SEARCH_LAMBDA, VALIDATION_PAIRS
    from cflib.bench.data import CLASS_NAMES
    from cflib.bench.profiles import PROFILES
    from cflib.bench.tuning import (
        C3LT_BUDGET_MIN_VALIDITY,
        C3LT_BUDGET_SLACK,
        C3LT_LEVERS,
        SINK_EPS,
        SINK_IMAGES,
        budget_of,
    )
    from cflib.explainers import C3LT
    from cflib.quantization.recipes import QATConfig

    vp = VALIDATION_PAIRS.get(readings.dataset)
    return {"all_levers": list(C3LT_LEVERS),
            "class_names": CLASS_NAMES.get(readings.dataset, {}),
            # a network sends images off the data to one class (a sink) when it gives
            # one class more than this share of the sink probes (ten classes: 0.1 each)
            "sink_share": 0.3,
            "sink_eps": SINK_EPS, "sink_images": SINK_IMAGES,
            "latent_lambda": LATENT_SEARCH_LAMBDA.get(readings.dataset, math.nan),
            # the candidate of the budget curve this run's C3LT sizes are ("" if none)
            "budget_used": budget_of(profile.c3lt) if profile else "",
            "budget_min_validity": C3LT_BUDGET_MIN_VALIDITY,
            "budget_slack": C3LT_BUDGET_SLACK,
            # a lever "moves" C3LT's proximity when it changes it by more than this
            # (per pixel on [-1, 1]: about a tenth of C3LT's proximity on these tables)
            "lever_effect": 0.03,
            # a C3LT validity below this on a pair in a seed is named and read against
            # the ceiling the classifier leaves
            "validity_floor": 0.95,
            "n_queries": profile.c3lt.n_images if profile else None,
            "paper_dcgan_epochs": PROFILES["paper"].c3lt.dcgan_epochs,
            "paper_alpha": C3LT.Config().alpha,
            # L_prox (Eq. 4) divides the pixel L1 by 1 + p1 + p2 (smoothness, entropy)
            "prox_divisor": 1 + C3LT.Config().p1 + C3LT.Config().p2,
            # the code's bit budget (QATConfig's defaults are the public code's)
            "code_bit_budget": QATConfig().target_avg_bits,
            "validation_pair": f"{vp[0]}→{vp[1]}" if vp else ""}


def render(template: str, readings: Readings, **context) -> str:
    """A discussion template filled from ``readings`` (see the module docstring)."""
    from cflib.bench.profiles import PROFILES
    from cflib.book.report.tables import REFERENCE_ROWS, kendall_tau, same_generator

    names = {k: getattr(readings, k) for k in
             ("v", "m", "sd", "spread", "paper", "values", "seeds_where", "in_seeds",
              "better_in", "tau", "checks", "pairs", "tuning", "ranks", "frame", "rv",
              "evidence", "candidates", "budget_rule", "generator_reading",
              "better_in_repeats", "validity_shortfalls", "seeds_of", "judge_gap",
              "like_explained", "claim_checks", "order", "leads", "claim", "top",
              "best_rank_seeds", "reaches", "redraws")}
    profile = PROFILES.get(str(readings.results["profile"].iloc[0]))
    context = {**_constants(readings, profile), **context}
    return environment().from_string(template).render(
        r=readings, n_seeds=readings.n_seeds, math=math, profile=profile, kendall=kendall_tau,
        confounded_ratio=specs_of("c3lt")[0].redraw_ratio,
        reference_rows=list(REFERENCE_ROWS), same_generator=same_generator,
        **names, **context)


def readings_for(chapter: str, results_dir) -> Readings:
    """The readings of a chapter's results folder (its sweep too, where one exists)."""
    ch = get_chapter(chapter)
    results_dir = Path(results_dir)
    spec = discussions().get(ch.name)
    if spec is None:
        raise ValueError(f"chapter {chapter!r} has no discussion template")
    table, dataset, name, _ = spec
    df = read_results(results_dir / f"{name}.csv")
    profile = df["profile"].iloc[0]
    per_seed = {}
    if reads_sweep(ch, name, profile):
        _, per_seed = read_sweep(name, profile, root=results_dir / "sweep", own=df)
    if per_seed:
        per_seed = {k: read_results_frame(v) for k, v in per_seed.items()}
    from cflib.bench.tuning import TUNING_DIR

    tuning = results_dir / "tuning"
    extra = {"tuning_dir": tuning if tuning.exists() else TUNING_DIR}
    # the other chapters' results this chapter reads (cross_dataset: both C3LT chapters')
    for other in (s.chapter for s in SPECS.values()):
        if f"{other}.csv" in ch.reads and (results_dir / f"{other}.csv").exists():
            own = read_results(results_dir / f"{other}.csv")
            other_profile = str(own["profile"].iloc[0])
            if reads_sweep(ch, other, other_profile):
                _, seeds = read_sweep(other, other_profile, root=results_dir / "sweep", own=own)
                if len(seeds) > 1:       # the means as seed_means makes them, one read
                    extra[f"{other} per seed"] = {k: read_results_frame(v)
                                                  for k, v in seeds.items()}
                    own = mean_of_seeds(seeds, list(own.columns))
            extra[other] = own
    return Readings(df, table, dataset, per_seed or None, extra)


def reads_sweep(chapter, name: str, profile: str) -> bool:
    """Does ``chapter`` declare the sweep of chapter ``name`` among its reads?  Only then
    does its run copy that sweep beside its results and its staleness watch it, so only
    then may its discussion quote it: the page's tables and its prose read the same
    seeds."""
    from cflib.book.chapters import SWEEP_READS

    patterns = chapter.read_patterns(profile)
    return any(r.format(chapter=name, profile=profile) in patterns for r in SWEEP_READS)


def read_results_frame(df: pd.DataFrame) -> pd.DataFrame:
    out = tidy(df)
    out["value"] = pd.to_numeric(out["value"], errors="coerce")
    return out


#: the chapter that ranks the methods on both C3LT chapters' results
CROSS_DATASET = "cross_dataset"


def discussions() -> dict[str, tuple[str, str, str, str]]:
    """chapter -> (reference table, dataset, results file, template) of its discussion:
    every table's (the template is ``book/discussion/<template>.md``; the two C3LT chapters
    share one), and the cross-dataset chapter's (its own template, the first C3LT
    chapter's file)."""
    out = {s.chapter: (s.kind, s.dataset, s.chapter, s.template) for s in SPECS.values()}
    first = specs_of("c3lt")[0]
    out[CROSS_DATASET] = ("c3lt", first.dataset, first.chapter, CROSS_DATASET)
    return out


def template_path(chapter: str, page_dir=None) -> Path:
    """The discussion template of a chapter (which may not exist)."""
    spec = discussions().get(chapter)
    return Path(page_dir or DISCUSSION) / f"{spec[3] if spec else chapter}.md"


def discussion_text(chapter: str, results_dir, page_dir=None) -> str:
    """The chapter's discussion page rendered from ``results_dir`` ('' without a page)."""
    page = template_path(chapter, page_dir)
    if not page.exists():
        return ""
    return render(page.read_text(), readings_for(chapter, results_dir))
