"""The buffer layer, tested the way SimPy tests its resources: a small environment per test, one behaviour
each, expected values worked out by hand (pools, flags, GM FIFOs and their credit rule, the l1_exp_max ring,
tile stores, GM sharing, pipes, and the block-end check)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import simpy

from tfa_sim.buffers.data import Compute, Const, Move, TileStore, View
from tfa_sim.buffers.fifo import GmFifo, Ring
from tfa_sim.buffers.pools import FLAG_MAX, Flag, HazardError, Pending, PingPong
from tfa_sim.clock.simpy_adapter import run
from tfa_sim.engine.core import Core
from tfa_sim.engine.gm import GlobalMemory
from tfa_sim.engine.issue import IssueStream
from tfa_sim.engine.pipes import Instr, Pipe, Stats
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import load_config
from tfa_sim.stages.plan import kernel_plan
from tfa_sim.stages.run_tfa import TfaKernel


def check(got, want, what):
    assert got == want, f"{what}: expected {want!r}, got {got!r}"


def who(kind: str = "X", stage: str = "s", tile: int = 0, sub: int = 0) -> Instr:
    """An instruction used only as a name (``label``) and as the ``by`` of effects; it never runs."""
    return Instr(Pipe(simpy.Environment(), "core0.cubecore0", "M", Stats(False)), stage, 0, tile, sub, kind, 0.0)


def at(env: simpy.Environment, when: float, action) -> None:
    """Call ``action()`` at cycle ``when``."""
    env.timeout(when - env.now).callbacks.append(lambda _ev: action())


def record(env: simpy.Environment, log: list, name: str, req) -> None:
    """Append (name, value, cycle) to ``log`` when ``req`` (granted now, or a Pending that calls back) is granted."""
    if not isinstance(req, Pending):
        log.append((name, req.value, env.now))
    else:
        req.callback = lambda pending: log.append((name, pending.value, env.now))


@pytest.fixture
def env():
    return simpy.Environment()


# ---- PingPong ------------------------------------------------------------------------------------
def test_pingpong_grants_in_request_order(env):
    pool, log = PingPong(env, "core0.L1.k", 2), []
    slots = {name: pool.slot() for name in "abcde"}
    for name, slot in slots.items():
        record(env, log, name, slot.request(who(name)))
    at(env, 10, lambda: pool.release(1))  # slot 1 free, but c waits for slot 0 (its turn): nobody moves
    at(env, 20, lambda: pool.release(0))  # c takes 0, then d takes the already-free 1
    at(env, 30, lambda: slots["c"].release())  # e takes 0
    run(env)
    check(log, [("a", 0, 0), ("b", 1, 0), ("c", 0, 20), ("d", 1, 20), ("e", 0, 30)], "grants (name, slot, cycle)")


def test_pingpong_third_request_waits_for_slot_0(env):
    pool, log = PingPong(env, "core0.L1.k", 2), []
    first, second, third = pool.slot(), pool.slot(), pool.slot()
    first.request(who()), second.request(who())
    record(env, log, "third", third.request(who()))
    at(env, 7, first.release)
    run(env)
    check((log, third.index, pool.in_use), ([("third", 0, 7)], 0, 2), "(grants, third's index, slots in use)")


@pytest.mark.parametrize("twice", [True, False], ids=["same handle released twice", "pool.release of a free slot"])
def test_pingpong_release_of_free_slot_is_hazard(env, twice):
    pool, slot = PingPong(env, "core0.L1.k", 2), None
    if twice:
        slot = pool.slot()
        slot.request(who())
        slot.release()
    with pytest.raises(HazardError) as err:
        slot.release() if twice else pool.release(0)
    check(str(err.value), "core0.L1.k slot 0 released twice at cycle 0", "hazard message")


@pytest.mark.parametrize("stale", ["never granted", "released then re-granted to another"])
def test_pingpong_release_by_handle_not_holding_the_slot_is_hazard(env, stale):
    """A Slot handle may only release the slot it holds; it must not free another instruction's slot."""
    pool = PingPong(env, "core0.L1.k", 1)
    handle = pool.slot()
    if stale == "released then re-granted to another":
        handle.request(who("first"))
        handle.release()
    other = pool.slot()
    other.request(who("other"))
    try:
        handle.release()
        raised = False
    except HazardError:
        raised = True
    check((raised, pool.holder[0] is other, pool.in_use), (True, True, 1),
          "(HazardError raised, other still holds slot 0, slots in use)")


