"""For every input: arbitrary TOML values at every config key, arbitrary bytes in every file tfa-sim reads.

Every case must end in exit 0, 1, 2 or 3 — exit 2 with exactly one line on stderr — with no traceback and
no hang, and must write nothing outside the directory it was asked to write.  The CLI runs in-process
(``tfa`` of test_hostile_cli) on small shapes; ``MAX_GROUPS`` is lowered for these tests so that a value
that happens to be legal but large (heads = 10^6) is refused by the same rule in milliseconds rather than
simulated for an hour: the property is about handling, not about the size of the limit.
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import stat
import tempfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hostile_cli import tfa

from tfa_sim.numerics.inputs import generate_inputs
from tfa_sim.spec import legality
from tfa_sim.spec.config import SECTION_TYPES
from tfa_sim.spec.load import load_config

KEYS = [(s, f.name, f.default) for s, cls in SECTION_TYPES.items() for f in dataclasses.fields(cls)]
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture]


@pytest.fixture(autouse=True)
def small_work_limit(monkeypatch):
    monkeypatch.setattr(legality, "MAX_GROUPS", 5_000)


# --- values -------------------------------------------------------------------------------------------------

#: Values near the edges of what each kind of key accepts, and the classic hostile strings ("../escape" would
#: land next to the sandbox, where the snapshot sees it).
plausible = st.sampled_from([0, 1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024, -1, 2 ** 31, 2 ** 32, 2 ** 63,
                             10 ** 30, 0.0, 0.5, 2.0, 1e-300, 1e300, math.nan, math.inf, -math.inf, True, False, "",
                             "numpy", "native", "tfa", "libm", "910b1", "0:1", "1:", ":2", "../escape",
                             "../../escape", "a/b", "a\0b", "é" * 120, "case_x", ".hidden", "x" * 101])
scalars = st.one_of(plausible, plausible, plausible, st.integers(), st.integers(-2 ** 70, 2 ** 70), st.floats(),
                    st.booleans(), st.text(max_size=30))
toml_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=6)


def toml_literal(value) -> str:
    """``value`` as a TOML literal (inline tables and arrays for containers)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return '"' + "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in value) + '"'
    if isinstance(value, list):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    return "{" + ", ".join(f"{toml_literal(k)} = {toml_literal(v)}" for k, v in value.items()) + "}"


# --- sandbox ------------------------------------------------------------------------------------------------

def snapshot(root: Path, allowed: tuple[str, ...]) -> dict[str, tuple]:
    """Every path under ``root`` except inside the ``allowed`` subdirectories: its type, and for anything but a
    directory (whose mtime moves when an allowed directory is made in it) its size and mtime."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(rel_dir, d)) not in allowed]
        for name in dirs + files:
            st_ = os.lstat(os.path.join(dirpath, name))
            key = os.path.normpath(os.path.join(rel_dir, name))
            out[key] = (st_.st_mode,) if stat.S_ISDIR(st_.st_mode) else (st_.st_mode, st_.st_size, st_.st_mtime_ns)
    return out


def check_outcome(cwd: Path, root: Path, allowed: tuple[str, ...], before: dict, argv: list[str]) -> None:
    """Run ``argv`` in ``cwd``: an allowed exit code, one line for exit 2, nothing changed under ``root`` outside
    the ``allowed`` directories (relative to ``root``)."""
    r = tfa(*argv, cwd=cwd)
    assert r.code in (0, 1, 2, 3) and "Traceback" not in r.err, f"{argv}: exit {r.code}\n{r.err[-3000:]}"
    if r.code == 2:
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("tfa-sim"), f"{argv}: {r.err}"
    assert snapshot(root, allowed) == before, f"{argv} wrote outside {allowed}"


@pytest.fixture(scope="module")
def sandbox_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hostile")


def fresh(root: Path) -> Path:
    """A new sandbox directory two levels below ``root`` (so that ``../../x`` stays inside ``root``), with a
    sentinel file outside every output directory."""
    (root / "level").mkdir(exist_ok=True)
    box = Path(tempfile.mkdtemp(dir=root / "level"))
    (box / "outside").mkdir()
    (box / "outside" / "sentinel.txt").write_text("keep")
    return box


# --- every config key, every TOML value ---------------------------------------------------------------------

@settings(max_examples=400, deadline=None, suppress_health_check=HEALTH)
@given(picks=st.lists(st.tuples(st.sampled_from(KEYS), toml_values), min_size=1, max_size=4),
       how=st.sampled_from(["toml", "yaml", "set"]), numerics=st.booleans(), with_out=st.booleans())
def test_every_config_key_takes_any_value(sandbox_root, picks, how, numerics, with_out):
    box = fresh(sandbox_root)
    data: dict = {"case": {"s0": 128, "s1": 256}}
    for (section, key, _default), value in picks:
        data.setdefault(section, {})[key] = value
    argv = ["run"]
    if how == "toml":
        (box / "c.toml").write_text("".join(f"[{s}]\n" + "".join(f"{k} = {toml_literal(v)}\n" for k, v in t.items())
                                            for s, t in data.items()), encoding="utf-8")
        argv.append(str(box / "c.toml"))
    elif how == "yaml":
        (box / "c.yaml").write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
        argv.append(str(box / "c.yaml"))
    else:
        argv += [a for s, t in data.items() for k, v in t.items() for a in ("--set", f"{s}.{k}={toml_literal(v)}")]
    argv += [] if numerics else ["--no-numerics"]
    argv += ["--no-event-log"] + (["--out", str(box / "out")] if with_out else [])
    allowed = (f"level/{box.name}/out", f"level/{box.name}/runs")
    check_outcome(box, sandbox_root, allowed, snapshot(sandbox_root, allowed), argv)
    shutil.rmtree(box)


# --- every file, any bytes ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A small run (numerics, dumps, event log), its inputs as .npy and .bin, a config and a preset."""
    root = tmp_path_factory.mktemp("pristine")
    run = root / "run"
    r = tfa("run", "--set", "case.s0=256", "--set", "case.s1=512", "--intermediate-check", "--out", str(run))
    assert r.code == 0, r.err
    inputs = generate_inputs(load_config(overrides=["case.s1=256"]))
    (root / "npy").mkdir()
    for name in "qkv":
        np.save(root / "npy" / f"{name}.npy", getattr(inputs, name)[0, 0])
    assert tfa("gen-data", "case_float_H_128_S0_128_S1_1024", "--set", "case.s1=256", "--out",
               str(root / "bin")).code == 0
    (root / "c.toml").write_text("[case]\ns0 = 128\ns1 = 256\n[schedule]\nqk_preload = 2\n")
    (root / "c.yaml").write_text("case:\n  s0: 128\n  s1: 256\nnumerics:\n  enabled: false\n")
    shutil.copy(Path(__file__).resolve().parent.parent / "configs" / "hw" / "910b2.toml", root / "hw.toml")
    return root


