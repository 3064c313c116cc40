"""tfa_sim.sim.parallel: each sweep worker's share of the CPUs, work forked from inside a worker, and a worker's
memory (no cyclic GC, retired past a bound)."""
from __future__ import annotations

import gc
import mmap
import os

import pytest

from tfa_sim.explore.sweep import pool
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


_HELD: list[mmap.mmap] = []


def hold_memory(_item: object) -> tuple[int, bool]:
    """Run in a sweep worker: keep 8 MiB of new pages alive (as uncollected garbage would), report the process
    and its GC.  New pages, mapped here: a malloc'd block could reuse heap the parent freed, already resident
    (in a long pytest worker it did, and the worker's resident size did not grow)."""
    block = mmap.mmap(-1, 8 * 2**20)
    for page in range(0, len(block), mmap.PAGESIZE):
        block[page] = 1  # written, so resident
    _HELD.append(block)
    return os.getpid(), gc.isenabled()


def test_a_worker_runs_without_gc_and_retires_when_its_memory_grows(monkeypatch):
    """A worker's garbage is left to its exit: past RETIRE_BYTES of growth it hands back its result and a fresh
    worker takes the next item; no item is lost or run twice."""
    monkeypatch.setattr(pool, "RETIRE_BYTES", 20 * 2**20)
    with WorkerPool(hold_memory, 1) as workers:
        outcomes = [outcome for _, outcome in workers.imap_unordered(range(9))]
    assert [kind for kind, _ in outcomes] == ["done"] * 9
    pids = [pid for _, (pid, _gc) in outcomes]
    assert not any(enabled for _, (_pid, enabled) in outcomes)
    assert 3 <= len(set(pids)) <= 5, pids  # 8 MiB an item, retiring past 20 MiB: every third item or so
    assert pids == sorted(pids, key=pids.index)  # each worker's items in one run, none shared back


def test_a_timeout_beyond_what_poll_takes_still_waits_for_the_result():
    """[sweep] point_timeout = 2⁶³ − 1 is accepted; the pool waits in bounded steps instead of overflowing."""
    with WorkerPool(hold_memory, 1, timeout=float(2**63 - 1)) as workers:
        assert [kind for _, (kind, _value) in workers.imap_unordered([None])] == ["done"]
