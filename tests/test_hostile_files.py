"""Damaged or foreign files given to check, timeline, plan and run: one line and exit 2, never a traceback
or a hang (issue 12, class 1, the files half)."""
from __future__ import annotations

import json
import os
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from test_hostile_cli import assert_refused, tfa, tfa_subprocess


@pytest.fixture
def run_dir(small_run, tmp_path) -> Path:
    """A private copy of the small run to damage."""
    return Path(shutil.copytree(small_run, tmp_path / "run", symlinks=True))


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def npy_header(shape: tuple[int, ...], descr: str = "<f2") -> bytes:
    """A valid .npy version 1.0 header for ``shape`` (no data follows)."""
    text = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}".encode()
    text = text.ljust(118) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text


SUMMARY_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:100]),
    "a list": lambda p: p.write_text("[]"),
    "empty table": lambda p: p.write_text("{}"),
    "config section an int": lambda p: edit_json(p, lambda d: d["config"].update(case=5)),
    "config key wrong type": lambda p: edit_json(p, lambda d: d["config"]["case"].update(s0=[1, 2])),
    "zero cycles": lambda p: edit_json(p, lambda d: d.update(total_cycles=0)),
    "clock a string": lambda p: edit_json(p, lambda d: d.update(clock_mhz="fast")),
    "no overhead": lambda p: edit_json(p, lambda d: d.pop("overhead")),
    "not utf-8": lambda p: p.write_bytes(b"\xff" + p.read_bytes()),
    "deeply nested": lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
    "a directory": lambda p: (p.unlink(), p.mkdir()),
    "a fifo": lambda p: (p.unlink(), os.mkfifo(p)),
}


#: timeline and plan read no case section, so a damaged one is refused by check only.
SUMMARY_CASES = [(d, c) for d in SUMMARY_DAMAGE for c in ("check", "timeline", "plan")
                 if c == "check" or not d.startswith("config ")]


@pytest.mark.parametrize("damage, command", SUMMARY_CASES, ids=[f"{d}-{c}" for d, c in SUMMARY_CASES])
def test_damaged_summary(run_dir, command, damage):
    SUMMARY_DAMAGE[damage](run_dir / "summary.json")
    extra = ["-o", str(run_dir / "t.svg")] if command == "timeline" else []
    runner = tfa_subprocess if damage == "a fifo" else tfa  # reading a FIFO used to hang: a timeout guards it
    assert_refused(runner(command, str(run_dir), *extra), "summary.json")


