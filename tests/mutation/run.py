"""A mutation check you can run: hand-made mutants of the metrics (``cflib/metrics``), the
explainer base (``cflib/explainers/base.py``) and the results writer
(``cflib/bench/results.py``), each run against a fixed fast test subset.

    python tests/mutation/run.py              # every mutant, then the kill rate
    python tests/mutation/run.py --list       # what each mutant changes
    python tests/mutation/run.py M07 R03      # some of them

Each mutant replaces one snippet of one file, found there exactly once, by another (a
flipped comparison, an off-by-one, a dropped term, a swapped argument, a wrong
reduction...).  The mutant is written into a temporary copy of the project (``cflib/``,
``tests/``, ``pyproject.toml``), never into the worktree; the subset of its target runs
in a subprocess with that copy first on ``PYTHONPATH``, with ``-x``: a failing test kills
the mutant.  A subset that runs past ``--timeout`` seconds counts as killed, and says so.
The unmutated copy must pass every subset first.  Exit status 0 when every mutant is
killed, 1 otherwise (the survivors are listed).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the fixed fast test subset of each target
SUBSETS = {
    "metrics": ["tests/test_metrics.py", "tests/test_recourse_metrics.py",
                "tests/test_bayesian.py::test_implausibility_two_points",
                "tests/test_bayesian.py::test_reference_rows_and_edit_size_metrics",
                "tests/test_bayesian.py::test_im1_by_class_matches_im1",
                "tests/test_fidelity.py::test_robustness_auc_on_known_curves"],
    "base": ["tests/test_output_check.py", "tests/test_base.py"],
    "results": ["tests/test_results_writer.py"],
}


@dataclass(frozen=True)
class Mutant:
    id: str
    path: str       # relative to the project
    old: str        # the snippet, found exactly once
    new: str
    what: str

    @property
    def target(self) -> str:
        if self.path.startswith("cflib/metrics/"):
            return "metrics"
        return "base" if self.path.endswith("base.py") else "results"


B, A, P, R, RB, S = ("cflib/metrics/basic.py", "cflib/metrics/aupc.py",
                     "cflib/metrics/plausibility.py", "cflib/metrics/recourse.py",
                     "cflib/metrics/robustness.py", "cflib/metrics/spec.py")
E, W = "cflib/explainers/base.py", "cflib/bench/results.py"

MUTANTS = [
    # -- metrics -------------------------------------------------------------------------------
    Mutant("M01", B, "out = out & (pred != target)", "out = out",
           "validity: a query already in its target counts (dropped term)"),
    Mutant("M02", B, "pred_cf = pred_cf.argmax(1)", "pred_cf = pred_cf.argmin(1)",
           "validity: scores read with argmin (flipped)"),
    Mutant("M03", B, "return (x_cf - x).abs().flatten(1).mean(1)",
           "return (x_cf - x).abs().flatten(1).sum(1)", "proximity: sum, not mean (reduction)"),
    Mutant("M04", B, "return ((x_cf - x).abs() / 2).flatten(1).sum(1)",
           "return (x_cf - x).abs().flatten(1).sum(1)", "L1 on [-1, 1], not [0, 1] (dropped /2)"),
    Mutant("M05", B, "/ 2 > threshold).flatten", "/ 2 >= threshold).flatten",
           "L0 counts a change at the threshold (> becomes >=)"),
    Mutant("M06", B, "if not threshold >= 0:", "if not threshold > 0:",
           "L0 refuses threshold 0 (>= becomes >)"),
    Mutant("M07", A, "return self.aupc_target - self.aupc_query",
           "return self.aupc_query - self.aupc_target", "COUT: query minus target (swapped)"),
    Mutant("M08", A, "dx=1.0 / steps", "dx=1.0 / (steps + 1)", "AUPC: x-step off by one"),
    Mutant("M09", A, "descending=True", "descending=False",
           "AUPC: smallest changes pasted first (flipped order)"),
    Mutant("M10", A, "mask = rank.unsqueeze(1) < counts", "mask = rank.unsqueeze(1) <= counts",
           "AUPC: one pixel more pasted at every step (off by one)"),
    Mutant("M11", A, "tb = target[i:i + chunk]", "tb = query[i:i + chunk]",
           "AUPC: the target curve reads the query class (swapped argument)"),
    Mutant("M12", P, "return _sq(x_cf, _recon(ae_target, x_cf)) / (_sq(x_cf, _recon(ae_query, "
                     "x_cf)) + eps)",
           "return _sq(x_cf, _recon(ae_query, x_cf)) / (_sq(x_cf, _recon(ae_target, x_cf)) + eps)",
           "IM1: the autoencoders swapped"),
    Mutant("M13", P, "_recon(ae_all, x_cf)) / 4.0", "_recon(ae_all, x_cf)) / 2.0",
           "IM2: numerator on the wrong scale (/2, not /4)"),
    Mutant("M14", P, "(x_cf + 1).div(2).abs()", "x_cf.abs()",
           "IM2: denominator on [-1, 1] (dropped shift)"),
    Mutant("M15", P, "autoencoders[tc], autoencoders[qc]", "autoencoders[qc], autoencoders[tc]",
           "IM1 by class: target and query autoencoders swapped"),
    Mutant("M16", R, "out = (~q_valid).float().cpu()", "out = q_valid.float().cpu()",
           "VD events: acceptances counted (dropped negation)"),
    Mutant("M17", R, "((qc - fc) / fc.clamp_min(1e-8))", "((qc - fc) / qc.clamp_min(1e-8))",
           "CRG: divided by the compressed model's cost (swapped argument)"),
    Mutant("M18", R, "(a.norm(dim=1) * b.norm(dim=1)).clamp_min(1e-8)",
           "(a.norm(dim=1) * b.norm(dim=1))", "DirSim: no guard for a zero action (dropped clamp)"),
    Mutant("M19", R, "max(0.0, centre - half)", "max(0.0, centre + half)",
           "Wilson: lower end above the centre (flipped sign)"),
    Mutant("M20", R, "lo = 0.0 if k == 0 else", "lo = 0.0 if k <= 1 else",
           "Wilson: lower end 0 at one event too (off by one)"),
    Mutant("M21", R, "return (k / n if n else", "return (k / (n + 1) if n else",
           "rate: divided by n + 1 (off by one)"),
    Mutant("M22", R, "def _nanmean(v: torch.Tensor) -> float:\n    v = v[~torch.isnan(v)]",
           "def _nanmean(v: torch.Tensor) -> float:\n    v = v[~torch.isinf(v)]",
           "nan-mean keeps the NaNs (wrong filter)"),
    Mutant("M23", R, "[(1 - level) / 2, (1 + level) / 2]", "[(1 - level), (1 + level) / 2]",
           "bootstrap: the lower tail at 5 %, not 2.5 % (dropped /2)"),
    Mutant("M24", R, "est = float(stat(a[None])[0] - stat(b[None])[0])",
           "est = float(stat(b[None])[0] - stat(a[None])[0])",
           "paired bootstrap: b - a (swapped)"),
    Mutant("M25", R, "return z_t - others.max(1).values", "return others.max(1).values - z_t",
           "target margin: sign flipped (swapped)"),
    Mutant("M26", R, "float(t) / base for m", "base / float(t) for m",
           "overhead: inverted ratio (swapped)"),
    Mutant("M27", RB, "largest=False", "largest=True",
           "implausibility: the farthest training images (flipped)"),
    Mutant("M28", RB, "math.ceil(frac * len(pool))", "math.floor(frac * len(pool))",
           "implausibility: floor of the fraction (off by one)"),
    Mutant("M29", RB, "return pert[:, base].float().mean().item()",
           "return pert.float().mean().item()",
           "robustness ratio: invalid counterfactuals counted (dropped filter)"),
    Mutant("M30", RB, "return area / (xs[-1] - xs[0])", "return area",
           "robustness AUC: not normalised (dropped term)"),
    Mutant("M31", S, "return -value if self.higher_is_better else value",
           "return value if self.higher_is_better else -value",
           "metric spec: ranking direction flipped"),
    # -- the explainer base ---------------------------------------------------------------------
    Mutant("E01", E, "return x_cf.detach().to(x.dtype).clamp(X_MIN, X_MAX)",
           "return x_cf.detach().to(x.dtype)", "output: no clamp (dropped term)"),
    Mutant("E02", E, "bad = ~torch.isfinite(x_cf.detach()).flatten(1).all(1)",
           "bad = torch.isnan(x_cf.detach()).flatten(1).any(1)",
           "output: inf passes the check (wrong test)"),
    Mutant("E03", E, "tuple(x_cf.shape) != tuple(x.shape)", "len(x_cf) != len(x)",
           "output: only the length checked (weaker check)"),
    Mutant("E04", E, "success=(pred_cf == target) & ~already", "success=(pred_cf == target)",
           "success: already-target queries count (dropped term)"),
    Mutant("E05", E, "if already.all():", "if already.any():",
           "explain: one already-target query refuses the batch (all becomes any)"),
    Mutant("E06", E, '"model_passes": rows[0] / len(x)', '"model_passes": rows[0]',
           "model passes: not per query (dropped division)"),
    Mutant("E07", E, "for i in range(0, len(x), bs):\n            out[i:i + bs] = self._search",
           "for i in range(0, len(x) - 1, bs):\n            out[i:i + bs] = self._search",
           "default search: the last row of an odd batch skipped (off by one)"),
    Mutant("E08", E, "if seed is not None and (isinstance(seed, bool) or not",
           "if seed is not None and (not", "explain: a bool seed accepted (dropped check)"),
    Mutant("E09", E, "or not isinstance(value, bool))", "or True)",
           "config: a bool accepted for an int field (dropped check)"),
    Mutant("E10", E, "if self.batch_size < 1:", "if self.batch_size < 0:",
           "config: batch_size 0 accepted (off by one)"),
    Mutant("E11", E, "return self.success.float().mean().item()",
           "return self.success.float().sum().item()", "validity: sum, not mean (reduction)"),
    Mutant("E12", E, "return v[:n]", "return v[:n + 1]", "head: one row too many (off by one)"),
    Mutant("E13", E, "model_device(net) != self.device:", "model_device(net) == self.device:",
           "devices: a network on the classifier's device refused (flipped)"),
    Mutant("E14", E, "if not self.fitted:\n            raise RuntimeError(f\"{self.name} must be "
                     "fitted first",
           "if False:\n            raise RuntimeError(f\"{self.name} must be fitted first",
           "explain: an unfitted method runs (dropped check)"),
    Mutant("E15", E, "pred = probs.argmax(1)", "pred = probs.argmin(1)",
           "explain: the query's decision by argmin (flipped)"),
    # -- the results writer ---------------------------------------------------------------------
    Mutant("R01", W, 'df[c] = df[c].fillna("").astype(str)', "df[c] = df[c].astype(str)",
           "tidy: a missing text becomes 'nan' (dropped fillna)"),
    Mutant("R02", W, 'df = pd.read_csv(path, keep_default_na=False)\n    _READ.add(str(path.resolve()))'
                     '\n    df["value"]',
           'df = pd.read_csv(path)\n    _READ.add(str(path.resolve()))\n    df["value"]',
           "read_results: pandas' NaN spellings ('NA', 'None') read as missing"),
    Mutant("R03", W, 'df["value"] = pd.to_numeric(df["value"], errors="coerce")', "pass",
           "read_results: values left as text where one is empty (dropped conversion)"),
    Mutant("R04", W, "return df[COLUMNS + [c for c in OPTIONAL if c in df.columns]]",
           "return df[COLUMNS]", "tidy: the repeat column dropped"),
    Mutant("R05", W, '"metric", "train_seed", "data_seed",', '"metric", "data_seed",',
           "pair means: two training seeds averaged together (dropped key)"),
    Mutant("R06", W, 'return df[(df["pair"] != "") & (df["aggregate"] == "")]',
           'return df[(df["pair"] != "") | (df["aggregate"] == "")]',
           "pair rows: and becomes or"),
    Mutant("R07", W, 'return d[d["variant"].fillna("") == ""]',
           'return d[d["variant"].fillna("") != ""]', "table means: the variants kept (flipped)"),
    Mutant("R08", W, "return write_table(tidy(df),", "return write_table(df,",
           "write_results: the schema not checked before writing (dropped check)"),
    Mutant("R09", W, 'MEAN_OVER_PAIRS = "mean over pairs"', 'MEAN_OVER_PAIRS = "mean over pair"',
           "the aggregate's name misspelt"),
]


def _copy_project(dest: Path) -> None:
    for name in ("cflib", "tests"):
        shutil.copytree(ROOT / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "mutation"))
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def _run_subset(copy: Path, target: str, timeout: float) -> tuple[str, float, str]:
    """('passed' | 'failed' | 'timeout', seconds, the last lines of the output)."""
    env = {**os.environ, "PYTHONPATH": str(copy), "CFLIB_CACHE": str(copy / "cache"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m",
           "not slow", *SUBSETS[target]]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - t0, ""
    tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-3:])
    return ("passed" if p.returncode == 0 else "failed"), time.perf_counter() - t0, tail


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ids", nargs="*", help="mutant ids (default: all)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds a subset may run (default 300)")
    args = ap.parse_args(argv)
    ids = [m.id for m in MUTANTS]
    assert len(set(ids)) == len(ids), "mutant ids repeat"
    for m in MUTANTS:                          # every snippet is where the mutant says
        n = (ROOT / m.path).read_text().count(m.old)
        if n != 1:
            raise SystemExit(f"{m.id}: the snippet occurs {n} times in {m.path}: {m.old!r}")
    if args.list:
        for m in MUTANTS:
            print(f"{m.id}  {m.path:32}  {m.what}")
        return 0
    unknown = sorted(set(args.ids) - set(ids))
    if unknown:
        raise SystemExit(f"unknown mutant id(s) {unknown}; see --list")
    chosen = [m for m in MUTANTS if not args.ids or m.id in args.ids]
    with tempfile.TemporaryDirectory(prefix="cflib-mutants-") as tmp:
        copy = Path(tmp)
        _copy_project(copy)
        for target in sorted({m.target for m in chosen}):
            status, secs, tail = _run_subset(copy, target, args.timeout)
            print(f"baseline {target:8} {status} ({secs:.0f} s)", flush=True)
            if status != "passed":
                raise SystemExit(f"the unmutated subset of {target} does not pass:\n{tail}")
        killed, survived = [], []
        for m in chosen:
            f = copy / m.path
            original = f.read_text()
            f.write_text(original.replace(m.old, m.new))
            try:
                status, secs, tail = _run_subset(copy, m.target, args.timeout)
            finally:
                f.write_text(original)
            dead = status != "passed"
            (killed if dead else survived).append(m)
            how = {"failed": "killed", "timeout": "killed (timeout)"}.get(status, "SURVIVED")
            print(f"{m.id} {how:16} {secs:5.0f} s  {m.path}: {m.what}", flush=True)
    n = len(chosen)
    print(f"\nkill rate: {len(killed)}/{n} = {len(killed) / n:.0%}")
    for m in survived:
        print(f"  survived {m.id}: {m.what}")
    return 0 if not survived else 1


if __name__ == "__main__":
    sys.exit(main())
