"""A value has one home: the default dtype is assigned in one module, and an overlap policy's name is written
only in its enum (:mod:`shardalg.planning.overlap`); everywhere else the code names the enum's members."""

from __future__ import annotations

import ast

from tests.shared import ROOT

PACKAGE = ROOT / "shardalg"
POLICY_NAMES = {"schedule", "steady", "serial"}
# the same words that are not policies: a derivation's regime, and the JSON key of a cost's schedule
NOT_POLICIES = {("costs/derive.py", "serial"), ("cli/costs.py", "serial"), ("costs/plancost.py", "schedule")}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (p.relative_to(PACKAGE).as_posix(), ast.parse(p.read_text())) for p in sorted(PACKAGE.rglob("*.py"))
    ]


def _docstrings(tree: ast.Module) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_the_default_dtype_is_assigned_once() -> None:
    homes = [
        name
        for name, tree in _modules()
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "DEFAULT_DTYPE" for t in node.targets)
    ]
    assert homes == ["algebra/traffic.py"]


def test_a_policy_is_named_by_its_enum_member_outside_the_enum() -> None:
    written = [
        (name, node.value, node.lineno)
        for name, tree in _modules()
        if name != "planning/overlap.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and node.value in POLICY_NAMES
        and id(node) not in _docstrings(tree)
        and (name, node.value) not in NOT_POLICIES
    ]
    assert written == []
