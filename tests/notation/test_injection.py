"""No user text reaches eval, exec or sympify: hostile strings given to every text entry point raise our
own errors, and eval / exec / sympify are booby-trapped while they do."""

from __future__ import annotations

import builtins
import importlib

import pytest
import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.errors import ParseError, ShardalgError, UsageError
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from shardalg.notation.syntax import dtype_named

HOSTILE = [
    "__import__('os').system('true')",
    'eval("1")',
    "exec('import os')",
    "A[__import__]",
    "A[I_X](__import__('os'))",
    "A[I] -> __import__('os').system('true')",
    "lambda: 0",
    "A[I]; import os",
    "A[I] where I=__import__('os')",
    "mesh X=os.system('true')",
    "A[I_{__class__}]",
    "().__class__.__bases__[0].__subclasses__()",
    "{{7*7}}",
    "${7*7}",
    "A[I] where I=1e9",
    "A[I] where I=-4",
    "A[I] where I=0x10",
    "\\input{/etc/passwd}",
    "A[I]\x00B[I]",
]


@pytest.fixture
def trapped(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"evaluated user text: {args!r}")

    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(builtins, "exec", boom)
    monkeypatch.setattr(sympy, "sympify", boom)
    monkeypatch.setattr(importlib.import_module("sympy.core.sympify"), "sympify", boom)
    monkeypatch.setattr(importlib.import_module("sympy.parsing.sympy_parser"), "parse_expr", boom)


@pytest.mark.parametrize("source", HOSTILE)
def test_parse_entry_points_reject_hostile_text(trapped: None, source: str) -> None:
    for entry in (parse, parse_tensor, parse_statement):
        with pytest.raises(ParseError):
            entry(source)


@pytest.mark.parametrize("source", HOSTILE)
def test_mesh_and_dtype_reject_hostile_text(trapped: None, source: str) -> None:
    with pytest.raises(UsageError):
        Mesh.parse(source)
    with pytest.raises(UsageError):
        dtype_named(source)


def test_legit_text_still_parses_with_the_traps_set(trapped: None) -> None:
    program = parse("mesh X=4\nA[I_X, J] · B[J, K] -> C[I_X, K]\nwhere I=1024")
    assert program.sizes == (("I", 1024),)
    assert Mesh.parse("X=4,Y=2").names == ("X", "Y")


def test_names_that_look_like_python_are_just_names(trapped: None) -> None:
    t = parse_tensor("os[system, true]")
    assert t.name == "os" and t.dim_names == ("system", "true")


def test_the_sources_never_name_the_evaluators() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for path in [
        root / "shardalg" / "notation" / "parse.py",
        *sorted((root / "shardalg" / "notation" / "printing").glob("*.py")),
    ]:
        code = path.read_text(encoding="utf-8")
        for word in ("eval(", "exec(", "sympify(", "parse_expr"):
            assert word not in code, f"{path.name} mentions {word}"


def test_errors_are_one_family() -> None:
    assert issubclass(ParseError, ShardalgError) and issubclass(UsageError, ShardalgError)
