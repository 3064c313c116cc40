"""Memory a command will hold, estimated before anything is allocated, and the refusal when it will not fit.

A run with numerics holds its inputs and output, the goldens and the comparison (float64 copies of the
output: the largest part, about 76 bytes per output element), the intermediate dumps when asked for,
and per core a few FIFO tiles; with the event log every instruction group costs about
:data:`EVENT_BYTES` (its columns, its trace.json events, the critical path).  ``tfa-sim check`` and
``gen-data`` hold every intermediate over the whole run (``tfa_sim.sim.functional.empty_intermediates``).
The estimate is compared with the limit — ``numerics.mem_limit_gib``, by default
:data:`AUTO_FRACTION` of the memory available now (``MemAvailable``, the cgroup's limit, ``RLIMIT_AS``) —
and a command that would exceed it stops at once with the estimate and the ways out (docs/guide/safety.md).
"""
from __future__ import annotations

import os
import resource
from pathlib import Path

import numpy as np

from tfa_sim.numerics.intermediates import INTERMEDIATES, block_shape
from tfa_sim.spec.config import Config, parse_span
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.workload import blocks, instruction_groups, selected_tiles

GIB = 1 << 30
#: The default limit: this share of the memory available when the command starts.
AUTO_FRACTION = 0.8
#: Bytes per instruction group with the event log (columnar log, streamed trace.json, critical path; measured
#: peak RSS over the run without the log: 1.35 KB at 16k², 0.85 KB at 32k²).
EVENT_BYTES = 1536
#: What any command holds besides its data: the loaded libraries and their working set (matplotlib, the native
#: kernels, SimPy); measured peaks of small runs are 50–150 MiB.
BASE_BYTES = 256 << 20
#: Bytes of output compared per element: float64 reference and kernel golden, and the comparison's
#: float64 copies, differences and masks (tfa_sim.numerics.compare).
GOLDEN_BYTES_PER_OUTPUT = 8 + 4 + 64
#: Per command: the ways out of a refusal.
WAYS_OUT = {
    "run": "use --no-numerics (timing only) or --no-event-log, fewer batch/heads, a smaller S0 or S1, or raise "
           "the limit with --set numerics.mem_limit_gib=N",
    "check": "check a smaller run (fewer batch/heads, a smaller S0 or S1) or raise the limit with --mem-limit-gib N",
    "read": "draw or plan a smaller run (fewer blocks or tiles)",
    "gen-data": "use fewer batch/heads, a smaller S0 or S1, or raise the limit with --set numerics.mem_limit_gib=N",
}


def _elements(config: Config) -> dict[str, int]:
    c = config.case
    return {"q": c.batch * c.heads * c.s0 * c.head, "kv": c.batch * c.kv_heads * c.s1 * c.head,
            "o": c.batch * c.heads * c.s0 * c.head}


def input_bytes(config: Config) -> int:
    """Q, K, V in fp16 and the largest transient of making or reading one (a float64 draw)."""
    n = _elements(config)
    return 2 * (n["q"] + 2 * n["kv"]) + 10 * max(n["q"], n["kv"])


def intermediate_bytes(config: Config) -> int:
    """Every intermediate over the whole run in the full layout (scores fp32 and fp16, rows, head tiles, the
    combine's O)."""
    c, tiles = config.case, config.tiles
    per_head = c.s0 * c.s1 * (4 + 2) + tiles * c.s0 * 3 * 4 + tiles * c.s0 * c.head * 2 * 4 + c.s0 * c.head * 4
    return c.batch * c.heads * per_head


def _per_head_transient(config: Config) -> int:
    """One head of the goldens: K/V in float64 and a block of float64 scores (and its mask) in each of the two
    processes that share the goldens (tfa_sim/numerics/shared_goldens.py), one tile's float64 softmax over the
    kernel-ordered golden's rows."""
    from tfa_sim.numerics.golden import GOLDEN_ROWS, reference_rows

    c = config.case
    return (2 * (16 * c.s1 * c.head + 10 * reference_rows(config) * c.s1)
            + 30 * min(c.s0, GOLDEN_ROWS) * config.tiling.tile_s1 + 12 * c.s0 * c.head)


def _engine_bytes(config: Config) -> int:
    """The blocks, and per core (at most 64 run at once) FIFO tiles in flight and the stage buffers."""
    t, s = config.tiling, config.schedule
    per_core = s.cv_fifo_size * t.cube_s0 * (6 * t.tile_s1 + 4 * config.case.head) * 2 + (1 << 20)
    return 512 * blocks(config) + min(blocks(config), 64) * per_core


