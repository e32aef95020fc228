"""Factorial experiments on the emulated router (`npk experiment`).

    design.py    designs as data: factors, levels, targets, full / fractional / sweep,
                 replications, confounding and resolution (load_design, Design)
    execute.py   one configuration -> one run of the router: windowed series, responses,
                 capacity trials (run_one, run_config); the only module that touches
                 the router harness
    steady.py    MSER-5 warm-up cut, batch-means CIs, the stopping rule
    capacity.py  RFC 2544 zero-loss search over per-port rates
    store.py     the resumable results store and its CSV / Parquet table
    runner.py    parallel execution: local process pool or Dask (run_experiment)
    analysis.py  sign-table effects, allocation of variation, CIs, ANOVA (analyze)
    anova_types.py  type II and type III sums of squares of coded two-level columns
    interactions.py significant interactions in words, cell means with CIs
    compare.py   two result sets' effects side by side (compare)
    export.py    the effects table as rows, CSV and LaTeX
    figures.py   the README's seed 003 figures from a recorded full run
    plots.py     matplotlib figures
    report.py    HTML / Markdown report (build)
    cli.py       the click commands
"""
