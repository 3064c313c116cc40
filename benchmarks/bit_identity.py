"""sha256 of o.npy and of every intermediate dump, over configs × backends × references; or (``--timing``) every
build's cycles, figures and output bits over configs: record, then compare.

Run: ``python benchmarks/bit_identity.py record FILE`` in one tree, ``python benchmarks/bit_identity.py compare
FILE`` in another; ``compare`` prints each difference and exits 1 if there is one.  A speed change to the stage
kernels must leave every hash of ``bit_identity_af08600.json`` (recorded at af08600, issue 34) as it is.  The
configs cover TILE_S1 128/256/512, CUBE_S1 64, HEAD 64 and 256 (two QK K panels: TMATMUL_ACC), short blocks
(rows not a multiple of 4), causal and window masks, softcap, bf16, split-S1 with GQA (the combine), and the
S0 = 512, S1 = 8192 benchmark case; each runs on both backends in both references (``numerics.reference``).

With ``--timing`` the table is :func:`record_timing`'s: per config of :data:`TIMING` and build, the run's cycles,
the three measured figures with their intervals and reasons, blocks, waves, cores and launches, and o.npy's
sha256 (numerics on), or that legality refused it; ``timing_e70562a.json`` holds the table of e70562a, before
the builds became bundles (issue 42): a change that should move no build's time must leave it as it is.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

#: name → overrides of the shipped case ``case_float_H_128_S0_128_S1_1024`` (910b2)
CONFIGS: dict[str, dict[str, Any]] = {
    "t256": {"case.s0": 256},
    "t128": {"tiling.tile_s1": 128},
    "t512": {"case.s1": 2048, "tiling.tile_s1": 512},
    "cube_s1_64": {"tiling.cube_s1": 64},
    "head64": {"case.head": 64, "case.s0": 256},
    "head256": {"case.head": 256, "case.s1": 512, "tiling.cube_s0": 64, "tiling.tile_s1": 128},
    "short_rows": {"case.s0": 100, "case.s1": 768},
    "causal": {"case.s0": 512, "case.s1": 512, "case.causal": True},
    "bf16": {"case.dtype": "bf16"},
    "bf16_causal_h64_c64": {"case.dtype": "bf16", "case.causal": True, "case.head": 64, "case.s0": 256,
                            "case.s1": 512, "tiling.cube_s1": 64, "tiling.tile_s1": 128},
    "window_softcap_bf16": {"case.causal": True, "case.window": 200, "case.softcap": 20.0, "case.dtype": "bf16",
                            "case.s0": 256, "case.s1": 512, "tiling.cube_s0": 64},
    "softcap": {"case.softcap": 30.0},
    "split_gqa": {"case.s0": 16, "case.s1": 4096, "case.heads": 8, "case.kv_heads": 2, "schedule.s1_split": 4,
                  "schedule.gqa_pack": True},
    "split_bf16": {"case.s0": 100, "case.s1": 4096, "case.dtype": "bf16", "schedule.s1_split": 4},
    "s0_512_s1_8192": {"case.s0": 512, "case.s1": 8192},
}
#: name → (overrides of the built-in case, numerics on, folded): the timing table's configs, each run by every
#: build (:data:`BUILDS`) — one and many waves, prefetch hits (S0 = S1), GQA and batches, split-S1 decode, the
#: sync periods, masks, and the folded long launches.
TIMING: dict[str, tuple[dict[str, Any], bool, bool]] = {
    "ref": ({}, True, False),
    "t512_preload2": ({"case.s1": 2048, "tiling.tile_s1": 512, "schedule.qk_preload": 2}, True, False),
    "s2048": ({"case.s0": 2048, "case.s1": 2048}, True, False),
    "s4096_waves": ({"case.s0": 4096, "case.s1": 4096}, False, False),
    "s8192_period8": ({"case.s0": 8192, "case.s1": 8192, "schedule.cv_fifo_cons_sync_period": 8}, False, False),
    "s0_512_s1_8192": ({"case.s0": 512, "case.s1": 8192}, True, False),
    "gqa_batch": ({"case.batch": 2, "case.heads": 4, "case.kv_heads": 2, "case.s0": 256, "case.s1": 2048,
                   "schedule.gqa_pack": True}, True, False),
    "decode_split": ({"case.s0": 1, "case.s1": 16384, "case.heads": 8, "schedule.s1_split": "auto"}, True, False),
    "split_many": ({"case.s0": 1024, "case.s1": 8192, "schedule.s1_split": 3}, False, False),
    "causal": ({"case.s0": 2048, "case.s1": 2048, "case.causal": True}, True, False),
    "window_zigzag": ({"case.s0": 4096, "case.s1": 4096, "case.causal": True, "case.window": 1000,
                       "schedule.block_order": "zigzag"}, False, False),
    "cores8_preload6": ({"case.s0": 2048, "case.s1": 4096, "hardware.cores": 8, "schedule.qk_preload": 6},
                        False, False),
    "fold_32768": ({"case.s0": 32768, "case.s1": 32768}, False, True),
    "fold_131072": ({"case.s0": 131072, "case.s1": 131072}, False, True),
}
BUILDS = ("manual", "jit", "dsl")
BACKENDS = ("numpy", "native")
REFERENCES = ("npu", "cpu_sim")


def run_hashes(overrides: dict[str, Any], backend: str, reference: str, tmp: Path) -> dict[str, str]:
    """Run one config with dumps into ``tmp``; sha256 of o.npy and of each file under dumps/ (the .npy and .bin
    dumps, and manifest.json with each dump's instruction and cycles, which :func:`digest` leaves out)."""
    import tfa_sim

    out = tmp / f"{backend}-{reference}"
    settings = {**overrides, "numerics.backend": backend, "numerics.reference": reference,
                "numerics.intermediate_check": True}
    tfa_sim.run(case="case_float_H_128_S0_128_S1_1024", overrides=settings, hw="910b2", event_log=False, out=out)
    files = [out / "o.npy", *sorted((out / "dumps").iterdir())]
    return {f.relative_to(out).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def digest(files: dict[str, str]) -> dict[str, Any]:
    """One run's hashes kept short: o.npy's, one sha256 over every data dump's name and hash, and their count.
    The dumps' manifest.json is left out: it records each dump's cycles, which a change to the timing model (a
    refit, the prefetch) moves while every bit stays."""
    dumps = sorted((f, h) for f, h in files.items() if f not in ("o.npy", "dumps/manifest.json"))
    joined = "".join(f"{f} {h}\n" for f, h in dumps).encode()
    return {"o.npy": files["o.npy"], "dumps": hashlib.sha256(joined).hexdigest(), "dump_files": len(dumps)}


def record() -> dict[str, dict[str, dict[str, Any]]]:
    """Every config × backend × reference: {config: {"backend/reference": digest}} (:func:`digest`)."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for name, overrides in CONFIGS.items():
        table[name] = {}
        for backend in BACKENDS:
            for reference in REFERENCES:
                with tempfile.TemporaryDirectory() as tmp:
                    table[name][f"{backend}/{reference}"] = digest(run_hashes(overrides, backend, reference, Path(tmp)))
        print(f"{name}: {sum(1 + v['dump_files'] for v in table[name].values())} files", flush=True)
    return table


def timing_row(overrides: dict[str, Any], numerics: bool, fold: bool) -> dict[str, Any]:
    """One run's timing figures (and o.npy's sha256 with numerics), or ``{"refused": True}`` for an illegal
    config."""
    import tfa_sim
    from tfa_sim.spec.errors import InputError, ScheduleError

    try:
        result = tfa_sim.run(case="case_float_H_128_S0_128_S1_1024", overrides=overrides, hw="910b2",
                             backend="native", numerics=numerics, event_log=False, fold=fold)
    except InputError:
        return {"refused": True}
    except ScheduleError:
        return {"schedule_error": True}
    s = result.summary
    row = {key: s[key] for key in ("total_cycles", "time_us", "launch_period_us", "host_sync_us", "time_interval_us",
                                   "launch_period_interval_us", "host_sync_interval_us", "interval_half_width",
                                   "interval_reasons", "blocks", "waves", "cores_used", "launches")}
    if numerics:
        assert result.o is not None
        row["o.npy"] = hashlib.sha256(result.o.tobytes()).hexdigest()
    return row


def record_timing() -> dict[str, dict[str, dict[str, Any]]]:
    """Every config of :data:`TIMING` × build: {config: {build: :func:`timing_row`}}."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for name, (overrides, numerics, fold) in TIMING.items():
        table[name] = {build: timing_row({**overrides, "kernel.build": build}, numerics, fold) for build in BUILDS}
        print(f"{name}: " + ", ".join(f"{b} {r.get('total_cycles', 'refused')}" for b, r in table[name].items()),
              flush=True)
    return table


def sample_configs(count: int, seed: int) -> dict[str, tuple[dict[str, Any], bool, bool]]:
    """``count`` configs drawn from ``seed`` (a table like :data:`TIMING`): shapes, tilings, preloads, sync periods,
    masks, heads, dtypes and split-S1 at random, and each build's design choices mixed with the others' — configs
    no one chose, so a change that should move nothing is checked beyond the fixed table (illegal draws are
    recorded as refused, and must stay refused)."""
    import random

    rng = random.Random(seed)
    choices = {"kernel.launch_grid": ["blocks", "persistent"], "kernel.prefetch": ["s0_head", "none"],
               "kernel.stage_order": ["qk_pv", "pv_qk"], "kernel.pv_loads": ["v_first", "p_first"],
               "kernel.talloc": ["before_store", "before_load"], "kernel.accumulators": ["running", "fixed"],
               "kernel.gu_rows": ["whole", "slices"]}
    out: dict[str, tuple[dict[str, Any], bool, bool]] = {}
    for i in range(count):
        tile = rng.choice([128, 256, 512])
        settings: dict[str, Any] = {
            "case.s0": rng.choice([64, 128, 200, 256, 512, 1024, 2048]), "case.s1": tile * rng.randint(1, 24),
            "tiling.tile_s1": tile, "tiling.cube_s1": rng.choice([64, 128]),
            "schedule.qk_preload": rng.randint(1, 7), "schedule.cv_fifo_cons_sync_period": rng.choice([1, 2, 4, 8]),
            "case.causal": rng.random() < 0.25, "case.heads": rng.choice([1, 1, 2, 4])}
        if rng.random() < 0.2:
            settings["schedule.s1_split"] = rng.choice([2, 3, "auto"])
        if rng.random() < 0.2:
            settings["case.dtype"] = "bf16"
        for key in rng.sample(sorted(choices), rng.randint(0, 3)):
            settings[key] = rng.choice(choices[key])
        small = settings["case.s0"] * settings["case.s1"] * settings["case.heads"] <= 1 << 21
        out[f"sample{seed}_{i}_{rng.choice(BUILDS)}"] = (settings, small, False)
    return out


def record_sample(count: int, seed: int) -> dict[str, dict[str, dict[str, Any]]]:
    """Each drawn config (:func:`sample_configs`) under the build its name ends in."""
    table: dict[str, dict[str, dict[str, Any]]] = {}
    for name, (overrides, numerics, fold) in sample_configs(count, seed).items():
        build = name.rsplit("_", 1)[1]
        table[name] = {build: timing_row({**overrides, "kernel.build": build}, numerics, fold)}
        print(f"{name}: {table[name][build].get('total_cycles', 'refused')}", flush=True)
    return table


#: What a run's cycles and bits are (--timing --bits: the intervals and their reasons left out).
BITS = ("total_cycles", "time_us", "launch_period_us", "host_sync_us", "blocks", "waves", "cores_used", "launches",
        "o.npy", "refused", "schedule_error")


def differences(old: dict[str, Any], new: dict[str, Any], only: tuple[str, ...] = ()) -> list[str]:
    """One line per run whose o.npy, dumps or dump count (or, ``only`` given, those figures) differs, or that
    only one of the two tables has."""
    lines = []
    for name in sorted(set(old) | set(new)):
        for run in sorted(set(old.get(name, {})) | set(new.get(name, {}))):
            a, b = old.get(name, {}).get(run, {}), new.get(name, {}).get(run, {})
            lines += [f"{name} {run} {f}: {a.get(f, 'missing')} -> {b.get(f, 'missing')}"
                      for f in sorted(set(a) | set(b)) if a.get(f) != b.get(f) and (not only or f in only)]
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("action", choices=("record", "compare"))
    p.add_argument("file", type=Path, help="the JSON table of hashes (written by record, read by compare)")
    p.add_argument("--timing", action="store_true", help="the builds' cycles, figures and o.npy (TIMING)")
    p.add_argument("--sample", type=int, default=0, metavar="N",
                   help="with --timing: N configs drawn at random (--seed) instead of TIMING")
    p.add_argument("--seed", type=int, default=1, help="the draw of --sample")
    p.add_argument("--bits", action="store_true", help="with --timing compare: only the cycles, figures and output "
                   "bits (not the intervals and their reasons)")
    args = p.parse_args()
    if args.sample and not args.timing:
        p.error("--sample goes with --timing")
    table = (record_sample(args.sample, args.seed) if args.sample else record_timing()) if args.timing else record()
    if args.action == "record":
        args.file.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        return 0
    diff = differences(json.loads(args.file.read_text()), table, BITS if args.bits else ())
    print("\n".join(diff) if diff else "")
    if args.timing:
        print(f"{len(table)} configs: {len(diff)} figures differ")
    else:
        n = sum(1 + d["dump_files"] for runs in table.values() for d in runs.values())
        print(f"{len(CONFIGS)} configs, {n} files: {len(diff)} differ")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
