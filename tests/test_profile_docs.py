"""The profile examples the README ("Profiles") and docs/profiles.md quote are what ``tfa-sim profile`` prints
today: rerun here, compared line by line (run directories' time stamps masked)."""
from __future__ import annotations

import pytest
import test_readme
from test_readme import ROOT, run_quoted

COMMAND = "tfa-sim profile {dir} {flags}--set case.s0={s0} --set case.s1={s1} --set " \
          "schedule.cv_fifo_cons_sync_period=1 --set kernel.build=jit"
#: Where each example is quoted and its command.
EXAMPLES = {
    "README, a torch_npu profile": (
        "README.md", COMMAND.format(dir="tests/data/msprof/torch_a3_9x/llm_4170_20260307093000123_ascend_pt",
                                    flags="--op runTFA ", s0=1024, s1=4096)),
    "docs/profiles.md, an msprof op profile": (
        "docs/profiles.md", COMMAND.format(dir="tests/data/msprof/a2_op_single", flags="", s0=512, s1=2048)),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_quoted_example_is_todays_output(name, tmp_path, monkeypatch, capsys):
    document, command = EXAMPLES[name]
    quoting = tmp_path / "quoting"  # run_quoted reads ROOT/README.md: here that is the document quoting it
    quoting.mkdir()
    (quoting / "README.md").symlink_to(ROOT / document)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    monkeypatch.setattr(test_readme, "ROOT", quoting)
    monkeypatch.chdir(tmp_path)
    got, expected = run_quoted(command, capsys)
    assert len(expected) > 15 and expected[0].startswith("tfa-sim profile: runTFA, ")
    assert got == expected
