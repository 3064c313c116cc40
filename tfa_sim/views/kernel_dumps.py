"""``tfa-sim check RUN --kernel-dumps DIR [--exact]``: a run's intermediates against the files the kernel's own
program writes.

The reference kernel's ``main.cpp`` run with ``--intermediate`` (on a board, or built for the PTO library's
CPU simulation, CPU_SIM) writes five files into its case directory, laid out as the kernel's GM FIFOs hold
them (``slots`` = its CV_FIFO_SIZE, 8; ``kf`` = TILE_S1/CUBE_S1; one block per CUBE_S0 query rows):

========================  =======  ==========================================  ====================================
file                      dtype    shape                                       tfa-sim's dump
========================  =======  ==========================================  ====================================
``qk_out.bin``            fp32     [blocks][slots][kf][CUBE_S0][CUBE_S1]       ``qk_fifo`` (raw scores)
``p_out.bin``             fp16     [blocks][slots][kf][CUBE_S0][CUBE_S1]       ``p_fifo`` (x_exp)
``exp_max_ififo.bin``     fp32     [blocks][slots][CUBE_S0]                    ``exp_max`` (l1_exp_max)
``out2.bin``              fp32     [blocks][slots][CUBE_S0][HEAD]              ``pv_fifo`` (PV of a logical tile)
``o_out.bin``             fp32     [S0][HEAD]                                  ``o_part`` of the last tile (O)
========================  =======  ==========================================  ====================================

Tile t sits in slot t % slots (a later tile overwrites an earlier one in the same slot); element (r, c) of
sub-tile s of a score tile is column s·CUBE_S1 + c of the logical tile.  ``file.bin.gz`` (gzip) is read where
``file.bin`` is absent.  What is not compared, and why, is listed in the report: the kernel never writes tile
0's ``exp_max`` (its first tile takes the init path), computes no sub-tile a causal block skips, and does not
divide O by the row sum when a block has one logical tile and no causal mask (tfa-sim always divides).

Every tensor gets its bit-equal fraction, max abs error, max ULP and the kernel's comparison rule; the first
divergence is named in data-flow order (tile by tile: QK, P, exp_max, PV; then O) as tensor, block, tile,
row and column.  ``--exact`` passes only when every compared element is bit-equal; without it the kernel's rule
decides (eps 1e-3, exp_max 1e-2).
"""
from __future__ import annotations

import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.numerics.compare import EPS, EPS_EXP_MAX, compare, ulp_distance
from tfa_sim.rundir.dumps import dump_blocks
from tfa_sim.rundir.memory import check_parts, require
from tfa_sim.rundir.outputs import read_summary
from tfa_sim.spec.blocks import Block
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.safety import load_npy, read_bytes
from tfa_sim.views.check import read_manifest, run_config, with_check_json

#: The kernel's CV_FIFO_SIZE is 8; a file may hold up to this many slots (a board build with a deeper FIFO).
MAX_SLOTS = 64


@dataclass(frozen=True)
class KernelFile:
    """One file main.cpp writes with ``--intermediate`` and the run's dump it holds."""

    file: str
    dump: str  # tfa-sim's dump name (tfa_sim.numerics.intermediates)
    what: str
    stage: str
    dtype: Any
    eps: float = EPS


#: In data-flow order within a tile; ``o_out.bin`` comes after the last tile.
FILES = (KernelFile("qk_out.bin", "qk_fifo", "QK", "compute_qk", np.float32),
         KernelFile("p_out.bin", "p_fifo", "P (x_exp)", "compute_p", np.float16),
         KernelFile("exp_max_ififo.bin", "exp_max", "exp_max (l1_exp_max)", "compute_p", np.float32, EPS_EXP_MAX),
         KernelFile("out2.bin", "pv_fifo", "PV", "compute_pv", np.float32),
         KernelFile("o_out.bin", "o_part", "O", "compute_gu", np.float32))


def _unit_shape(config: Config, kf: KernelFile) -> tuple[int, ...]:
    """The shape of one [block][slot] entry of ``kf`` (o_out: the whole [S0][HEAD])."""
    t, head = config.tiling, config.case.head
    return {"qk_out.bin": (t.k_tile_factor, t.cube_s0, t.cube_s1), "p_out.bin": (t.k_tile_factor, t.cube_s0,
            t.cube_s1), "exp_max_ififo.bin": (t.cube_s0,), "out2.bin": (t.cube_s0, head),
            "o_out.bin": (config.case.s0, head)}[kf.file]