#: file (relative to the pristine tree) → the commands that read it; {box} is the sandbox copy.
TARGETS = {
    "c.toml": [["run", "{box}/c.toml", "--no-numerics", "--no-event-log", "--out", "{box}/out"]],
    "c.yaml": [["run", "{box}/c.yaml", "--no-event-log", "--out", "{box}/out"]],
    "hw.toml": [["run", "--hw", "{box}/hw.toml", "--set", "case.s1=256", "--no-numerics", "--no-event-log",
                 "--out", "{box}/out"]],
    "npy/q.npy": [["run", "--set", "case.s1=256", "--inputs", "{box}/npy", "--no-event-log", "--out", "{box}/out"]],
    "npy/v.npy": [["run", "--set", "case.s1=256", "--inputs", "{box}/npy", "--no-event-log", "--out", "{box}/out"]],
    "bin/kt.bin": [["run", "--set", "case.s1=256", "--inputs", "{box}/bin", "--no-event-log", "--out", "{box}/out"]],
    "run/summary.json": [["check", "{box}/run"], ["timeline", "{box}/run", "-o", "{box}/run/t.html"],
                         ["plan", "{box}/run"]],
    "run/dumps/manifest.json": [["check", "{box}/run"]],
    "run/dumps/block1_pv_fifo0.npy": [["check", "{box}/run"]],
    "run/events.csv": [["timeline", "{box}/run", "-o", "{box}/run/t.html"], ["plan", "{box}/run"]],
    "run/trace.json": [["timeline", "{box}/run", "-o", "{box}/run/t.html"]],
}


@st.composite
def damaged(draw, original: bytes) -> bytes:
    """Arbitrary bytes, or the original truncated, spliced with random bytes, or with one token replaced."""
    how = draw(st.sampled_from(["bytes", "truncate", "splice", "token"]))
    if how == "bytes" or not original:
        return draw(st.binary(max_size=300))
    cut = draw(st.integers(0, len(original)))
    if how == "truncate":
        return original[:cut]
    if how == "splice":
        return original[:cut] + draw(st.binary(min_size=1, max_size=40)) + original[cut + draw(st.integers(0, 40)):]
    tokens = list(re.finditer(rb"[A-Za-z0-9_.+-]+", original))
    if not tokens:
        return original
    t = tokens[draw(st.integers(0, len(tokens) - 1))]
    new = draw(st.one_of(st.sampled_from([b"-1", b"0", b"nan", b"1e999", b"99999999999999999999", b"", b"x",
                                          b"null", b"[]", b"{}", b'"', b"\x00"]),
                         st.text(max_size=12).map(lambda s: s.encode())))
    return original[:t.start()] + new + original[t.end():]


@settings(max_examples=300, deadline=None, suppress_health_check=HEALTH)
@given(data=st.data(), target=st.sampled_from(sorted(TARGETS)))
def test_every_file_takes_any_bytes(sandbox_root, pristine, data, target):
    box = fresh(sandbox_root)
    for name in ("run", "npy", "bin"):
        shutil.copytree(pristine / name, box / name)
    for name in ("c.toml", "c.yaml", "hw.toml"):
        shutil.copy(pristine / name, box / name)
    path = box / target
    path.write_bytes(data.draw(damaged(path.read_bytes()), label=target))
    allowed = (f"level/{box.name}/out", f"level/{box.name}/run")
    for argv in TARGETS[target]:
        argv = [a.format(box=box) for a in argv]
        check_outcome(box, sandbox_root, allowed, snapshot(sandbox_root, allowed), argv)
    shutil.rmtree(box)


def test_the_sandbox_snapshot_sees_writes(tmp_path):
    """The property's outside-writes check itself: a write outside the allowed directories is noticed."""
    before = snapshot(tmp_path, ("out",))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "fine").write_text("x")
    assert snapshot(tmp_path, ("out",)) == before
    (tmp_path / "stray").write_text("x")
    assert snapshot(tmp_path, ("out",)) != before