EVENTS_DAMAGE = {
    "truncated mid-row": lambda t: t[: len(t) // 2 + 7],
    "a short row": lambda t: t + "99,core0.cubecore0\n",
    "id not a number": lambda t: t.replace("\n0,", "\nzero,", 1),
    "dependency on a missing id": lambda t: t + "999999,core0.cubecore0,M,compute_qk,0,0,0,x,1,2,0,0,,424242:data:0:\n",
    "dependency cycle": lambda t: t + "999998,core0.cubecore0,M,compute_qk,0,0,0,x,1,2,0,0,,999999:data:0:\n"
                                      "999999,core0.cubecore0,M,compute_qk,0,0,0,x,1,2,0,0,,999998:data:0:\n",
    "unknown stage": lambda t: t + "999999,core0.cubecore0,M,compute_xx,0,0,0,x,1,2,0,0,,\n",
    "unknown unit": lambda t: t + "999999,core0.gpu0,M,compute_qk,0,0,0,x,1,2,0,0,,\n",
    "pipe of the other unit": lambda t: t + "999999,core0.veccore0,M,compute_qk,0,0,0,x,1,2,0,0,,\n",
    "NaN start": lambda t: t + "999999,core0.cubecore0,M,compute_qk,0,0,0,x,nan,2,0,0,,\n",
    "ends before it starts": lambda t: t + "999999,core0.cubecore0,M,compute_qk,0,0,0,x,5,2,0,0,,\n",
    "a huge field": lambda t: t + "999999," + "x" * 200_000 + "\n",
    "header only": lambda t: t.splitlines()[0] + "\n",
    "a NUL byte": lambda t: t.replace("compute_qk", "compute\0qk", 1),
}


@pytest.mark.parametrize("command", ["timeline", "plan"])
@pytest.mark.parametrize("damage", list(EVENTS_DAMAGE), ids=list(EVENTS_DAMAGE))
def test_damaged_event_log(run_dir, command, damage):
    (run_dir / "events.npz").unlink()  # a run written before events.npz: events.csv is the log
    path = run_dir / "events.csv"
    path.write_text(EVENTS_DAMAGE[damage](path.read_text()))
    extra = ["-o", str(run_dir / "t.svg")] if command == "timeline" else []
    assert_refused(tfa(command, str(run_dir), *extra), "events.csv" if damage != "header only" else "")


def edit_npz(path: Path, change) -> None:
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    change(arrays)
    with path.open("wb") as fh:
        np.savez(fh, **arrays)


def set_item(arrays: dict, key: str, index: int, value) -> None:
    arrays[key] = arrays[key].copy()
    arrays[key][index] = value


NPZ_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "garbage": lambda p: p.write_bytes(b"PK\x03\x04" + b"\x00" * 100),
    "empty": lambda p: p.write_bytes(b""),
    "compressed": lambda p: np.savez_compressed(p.with_suffix(".tmp.npz"), **dict(np.load(p)))
    or p.with_suffix(".tmp.npz").replace(p),
    "a column missing": lambda p: edit_npz(p, lambda a: a.pop("ev_start")),
    "a column of another type": lambda p: edit_npz(p, lambda a: a.update(ev_start=a["ev_start"].astype(np.float32))),
    "columns of different lengths": lambda p: edit_npz(p, lambda a: a.update(ev_end=a["ev_end"][:-1])),
    "pickled objects": lambda p: edit_npz(p, lambda a: a.update(table_units=np.array([{}], dtype=object))),
    "a unit code out of range": lambda p: edit_npz(p, lambda a: set_item(a, "ev_unit", 0, 999)),
    "an unknown stage": lambda p: edit_npz(p, lambda a: a.update(table_stages=np.array(["compute_xx"] * 9))),
    "NaN start": lambda p: edit_npz(p, lambda a: set_item(a, "ev_start", 3, np.nan)),
    "ends before it starts": lambda p: edit_npz(p, lambda a: set_item(a, "ev_end", 3, -1.0)),
    "an id twice": lambda p: edit_npz(p, lambda a: set_item(a, "ev_id", 1, a["ev_id"][2])),
    "dependency on a missing id": lambda p: edit_npz(p, lambda a: set_item(a, "edge_src", 0, 424242)),
    "dependency on a later id": lambda p: edit_npz(p, lambda a: set_item(a, "edge_src", 0, a["edge_dst"][0])),
    "another version": lambda p: edit_npz(p, lambda a: a.update(version=np.array(99))),
}


@pytest.mark.parametrize("command", ["timeline", "plan", "trace"])
@pytest.mark.parametrize("damage", list(NPZ_DAMAGE), ids=list(NPZ_DAMAGE))
def test_damaged_columnar_event_log(run_dir, command, damage):
    NPZ_DAMAGE[damage](run_dir / "events.npz")
    extra = {"timeline": ["-o", str(run_dir / "t.svg")], "trace": ["--out", str(run_dir / "t.json")]}
    assert_refused(tfa(command, str(run_dir), *extra.get(command, [])), "events.npz")


def test_a_damaged_trace_json_is_not_read(run_dir):
    (run_dir / "trace.json").write_bytes(b"\x00garbage")
    r = tfa("timeline", str(run_dir), "-o", str(run_dir / "t.svg"))
    assert r.code == 0, r.err


MANIFEST_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:50]),
    "a table": lambda p: p.write_text("{}"),
    "entries not tables": lambda p: p.write_text("[1, 2]"),
    "block out of range": lambda p: edit_json(p, lambda d: d[0].update(block=99)),
    "tile negative": lambda p: edit_json(p, lambda d: d[0].update(tile=-1)),
    "unknown dump": lambda p: edit_json(p, lambda d: d[0].update(name="bogus")),
    "a path outside": lambda p: edit_json(p, lambda d: d[0].update(file="../../summary.npy")),
    "event not a table": lambda p: edit_json(p, lambda d: d[0].update(event=[1])),
    "block a string": lambda p: edit_json(p, lambda d: d[0].update(block="0")),
}


@pytest.mark.parametrize("damage", list(MANIFEST_DAMAGE), ids=list(MANIFEST_DAMAGE))
def test_damaged_dump_manifest(run_dir, damage):
    MANIFEST_DAMAGE[damage](run_dir / "dumps" / "manifest.json")
    assert_refused(tfa("check", str(run_dir)), "manifest.json")


@pytest.mark.parametrize("content", [b"", b"\x93NUMPY\x01\x00garbage", npy_header((1 << 40,)),
                                     npy_header((128, 256), "|O")],
                         ids=["empty", "bad header", "header claims a terabyte", "pickled objects"])