@pytest.mark.parametrize("when", ["granted on the spot", "granted after a wait"])
def test_pingpong_pred_is_the_releasing_instruction(env, when):
    pool, releaser = PingPong(env, "core0.L0A", 1), who("TEXTRACT")
    first = pool.slot()
    first.request(who("TLOAD"))
    if when == "granted on the spot":
        first.release(by=releaser)
        granted = pool.slot().request(who())
    else:
        granted = pool.slot().request(who())
        first.release(by=releaser)
        run(env)
    check((granted.triggered, granted.value, granted.pred), (True, 0, releaser), "(triggered, slot, pred)")


def test_pingpong_reset_restores_slot_0_and_forgets_releases(env):
    pool = PingPong(env, "core0.L1.v", 3)
    a, b = pool.slot(), pool.slot()
    a.request(who()), b.request(who()), a.put("tile a"), a.release(by=who("TEXTRACT"))
    pool.reset()
    got = pool.slot().request(who())
    check((got.value, got.pred, pool.next, pool.in_use, pool.data), (0, None, 1, 1, [None, None, None]),
          "after reset and one request: (slot, pred, next, in use, data)")


def test_pingpong_holder_label_names_the_owner(env):
    pool = PingPong(env, "core0.L0C", 1)
    slot, labels = pool.slot(), [pool.holder_label()]
    slot.request(who("TMATMUL", "compute_pv", 3, 1))
    labels.append(pool.holder_label())
    slot.release()
    labels.append(pool.holder_label())
    check(labels, ["", " (slot 0 held by TMATMUL [compute_pv t3 #1])", ""], "labels: free, held, released")


# ---- Flag ----------------------------------------------------------------------------------------
def test_flag_sets_then_waits_consume_oldest_first(env):
    flag, setters = Flag(env, "core0.qk_tile_fifo.ready[aiv0]"), [who("FIXPIPE", tile=0), who("FIXPIPE", tile=1)]
    flag.set(setters[0]), flag.set(setters[1])
    grants = []
    for _ in range(3):  # a grant on the spot is read at once: the flag itself carries the last grant's pred
        g = flag.request(who())
        grants.append((g.triggered, g.pred))
    check((grants, flag.count), ([(True, setters[0]), (True, setters[1]), (False, None)], 0),
          "((triggered, pred) of three requests, count left)")


def test_flag_waiters_are_served_fifo_with_their_setters(env):
    flag, log, setters = Flag(env, "core0.p_tile_fifo.consumed[aiv1]", cause="credit"), [], [who("A"), who("B")]
    for name in ("w1", "w2"):
        flag.request(who(name)).callback = lambda pending, name=name: log.append((name, pending.pred.kind))
    at(env, 4, lambda: flag.set(setters[0]))
    at(env, 9, lambda: flag.set(setters[1]))
    run(env)
    check(log, [("w1", "A"), ("w2", "B")], "(waiter, setter) in grant order")


@pytest.mark.parametrize("latency", [0.0, 7.0, 2.5], ids=lambda lat: f"latency={lat:g}")
def test_flag_waiter_sees_set_after_latency(env, latency):
    flag, seen = Flag(env, "core0.pv_tile_fifo.ready[aiv0]", latency=latency), []

    flag.request(who()).callback = lambda _pending: seen.append(env.now)
    at(env, 3, lambda: flag.set(who("FIXPIPE")))
    run(env)
    check(seen, [3 + latency], "cycle the waiter resumes")


@pytest.mark.parametrize("latency", [0.0, 4.0], ids=lambda lat: f"latency={lat:g}")
def test_flag_sixteenth_set_without_wait_is_hazard(env, latency):
    flag = Flag(env, "core0.p_tile_fifo.ready[aiv0]", latency=latency)
    for _ in range(FLAG_MAX):
        flag.set(who())
    run(env)  # 15 pending counts are legal (sets on their way cost no event: the clock stays at 0)
    with pytest.raises(HazardError) as err:
        flag.set(who())  # the 16th, set at cycle 0, overflows the counter when it arrives at cycle `latency`
        run(env)
    check(str(err.value), f"flag core0.p_tile_fifo.ready[aiv0] set 16 times without a wait (counter max 15) at "
          f"cycle {latency:.0f}", "hazard message")


# ---- GmFifo: the credit rule ---------------------------------------------------------------------
def fifo(env, depth=2, period=1, latency=0.0, shape=(4, 3)):
    return GmFifo(env, "core0.qk_tile_fifo", depth, period, latency, shape, np.float32)


