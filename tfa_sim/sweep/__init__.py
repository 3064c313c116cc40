"""Schedule exploration: ``tfa-sim sweep`` and ``tfa-sim sweep-report``.

``spec`` reads and checks sweep files and generates the points, ``execute``
runs them (process pool or dask, resumable results files), ``report`` ranks
them and draws the plots.
"""
from tfa_sim.sweep.execute import read_results, run_point, run_sweep
from tfa_sim.sweep.report import format_sweep_report, pareto, sweep_report
from tfa_sim.sweep.spec import METRICS, Sweep, load_sweep, point_key, points

__all__ = ["METRICS", "Sweep", "format_sweep_report", "load_sweep", "pareto", "point_key", "points",
           "read_results", "run_point", "run_sweep", "sweep_report"]
