"""``tfa-sim check``: a run's intermediate dumps against a reference, stage by stage and tile by tile.

References:

* default — the model: tfa-sim's own numerics recomputed from the run's inputs
  (``functional.run_functional``).  A tfa-sim run must match it to the bit, so
  any ULP difference fails, and the kernel's rule is reported too;
* ``--golden DIR`` — a directory of raw ``.bin`` files in the reference
  generator's layout (``tfa-sim gen-data`` writes one; hardware dumps laid out
  the same way work too): the kernel's rule (docs/kernel.md, "Comparison rule": eps 1e-3, 1e-2 for
  exp_max) decides, and the ULP histogram says how far apart the two are.

Every dump gets max abs/rel error and a ULP-distance histogram; the report is
a per-stage, per-tile PASS/FAIL table and the first divergence in data-flow
order (tile by tile: QK, x_exp, exp_max, running max, running sum, PV,
running O), with its element, values, ULPs and timeline event.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tfa_sim.backends import get_backend
from tfa_sim.numerics.compare import EPS, EPS_EXP_MAX, compare, element_failures, ulp_distance, ulp_histogram
from tfa_sim.numerics.inputs import Inputs, changed_inputs, generate_inputs, load_inputs
from tfa_sim.numerics.intermediates import BY_NAME, NAMES, block_index, golden_files, read_golden, select
from tfa_sim.numerics.rounding import bf16_from_npy
from tfa_sim.rundir.directory import RunDir
from tfa_sim.rundir.dumps import dump_blocks
from tfa_sim.rundir.memory import check_parts, require
from tfa_sim.rundir.outputs import read_summary, write_json
from tfa_sim.sim.functional import run_functional
from tfa_sim.spec.blocks import Block
from tfa_sim.spec.config import Config
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.hardware import load_hardware
from tfa_sim.spec.load import build_config
from tfa_sim.spec.safety import is_name, load_npy, read_bytes, require_fields

ORDER = list(NAMES)  # data-flow order within a tile


@dataclass
class Result:
    name: str
    block: int
    tile: int
    passed: bool
    detail: dict[str, Any] = field(default_factory=dict)


def run_config(summary: dict[str, Any], run_dir: Path = Path(".")) -> Config:
    """The run's config from its summary (checked like any config)."""
    try:
        return build_config(summary["config"])
    except InputError as exc:
        raise InputError(f"{run_dir / 'summary.json'}: {exc}; rerun tfa-sim run") from None


def run_inputs(summary: dict[str, Any], config: Config) -> Inputs:
    """The run's inputs again: regenerated, or re-read from its --inputs directory — refused when they are not
    the ones the run used (``input_hashes`` in summary.json)."""
    source, recorded = summary.get("inputs", ""), summary.get("input_hashes")
    if source.startswith("generated"):
        inputs = generate_inputs(config)
        changed = changed_inputs(recorded, inputs.hashes) if recorded is not None else []
        if changed:
            raise InputError(f"inputs changed since the run: generated {', '.join(changed)} (seed "
                             f"{config.numerics.seed}) differ from the run's; rerun tfa-sim run")
        return inputs
    if not source or not os.path.isdir(source):
        raise InputError(f"the run's inputs {source or '(not recorded)'} are gone; restore them or rerun tfa-sim run")
    return load_inputs(source, config, recorded)


def model_reference(config: Config, summary: dict[str, Any]) -> Any:
    """The model's value of a dump: get(name, block, tile) → array."""
    n = config.numerics
    backend = get_backend(summary.get("backend", n.backend), n.exp_model, n.reference)
    cores = load_hardware(config.hardware).cube_cores
    _o, rec = run_functional(backend, config, run_inputs(summary, config), record=True, cores=cores)
    assert rec is not None

    def get(name: str, block: Any, tile: int) -> np.ndarray:
        item = BY_NAME[name]
        return rec[name][block_index(item, block, tile, config)]

    return get


def golden_reference(config: Config, directory: Path) -> Any:
    """Slices of the reference generator's raw files, read once each with the shapes this config implies."""
    cache: dict[str, np.ndarray | str] = {}

    def get(name: str, block: Any, tile: int) -> np.ndarray | str:
        item = BY_NAME[name]
        fname, file_tile = golden_files(item, config)[tile if item.per_tile else 0]
        if fname not in cache:
            cache[fname] = read_golden(item, directory, fname, config)
        arr = cache[fname]
        if isinstance(arr, str):
            return arr
        if file_tile is not None:  # one tile per file: put it where the full layout has it
            return arr[:, :, None][block_index(item, block, 0, config)]
        return arr[block_index(item, block, tile, config)]

    return get


#: The fields ``check`` reads from each per-block entry of dumps/manifest.json.
MANIFEST_FIELDS = {"file": "str", "name": "str", "block": "int", "tile": "int", "slot": "int?", "event": "table?",
                   "event.unit": "str", "event.pipe": "str", "event.instruction": "str",
                   "event.start_cycle": "number", "event.end_cycle": "number"}