ALL_T = list(range(21))
#: (depth, period): tiles 0..20 where the producer waits, where the consumer notifies (written out by hand).
CREDIT_RULE = {
    (8, 4): ([8, 12, 16, 20], [3, 7, 11, 15, 19]),
    (8, 8): ([8, 16], [7, 15]),
    (4, 2): ([4, 6, 8, 10, 12, 14, 16, 18, 20], [1, 3, 5, 7, 9, 11, 13, 15, 17, 19]),
    (2, 1): (ALL_T[2:], ALL_T),
    (8, 1): (ALL_T[8:], ALL_T),
}


@pytest.mark.parametrize("depth,period", list(CREDIT_RULE), ids=[f"depth{d}-period{p}" for d, p in CREDIT_RULE])
def test_credit_rule_truth_table(env, depth, period):
    f = fifo(env, depth, period)
    got = ([t for t in ALL_T if f.producer_waits(t)], [t for t in ALL_T if f.consumer_notifies(t)])
    check(got, CREDIT_RULE[depth, period], f"(producer waits, consumer notifies) for depth {depth} period {period}")


#: (depth, period, tiles) → credits sent - credits waited, counted by hand from the table above.
UNDRAINED = [(8, 4, 1, 0), (8, 4, 4, 1), (8, 4, 8, 2), (8, 4, 9, 1), (8, 4, 16, 2), (8, 4, 17, 1),
             (8, 8, 7, 0), (8, 8, 8, 1), (8, 8, 16, 1), (4, 2, 3, 1), (4, 2, 10, 2),
             (2, 1, 0, 0), (2, 1, 1, 1), (2, 1, 5, 2), (8, 1, 3, 3), (8, 1, 20, 8)]


@pytest.mark.parametrize("depth,period,tiles,want", UNDRAINED,
                         ids=[f"depth{d}-period{p}-tiles{t}" for d, p, t, _ in UNDRAINED])
def test_undrained_credits(env, depth, period, tiles, want):
    check(fifo(env, depth, period).undrained_credits(tiles), want, "undrained credits")


# ---- GmFifo: tiles, flags and hazards ------------------------------------------------------------
def test_fifo_claim_over_unread_tile_is_hazard_until_freed(env):
    f, by = fifo(env, depth=2, period=1), who("FIXPIPE", "compute_qk", 2)
    f.claim(0, 0, who())
    with pytest.raises(HazardError) as err:
        f.claim(0, 2, by)
    want = ("core0.qk_tile_fifo slot 0 (aiv0 rows) overwritten by FIXPIPE [compute_qk t2 #0] tile 2 at cycle 0 "
            "while tile 0 is unread; the credit rule (depth 2, period 1) does not protect it")
    check(str(err.value), want, "hazard message")
    f.free(0, 0)
    f.claim(0, 2, by)
    check(f.unread, [[2, None], [None, None]], "unread tiles per lane after free and claim")


@pytest.mark.parametrize("lanes,want", [((0, 1), [[0, None], [0, None]]), ((1,), [[None, None], [0, None]])],
                         ids=["both lanes", "lane 1"])
def test_fifo_tile_claims_its_lanes(env, lanes, want):
    f = fifo(env)
    f.tile(0, lanes).claim(who())
    check(f.unread, want, "unread tiles per lane")


@pytest.mark.parametrize("t,lanes,want", [(4, (0, 1), ()), (8, (0, 1), (0, 1)), (9, (0, 1), ()), (12, (1,), (1,))],
                         ids=["t4 below depth", "t8 both lanes", "t9 off period", "t12 lane 1"])
def test_fifo_tile_credits_follow_the_rule(env, t, lanes, want):
    f = fifo(env, depth=8, period=4)
    check(f.tile(t, lanes).credits, tuple(f.consumed[a] for a in want), f"consumed flags to wait on before tile {t}")


@pytest.mark.parametrize("effect,lanes,want", [
    ("push", (0, 1), ([1, 1], [0, 0])), ("push", (1,), ([0, 1], [0, 0])),
    ("credit", (0, 1), ([0, 0], [1, 1])), ("credit", (0,), ([0, 0], [1, 0]))],
                         ids=["push both", "push lane 1", "credit both", "credit lane 0"])
