"""The tuner's third stage: full simulations of the finalists, which decide.

The screened candidates are simulated in the order of their estimates, exactly as ``tfa-sim run`` runs
them (timing only, no fold), through the sweep's executor (:func:`tfa_sim.explore.sweep.execute.run_points`:
local worker processes or dask, every row appended to ``OUT/results.jsonl`` the moment it arrives, so a
rerun skips what is there).  The search draws its next candidate only when a worker frees up, so each
decision sees every row so far.

**Stopping rule.**  After at least :data:`MIN_SIMULATIONS` simulations, the search stops when the next
candidate's estimate, corrected by the most favourable simulated/estimated ratio seen so far (the most the
screen has underestimated a simulated candidate's advantage), cannot beat the best simulated value by more
than :data:`MARGIN` (1 %): the candidates after it have larger estimates still.  It also stops when the
space is exhausted, and starts no new simulation once ``--budget-s`` is spent (except the first finalist
and the kernel's defaults, which an answer needs).  The kernel's defaults for the case (the sweep's
reference point) are simulated second, for the gain, whether or not they are a candidate.
"""
from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tfa_sim.explore.sweep.points import point_key
from tfa_sim.explore.tune.space import Candidate

#: Simulations before the stopping rule may stop the search.
MIN_SIMULATIONS = 3
#: How much better than the best simulated value a candidate must be able to be to get simulated.
MARGIN = 0.01


def task(key: str, overrides: dict[str, Any], config: dict[str, Any], metric: str,
         reference: bool = False) -> dict[str, Any]:
    """A timing-only point for the sweep's workers (``runpoint.run_task``)."""
    return {"point": {"key": key, "overrides": overrides, "config": config}, "constraints": (), "metric": metric,
            "fold": False, "reference": reference}


@dataclass
class Search:
    """The finalists' search: ``order`` the screened candidates by estimate (twins left out), ``reference``
    the kernel's defaults as a full config (None when they are illegal for the case), ``rows`` the rows
    simulated so far by key (a resumed tune's to begin with)."""

    order: list[Candidate]
    reference: dict[str, Any] | None
    metric: str
    rows: dict[str, dict[str, Any]]
    deadline: float | None = None  # time.monotonic() after which no new simulation starts
    stop: str = ""
    launched: set[str] = field(default_factory=set)

    @property
    def reference_key(self) -> str | None:
        return None if self.reference is None else point_key(self.reference)

    def simulated(self) -> list[Candidate]:
        """The candidates with a row, in the screen's order."""
        return [c for c in self.order if c.key in self.rows]

    def _best(self) -> tuple[float, float] | None:
        """The best simulated value and the most favourable simulated/estimated ratio (None: nothing ok yet)."""
        ok = [(self.rows[c.key][self.metric], c.estimate) for c in self.simulated()
              if self.rows[c.key]["status"] == "ok" and c.estimate]
        if not ok:
            return None
        return min(v for v, _ in ok), min(v / e for v, e in ok)

    def should_stop(self, cand: Candidate) -> bool:
        """Whether the search ends before simulating ``cand`` (recording why in :attr:`stop`)."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.stop = "the --budget-s was spent"
            return True
        best = self._best()
        if len(self.simulated()) < MIN_SIMULATIONS or best is None or cand.estimate is None:
            return False
        value, ratio = best
        if cand.estimate * ratio >= value * (1 - MARGIN):
            self.stop = (f"the next candidate's estimate {cand.estimate:.6g} × the most favourable simulated/"
                         f"estimated ratio {ratio:.4f} = {cand.estimate * ratio:.6g} cannot beat the best simulated "
                         f"so far, {value:.6g}, by more than {MARGIN * 100:g} %")
            return True
        return False

    def tasks(self) -> Iterator[dict[str, Any]]:
        """The simulations to run, drawn one at a time as workers free up (module docstring)."""
        for n, cand in enumerate(self.order):
            if n == 1:
                yield from self._reference()
            if cand.key in self.rows or cand.key in self.launched:
                continue
            if n and self.should_stop(cand):
                break
            assert cand.config is not None
            self.launched.add(cand.key)
            yield task(cand.key, cand.overrides, cand.config.to_dict(), self.metric)
        else:
            self.stop = f"every one of the {len(self.order)} screened candidates was simulated"
        yield from self._reference()

    def _reference(self) -> Iterator[dict[str, Any]]:
        key = self.reference_key
        if self.reference is not None and key is not None and key not in self.rows and key not in self.launched:
            self.launched.add(key)
            yield task(key, {}, self.reference, self.metric, reference=True)

    def record(self, _task: dict[str, Any], row: dict[str, Any]) -> None:
        """A finished simulation's row (``run_points``' ``on_row``)."""
        self.rows[row["key"]] = row
