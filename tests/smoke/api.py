"""The installed package's Python API, each function once on a small case (docs/guide/python-api.md): smoke.sh runs it
from an empty directory in the wheel's and the sdist's venvs.  Writes what it saw to the JSON file it is given;
tests/test_packaging.py fails when a function ``tfa_sim`` exports is not called here."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import tfa_sim

HERE = Path(__file__).resolve().parent
CASE = "case_float_H_128_S0_128_S1_1024"


def compiled() -> dict[str, str]:
    """Where the C stage kernels and a module of the hot path were loaded from: both built by pip, the hot path as
    mypyc's extension unless the install had TFA_SIM_PURE_PYTHON=1."""
    from tfa_sim.backends import _native as native
    from tfa_sim.engine import pipes

    suffix = ".py" if os.environ.get("TFA_SIM_PURE_PYTHON") == "1" else ".so"
    assert str(pipes.__file__).endswith(suffix), f"tfa_sim.engine.pipes runs from {pipes.__file__}"
    return {"native": str(native.__file__), "engine": str(pipes.__file__)}


def main(out: str) -> None:
    config = tfa_sim.load_config(case=CASE, overrides={"schedule.qk_preload": 2}, hw="910b2")
    result = tfa_sim.run(config, overrides={"numerics.intermediate_check": True}, out="api-run")
    assert result.passed and result.o is not None and result.o.shape == (1, 1, 128, 128), result.summary
    events = result.events
    assert events is not None and len(events.to_pandas()) == events.to_arrow().num_rows == len(events) > 0
    result.timeline(cores=[0])
    report = tfa_sim.check("api-run")
    assert report["passed"], report
    roofs = tfa_sim.roofline("api-run", out="roofline.html")
    assert roofs["api-run"]["nearest"] and Path("roofline.html").is_file(), roofs
    listed = tfa_sim.listing("compute_p", case=CASE)
    assert listed["listing"] == "manual" and listed["total_cycles"] > 0, listed
    points = tfa_sim.sweep(HERE / "sweep.toml", jobs=2)
    assert list(points["status"]) == ["ok", "ok"], points
    tuned = tfa_sim.tune(case=CASE, jobs=2)
    assert tuned.time_us <= float(points["time_us"].min()), tuned
    checked = tfa_sim.calibrate([HERE / "points.csv"], check=True)
    assert len(checked.record["points"]) == 3 and checked.out_dir is None, checked.report
    board = tfa_sim.profile(HERE.parent / "data" / "msprof" / "a2_op_single", case=CASE,
                            overrides={"case.s0": 512, "case.s1": 2048, "schedule.cv_fifo_cons_sync_period": 1})
    assert len(board.to_pandas()) > 0 and board.report["task_duration_us"] > 0, board.report
    try:
        tfa_sim.load_config(case="no_such_case")
    except tfa_sim.InputError as exc:
        refused = str(exc)
    else:
        raise AssertionError("an unknown case was accepted")
    seen = {"version": tfa_sim.__version__, "time_us": result.time_us, "sweep": points["time_us"].tolist(),
            "tuned_us": tuned.time_us, "checked_mape": checked.record["mape"],
            "profile_task_us": board.report["task_duration_us"], "refused": refused,
            **compiled()}
    Path(out).write_text(json.dumps(seen, indent=1), encoding="utf-8")
    print(json.dumps(seen, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
