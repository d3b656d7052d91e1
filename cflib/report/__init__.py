"""Tables beside the papers' values, the chapters' figures and the README headline.

* :mod:`cflib.report.tables`: ours beside the papers' numbers, pivots, rankings;
* :mod:`cflib.report.figures`: counterfactual grids, curves, heatmaps;
* :mod:`cflib.report.readme`: the README's headline block (``python -m cflib.report``).

Paper values come from :mod:`cflib.reference`, never typed into a notebook.
"""
from cflib.report.figures import (
    plot_aupc_curves,
    plot_bayes_grid,
    plot_cf_grid,
    plot_perturbation_curves,
    plot_rank_heatmaps,
    plot_seconds,
)
from cflib.report.readme import headline, markdown_bayes, markdown_ours_paper, update_readme
from cflib.report.tables import (
    bayes_table,
    comparison_table,
    kendall_tau,
    metrics_table,
    pair_table,
    pair_title,
    pairs_table,
    perturbation_table,
    profile_table,
    rank_methods,
    rank_summary,
    ranking_agreement,
    style,
    tuning_table,
)

__all__ = ["bayes_table", "comparison_table", "kendall_tau", "metrics_table", "pair_table",
           "pair_title", "pairs_table", "perturbation_table", "profile_table", "rank_methods", "rank_summary",
           "ranking_agreement", "style", "tuning_table", "plot_aupc_curves", "plot_bayes_grid", "plot_cf_grid",
           "plot_perturbation_curves", "plot_rank_heatmaps", "plot_seconds", "headline",
           "markdown_bayes", "markdown_ours_paper", "update_readme"]
