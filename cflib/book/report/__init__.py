"""Tables beside the papers' values, the chapters' figures and the README headline.

* :mod:`cflib.book.report.tables`: ours beside the papers' numbers, pivots, rankings;
* :mod:`cflib.book.report.figures`: counterfactual grids, curves, heatmaps;
* :mod:`cflib.book.report.readme`: the README's headline block (``python -m cflib.book.report``);
* :mod:`cflib.book.report.comparison`: a user's method beside the book's rows
  (``cflib bench``, :func:`cflib.bench.compare.compare`'s page).

Paper values come from :mod:`cflib.bench.reference`, never typed into a notebook.
"""
from cflib.book.report.comparison import (
    bench_grid,
    bench_intervals,
    bench_page,
    bench_ranks,
    bench_reading,
    bench_section,
    bench_table,
    bench_verdict,
)
from cflib.book.report.display import Page, figure_html, fmt, fold, page_table, row_anchor, verdicts
from cflib.book.report.figures import (
    plot_acc_vs_vd,
    plot_aupc_curves,
    plot_bayes_grid,
    plot_bit_allocation,
    plot_c3lt_budget_curves,
    plot_c3lt_training,
    plot_cf_grid,
    plot_fraction_of_bound,
    plot_im1_vs_confidence,
    plot_latent_frontier,
    plot_lever_frontier,
    plot_perturbation_curves,
    plot_query_dependence,
    plot_rank_heatmaps,
    plot_recourse_distributions,
    plot_recourse_grid,
    plot_seconds,
    plot_time_vs_batch,
    plot_vd_vs_bits,
)
from cflib.book.report.readme import (
    headline,
    markdown_bayes,
    markdown_ours_paper,
    markdown_quant,
    update_readme,
)
from cflib.book.report.tables import (
    bayes_table,
    budget_evidence,
    class_accuracy_table,
    comparison_table,
    confounded_table,
    dense_rate,
    dense_share,
    first_run_tables,
    generator_reading,
    gpu_chapter_table,
    judges_table,
    kendall_tau,
    loops_table,
    machine_table,
    metrics_table,
    networks_note,
    networks_page_table,
    ops_table,
    pair_table,
    pair_title,
    pairs_table,
    paper_rows,
    performance_table,
    perturbation_table,
    profile_table,
    psce_ablation_table,
    quant_checks_table,
    quant_table,
    rank_methods,
    rank_summary,
    ranking_agreement,
    read_first_run,
    read_gpu_chapter,
    read_ops,
    read_steps,
    same_generator,
    spread_table,
    step_syncs_left,
    steps_table,
    style,
    timing_beside_papers,
    tuning_table,
)

__all__ = ["bench_grid", "bench_intervals", "bench_page", "bench_ranks", "bench_reading", "bench_verdict", "bench_section",
           "bench_table", "figure_html", "fold", "loops_table", "budget_evidence", "ops_table", "dense_share", "dense_rate", "read_ops", "read_steps", "steps_table", "step_syncs_left", "read_first_run", "read_gpu_chapter", "gpu_chapter_table", "first_run_tables", "generator_reading", "machine_table", "Page", "fmt", "page_table", "row_anchor", "verdicts", "plot_c3lt_training", "judges_table", "networks_note", "networks_page_table", "plot_query_dependence", "plot_lever_frontier", "plot_c3lt_budget_curves", "plot_latent_frontier", "confounded_table", "plot_im1_vs_confidence", "psce_ablation_table", "bayes_table", "class_accuracy_table", "comparison_table", "kendall_tau", "metrics_table", "pair_table",
           "pair_title", "pairs_table", "perturbation_table", "profile_table", "paper_rows", "rank_methods", "rank_summary", "same_generator",
           "ranking_agreement", "spread_table", "style", "tuning_table", "plot_aupc_curves", "plot_bayes_grid", "plot_cf_grid",
           "plot_perturbation_curves", "plot_rank_heatmaps", "plot_seconds", "headline",
           "markdown_bayes", "markdown_ours_paper", "markdown_quant", "update_readme", "quant_table",
           "quant_checks_table", "plot_acc_vs_vd", "plot_vd_vs_bits", "plot_recourse_grid",
           "plot_bit_allocation", "plot_recourse_distributions", "performance_table",
           "timing_beside_papers", "plot_time_vs_batch", "plot_fraction_of_bound"]
