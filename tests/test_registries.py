"""One registry per design choice, one plan for every reader (issue 47): every value carries what it does, its
rules, a doc line and its source; the schema, the docs' table and the legality rules are derived from the
registries; no choice's value is compared as a string outside its registry; BlockKernel holds nothing the plan
holds."""
from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from pathlib import Path

import pytest

import tfa_sim
from tfa_sim.spec import choices
from tfa_sim.spec.builds import choices_table
from tfa_sim.spec.config import CHOICE_KEYS, KernelConfig, kernel_choices
from tfa_sim.spec.errors import InputError
from tfa_sim.spec.load import build_config
from tfa_sim.stages.plan import KernelPlan, kernel_plan

PACKAGE = Path(tfa_sim.__file__).parent
DOCS = PACKAGE.parent / "docs"


def test_every_design_choice_has_a_registry_and_every_registry_a_key():
    assert list(choices.REGISTRIES) == list(CHOICE_KEYS)
    for key in CHOICE_KEYS:
        assert choices.REGISTRIES[key].default == getattr(KernelConfig, key), key


@pytest.mark.parametrize("key", CHOICE_KEYS)
def test_every_value_names_what_it_does_its_rules_doc_and_source(key):
    registry = {c.key: c for c in choices.choices()}[key]
    assert registry.values, key
    for value in (v for v in registry.values.values() if v.module.startswith("tfa_sim.")):  # not a plugin's
        assert value.does is not None and registry.contract(value.does) is None, (key, value.name)
        assert value.doc.strip() and value.source.strip(), (key, value.name)
        assert isinstance(value.rules, tuple) and all(callable(r) for r in value.rules), (key, value.name)
        module = importlib.import_module(value.module)  # registered beside its consumer, a module of the package
        assert value.module in choices.PROVIDERS and module.__name__.startswith("tfa_sim."), value.module


def test_the_schema_takes_exactly_the_registered_values():
    """kernel_choices() lists each registry's values; the schema refuses any other in one line naming them."""
    listed = kernel_choices()
    assert listed["stage_order"][:2] == ["qk_pv", "pv_qk"] and listed["exp_ring"][-1] == "1…64"
    for key, values in listed.items():
        with pytest.raises(InputError, match=re.escape(f"kernel.{key} = 'nonsense' is not one of {', '.join(values)}")):
            build_config({"kernel": {key: "nonsense"}})


def test_docs_kernel_md_holds_the_table_the_registries_make():
    text = (DOCS / "kernel.md").read_text(encoding="utf-8")
    table = text.split("<!-- choices:start -->\n", 1)[1].split("\n<!-- choices:end -->", 1)[0]
    assert table.strip() == choices_table(shipped=True), \
        "regenerate docs/kernel.md's table: print(tfa_sim.spec.builds.choices_table(shipped=True))"


def test_legality_is_the_values_rules():
    """A value's rule is asked only when the value is chosen: pv_qk's preload rule, persistent's block order."""
    with pytest.raises(InputError, match="kernel.stage_order = pv_qk issues PV"):
        build_config({"kernel": {"stage_order": "pv_qk"}, "schedule": {"qk_preload": 0}})
    assert build_config({"kernel": {"stage_order": "qk_pv"}, "schedule": {"qk_preload": 0}})
    with pytest.raises(InputError, match="kernel.launch_grid = persistent gives each core a contiguous range"):
        build_config({"kernel": {"launch_grid": "persistent"}, "schedule": {"block_order": "zigzag"}})


# ---- no string comparison of a choice's value ---------------------------------------------------------------
def _choice_compares(tree: ast.AST) -> list[int]:
    """Lines comparing a choice (an attribute or key named after one) with a string or tuple of strings."""
    def names_choice(node: ast.AST) -> bool:
        keyed = isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
        return (isinstance(node, ast.Attribute) and node.attr in CHOICE_KEYS) or (
            keyed and node.slice.value in CHOICE_KEYS)  # type: ignore[attr-defined]

    def is_text(node: ast.AST) -> bool:
        return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or (
            isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(is_text(e) for e in node.elts))

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(names_choice(s) for s in sides) and any(is_text(s) for s in sides):
                found.append(node.lineno)
    return found


def test_no_choice_value_is_compared_as_a_string_outside_its_registry():
    found = [f"{path.relative_to(PACKAGE)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _choice_compares(ast.parse(path.read_text(encoding="utf-8")))]
    assert not found, found


def test_the_scan_finds_such_a_comparison():
    assert _choice_compares(ast.parse("x = config.kernel.stage_order == 'qk_pv'\ny = k['exp_ring'] in ('fifo',)")) \
        == [1, 2]


# ---- one plan; BlockKernel holds only a run's per-block state --------------------------------------------------
def _assigned_attributes(path: Path, cls: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    return {t.attr for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            for t in (t.elts if isinstance(t, ast.Tuple) else [t])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def test_block_kernel_has_no_field_the_plan_holds():
    fields = _assigned_attributes(PACKAGE / "stages" / "block_kernel.py", "BlockKernel")
    assert fields and not fields & {f.name for f in dataclasses.fields(KernelPlan)}, fields
    assert "_adopt" not in (PACKAGE / "stages" / "block_kernel.py").read_text()


def test_the_plan_resolves_each_choice_once_and_is_immutable():
    config = build_config({"kernel": {"build": "dsl"}, "case": {"s0": 4096, "s1": 4096}})
    plan = kernel_plan(config)
    assert plan.choices == {key: getattr(config.kernel, key) for key in CHOICE_KEYS}
    assert plan.stage_order is importlib.import_module("tfa_sim.stages.order_pv_qk")
    assert plan.geometry.main.persistent and plan.geometry.main.units == 32 and plan.geometry.main.cores == 24
    assert (plan.buffers.l1_p, plan.buffers.ub_src, plan.buffers.exp_ring) == (1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.shape = None  # type: ignore[misc]


def test_the_cores_override_is_applied_in_one_place():
    """kernel_plan applies hardware.cores to a preset it is handed (calibration's fitted one, say) as to the
    config's own."""
    from tfa_sim.explore.points import base_preset

    config = build_config({"case": {"s0": 2048}, "hardware": {"cores": 8}})
    for plan in (kernel_plan(config), kernel_plan(config, base_preset("910b2"))):
        assert (plan.hw.cube_cores, plan.geometry.main.cores, plan.geometry.main.waves) == (8, 8, 2)