def test_damaged_dump_file(run_dir, content):
    (run_dir / "dumps" / "block0_qk_fifo0.npy").write_bytes(content)
    assert_refused(tfa("check", str(run_dir)), "block0_qk_fifo0.npy")


def default_inputs(directory: Path) -> Path:
    from tfa_sim.numerics.inputs import generate_inputs
    from tfa_sim.spec.load import load_config

    directory.mkdir()
    inputs = generate_inputs(load_config(overrides=["case.s1=256"]))
    for name in ("q", "k", "v"):
        np.save(directory / f"{name}.npy", getattr(inputs, name)[0, 0])
    return directory


@pytest.mark.parametrize("content, needle", [
    (npy_header((1 << 40, 128)), "header says"),
    (npy_header((128, 128), "|O"), "not numbers"),
    (b"PK\x03\x04 a zip file", "not a .npy"),
    (npy_header((128, 128))[:20], "not a .npy"),
], ids=["huge header", "objects", "not npy", "truncated header"])
def test_damaged_input_files(tmp_path, content, needle):
    d = default_inputs(tmp_path / "in")
    (d / "q.npy").write_bytes(content)
    assert_refused(tfa("run", "--set", "case.s1=256", "--inputs", str(d), "--out", str(tmp_path / "o")), "q.npy",
                   needle)


def test_an_input_that_is_a_fifo_is_refused_not_waited_for(tmp_path):
    d = default_inputs(tmp_path / "in")
    (d / "q.npy").unlink()
    os.mkfifo(d / "q.npy")
    assert_refused(tfa_subprocess("run", "--set", "case.s1=256", "--inputs", str(d), "--out", str(tmp_path / "o")),
                   "q.npy", "not a regular file")


def test_fortran_ordered_inputs_are_read_as_their_values(tmp_path):
    d = default_inputs(tmp_path / "in")
    np.save(d / "q.npy", np.asfortranarray(np.load(d / "q.npy")))
    assert tfa("run", "--set", "case.s1=256", "--inputs", str(d), "--out", str(tmp_path / "f")).code == 0
    assert tfa("run", "--set", "case.s1=256", "--no-event-log", "--out", str(tmp_path / "c")).code == 0
    assert np.array_equal(np.load(tmp_path / "f" / "o.npy"), np.load(tmp_path / "c" / "o.npy"))


PRESET = (Path(__file__).resolve().parent.parent / "configs" / "hw" / "910b2.toml").read_text()


@pytest.mark.parametrize("text, needle", [
    (PRESET.replace("clock_mhz = 1800", ""), "misses clock_mhz"),
    (PRESET.replace("clock_mhz = 1800", "clock_mhz = 0"), "chip.clock_mhz"),
    (PRESET.replace("clock_mhz = 1800", 'clock_mhz = "fast"'), "chip.clock_mhz"),
    (re.sub(r"gm_to_l1 = [0-9.]+", "gm_to_l1 = 1e-300", PRESET), "move.gm_to_l1"),
    (re.sub(r"block_dispatch = [0-9.]+", "block_dispatch = 1e300", PRESET), "overhead.block_dispatch"),
    (re.sub(r"s1 = \[[0-9, ]+\]", "s1 = []", PRESET), "calibration.s1"),
    (PRESET.replace("measured = true", "measured = 1"), "calibration.measured"),
    (PRESET.replace("cube_cores = 24", "cube_cores = 0x" + "f" * 2000), "chip.cube_cores"),
    (PRESET.replace("[chip]", "[[chip]]"), "[chip]"),
    (PRESET.replace("fractal = 16", "fractal = nan"), "cube.fractal"),
    (PRESET + "\n[extra]\nx = 1\n", "unknown table"),
], ids=["missing", "zero", "string", "tiny rate", "huge", "empty list", "not a bool", "huge int", "array of tables",
        "nan", "unknown table"])
def test_damaged_preset_files(tmp_path, text, needle):
    path = tmp_path / "hw.toml"
    path.write_text(text)
    assert_refused(tfa("run", "--hw", str(path), "--no-numerics", "--no-event-log", "--out", str(tmp_path / "o")),
                   str(path), needle)


def test_a_preset_that_is_not_utf8_or_a_fifo(tmp_path):
    path = tmp_path / "hw.toml"
    path.write_bytes(b"\xfe" + PRESET.encode())
    assert_refused(tfa("run", "--hw", str(path), "--no-numerics"), "UTF-8")
    path.unlink()
    os.mkfifo(path)
    assert_refused(tfa_subprocess("run", "--hw", str(path), "--no-numerics", cwd=tmp_path), str(path))
