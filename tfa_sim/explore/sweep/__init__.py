"""Schedule exploration: ``tfa-sim sweep`` and ``tfa-sim sweep-report``.

Modules, one job each: ``spec`` reads and checks sweep files, ``schema`` and
``constraints`` know the config keys and the constraint language, ``points``
numbers the points and names their shapes and references, ``runpoint``
simulates one point, ``pool`` runs worker processes, ``results`` keeps the
sweep directory's files honest, ``execute`` runs or resumes a sweep,
``report`` ranks the results and ``plots`` draws them.
"""
from tfa_sim.explore.sweep.execute import default_out, run_sweep
from tfa_sim.explore.sweep.points import indices, point_at, point_key, points
from tfa_sim.explore.sweep.report import format_sweep_report, pareto, sweep_report
from tfa_sim.explore.sweep.results import read_results, results_table
from tfa_sim.explore.sweep.spec import METRICS, Sweep, load_sweep

__all__ = ["METRICS", "Sweep", "default_out", "format_sweep_report", "indices", "load_sweep", "pareto", "point_at",
           "point_key", "points", "read_results", "results_table", "run_sweep", "sweep_report"]
