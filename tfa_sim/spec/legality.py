"""docs/kernel.md, "Legality": which (case, tiling, schedule) tuples the kernel accepts.

``check_legal`` raises a one-line :class:`InputError` naming the first rule
broken, the values involved and a legal alternative.
"""
from __future__ import annotations

import math

from tfa_sim.buffers.capacity import CUBE_K_CHOICES, buffer_use, cube_k
from tfa_sim.spec import plugins
from tfa_sim.spec.choices import problems, resolve
from tfa_sim.spec.config import ZERO_OK, Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import Hardware, load_hardware
from tfa_sim.spec.workload import instruction_groups

#: More instruction groups than this is no simulation anyone waits for (about an hour of SimPy).
MAX_GROUPS = 10 ** 8

SUGGEST_SPAN = 4096  # how many multiples of ``step`` either side of the target a suggestion may look at


def _divisors_near(n: int, target: int, step: int = 1) -> int | None:
    """The divisor of ``n`` (a multiple of ``step``) closest to ``target`` within :data:`SUGGEST_SPAN`
    steps of it, or None; bounded so that a huge ``n`` gets an answer at once."""
    base = target // step * step
    window = range(max(step, base - SUGGEST_SPAN * step), min(n, base + SUGGEST_SPAN * step) + 1, step)
    cands = [d for d in window if n % d == 0]
    return min(cands, key=lambda d: (abs(d - target), d)) if cands else None


def _fix(key: str, n: int, target: int, step: int, other: str, multiple: int) -> str:
    """'use key=…' with a legal divisor, or else the other value rounded up to a multiple."""
    d = _divisors_near(n, target, step)
    return f"use {key}={d}" if d else f"use {other}={-(-n // multiple) * multiple}"


def _check_variants(config: Config) -> None:
    """The kernel variants: window, softcap, mask file, split-S1 (docs/kernel.md, "Variants")."""
    c = config.case
    _require(c.window is None or c.causal, f"case.window={c.window} is the causal local window (i − W < j ≤ i); "
             f"set case.causal = true with it")
    _require(math.isfinite(c.softcap) and c.softcap >= 0, f"case.softcap={c.softcap} must be a finite number ≥ 0 "
             f"(0 = off; Gemma uses 50 for attention)")
    _require(not c.mask or not c.causal, "case.mask replaces the causal mask: give either --mask FILE or "
             "case.causal = true, not both (put the causal part into the mask file)")
    n = config.numerics
    _require(n.reference != "cpu_sim" or n.exp_model == "tfa", f"numerics.exp_model={n.exp_model} chooses the npu "
             f"reference's exp; numerics.reference=cpu_sim brings CPU_SIM's own, (float)exp((double)x): drop one")


def _check_choices(config: Config) -> None:
    """The rules the chosen values of the design choices bring (their registries', :mod:`tfa_sim.spec.choices`),
    each written beside the value it concerns, whichever build carries it."""
    _check_origins(config)
    for problem in problems(config):
        raise InputError(f"illegal config: {problem}")


def _check_origins(config: Config) -> None:
    """A plugin's value is the config's only when the config loads that plugin (``kernel.plugins``: its own,
    ``--plugin``'s and its build bundle's): one loaded by another config of the same process (a sweep's other
    point) lends it none."""
    mine = plugins.allowed(config.kernel.plugins)
    for key, value in resolve(config.kernel).items():
        came = plugins.origin(key, value.name, integer=isinstance(value.name, int) and not isinstance(value.name, bool))
        if came is not None and came not in mine:
            raise InputError(f"illegal config: kernel.{key} = {value.word} is a value of plugin "
                             f"{plugins.NAMED.get(came, value.module)}, which this config does not load; add the "
                             f"plugin to kernel.plugins (or --plugin)")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise InputError(f"illegal config: {message}")


def _ub_knobs(config: Config) -> str:
    """What a UB that overflows can take less of, as the config sets it: the tile size, the counts, the union."""
    s, k = config.schedule, config.kernel
    counts = ["schedule.ub_src" if s.ub_src is not None else "schedule.local_slot_num", "schedule.ub_x_exp",
              "kernel.exp_ring (the l1_exp_max ring's entries)"]
    union = ", or set kernel.ub_union = true (the GU input in the softmax source's tiles)" if k.ub_union is False \
        else ""
    return f"reduce tiling.tile_s1 or a count ({', '.join(counts)}){union}"