def test_fifo_push_and_credit_set_flags(env, effect, lanes, want):
    f = fifo(env, latency=5.0)
    getattr(f.tile(3, lanes), effect)(who())
    run(env)
    check(([fl.pending for fl in f.ready], [fl.pending for fl in f.consumed]), want, "(ready counts, consumed counts)")


def test_fifo_reset_empties_flags_unread_and_data(env):
    f = fifo(env)
    t0 = f.tile(0)
    t0.claim(who()), t0.push(who()), t0.region().put(np.ones((4, 3), np.float32))
    f.reset()
    check(([fl.count for fl in f.flags()], f.unread, f.store.tiles), ([0] * 4, [[None] * 2] * 2, [None] * 2),
          "(flag counts, unread, stored tiles) after reset")


# ---- Ring ----------------------------------------------------------------------------------------
def ring(env):
    return Ring(env, "core0.veccore0.UB.l1_exp_max", 2, (4,), np.float32)


def test_ring_write_read_write_is_fine(env):
    r = ring(env)
    r.entry(0).write(who("VEC softmax", "compute_p", 0))
    r.entry(0).read(who("VEC update", "compute_gu", 0))
    r.entry(2).write(who("VEC softmax", "compute_p", 2))
    check(r.holder, [2, None], "ring holders (the tile whose entry is unread)")


def test_ring_second_write_without_read_is_hazard(env):
    r = ring(env)
    r.entry(1).write(who("VEC softmax", "compute_p", 1))
    with pytest.raises(HazardError) as err:
        r.entry(3).write(who("VEC softmax", "compute_p", 3))
    msg = str(err.value)
    for part in ("core0.veccore0.UB.l1_exp_max slot 1 overwritten by VEC softmax [compute_p t3 #0] at cycle 0",
                 "the entry of tile 1 is still unread", "compute_gu of tile 1 would silently rescale running_o "
                 "with tile 3's factor and O would be wrong", "runs compute_p 2 tiles ahead of compute_gu and the "
                 "ring has 2 entries", "give kernel.exp_ring more than 2 entries"):
        assert part in msg, f"expected {part!r} in the hazard message, got {msg!r}"


def test_ring_read_before_write_is_hazard(env):
    with pytest.raises(HazardError) as err:
        ring(env).entry(1).read(who("VEC update", "compute_gu", 1))
    check(str(err.value), "core0.veccore0.UB.l1_exp_max slot 1 read by VEC update [compute_gu t1 #0] at cycle 0 "
          "before it was written", "hazard message")


# ---- TileStore, Region, Move, Compute ------------------------------------------------------------
ROWS0, ROWS1 = slice(0, 2), slice(2, 4)


def test_tilestore_new_tile_in_slot_starts_fresh_array():
    store = TileStore(2, (4, 3), np.float32)
    store.region(0, ROWS0).put(np.full((2, 3), 1.0, np.float32))
    old = store.tiles[0][1]
    store.region(0, ROWS1).put(np.full((2, 3), 2.0, np.float32))  # more rows of tile 0: same array
    same_tile, view = store.tiles[0][1] is old, store.region(0, ROWS1).get()  # a consumer's view of rows 2:4
    store.region(2, ROWS0).put(np.full((2, 3), 9.0, np.float32))  # rows of tile 2 in tile 0's slot: fresh array
    check((same_tile, store.tiles[0][1] is old, view.tolist()), (True, False, [[2.0] * 3] * 2),
          "(tile 0 rows share an array, tile 2 reuses it, the old view's values)")


def test_tilestore_whole_tile_write_keeps_the_array():
    store, tile = TileStore(2, (4, 3), np.float32), np.arange(12, dtype=np.float32).reshape(4, 3)
    store.region(5).put(tile)
    check((store.tiles[1][0], store.region(5).get() is tile), (5, True), "(tile in slot 1, the very array read back)")


def test_move_copies_between_locations(env):
    gm = np.arange(12, dtype=np.float32).reshape(4, 3)
    store, pool = TileStore(2, (4, 3), np.float32), PingPong(env, "core0.L1.k", 2)
    slot = pool.slot()
    slot.request(who())
    Move(View(gm, ROWS1), store.region(0, ROWS0))(who())
    Move(store.region(0, ROWS0), slot)(who())
    check(slot.get().tolist(), gm[2:].tolist(), "slot contents after GM → FIFO → slot")