def read_manifest(run_dir: Path, blocks: dict[int, Any]) -> list[dict[str, Any]]:
    """The per-block ``.npy`` entries of ``RUN/dumps/manifest.json``, each checked against the run's blocks."""
    path = run_dir / "dumps" / "manifest.json"
    if not os.path.lexists(path):
        raise InputError(f"{run_dir} has no dumps: run with --intermediate-check first")
    problem = f"{path} is damaged; rerun tfa-sim run --intermediate-check"
    try:
        entries = json.loads(read_bytes(path, "dump manifest", max_bytes=1 << 28))
    except (ValueError, RecursionError):
        raise InputError(f"{problem} (not JSON)") from None
    if not isinstance(entries, list) or not all(isinstance(m, dict) for m in entries):
        raise InputError(f"{problem} (not a list of entries)")
    out = [m for m in entries if m.get("block") is not None and str(m.get("file")).endswith(".npy")]
    for m in out:
        spec = {k: v for k, v in MANIFEST_FIELDS.items() if not k.startswith("event.") or m.get("event") is not None}
        require_fields(m, spec, problem)
        block = blocks.get(m["block"])
        if not is_name(m["file"]) or m["name"] not in NAMES or block is None or m["tile"] not in block.tile_ids:
            raise InputError(f"{problem} (entry {m['file']!r}: no such dump in this run)")
        m.setdefault("slot", None)
        m.setdefault("event", None)
    return out


def check_run(run_dir: Path, golden: Path | None = None, eps: float = EPS, atol: float | None = None,
              rtol: float | None = None, stages: list[str] | None = None, mem_limit_gib: float = 0) -> dict[str, Any]:
    """Compare every dump of ``run_dir``; returns the report (also written to check.json)."""
    return with_check_json(run_dir, lambda: _check(Path(run_dir), golden, eps, atol, rtol, stages, mem_limit_gib))