def dump_bytes(config: Config) -> int:
    """Bytes the intermediate dumps will take (npy and raw copies, plus the full-S0 files when everything is
    dumped); in closed form, so that an absurd selection is refused at once."""
    n = config.numerics
    per_tile = sum(int(np.prod(block_shape(item, config))) * item.dtype_for(config).itemsize
                   for item in INTERMEDIATES)
    spans = [parse_span(n.dump_blocks, "numerics.dump_blocks"), parse_span(n.dump_tiles, "numerics.dump_tiles")]
    tiles = selected_tiles(config, *(span or (0, 1 << 62) for span in spans))
    total = 2 * per_tile * tiles
    if n.full_dump:
        total += per_tile * selected_tiles(config)
    return total


def run_parts(config: Config, event_log: bool) -> dict[str, int]:
    """Bytes ``tfa-sim run`` holds, by part."""
    parts = {"simulation": _engine_bytes(config),
             "event log": instruction_groups(config) * EVENT_BYTES if event_log else 0}
    if config.numerics.enabled:
        parts["inputs"] = input_bytes(config)
        parts["goldens"] = _elements(config)["o"] * (4 + GOLDEN_BYTES_PER_OUTPUT) + _per_head_transient(config)
        if config.numerics.intermediate_check:
            parts["dumps"] = dump_bytes(config)
    return parts


def check_parts(config: Config) -> dict[str, int]:
    """Bytes ``tfa-sim check`` holds: the reference's intermediates over the whole run and the inputs."""
    return {"intermediates": intermediate_bytes(config) + 4 * _elements(config)["o"], "inputs": input_bytes(config),
            "blocks": 512 * blocks(config)}


def gen_data_parts(config: Config) -> dict[str, int]:
    """Bytes ``tfa-sim gen-data`` holds: the recorded golden (intermediates plus fp32 P) and the inputs."""
    c = config.case
    recorded = intermediate_bytes(config) + 4 * c.batch * c.heads * c.s0 * c.s1 + 8 * _elements(config)["o"]
    return {"golden": recorded + _per_head_transient(config), "inputs": input_bytes(config)}


def _read_number(path: str, key: str | None = None) -> int | None:
    """An integer from a /proc or /sys file (``key`` selects a ``key: value kB`` line); None if absent."""
    try:
        text = Path(path).read_text()
    except (OSError, ValueError):
        return None
    if key is None:
        return int(text) if text.strip().isdigit() else None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key and value.split() and value.split()[0].isdigit():
            return int(value.split()[0]) * 1024
    return None


def available_bytes() -> int:
    """Memory this process can still take: the least of MemAvailable, the cgroup's headroom, RLIMIT_AS."""
    found = [_read_number("/proc/meminfo", "MemAvailable")]
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        cap, now = _read_number(limit), _read_number(used)
        if cap is not None and now is not None:
            found.append(max(0, cap - now))
    soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    if soft != resource.RLIM_INFINITY:
        found.append(max(0, soft - (_read_number("/proc/self/status", "VmSize") or 0)))
    known = [v for v in found if v is not None]
    if not known:
        known = [os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")]
    return min(known)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB" if n >= GIB / 10 else f"{n / 2 ** 20:.1f} MiB"


def require(parts: dict[str, int], limit_gib: float, command: str) -> None:
    """InputError when the estimate exceeds the limit (``limit_gib`` > 0) or the automatic one."""
    parts = {**parts, "libraries": BASE_BYTES}
    need = sum(parts.values())
    available = available_bytes()
    if limit_gib > 0:
        limit, why = limit_gib * GIB, f"numerics.mem_limit_gib = {limit_gib:g}"
    else:
        limit, why = AUTO_FRACTION * available, (f"the default limit, {AUTO_FRACTION:.0%} of the {_gib(available)} "
                                                 f"available (numerics.mem_limit_gib)")
    if need <= limit:
        return
    detail = ", ".join(f"{k} {_gib(v)}" for k, v in sorted(parts.items(), key=lambda kv: -kv[1]) if v)
    subject = "reading the run" if command == "read" else f"tfa-sim {command}"
    raise InputError(f"{subject} would hold about {_gib(need)} of memory ({detail}) > {_gib(limit)}, {why}: "
                     f"{WAYS_OUT[command]}")


def check_run_memory(config: Config, event_log: bool) -> None:
    """Refuse a ``tfa-sim run`` of ``config`` that would not fit (before anything is allocated)."""
    require(run_parts(config, event_log), config.numerics.mem_limit_gib, "run")