def test_compute_stores_each_result_and_passes_none(env):
    a, b = np.array([1.0, 2.0]), np.array([10.0, 20.0])
    total, prod, seen = View(np.zeros(2)), View(np.zeros(2)), []

    def fn(x, missing, y):
        seen.append(missing)
        return x + y, x * y

    Compute(fn, (View(a), None, View(b)), (total, prod))(who())
    check((total.array.tolist(), prod.array.tolist(), seen), ([11.0, 22.0], [10.0, 40.0], [None]),
          "(sums, products, the None source)")


def test_compute_single_destination_and_const():
    out = View(np.zeros(2))
    Compute(lambda x: x * 2, (Const(np.array([1.0, 3.0])),), (out,))(who())
    check(out.array.tolist(), [2.0, 6.0], "single destination after doubling a Const")
    with pytest.raises(TypeError, match="a constant cannot be written"):
        Const(0.0).put(1.0)


# ---- GlobalMemory --------------------------------------------------------------------------------
@pytest.mark.parametrize("nbytes,rate,want", [(1000, 80, 22.5), (640, 64, 20.0), (300, 100, 13.0)],
                         ids=["1000B@80", "640B@64", "300B@100"])
def test_gm_transfer_alone(nbytes, rate, want):
    gm = GlobalMemory(l2_bandwidth=100, l2_latency=10, hbm_bandwidth=25, miss_latency=40)
    check(gm.transfer(50, nbytes, rate), (want, 0.0), "(cycles, lost to sharing)")


@pytest.mark.parametrize("a,b,want_b", [((1000, 80), (1000, 80), (30.0, 7.5)), ((600, 60), (700, 70), (23.0, 3.0))],
                         ids=["2x1000B@80", "600B@60+700B@70"])
def test_gm_two_transfers_share_bandwidth(a, b, want_b):
    # bandwidth 100 B/cycle, latency 10. 1000B@80: A alone 12.5 (channel 0-10); B's channel 10-20, own 12.5 → 20.
    # 600B@60 then 700B@70: A 10 (channel 0-6); B channel 6-13, own 10 → ends 13, lost 3.
    gm = GlobalMemory(l2_bandwidth=100, l2_latency=10, hbm_bandwidth=25, miss_latency=40)
    first, second = gm.transfer(0, *a), gm.transfer(0, *b)
    third = gm.transfer(100, 500, 50)  # the channel is idle again: 500/50 + 10, nothing lost
    check((first[1], second, third, gm.bytes), (0.0, want_b, (20.0, 0.0), a[0] + b[0] + 500),
          "(A lost, B (cycles, lost), later C (cycles, lost), bytes)")


def test_gm_first_read_of_a_line_misses_and_later_readers_wait_for_it():
    # L2 100 B/cycle, hit 10; HBM 25 B/cycle, miss +40.  Core A reads line K (1000 B at 80 B/cycle) at 0:
    # L2 channel 0-10, HBM 0-40 → data at 40, + 10 + 40 latency = 90 cycles, 27.5 of them lost to HBM.
    # Core B reads K at 5 (L2 channel 10-20): a hit, but the line is in L2 only at 90 → done at 90 (85 cycles,
    # of which 80 − 17.5 = 62.5 beyond its own 12.5 at 80 B/cycle).
    # Q rows (MISS) always come from HBM; FIFO traffic (None) never does.
    from tfa_sim.engine.gm import MISS

    gm = GlobalMemory(l2_bandwidth=100, l2_latency=10, hbm_bandwidth=25, miss_latency=40)
    a = gm.transfer(0, 1000, 80, ("k", 0, 0, 0))
    b = gm.transfer(5, 1000, 80, ("k", 0, 0, 0))
    q = gm.transfer(200, 100, 100, MISS)
    fifo = gm.transfer(300, 100, 100, None)
    check((a, b, q, fifo, gm.hbm_bytes), ((90.0, 27.5), (85.0, 62.5), (54.0, 3.0), (11.0, 0.0), 1100),
          "(first reader, second reader, Q read, FIFO write, HBM bytes)")


# ---- Pipe + Instr --------------------------------------------------------------------------------
@pytest.mark.parametrize("latency,cause", [(50.0, "data"), (0.0, "data"), (50.0, "credit")],
                         ids=["ready latency 50", "ready latency 0", "credit latency 50"])
