"""The kernel program of one block (KERNEL.md §3), issued to a core's pipes.

Reads like the kernel: the cube runs the QK prologue, then per logical tile
and sub-tile ``QK(next)`` followed by ``PV(t)``; each AIV runs the P prologue,
then ``P(next)`` row slices before ``GU(t)``; the epilogue drains credits and
the vector cores signal block end.  Buffers are the config's ping-pong pools;
the three GM FIFOs follow the credit rule.  With numerics on, every
instruction's action moves the real tile through its slot and the stage
functions compute on it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import simpy

from tfa_sim.backends import Backend
from tfa_sim.blocks import Block
from tfa_sim.buffers.capacity import FP16, FP32, cube_k
from tfa_sim.buffers.slots import Flag, GmFifo, HazardError, PingPong, Ring
from tfa_sim.config import Config
from tfa_sim.costs import Costs
from tfa_sim.dumps import DumpRecorder
from tfa_sim.engine.gm import GlobalMemory
from tfa_sim.engine.pipes import GmMove, Instr, Pipe
from tfa_sim.functional import softmax_scale
from tfa_sim.hardware import Hardware
from tfa_sim.inputs import Inputs
from tfa_sim.stages.compute_gu import compute_gu, finalize
from tfa_sim.stages.compute_p import compute_p
from tfa_sim.stages.compute_pv import compute_pv
from tfa_sim.stages.compute_qk import compute_qk

CUBE_PIPES = ("MTE2", "MTE1", "M", "FIX")
VEC_PIPES = ("MTE2", "V", "MTE3")


class Core:
    """One AI core: an AIC (``coreN.cubecore0``) and two AIVs (``coreN.veccore0/1``), a Pipe each."""

    def __init__(self, env: simpy.Environment, index: int, stats: Any, gm: GlobalMemory) -> None:
        self.index = index
        self.stats = stats
        cube = f"core{index}.cubecore0"
        self.cube = {p: Pipe(env, cube, p, stats, gm) for p in CUBE_PIPES}
        self.vec = [{p: Pipe(env, f"core{index}.veccore{a}", p, stats, gm) for p in VEC_PIPES} for a in range(2)]

    def pipes(self) -> list[Pipe]:
        return list(self.cube.values()) + [p for v in self.vec for p in v.values()]


@dataclass
class Numerics:
    """What the actions compute with: backend, inputs, the output being filled, optional dumps."""

    backend: Backend
    inputs: Inputs
    out: np.ndarray
    dumps: DumpRecorder | None = None


class BlockProgram:
    """Issues one block's instructions to a core and returns the block-end instruction."""

    def __init__(self, env: simpy.Environment, core: Core, block: Block, config: Config, hw: Hardware,
                 costs: Costs, numerics: Numerics | None) -> None:
        self.env, self.core, self.block, self.config = env, core, block, config
        self.costs, self.num = costs, numerics
        c, t, s = config.case, config.tiling, config.schedule
        self.head, self.cube_s0, self.cube_s1, self.tile_s1 = c.head, t.cube_s0, t.cube_s1, t.tile_s1
        self.kf, self.vec_s0, self.half = t.k_tile_factor, t.vec_s0, t.cube_s0 // 2
        self.preload = s.qk_preload
        latency = costs.sync["flag_latency"]
        name = f"core{core.index}"
        cube, vec = core.cube, core.vec
        # ping-pong pools; owner_pipe = the pipe whose instruction releases a slot
        self.l1_q = self._pool(f"{name}.L1.q", s.l1_q, cube["MTE1"])
        self.l1_k = self._pool(f"{name}.L1.k", s.l1_k, cube["MTE1"])
        self.l1_p = self._pool(f"{name}.L1.p", s.l1_p, cube["MTE1"])
        self.l1_v = self._pool(f"{name}.L1.v", s.l1_v, cube["MTE1"])
        self.l0a = self._pool(f"{name}.L0A", s.l0a, cube["M"])
        self.l0b = self._pool(f"{name}.L0B", s.l0b, cube["M"])
        # L0C: QK and PV keep their own accumulators ("QK and PV alternate"); a single one is shared
        if s.l0c == 1:
            self.l0c_qk = self.l0c_pv = self._pool(f"{name}.L0C", 1, cube["FIX"])
        else:
            self.l0c_qk = self._pool(f"{name}.L0C.qk", s.l0c // 2, cube["FIX"])
            self.l0c_pv = self._pool(f"{name}.L0C.pv", s.l0c - s.l0c // 2, cube["FIX"])
        self.ub_src = [self._pool(f"{name}.veccore{a}.UB.src", s.ub_src, vec[a]["V"]) for a in range(2)]
        self.ub_x_exp = [self._pool(f"{name}.veccore{a}.UB.x_exp", s.ub_x_exp, vec[a]["MTE3"]) for a in range(2)]
        self.ring = [Ring(env, f"{name}.veccore{a}.UB.l1_exp_max", s.ub_exp_max) for a in range(2)]
        depth, period = s.cv_fifo_size, s.cv_fifo_cons_sync_period
        self.qk_fifo = self._fifo(f"{name}.qk_tile_fifo", depth, period, latency, cube["FIX"], [v["MTE2"] for v in vec])
        self.p_fifo = self._fifo(f"{name}.p_tile_fifo", depth, period, latency, None, [cube["MTE2"]] * 2)
        for a in range(2):
            self.p_fifo.ready[a].owner_pipe = vec[a]["MTE3"]
        self.pv_fifo = self._fifo(f"{name}.pv_tile_fifo", depth, period, latency, cube["FIX"],
                                  [v["MTE2"] for v in vec])
        self.block_end = [Flag(env, f"{name}.block_end[aiv{a}]", latency) for a in range(2)]
        for a in range(2):
            self.block_end[a].owner_pipe = vec[a]["MTE3"]
        l0a_half, l0b_half = hw.l0a // s.l0a, hw.l0b // s.l0b
        self.qk_cube_k = cube_k(t.cube_s0, t.cube_s1, c.head, l0a_half, l0b_half)
        self.pv_cube_k = cube_k(t.cube_s0, c.head, t.cube_s1, l0a_half, l0b_half)
        # vector running state and the per-tile assembly buffers (numerics only)
        self.m = [None, None]
        self.l = [None, None]
        self.running_o = [None, None]
        self.scale = softmax_scale(c.head)

    def _pool(self, name: str, count: int, owner: Pipe) -> PingPong:
        pool = PingPong(self.env, name, count)
        pool.owner_pipe = owner
        self._trace(pool)
        return pool

    def _trace(self, pool: PingPong | GmFifo) -> None:
        """With the event log on, sample the pool's occupancy for the trace's counter tracks."""
        if self.core.stats.events is not None:
            pool.samples = []
            self.core.stats.pools.append(pool)

    def _fifo(self, name: str, depth: int, period: int, latency: float, ready_owner: Pipe | None,
              consumed_owners: list[Pipe]) -> GmFifo:
        fifo = GmFifo(self.env, name, depth, period, latency)
        self._trace(fifo)
        for a in range(2):
            fifo.ready[a].owner_pipe = ready_owner
            fifo.consumed[a].owner_pipe = consumed_owners[a]
        return fifo

    def check_clean(self) -> None:
        """At block end every flag must be back to zero and every slot released."""
        flags = [f for fifo in (self.qk_fifo, self.p_fifo, self.pv_fifo) for f in fifo.ready + fifo.consumed]
        for flag in flags + self.block_end:
            if flag.count:
                raise HazardError(f"{flag.name} was set {flag.count} more time(s) than waited in block "
                                  f"{self.block.index} (cycle {self.env.now:.0f}): producer and consumer "
                                  f"disagree on the credit rule")
        pools = [self.l1_k, self.l1_p, self.l1_v, self.l0a, self.l0b, self.l0c_qk, self.l0c_pv, *self.ub_src,
                 *self.ub_x_exp]
        for pool in pools:
            if pool.in_use:
                raise HazardError(f"{pool.name}: {pool.in_use} slot(s) still held at the end of block "
                                  f"{self.block.index} (cycle {self.env.now:.0f})")

    def close(self) -> None:
        """Drop the tiles the block's buffers still reference (they are garbage from now on)."""
        for pool in (self.l1_q, self.l1_k, self.l1_p, self.l1_v, self.l0a, self.l0b, self.l0c_qk, self.l0c_pv,
                     *self.ub_src, *self.ub_x_exp, *self.ring, self.qk_fifo, self.p_fifo, self.pv_fifo):
            pool.data = [None] * len(pool.data)
        self.running_o = self.m = self.l = [None, None]

    # ---- helpers -------------------------------------------------------------------------------
    def _dump(self, name: str, t: int, row0: int, rows: np.ndarray, ins: Instr, slot: int | None = None) -> None:
        """Hand rows of a finished tile to the intermediate-check recorder (if dumping)."""
        if self.num.dumps is not None:
            self.num.dumps.put(name, self.block.index, t, row0, rows, ins, slot)

    def _gm(self, nbytes: int, path: str) -> GmMove:
        return GmMove(nbytes, self.costs.move[path])

    def _issue(self, pipe: Pipe, stage: str, t: int, sub: int, kind: str, waits: list, cost: Any,
               action: Callable | None = None, after: list | None = None, nbytes: int = 0, flops: int = 0) -> Instr:
        act = action if self.num is not None else None
        return pipe.issue(Instr(stage, self.block.index, t, sub, kind, waits, cost, act, after, nbytes, flops))

    # ---- the program ---------------------------------------------------------------------------
    def issue(self) -> Instr:
        """Issue the whole block; the returned instruction completes at block end."""
        tiles = self.block.tiles
        cube = self.core.cube
        self.q_load = self._issue(cube["MTE2"], "compute_qk", 0, 0, "TLOAD Q→L1", [("slot", self.l1_q, "q")],
                                  self._gm(self.cube_s0 * self.head * FP16, "gm_to_l1"), self._load_q,
                                  nbytes=self.cube_s0 * self.head * FP16)
        if self.preload == 0:  # no preload: QK(t) then PV(t), cube and vector take turns
            for t in range(tiles):
                for s in range(self.kf):
                    self.qk_sub(t, s)
                for s in range(self.kf):
                    self.pv_sub(t, s)
        for t in range(min(self.preload, tiles)):  # prologue
            for s in range(self.kf):
                self.qk_sub(t, s)
        for t in range(tiles if self.preload else 0):  # steady loop
            nxt = t + self.preload
            for s in range(self.kf):
                if nxt < tiles:
                    self.qk_sub(nxt, s)
                self.pv_sub(t, s)
        for a in range(2):
            self.vector_program(a)
        return self.cube_epilogue()

    def cube_epilogue(self) -> Instr:
        cube, tiles = self.core.cube, self.block.tiles
        waits = [("credit", f.consumed[a], None) for f in (self.qk_fifo, self.pv_fifo) for a in range(2)
                 for _ in range(f.undrained_credits(tiles))]
        waits += [("data", self.block_end[a], None) for a in range(2)]
        return self._issue(cube["FIX"], "epilogue", tiles, 0, "drain credits, wait block end", waits, 0)

    def _load_q(self, ins: Instr) -> None:
        b = self.block
        self.l1_q.data[ins.slots["q"]] = self.num.inputs.q[b.batch, b.head, b.row0:b.row0 + self.cube_s0]

    # ---- cube: compute_qk ---------------------------------------------------------------------
    def qk_sub(self, t: int, s: int) -> None:
        cube, b = self.core.cube, self.block
        active = b.sub_tile_active(t, s)
        col0 = t * self.tile_s1 + s * self.cube_s1
        fix_waits: list = []
        if active:
            k_bytes = self.cube_s1 * self.head * FP16
            ld = self._issue(cube["MTE2"], "compute_qk", t, s, "TLOAD K", [("slot", self.l1_k, "k")],
                             self._gm(k_bytes, "gm_to_l1"),
                             lambda ins: self.l1_k.data.__setitem__(
                                 ins.slots["k"], self.num.inputs.k[b.batch, b.kv_head, col0:col0 + self.cube_s1]),
                             nbytes=k_bytes)
            ex_waits = [("data", ld, None), ("data", self.q_load, None), ("slot", self.l0a, "a"),
                        ("slot", self.l0b, "b")]
            ex = self._issue(cube["MTE1"], "compute_qk", t, s, "TEXTRACT", ex_waits,
                             self.costs.extract(self.cube_s0 * self.head * FP16, k_bytes),
                             lambda ins: self.l0b.data.__setitem__(ins.slots["b"], self.l1_k.data[ld.slots["k"]]),
                             after=[lambda ins: self.l1_k.release(ld.slots["k"], ins)])
            flops = 2 * self.cube_s0 * self.cube_s1 * self.head
            mm = self._issue(cube["M"], "compute_qk", t, s, "TMATMUL", [("data", ex, None), ("slot", self.l0c_qk, "c")],
                             self.costs.matmul(self.cube_s0, self.cube_s1, self.head, self.qk_cube_k),
                             lambda ins: self.l0c_qk.data.__setitem__(ins.slots["c"], compute_qk(
                                 self.num.backend, b, self.l1_q.data[self.q_load.slots["q"]],
                                 self.l0b.data[ex.slots["b"]], t, s)),
                             after=[lambda ins: self.l0a.release(ex.slots["a"], ins),
                                    lambda ins: self.l0b.release(ex.slots["b"], ins)], flops=flops)
            fix_waits.append(("data", mm, None))
        if s == 0 and self.qk_fifo.must_wait_credit(t):
            fix_waits += [("credit", self.qk_fifo.consumed[a], None) for a in range(2)]
        out_bytes = self.cube_s0 * self.cube_s1 * FP32 if active else 0

        def store(ins: Instr) -> None:
            slot = t % self.qk_fifo.depth
            if s == 0:
                self.qk_fifo.data[slot] = np.empty((self.cube_s0, self.tile_s1), np.float32)
            # a skipped sub-tile (above the causal diagonal) is defined as +0, see stages.compute_qk
            src = self.l0c_qk.data[mm.slots["c"]] if active else 0.0
            self.qk_fifo.data[slot][:, s * self.cube_s1:(s + 1) * self.cube_s1] = src
            if s == self.kf - 1:
                self._dump("qk_fifo", t, 0, self.qk_fifo.data[slot], ins, slot)

        after = [lambda ins: self.qk_fifo.claim_both(t, ins.label)] if s == 0 else []
        if active:
            after.append(lambda ins: self.l0c_qk.release(mm.slots["c"], ins))
        if s == self.kf - 1:
            after.append(self.qk_fifo.signal_both)
        self._issue(cube["FIX"], "compute_qk", t, s, "FIXPIPE →qk_tile_fifo", fix_waits,
                    self._gm(out_bytes, "l0c_to_gm") if active else 0, store, after, nbytes=out_bytes)

    # ---- cube: compute_pv ---------------------------------------------------------------------
    def pv_sub(self, t: int, s: int) -> None:
        cube, b = self.core.cube, self.block
        active = b.sub_tile_active(t, s)
        col0 = t * self.tile_s1 + s * self.cube_s1
        waits: list = [("data", self.p_fifo.ready[a], None) for a in range(2)] if s == 0 else []
        last = s == self.kf - 1
        after: list = []
        if last:
            after.append(lambda ins: self.p_fifo.free_both(t))
            if self.p_fifo.notifies(t):
                after.append(self.p_fifo.credit_both)
        if not active:  # FIFO handshakes only
            self._issue(cube["MTE2"], "compute_pv", t, s, "handshake", waits, 0, after=after)
        else:
            p_bytes = self.cube_s0 * self.cube_s1 * FP16
            v_bytes = self.cube_s1 * self.head * FP16

            def load(ins: Instr) -> None:
                p_tile = self.p_fifo.data[t % self.p_fifo.depth][1]
                self.l1_p.data[ins.slots["p"]] = p_tile[:, s * self.cube_s1:(s + 1) * self.cube_s1]
                self.l1_v.data[ins.slots["v"]] = self.num.inputs.v[b.batch, b.kv_head, col0:col0 + self.cube_s1]

            waits += [("slot", self.l1_p, "p"), ("slot", self.l1_v, "v")]
            ld = self._issue(cube["MTE2"], "compute_pv", t, s, "TLOAD P,V", waits,
                             self._gm(p_bytes + v_bytes, "gm_to_l1"), load, after, nbytes=p_bytes + v_bytes)
            ex = self._issue(cube["MTE1"], "compute_pv", t, s, "TEXTRACT",
                             [("data", ld, None), ("slot", self.l0a, "a"), ("slot", self.l0b, "b")],
                             self.costs.extract(p_bytes, v_bytes),
                             lambda ins: (self.l0a.data.__setitem__(ins.slots["a"], self.l1_p.data[ld.slots["p"]]),
                                          self.l0b.data.__setitem__(ins.slots["b"], self.l1_v.data[ld.slots["v"]])),
                             after=[lambda ins: self.l1_p.release(ld.slots["p"], ins),
                                    lambda ins: self.l1_v.release(ld.slots["v"], ins)])
            mm_waits = [("data", ex, None)] + ([("slot", self.l0c_pv, "c")] if s == 0 else [])
            acc = None if s == 0 else self.pv_acc

            def matmul(ins: Instr) -> None:
                # L0C accumulates the tile's sub-products; keep them until the FIX store sums them
                first = acc or ins
                if first is ins:
                    self.l0c_pv.data[ins.slots["c"]] = []
                self.l0c_pv.data[first.slots["c"]].append((self.l0a.data[ex.slots["a"]], self.l0b.data[ex.slots["b"]]))

            mm = self._issue(cube["M"], "compute_pv", t, s, "TMATMUL", mm_waits,
                             self.costs.matmul(self.cube_s0, self.head, self.cube_s1, self.pv_cube_k), matmul,
                             after=[lambda ins: self.l0a.release(ex.slots["a"], ins),
                                    lambda ins: self.l0b.release(ex.slots["b"], ins)],
                             flops=2 * self.cube_s0 * self.cube_s1 * self.head)
            if s == 0:
                self.pv_acc = mm
            self.pv_last_mm = mm
        if last:
            self.pv_store(t)

    def pv_store(self, t: int) -> None:
        cube, b = self.core.cube, self.block
        acc = self.pv_acc
        waits: list = [("data", self.pv_last_mm, None)]
        if self.pv_fifo.must_wait_credit(t):
            waits += [("credit", self.pv_fifo.consumed[a], None) for a in range(2)]
        nbytes = self.cube_s0 * self.head * FP32

        def store(ins: Instr) -> None:
            # the kTileFactor sub-products accumulated in L0C: one sum over the tile's active columns
            parts = self.l0c_pv.data[acc.slots["c"]]
            p_tile = np.concatenate([p for p, _ in parts], axis=1)
            v_tile = np.concatenate([v for _, v in parts], axis=0)
            self.pv_fifo.data[t % self.pv_fifo.depth] = compute_pv(self.num.backend, b, p_tile, v_tile, t)
            self._dump("pv_fifo", t, 0, self.pv_fifo.data[t % self.pv_fifo.depth], ins, t % self.pv_fifo.depth)

        self._issue(cube["FIX"], "compute_pv", t, self.kf - 1, "FIXPIPE →pv_tile_fifo", waits,
                    self._gm(nbytes, "l0c_to_gm"), store,
                    [lambda ins: self.pv_fifo.claim_both(t, ins.label),
                     lambda ins: self.l0c_pv.release(acc.slots["c"], ins),
                     self.pv_fifo.signal_both], nbytes=nbytes)

    # ---- vector: compute_p and compute_gu -------------------------------------------------------
    def vector_program(self, a: int) -> None:
        tiles = self.block.tiles
        for t in range(min(self.preload, tiles)):
            for r in range(self.kf):
                self.p_slice(a, t, r)
        for t in range(tiles):
            nxt = t + self.preload  # with preload 0: P(t) right before GU(t)
            if nxt < tiles:
                for r in range(self.kf):
                    self.p_slice(a, nxt, r)
            last_store = self.gu(a, t)
        vec = self.core.vec[a]
        waits = [("data", last_store, None)]  # block end is signalled after the output is stored
        waits += [("credit", self.p_fifo.consumed[a], None) for _ in range(self.p_fifo.undrained_credits(tiles))]
        self._issue(vec["MTE3"], "epilogue", tiles, 0, "drain credits, signal block end", waits, 0,
                    after=[lambda ins: self.block_end[a].set(ins)])

    def p_slice(self, a: int, t: int, r: int) -> None:
        vec, b = self.core.vec[a], self.block
        row0 = a * self.half + r * self.vec_s0  # within the block
        last = r == self.kf - 1
        src_bytes = self.vec_s0 * self.tile_s1 * FP32
        waits: list = [("data", self.qk_fifo.ready[a], None)] if r == 0 else []
        waits.append(("slot", self.ub_src[a], "src"))
        after: list = []
        if last:
            after.append(lambda ins: self.qk_fifo.free(a, t))
            if self.qk_fifo.notifies(t):
                after.append(lambda ins: self.qk_fifo.consumed[a].set(ins))
        ld = self._issue(vec["MTE2"], "compute_p", t, r, "TLOAD QK", waits, self._gm(src_bytes, "gm_to_ub"),
                         lambda ins: self.ub_src[a].data.__setitem__(
                             ins.slots["src"], self.qk_fifo.data[t % self.qk_fifo.depth][row0:row0 + self.vec_s0]),
                         after, nbytes=src_bytes)
        first = t == 0
        masked = b.needs_mask(t, b.row0 + row0)

        def softmax(ins: Instr) -> None:
            rows = slice(r * self.vec_s0, (r + 1) * self.vec_s0)  # within this AIV's half
            if r == 0:
                if first:
                    self.m[a] = np.empty(self.half, np.float32)
                    self.l[a] = np.empty(self.half, np.float32)
                self.ring[a].data[t % self.ring[a].count] = np.empty(self.half, np.float32)
            res = compute_p(self.num.backend, b, self.ub_src[a].data[ld.slots["src"]], t, b.row0 + row0,
                            None if first else self.m[a][rows], None if first else self.l[a][rows], self.scale)
            self.ub_x_exp[a].data[ins.slots["x"]] = res.x_exp
            self.ring[a].data[t % self.ring[a].count][rows] = res.l1_exp_max
            self.m[a][rows] = res.m2_global_max
            self.l[a][rows] = res.l2_global_sum
            self._dump("exp_max", t, row0, res.l1_exp_max, ins, t % self.ring[a].count)
            self._dump("global_max", t, row0, res.m2_global_max, ins)
            self._dump("global_sum", t, row0, res.l2_global_sum, ins)

        v_after: list = [lambda ins: self.ub_src[a].release(ld.slots["src"], ins)]
        if r == 0:  # the tile's first slice claims its l1_exp_max ring slot (no flag guards it)
            v_after.append(lambda ins: self.ring[a].write(t, ins.label))
        v = self._issue(vec["V"], "compute_p", t, r, "VEC softmax",
                        [("data", ld, None), ("slot", self.ub_x_exp[a], "x")],
                        self.costs.compute_p(self.vec_s0, self.tile_s1, first, masked), softmax,
                        after=v_after)
        st_waits: list = [("data", v, None)]
        if r == 0 and self.p_fifo.must_wait_credit(t):
            st_waits.append(("credit", self.p_fifo.consumed[a], None))
        out_bytes = self.vec_s0 * self.tile_s1 * FP16

        def store(ins: Instr) -> None:
            slot = t % self.p_fifo.depth
            # a fresh array per tile (the first AIV to store makes it): views the cube took of the
            # previous tile stay valid, as copies in L1 would on the hardware
            entry = self.p_fifo.data[slot]
            if entry is None or entry[0] != t:
                entry = self.p_fifo.data[slot] = (t, np.empty((self.cube_s0, self.tile_s1), np.float16))
            entry[1][row0:row0 + self.vec_s0] = self.ub_x_exp[a].data[v.slots["x"]]
            self._dump("p_fifo", t, row0, self.ub_x_exp[a].data[v.slots["x"]], ins, slot)

        st_after: list = [lambda ins: self.p_fifo.claim(a, t, ins.label)] if r == 0 else []
        st_after.append(lambda ins: self.ub_x_exp[a].release(v.slots["x"], ins))
        if last:
            st_after.append(lambda ins: self.p_fifo.ready[a].set(ins))
        self._issue(vec["MTE3"], "compute_p", t, r, "TSTORE x_exp →p_tile_fifo", st_waits,
                    self._gm(out_bytes, "ub_to_gm"), store, st_after, nbytes=out_bytes)

    def gu(self, a: int, t: int) -> Instr | None:
        """GU(t) on AIV ``a``; after the last tile also the output store, which is returned."""
        vec, b = self.core.vec[a], self.block
        tiles = self.block.tiles
        hs = slice(a * self.half, (a + 1) * self.half)
        nbytes = self.half * self.head * FP32
        after: list = [lambda ins: self.pv_fifo.free(a, t)]
        if self.pv_fifo.notifies(t):
            after.append(lambda ins: self.pv_fifo.consumed[a].set(ins))
        ld = self._issue(vec["MTE2"], "compute_gu", t, 0, "TLOAD PV",
                         [("data", self.pv_fifo.ready[a], None), ("slot", self.ub_src[a], "src")],
                         self._gm(nbytes, "gm_to_ub"),
                         lambda ins: self.ub_src[a].data.__setitem__(
                             ins.slots["src"], self.pv_fifo.data[t % self.pv_fifo.depth][hs]),
                         after, nbytes=nbytes)
        last = t == tiles - 1

        def update(ins: Instr) -> None:
            exp_max = self.ring[a].data[t % self.ring[a].count]
            self.running_o[a] = compute_gu(self.num.backend, None if t == 0 else self.running_o[a],
                                           self.ub_src[a].data[ld.slots["src"]], exp_max)
            if last:
                self.running_o[a] = finalize(self.num.backend, self.running_o[a], self.l[a])
            self._dump("o_part", t, a * self.half, self.running_o[a], ins)

        v = self._issue(vec["V"], "compute_gu", t, 0, "VEC update", [("data", ld, None)],
                        self.costs.compute_gu(self.half, self.head, t == 0, last), update,
                        after=[lambda ins: self.ring[a].read(t, ins.label),
                               lambda ins: self.ub_src[a].release(ld.slots["src"], ins)])
        if last:
            def write_out(ins: Instr) -> None:
                rows = slice(b.row0 + a * self.half, b.row0 + (a + 1) * self.half)
                self.num.out[b.batch, b.head, rows] = self.running_o[a]

            return self._issue(vec["MTE3"], "compute_gu", t, 0, "TSTORE O", [("data", v, None)],
                               self._gm(nbytes, "ub_to_gm"), write_out, nbytes=nbytes)
        return None

