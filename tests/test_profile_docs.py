"""The profile examples the README and docs/profiles.md quote are what ``tfa-sim profile`` prints today: rerun here,
compared line by line (run directories' time stamps masked; the README's quote leaves lines out with ``…``)."""
from __future__ import annotations

import pytest
from test_readme import ROOT, follows, run_quoted

COMMAND = "tfa-sim profile {dir} {flags}--set case.s0={s0} --set case.s1={s1} --set " \
          "schedule.cv_fifo_cons_sync_period=1 --set kernel.build=jit"
OP_PROFILE = COMMAND.format(dir="tests/data/msprof/a2_op_single", flags="", s0=512, s1=2048)
#: Where each example is quoted and its command.
EXAMPLES = {
    "README, an msprof op profile, in part": ("README.md", OP_PROFILE),
    "docs/profiles.md, a torch_npu profile": (
        "docs/profiles.md", COMMAND.format(dir="tests/data/msprof/torch_a3_9x/llm_4170_20260307093000123_ascend_pt",
                                           flags="--op runTFA ", s0=1024, s1=4096)),
    "docs/profiles.md, an msprof op profile": ("docs/profiles.md", OP_PROFILE),
    "docs/profiles.md, a real profile with a damaged row": (
        "docs/profiles.md", "tfa-sim profile tests/data/msprof/real/msinsight_damaged_row/test_rank_0 --op "
                            "FlashAttentionScore --set case.s0=3072 --set case.s1=1024"),
}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_quoted_example_is_todays_output(name, tmp_path, monkeypatch, capsys):
    document, command = EXAMPLES[name]
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "data").symlink_to(ROOT / "tests" / "data")
    monkeypatch.chdir(tmp_path)
    got, expected = run_quoted(command, capsys, document)
    assert len([line for line in expected if line.strip() != "…"]) > 6
    assert expected[0].startswith("tfa-sim profile: ") and expected[-1].startswith("  wrote runs/profile-")
    assert follows(got, expected), "\n".join(got)