def test_instruction_starts_when_flag_arrives(env, latency, cause):
    stats = Stats(True)
    producer, consumer = Pipe(env, "core0.veccore0", "MTE3", stats), Pipe(env, "core0.cubecore0", "MTE2", stats)
    flag = Flag(env, "core0.p_tile_fifo.ready[aiv0]", latency=latency, cause=cause)
    store = producer.issue(Instr(producer, "compute_p", 0, 0, 0, "TSTORE", 10, then=(flag.set,)))
    load = consumer.issue(Instr(consumer, "compute_pv", 0, 0, 0, "TLOAD P", 5, waits=(flag,)))
    run(env)
    arrive = 10 + latency
    check((load.start, load.end, dict(consumer.stall_by), load.deps),
          (arrive, arrive + 5, {("compute_pv", cause, "p_tile_fifo.ready[aiv0]"): arrive},
           [(store, cause, latency, "p_tile_fifo.ready[aiv0]")]), "(start, end, stalls, deps)")


def test_pipe_executes_in_issue_order(env):
    pipe = Pipe(env, "core0.cubecore0", "MTE2", Stats(False))
    flag = Flag(env, "core0.p_tile_fifo.ready[aiv0]", latency=20)
    flag.set(who())
    waiting = pipe.issue(Instr(pipe, "compute_pv", 0, 0, 0, "TLOAD P", 5, waits=(flag,)))
    free = pipe.issue(Instr(pipe, "compute_qk", 0, 1, 0, "TLOAD K", 3))
    run(env)
    check([(i.start, i.end) for i in (waiting, free)], [(20, 25), (25, 28)], "(start, end) of both")


def test_slot_wait_counts_as_slot_stall(env):
    pipe, pool = Pipe(env, "core0.cubecore0", "MTE1", Stats(False)), PingPong(env, "core0.L0A", 1)
    held = pool.slot()
    held.request(who())
    at(env, 12, held.release)
    ins = pipe.issue(Instr(pipe, "compute_qk", 0, 0, 0, "TEXTRACT", 4, waits=(pool.slot(),)))
    run(env)
    check((ins.start, dict(pipe.stall_by)), (12, {("compute_qk", "slot", "L0A"): 12}), "(start, stalls)")


# ---- Block end -----------------------------------------------------------------------------------
@pytest.fixture
def ran_block():
    """Block 0 of the default case, timing only, run to completion by hand (finish() not yet called)."""
    config = load_config(overrides=["numerics.enabled=false"])
    hw = load_hardware(config.hardware)
    kernel, env = TfaKernel(kernel_plan(config, hw)), simpy.Environment()
    stats = Stats(False, kernel.stages)
    core = Core(env, 0, stats, GlobalMemory(hw.gm.l2_bandwidth, hw.gm.l2_latency, hw.gm.hbm_bandwidth,
                                            hw.gm.miss_latency))
    k = kernel.start(env, core, kernel.dispatch.order[0], stats)
    streams = [IssueStream(env, pipes[0].unit, pipes) for pipes, _ in k.programs]
    for stream, (_, program) in zip(streams, k.programs):
        stream.run(program)
    run(env)
    check(([s.done() for s in streams], env.now > hw.sync.flag_latency), ([None] * 3, True),
          "(unfinished streams' done events, the block took time)")
    return env, k


def test_clean_block_finishes(ran_block):
    _, k = ran_block
    k.finish()


EXTRA_SET = {"qk ready aiv0": lambda k: k.qk_fifo.ready[0], "p consumed aiv1": lambda k: k.p_fifo.consumed[1],
             "block_end aiv0": lambda k: k.buf.block_end[0]}


@pytest.mark.parametrize("arrived", [True, False], ids=["arrived", "in_flight"])
@pytest.mark.parametrize("flag", list(EXTRA_SET))
def test_block_end_with_extra_flag_set_is_hazard(ran_block, flag, arrived):
    env, k = ran_block
    target = EXTRA_SET[flag](k)
    target.set(who())
    if arrived:
        run(env)  # let the set arrive (flag latency); a set still in flight counts too
    with pytest.raises(HazardError, match=re.escape(f"{target.name} was set 1 more time(s) than waited in block 0")):
        k.finish()


HELD = {"L1.k": lambda k: k.buf.l1_k, "L0C": lambda k: k.buf.l0c, "veccore1.UB.src": lambda k: k.buf.ub_src[1]}


@pytest.mark.parametrize("pool", list(HELD))
def test_block_end_with_held_slot_is_hazard(ran_block, pool):
    _, k = ran_block
    HELD[pool](k).slot().request(who())  # taken, never released
    with pytest.raises(HazardError, match=re.escape(f"core0.{pool}: 1 slot(s) still held at the end of block 0")):
        k.finish()
