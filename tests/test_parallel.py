"""tfa_sim.sim.parallel: each sweep worker's share of the CPUs, and work forked from inside a worker."""
from __future__ import annotations

import os

import pytest

from tfa_sim.explore.sweep.pool import WorkerPool
from tfa_sim.sim.parallel import Forked, can_fork, spare_cpus


def share_and_fork(_item: object) -> tuple[int, object]:
    """Run in a sweep worker: its CPU share, and a forked helper's result when it may fork."""
    if not can_fork():
        return spare_cpus(), None
    helper = Forked(sum, [1, 2, 3])
    try:
        return spare_cpus(), helper.result()
    finally:
        helper.close()


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_sweep_worker_gets_its_share_of_the_cpus_and_can_fork_with_two(jobs):
    cpus = len(os.sched_getaffinity(0))
    with WorkerPool(share_and_fork, jobs) as pool:
        outcomes = [outcome for _, outcome in pool.imap_unordered([None] * jobs)]
    share = max(1, cpus // jobs)
    assert outcomes == [("done", (share, 6 if share > 1 else None))] * jobs


def test_a_failing_helper_gives_none_and_is_reaped():
    helper = Forked(lambda: 1 / 0)
    try:
        assert helper.result() is None
    finally:
        helper.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(helper._pid, os.WNOHANG)
