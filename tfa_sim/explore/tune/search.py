"""The tuner's third stage: full simulations of the finalists, which decide.

The screened candidates are simulated in the order of their estimates, exactly as ``tfa-sim run`` runs
them (timing only, no fold), through the sweep's executor (:func:`tfa_sim.explore.sweep.execute.run_points`:
local worker processes or dask, every row appended to ``OUT/results.jsonl`` the moment it arrives, so a
rerun skips what is there).  The search draws its next candidate when a worker frees up and decides on the
rows of the candidates before it but the last :data:`AHEAD` (one simulation runs while the next is drawn).
While one of those rows is still missing, the candidate is simulated ahead, and it counts only if the search
reaches it once every row is in (:meth:`Search.settle`).  So the answer does not depend on which worker
finishes first, nor on how many there are.

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
#: The candidates just before the next one that its decision does not wait for: one runs while it is drawn.
AHEAD = 1


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

    decided: int | None = None  # the search took order[:decided] (settle()); None: still searching

    @property
    def reference_key(self) -> str | None:
        return None if self.reference is None else point_key(self.reference)

    def simulated(self) -> list[Candidate]:
        """The candidates the search took that have a row, in the screen's order (once settled, not those
        simulated ahead past its stop)."""
        end = len(self.order) if self.decided is None else self.decided
        return [c for c in self.order[:end] if c.key in self.rows]

    def decidable(self, n: int) -> bool:
        """Whether every row candidate ``n``'s decision reads is in."""
        return all(c.key in self.rows for c in self.order[:max(n - AHEAD, 0)])

    def verdict(self, n: int) -> str:
        """Why the search stops before candidate ``n``, from the rows of the candidates before it but the last
        :data:`AHEAD` ("": it goes on)."""
        before = [c for c in self.order[:max(n - AHEAD, 0)] if c.key in self.rows]
        ok = [(self.rows[c.key][self.metric], c.estimate) for c in before
              if self.rows[c.key]["status"] == "ok" and c.estimate]
        cand = self.order[n]
        if len(before) < MIN_SIMULATIONS or not ok or cand.estimate is None:
            return ""
        value, ratio = min(v for v, _ in ok), min(v / e for v, e in ok)
        if cand.estimate * ratio < value * (1 - MARGIN):
            return ""
        return (f"the next candidate's estimate {cand.estimate:.6g} × the most favourable simulated/estimated ratio "
                f"{ratio:.4f} = {cand.estimate * ratio:.6g} cannot beat {value:.6g}, the best of the {len(before)} "
                f"simulations it is decided on, by more than {MARGIN * 100:g} %")

    def tasks(self) -> Iterator[dict[str, Any]]:
        """The simulations to run, drawn one at a time as workers free up (module docstring)."""
        for n, cand in enumerate(self.order):
            if n == 1:
                yield from self._reference()
            if n and self.deadline is not None and time.monotonic() > self.deadline:
                self.stop = "the --budget-s was spent"
                break
            if n and self.decidable(n):
                why = self.verdict(n)
                if why:
                    self.stop = why
                    break
            if cand.key in self.rows or cand.key in self.launched:
                continue
            assert cand.config is not None
            self.launched.add(cand.key)
            yield task(cand.key, cand.overrides, cand.config.to_dict(), self.metric)
        else:
            self.stop = f"every one of the {len(self.order)} screened candidates was simulated"
        yield from self._reference()

    def settle(self) -> None:
        """Once every row is in: the candidates the search takes, each decided as :meth:`verdict` says; the first
        it would not simulate ends them (a candidate with no row ends them too: the budget was spent)."""
        for n in range(1, len(self.order)):
            why = self.verdict(n)
            if why or self.order[n].key not in self.rows:
                self.stop = why or self.stop
                self.decided = n
                return
        self.decided = len(self.order)

    def _reference(self) -> Iterator[dict[str, Any]]:
        key = self.reference_key
        if self.reference is not None and key is not None and key not in self.rows and key not in self.launched:
            self.launched.add(key)
            yield task(key, {}, self.reference, self.metric, reference=True)

    def record(self, _task: dict[str, Any], row: dict[str, Any]) -> None:
        """A finished simulation's row (``run_points``' ``on_row``)."""
        self.rows[row["key"]] = row
