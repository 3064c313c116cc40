"""``tfa-sim tune``: a case's best legal schedule, found in three stages, each candidate recorded with the
stage it reached (docs/guide/tuning.md).

1. **Legality** (``space``): every point of the space — a sweep file's ``[base]``, ``[axes]`` and
   constraints over the user's config, or the default space of every knob that applies to the case — is
   built as a config; illegal points and points a constraint rejects go no further.
2. **Screen** (``screen``): every legal candidate's time is estimated from short probe simulations of its
   blocks with the real engine (one block alone on one core, cut to two lengths, cached by what decides a
   block's program) laid over its real block list, with the chip's L2 and HBM shared between the cores.
3. **Finalists** (``search``): full simulations, exactly as ``tfa-sim run`` runs the config, in the order of
   the estimates, until the estimates, corrected by the most favourable simulated/estimated ratio seen,
   say that no candidate left can beat the best simulated one by more than 1 % (or ``--budget-s`` is
   spent); the kernel's defaults are simulated too, for the gain.

``tuner`` runs them into a directory (resumable, by the run directories' rules) and ``report`` writes what
the tune answers: ``best.toml``, ``tune.json``, ``report.txt``, ``landscape.png``.
"""
from tfa_sim.explore.tune.tuner import tune

__all__ = ["tune"]