def _read(directory: Path, kf: KernelFile, limit: int) -> tuple[bytes, str]:
    """The bytes of ``kf`` in ``directory`` (``.bin``, else ``.bin.gz``), at most ``limit`` + 1 of them."""
    raw, gz = directory / kf.file, directory / f"{kf.file}.gz"
    if os.path.lexists(raw) or not os.path.lexists(gz):
        return read_bytes(raw, "--kernel-dumps file", "give the directory main.cpp --intermediate wrote",
                          max_bytes=limit), kf.file
    packed = read_bytes(gz, "--kernel-dumps file", max_bytes=limit + (1 << 20))
    try:
        d = zlib.decompressobj(wbits=31)  # gzip framing
        data = d.decompress(packed, limit + 1)
        if len(data) <= limit and not d.eof:
            raise zlib.error("truncated")
    except zlib.error as exc:
        raise InputError(f"--kernel-dumps file {gz} is not a complete gzip file ({exc})") from None
    return data, gz.name


def read_kernel_file(directory: Path, kf: KernelFile, config: Config, blocks: int) -> np.ndarray:
    """``kf`` as an array [blocks][slots][unit…] (o_out: [S0][HEAD]); InputError when its size does not fit
    the run's shapes."""
    unit = _unit_shape(config, kf)
    per = int(np.prod(unit)) * np.dtype(kf.dtype).itemsize
    fixed = kf.file == "o_out.bin"
    limit = per if fixed else per * blocks * MAX_SLOTS
    data, name = _read(directory, kf, limit)
    layout = "[S0][HEAD]" if fixed else f"[{blocks} blocks][slots]{''.join(f'[{n}]' for n in unit)}"
    if (fixed and len(data) != per) or (not fixed and (not data or len(data) % (per * blocks) or
                                                       len(data) > limit)):
        raise InputError(f"--kernel-dumps {name} has {len(data)} bytes: not {np.dtype(kf.dtype).name} {layout} "
                         f"of this run (HEAD {config.case.head}, S0 {config.case.s0}, CUBE_S0 "
                         f"{config.tiling.cube_s0}, TILE_S1 {config.tiling.tile_s1}); the dumps belong to another "
                         f"case")
    a = np.frombuffer(data, dtype=np.dtype(kf.dtype).newbyteorder("<"))
    return a.reshape(unit) if fixed else a.reshape((blocks, -1, *unit))


def check_layout(config: Config) -> int:
    """The kernel blocks of a run the kernel's dumps can describe (one head, S0/CUBE_S0 full blocks, fp16, one
    launch); InputError naming what does not fit."""
    c, t, s = config.case, config.tiling, config.schedule
    problems = [text for bad, text in (
        ((c.batch, c.heads, c.kv_heads) != (1, 1, 1), f"batch {c.batch}, heads {c.heads}, kv_heads {c.kv_heads} "
                                                      f"(the kernel's program runs one head)"),
        (c.s0 % t.cube_s0 != 0, f"S0 {c.s0} is not a multiple of CUBE_S0 {t.cube_s0}"),
        (c.dtype != "fp16", f"case.dtype {c.dtype} (the kernel is fp16)"),
        (s.s1_split != 1 or s.gqa_pack, "split-S1 or GQA packing (the kernel has neither)")) if bad]
    if problems:
        raise InputError(f"--kernel-dumps: this run is not a case of the kernel's own program: {'; '.join(problems)}")
    return c.s0 // t.cube_s0


@dataclass
class Tally:
    """One tensor's comparison so far."""

    kf: KernelFile
    got: list[np.ndarray] = field(default_factory=list)
    exp: list[np.ndarray] = field(default_factory=list)
    tiles: dict[str, bool] = field(default_factory=dict)
    first: dict[str, Any] | None = None

    def add(self, block: int, tile: int | None, got: np.ndarray, exp: np.ndarray, cols: np.ndarray | None) -> None:
        """One block's tile: the run's ``got`` against the kernel's ``exp`` (same shape; ``cols``: the
        logical columns of a score tile's columns, else None)."""
        bits = np.uint16 if got.dtype.itemsize == 2 else np.uint32
        differ = got.view(bits) != exp.view(bits)
        self.got.append(got.ravel())
        self.exp.append(exp.ravel())
        self.tiles[f"{block}:{'' if tile is None else tile}"] = not differ.any()
        if differ.any() and self.first is None:
            at = tuple(int(i) for i in np.argwhere(differ)[0])
            col = None if len(at) < 2 else (int(cols[at[1]]) if cols is not None else at[1])
            ulps = ulp_distance(np.atleast_1d(got[at]), np.atleast_1d(exp[at]))
            self.first = {"file": self.kf.file, "what": self.kf.what, "stage": self.kf.stage, "block": block,
                          "tile": tile, "row": at[0], "col": col, "kernel": float(exp[at]), "run": float(got[at]),
                          "ulps": int(ulps[0])}

    def result(self, exact: bool) -> dict[str, Any]:
        got = np.concatenate(self.got) if self.got else np.zeros(0, self.kf.dtype)
        exp = np.concatenate(self.exp) if self.exp else np.zeros(0, self.kf.dtype)
        bits = np.uint16 if got.dtype.itemsize == 2 else np.uint32
        equal = int(np.count_nonzero(got.view(bits) == exp.view(bits)))
        rule = compare(got, exp, self.kf.eps)
        ulps = ulp_distance(got, exp)
        passed = equal == got.size if exact else rule.passed
        return {"what": self.kf.what, "stage": self.kf.stage, "dump": self.kf.dump, "elements": int(got.size),
                "bit_equal": equal, "bit_equal_fraction": equal / got.size if got.size else 1.0,
                "max_abs_err": rule.max_abs_err, "max_ulp": int(ulps.max()) if ulps.size else 0,
                "rule": rule.to_dict(), "tiles": self.tiles, "passed": passed}


