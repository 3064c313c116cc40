"""Every ``tfa-sim`` subcommand's options are documented from the parser itself (issue 50): the page that
documents a command holds, between ``<!-- options: COMMAND -->`` and ``<!-- /options -->``, the table this
module makes from ``tfa_sim.cli.build_parser()`` — each argument and option, its value's name and its help
text — and a test compares the two. So a new option, a renamed one or a changed help line fails here until the
page follows; ``python tests/test_options_docs.py`` rewrites the tables.

Why a generated table rather than prose checked for option names: the help strings are already the options'
one-line definitions (``tfa-sim COMMAND --help`` prints them), so writing them twice would only let the two
drift; the page's prose explains what the table cannot (how the options work together), and links to it.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from tfa_sim.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: The page that documents each subcommand.
PAGES = {"run": "docs/guide/run.md", "gen-data": "docs/guide/run.md", "check": "docs/guide/check.md",
         "sweep": "docs/guide/sweeps.md", "sweep-report": "docs/guide/sweeps.md", "tune": "docs/guide/tuning.md",
         "timeline": "docs/guide/timelines.md", "trace": "docs/guide/timelines.md", "plan": "docs/guide/timelines.md",
         "roofline": "docs/guide/roofline.md", "listing": "docs/guide/listings.md", "profile": "docs/profiles.md",
         "calibrate": "docs/guide/calibration.md"}


def subcommands() -> dict[str, argparse.ArgumentParser]:
    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def spelled(action: argparse.Action) -> str:
    """The argument as a user writes it: ``CONFIG``, ``--set SECTION.KEY=VALUE``, ``-o``, ``--output FILE``."""
    value = action.metavar or action.dest.upper()
    assert "|" not in value, f"{value}: a pipe inside a code span cannot be escaped in a Markdown table"
    if not action.option_strings:
        return f"`{value}`"
    takes = action.nargs != 0
    return ", ".join(f"`{o} {value}`" if takes else f"`{o}`" for o in action.option_strings)


def described(action: argparse.Action) -> str:
    """Its help line, and what argparse enforces beside it: the choices, how many, whether required."""
    text = (action.help or "").replace("%%", "%")
    extra = []
    if action.choices:
        extra.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.nargs == "?":
        extra.append("optional")
    elif action.nargs == "+":
        extra.append("one or more")
    elif action.nargs == "*":
        extra.append("any number")
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        extra.append("repeatable")
    if action.required and action.option_strings:
        extra.append("required")
    text += f" ({'; '.join(extra)})" if extra else ""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")  # a table cell, not HTML


def table(command: str) -> str:
    rows = [f"| {spelled(a)} | {described(a)} |" for a in subcommands()[command]._actions
            if not isinstance(a, argparse._HelpAction)]
    return "\n".join([f"| `tfa-sim {command}` | what it does |", "|---|---|", *rows])


def block(command: str) -> str:
    return f"<!-- options: {command} -->\n{table(command)}\n<!-- /options -->"


def between(text: str, command: str) -> str | None:
    found = re.search(rf"<!-- options: {re.escape(command)} -->\n.*?<!-- /options -->", text, flags=re.S)
    return found[0] if found else None


def test_every_subcommand_has_its_page():
    assert sorted(subcommands()) == sorted(PAGES), "a subcommand without a page, or a page for none"


@pytest.mark.parametrize("command", sorted(PAGES))
def test_the_page_holds_the_commands_options_as_the_parser_has_them(command):
    text = (ROOT / PAGES[command]).read_text(encoding="utf-8")
    assert text.count(f"<!-- options: {command} -->") == 1, f"{PAGES[command]} has no options table of {command}"
    assert between(text, command) == block(command), \
        f"{PAGES[command]}: the options of tfa-sim {command} changed; python tests/test_options_docs.py"


def test_a_table_has_every_option_of_its_command():
    text = table("run")
    for option in ("`CONFIG`", "`--case NAME`", "`--set SECTION.KEY=VALUE`", "`--no-numerics`", "`--fold`"):
        assert option in text, option
    assert "one of `numpy`, `native`" in text and "optional" in text


if __name__ == "__main__":
    for command, page in PAGES.items():
        path = ROOT / page
        text = path.read_text(encoding="utf-8")
        old = between(text, command)
        if old is None:
            print(f"{page}: no <!-- options: {command} --> … <!-- /options --> to fill")
            continue
        path.write_text(text.replace(old, block(command)), encoding="utf-8")
        print(f"{page}: tfa-sim {command}")