def check_legal(config: Config) -> None:
    """Raise :class:`InputError` for the first broken legality rule."""
    c, t, s = config.case, config.tiling, config.schedule
    for section, obj in (("case", c), ("tiling", t), ("schedule", s)):
        for key, value in vars(obj).items():
            low = 0 if key in ZERO_OK else 1
            if isinstance(value, int) and not isinstance(value, bool) and value < low:
                raise InputError(f"illegal config: {section}.{key}={value} must be ≥ {low}")
    step = min(CUBE_K_CHOICES)
    _require(c.head % step == 0, f"case.head={c.head} must be a multiple of {step}: QK's matmul steps its K (HEAD) "
             f"in a CubeK of {'/'.join(map(str, CUBE_K_CHOICES))}; use 64 or 128")
    near = _divisors_near(c.heads, c.kv_heads)
    _require(c.heads % c.kv_heads == 0, f"case.heads={c.heads} is not a multiple of case.kv_heads={c.kv_heads} "
             f"(GQA groups); " + (f"use kv_heads={near}" if near else "use a kv_heads that divides heads"))
    _check_variants(config)
    _check_choices(config)
    _require(c.s1 % t.tile_s1 == 0, f"S1 % TILE_S1 == 0 broken: case.s1={c.s1}, tiling.tile_s1={t.tile_s1}; "
             + _fix("tile_s1", c.s1, t.tile_s1, t.cube_s1, "case.s1", t.tile_s1))
    _require(t.cube_s1 % step == 0, f"tiling.cube_s1={t.cube_s1} must be a multiple of {step}: PV's matmul steps its "
             f"K (CUBE_S1) in a CubeK of {'/'.join(map(str, CUBE_K_CHOICES))}; use 128")
    _require(t.tile_s1 % t.cube_s1 == 0, f"TILE_S1 % CUBE_S1 == 0 broken: tiling.tile_s1={t.tile_s1}, "
             f"tiling.cube_s1={t.cube_s1}; use tile_s1={max(t.cube_s1, t.tile_s1 // t.cube_s1 * t.cube_s1)}")
    kf = t.k_tile_factor
    legal_cube_s0 = 2 * kf * max(1, t.cube_s0 // (2 * kf))
    _require(t.cube_s0 % (2 * kf) == 0, f"CUBE_S0 % (2·kTileFactor) == 0 broken: cube_s0={t.cube_s0}, "
             f"kTileFactor={kf} (tile_s1/cube_s1); use a smaller tile_s1 or cube_s0={legal_cube_s0}")
    _require(t.vec_s0 * 4 % 32 == 0, f"Vec_S0·4 must be a multiple of 32 bytes: Vec_S0 = cube_s0/2/kTileFactor = "
             f"{t.vec_s0} rows; need Vec_S0 ≥ 8, e.g. tile_s1={t.cube_s1 * max(1, t.cube_s0 // 16)} or larger cube_s1")
    _require(t.cube_s0 // 2 * 4 % 32 == 0, f"(CUBE_S0/2)·4 must be a multiple of 32 bytes: cube_s0={t.cube_s0}; "
             f"use a multiple of 16")
    _require(s.qk_preload <= s.cv_fifo_size, f"1 ≤ qkPreloadNum ≤ CV_FIFO_SIZE broken: schedule.qk_preload="
             f"{s.qk_preload}, cv_fifo_size={s.cv_fifo_size}; use qk_preload={s.cv_fifo_size}")
    _require(s.qk_preload != 1 or kf == 1, f"qkPreloadNum > 1 unless kTileFactor == 1 broken: qk_preload=1 with "
             f"kTileFactor={kf}; use qk_preload=2")
    hw = load_hardware(config.hardware)
    _check_capacities(config, hw)
    groups = instruction_groups(config)
    _require(groups <= MAX_GROUPS, f"the run would execute about {groups:.3g} instruction groups (more than "
             f"{MAX_GROUPS:.0e}, hours of simulation): use fewer batch/heads, a smaller S0 or S1, or a larger "
             f"tiling.tile_s1")


def _check_capacities(config: Config, hw: Hardware) -> None:
    """L1, UB, L0C and L0A/L0B hold what the tiling and buffer counts ask for."""
    c, t, s = config.case, config.tiling, config.schedule
    use = buffer_use(config, hw.ub_align)
    _require(use.l1_bytes <= hw.l1, f"L1 holds {use.l1_bytes} bytes > {hw.l1} ({use.l1}); reduce buffer counts "
             f"(schedule.l1_*{', or schedule.local_slot_num' if s.l1_p is None else ''}) or tile sizes")
    _require(use.ub_bytes <= hw.ub, f"UB holds {use.ub_bytes} bytes > {hw.ub} ({use.ub}); {_ub_knobs(config)}")
    acc = hw.l0c // s.l0c
    _require(use.l0c_accumulator <= acc, f"one L0C accumulator needs {use.l0c_accumulator} bytes > {acc} "
             f"(l0c {hw.l0c} / schedule.l0c={s.l0c}); reduce cube_s0 or cube_s1")
    a_half, b_half = hw.l0a // s.l0a, hw.l0b // s.l0b
    matmuls = (("compute_qk", t.cube_s0, t.cube_s1, c.head), ("compute_pv", t.cube_s0, c.head, t.cube_s1))
    for stage, m, n, kdim in matmuls:
        _require(cube_k(m, n, kdim, a_half, b_half) is not None,
                 f"{stage}: no CubeK in 256/128/64/32 fits L0A/L0B halves ({a_half}/{b_half} bytes) with M={m}, "
                 f"N={n}; reduce cube_s0 or use schedule.l0a/l0b=1")