def with_check_json(run_dir: Path, make_report: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``make_report()`` with ``RUN_DIR`` locked, written to ``RUN_DIR/check.json`` (replacing tfa-sim's own)."""
    with RunDir(run_dir, "RUN_DIR", "check", create=False) as rd:
        rd.refuse_foreign(["check.json"], "rename it")
        report = make_report()
        rd.remove(lambda rel: rel == "check.json")
        write_json(rd.file("check.json"), report)
    return report


def _check(run_dir: Path, golden: Path | None, eps: float, atol: float | None, rtol: float | None,
           stages: list[str] | None, mem_limit_gib: float) -> dict[str, Any]:
    summary = read_summary(run_dir)
    config = run_config(summary, run_dir)
    wanted = select(stages)
    if golden is not None and not os.path.isdir(golden):
        raise InputError(f"--golden {golden} is not a directory")
    require(check_parts(config), mem_limit_gib or config.numerics.mem_limit_gib, "check")
    blocks = {b.index: b for b in dump_blocks(config)}
    manifest = read_manifest(run_dir, blocks)
    reference = golden_reference(config, Path(golden)) if golden else model_reference(config, summary)
    bit_exact = golden is None
    results: list[Result] = []
    unsplit_only = 0
    for m in sorted(manifest, key=lambda m: (m["tile"], ORDER.index(m["name"]), m["block"])):
        if m["name"] not in wanted:
            continue
        block = blocks[m["block"]]
        if golden is not None and not _in_generator_layout(m["name"], block):
            unsplit_only += 1
            continue
        path = run_dir / "dumps" / m["file"]
        got = bf16_from_npy(load_npy(read_bytes(path, "dump"), path, "dump"))
        exp = reference(m["name"], block, m["tile"])
        results.append(_compare_one(m, got, exp, block, bit_exact, eps, atol, rtol))
    if not results:
        raise InputError(f"{run_dir}: no dumps match --stage {','.join(stages or [])}")
    report = _report(results, summary, golden, bit_exact, eps)
    report["not_in_golden"] = unsplit_only
    return report


def _in_generator_layout(name: str, block: Any) -> bool:
    """Whether the reference generator's (unsplit) files hold this dump: all of an unsplit run's; of a
    split-S1 run's, QK (scores do not depend on the split), the first chunk's tiles and the combine's O —
    a later chunk starts its own running max, sum and O, which the generator never computes."""
    return name == "qk_fifo" or not isinstance(block, Block) or block.chunk == 0


def _compare_one(m: dict, got: np.ndarray, exp: np.ndarray | str, block: Any, bit_exact: bool, eps: float,
                 atol: float | None, rtol: float | None) -> Result:
    name, tile = m["name"], m["tile"]
    base = {"file": m["file"], "event": m["event"], "slot": m["slot"]}
    if isinstance(exp, str):
        return Result(name, block.index, tile, False, {**base, "error": exp})
    if got.shape != exp.shape or got.dtype != exp.dtype:
        return Result(name, block.index, tile, False, {**base, "error": (
            f"shape/dtype mismatch: dump {got.dtype.name} {got.shape}, reference {exp.dtype.name} {exp.shape}")})
    if name == "qk_fifo" and not bit_exact:  # skipped sub-tiles hold +0 by definition, not scores
        t, cs = block.tile_ids.index(tile), block.cube_s1
        cols = np.concatenate([np.arange(s * cs, (s + 1) * cs) for s in block.active_subs(t)])
        got, exp = got[:, cols], exp[:, cols]
    own = BY_NAME[name].eps
    e = own if own != EPS else eps  # the kernel test's own eps for a tensor (exp_max 1e-2) wins over --eps
    rule = compare(got, exp, e, atol, rtol)
    ulps = ulp_distance(got, exp)
    failing = element_failures(got, exp, e, atol, rtol)
    if bit_exact:
        failing = failing | (ulps > 0)
    passed = rule.passed and not (bit_exact and ulps.any())
    detail = {**base, "rule": rule.to_dict(), "max_ulp": int(ulps.max()) if ulps.size else 0,
              "ulp_histogram": ulp_histogram(ulps)}
    if not passed and failing.any():
        first = tuple(int(i) for i in np.argwhere(failing)[0])
        detail["first"] = {"element": list(first), "expected": float(exp[first]), "got": float(got[first]),
                           "ulps": int(ulps[first])}
    return Result(name, block.index, tile, passed, detail)


def _report(results: list[Result], summary: dict, golden: Path | None, bit_exact: bool, eps: float) -> dict:
    per_stage: dict[str, dict[str, Any]] = {}
    for r in results:
        s = per_stage.setdefault(r.name, {"stage": BY_NAME[r.name].stage, "tiles": {}, "max_abs_err": 0.0,
                                          "max_rel_err": 0.0, "max_ulp": 0, "ulp_histogram": {}})
        s["tiles"].setdefault(str(r.tile), True)
        s["tiles"][str(r.tile)] &= r.passed
        if "rule" in r.detail:
            s["max_abs_err"] = max(s["max_abs_err"], r.detail["rule"]["max_abs_err"])
            s["max_rel_err"] = max(s["max_rel_err"], r.detail["rule"]["max_rel_err"])
            s["max_ulp"] = max(s["max_ulp"], r.detail["max_ulp"])
            for k, v in r.detail["ulp_histogram"].items():
                s["ulp_histogram"][k] = s["ulp_histogram"].get(k, 0) + v
    for s in per_stage.values():
        s["passed"] = all(s["tiles"].values())
    failed = [r for r in results if not r.passed]
    first = None
    if failed:
        r = failed[0]
        first = {"name": r.name, "stage": BY_NAME[r.name].stage, "block": r.block, "tile": r.tile, **r.detail}
    return {"run": summary["case"], "reference": str(golden) if golden else "model (bit-exact)",
            "rule": f"docs/kernel.md \"Comparison rule\", eps {eps:g} (exp_max {EPS_EXP_MAX:g})"
                    + ("; plus 0 ULP" if bit_exact else ""),
            "passed": not failed, "dumps": len(results), "failed": len(failed), "stages": per_stage,
            "first_divergence": first}


def format_report(report: dict[str, Any]) -> str:
    lines = [f"tfa-sim check: {report['run']} against {report['reference']} — {report['rule']}"]
    width = max(len(n) for n in report["stages"])
    for name, s in report["stages"].items():
        tiles = s["tiles"]
        marks = "".join("." if tiles[t] else "F" for t in sorted(tiles, key=int))
        if len(marks) > 64:
            bad = sum(not v for v in tiles.values())
            marks = f"{len(tiles) - bad} tiles pass, {bad} fail"
        hist = " ".join(f"{k}:{v}" for k, v in s["ulp_histogram"].items() if v)
        lines.append(f"  {name:{width}s} {'PASS' if s['passed'] else 'FAIL'}  tiles {marks}  max abs "
                     f"{s['max_abs_err']:.3g}  max rel {s['max_rel_err']:.3g}  max ULP {s['max_ulp']}  "
                     f"(ULP histogram {hist})")
    if report.get("not_in_golden"):
        lines.append(f"  {report['not_in_golden']} dumps of later split-S1 chunks have no counterpart in the "
                     f"generator's unsplit files and were not compared; check them against the model (no --golden)")
    f = report["first_divergence"]
    if f is None:
        lines.append(f"  all {report['dumps']} dumps pass")
    else:
        lines.append(f"  {report['failed']} of {report['dumps']} dumps fail; first divergence (data-flow order): "
                     f"{f['name']} ({f['stage']}) block {f['block']} tile {f['tile']}")
        if "error" in f:
            lines.append(f"    {f['error']}")
        if "first" in f:
            e = f["first"]
            lines.append(f"    element {tuple(e['element'])}: expected {e['expected']!r}, got {e['got']!r}, "
                         f"{e['ulps']} ULP")
        if f.get("event"):
            ev = f["event"]
            lines.append(f"    timeline: {ev['unit']}.{ev['pipe']} {ev['instruction']} cycles "
                         f"{ev['start_cycle']:.0f}–{ev['end_cycle']:.0f}")
    return "\n".join(lines)