class RunDumps:
    """The run's own dumps (``RUN/dumps``, written by ``--intermediate-check``), read on demand."""

    def __init__(self, run_dir: Path, blocks: dict[int, Block]) -> None:
        self.run_dir = run_dir
        self.files = {(m["name"], m["block"], m["tile"]): m["file"] for m in read_manifest(run_dir, blocks)
                      if str(m["file"]).endswith(".npy")}

    def get(self, name: str, block: int, tile: int) -> np.ndarray:
        fname = self.files.get((name, block, tile))
        if fname is None:
            raise InputError(f"{self.run_dir} has no dump of {name} for block {block} tile {tile}: rerun tfa-sim "
                             f"run --intermediate-check without --blocks/--tiles")
        path = self.run_dir / "dumps" / fname
        return load_npy(read_bytes(path, "dump"), path, "dump")


def _survivors(block: Block, slots: int) -> list[int]:
    """The block's tiles whose FIFO slot no later tile of the block overwrote, in order."""
    last = {t % slots: t for t in block.tile_ids}
    return [t for t in block.tile_ids if last[t % slots] == t]


def _score_tile(a: np.ndarray) -> np.ndarray:
    """[kf][CUBE_S0][CUBE_S1] → [CUBE_S0][TILE_S1] (sub-tile s's column c is logical column s·CUBE_S1 + c)."""
    return a.transpose(1, 0, 2).reshape(a.shape[1], -1)


def _compare_tiles(tallies: dict[str, Tally], kernel: dict[str, np.ndarray], run: RunDumps, blocks: list[Block],
                   slots: int, notes: list[str]) -> None:
    """Every surviving tile of every block, tile by tile in data-flow order (QK, P, exp_max, PV)."""
    order = sorted({t for b in blocks for t in _survivors(b, slots)})
    skipped = 0
    for t in order:
        for kf in FILES[:4]:
            for b in blocks:
                if t not in _survivors(b, slots) or (kf.file == "exp_max_ififo.bin" and t == 0):
                    continue
                entry = kernel[kf.file][b.row_block, t % slots]
                got, local = run.get(kf.dump, b.index, t), b.tile_ids.index(t)
                if kf.file in ("qk_out.bin", "p_out.bin"):
                    cs = b.cube_s1
                    cols = np.concatenate([np.arange(s * cs, (s + 1) * cs) for s in b.active_subs(local)])
                    skipped += entry.size - cols.size * b.n_rows
                    tallies[kf.file].add(b.index, t, got[:, cols], _score_tile(entry)[:, cols], cols)
                else:
                    tallies[kf.file].add(b.index, t, got, entry, None)
    notes.append("exp_max_ififo.bin tile 0: never written by the kernel (its first tile takes the init path)")
    if skipped:
        notes.append(f"qk_out.bin, p_out.bin: {skipped} elements of sub-tiles a causal block skips (stale in the "
                     f"kernel, +0 in tfa-sim)")
    lost = sum(len(b.tile_ids) - len(_survivors(b, slots)) for b in blocks)
    if lost:
        notes.append(f"{lost} block tiles were overwritten in the kernel's {slots}-slot FIFOs by later tiles")


def _compare_output(tally: Tally, o_out: np.ndarray, run: RunDumps, blocks: list[Block], causal: bool,
                    notes: list[str]) -> None:
    """Each block's rows of ``o_out.bin`` against the run's O after the block's last tile."""
    for b in blocks:
        if len(b.tile_ids) == 1 and not causal:
            notes.append(f"o_out.bin block {b.index}: one logical tile and no causal mask — the kernel does not "
                         f"divide by the row sum, tfa-sim does (docs/numerics.md, \"Decisions\")")
            continue
        t = b.tile_ids[-1]
        tally.add(b.index, t, run.get("o_part", b.index, t), o_out[b.rows.pos], None)


def kernel_dump_report(run_dir: Path, directory: Path, exact: bool, mem_limit_gib: float) -> dict[str, Any]:
    """The comparison of ``run_dir``'s dumps with the kernel's files in ``directory`` (module docstring)."""
    summary = read_summary(run_dir)
    config = run_config(summary, run_dir)
    n_blocks = check_layout(config)
    if not os.path.isdir(directory):
        raise InputError(f"--kernel-dumps {directory} is not a directory")
    require(check_parts(config), mem_limit_gib or config.numerics.mem_limit_gib, "check")
    blocks = [b for b in dump_blocks(config) if isinstance(b, Block)]
    kernel = {kf.file: read_kernel_file(directory, kf, config, n_blocks) for kf in FILES}
    slots = {kf.file: kernel[kf.file].shape[1] for kf in FILES[:4]}
    if len(set(slots.values())) != 1:
        raise InputError(f"--kernel-dumps {directory}: the files hold different FIFO slot counts "
                         f"({', '.join(f'{k} {v}' for k, v in slots.items())}); they are not from one run")
    run = RunDumps(run_dir, {b.index: b for b in dump_blocks(config)})
    tallies = {kf.file: Tally(kf) for kf in FILES}
    notes: list[str] = []
    _compare_tiles(tallies, kernel, run, blocks, slots["qk_out.bin"], notes)
    _compare_output(tallies["o_out.bin"], kernel["o_out.bin"], run, blocks, config.case.causal, notes)
    tensors = {name: tally.result(exact) for name, tally in tallies.items()}
    firsts = [tally.first for tally in tallies.values() if tally.first is not None]
    first = min(firsts, key=_flow_key, default=None)
    return {"kind": "kernel_dumps", "run": summary["case"], "reference": str(directory),
            "reference_mode": config.numerics.reference, "exact": exact, "slots": slots["qk_out.bin"],
            "rule": "bit-equal (--exact)" if exact else f"docs/kernel.md \"Comparison rule\", eps {EPS:g} "
                                                        f"(exp_max {EPS_EXP_MAX:g})",
            "passed": all(t["passed"] for t in tensors.values()), "tensors": tensors, "not_compared": notes,
            "first_divergence": first}


def _flow_key(first: dict[str, Any]) -> tuple[int, int, int]:
    """Data-flow order of a divergence: tile, then QK, P, exp_max, PV; O after every tile."""
    index = [kf.file for kf in FILES].index(first["file"])
    return (1 << 30 if first["file"] == "o_out.bin" else first["tile"], index, first["block"])


def check_kernel_dumps(run_dir: Path, directory: Path, exact: bool = False, mem_limit_gib: float = 0) -> dict:
    """:func:`kernel_dump_report`, also written to ``RUN_DIR/check.json``."""
    return with_check_json(run_dir, lambda: kernel_dump_report(run_dir, directory, exact, mem_limit_gib))


def format_kernel_report(report: dict[str, Any]) -> str:
    """What ``tfa-sim check --kernel-dumps`` prints."""
    lines = [f"tfa-sim check: {report['run']} (reference {report['reference_mode']}) against the kernel's dumps in "
             f"{report['reference']} ({report['slots']} FIFO slots) — {report['rule']}"]
    width = max(len(n) for n in report["tensors"])
    for name, t in report["tensors"].items():
        share = math.floor(1e5 * t["bit_equal_fraction"]) / 1e3  # 99.999, never a rounded-up 100
        lines.append(f"  {name:{width}s} {t['what']:22s} {'PASS' if t['passed'] else 'FAIL'}  bit-equal "
                     f"{t['bit_equal']}/{t['elements']} ({share:.3f} %)  max abs {t['max_abs_err']:.3g}  "
                     f"max ULP {t['max_ulp']}")
    for note in report["not_compared"]:
        lines.append(f"  not compared: {note}")
    f = report["first_divergence"]
    if f is None:
        lines.append("  every compared element is bit-equal")
    else:
        where = f"block {f['block']} tile {f['tile']} row {f['row']}" + (f" col {f['col']}" if f["col"] is not None
                                                                         else "")
        lines.append(f"  first divergence (data-flow order): {f['file']} ({f['what']}, {f['stage']}) {where}: "
                     f"kernel {f['kernel']!r}, run {f['run']!r}, {f['ulps']} ULP")
    failed = [name for name, t in report["tensors"].items() if not t["passed"]]
    if failed:
        lines.append(f"  FAIL: {', '.join(failed)} " + ("not bit-equal" if report["exact"] else
                                                        "fail the kernel's comparison rule"))
    return "\n".join(lines)
