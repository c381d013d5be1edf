"""Imports inside functions only where :mod:`shardalg.deferred` lists them: its heavy and optional libraries
anywhere, any module in the CLI's handlers, anything in a generated module."""

from __future__ import annotations

import ast
from pathlib import Path

from shardalg.deferred import DEFERRED, DEFERRING_PACKAGES, GENERATED
from tests.shared import ROOT


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported(name: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not node.level:
        return [node.module or ""]
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    if node.module is None:  # from . import a, b: the modules a and b
        return [".".join([*base, alias.name]) for alias in node.names]
    return [".".join([*base, node.module])]


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def imports_inside_functions(package: Path) -> list[tuple[str, int, str]]:
    """(module, line, imported module) of each import inside a function of ``package``."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(package.rglob("*.py")):
        name = _module_name(path, package)
        work: list[tuple[ast.AST, bool]] = [(ast.parse(path.read_text(encoding="utf-8")), False)]
        while work:
            node, inside = work.pop()
            if inside and isinstance(node, ast.Import | ast.ImportFrom):
                found.extend((name, node.lineno, target) for target in _imported(name, path, node))
            inside = inside or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            work.extend((child, inside) for child in ast.iter_child_nodes(node))
    return sorted(found)


def not_allowed(found: list[tuple[str, int, str]]) -> list[str]:
    return [
        f"{module}:{line} imports {target} inside a function"
        for module, line, target in found
        if not _within(target, DEFERRED)
        and not _within(module, GENERATED)
        and not (_within(module, DEFERRING_PACKAGES) and _within(target, ("shardalg",)))
    ]


def test_imports_inside_functions_are_only_the_listed_ones() -> None:
    assert not_allowed(imports_inside_functions(ROOT / "shardalg")) == []


def test_an_import_inside_a_function_not_listed_is_found(tmp_path: Path) -> None:
    package = tmp_path / "shardalg"
    (package / "cli").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "cli" / "__init__.py").write_text("def run():\n    from shardalg.costs import plan\n")
    (package / "costs.py").write_text(
        "import csv\n\ndef plot():\n    import matplotlib.pyplot\n\ndef load(s):\n    import csv\n"
        "    from . import cli\n\nclass C:\n    def m(self):\n        import tomllib\n"
    )
    (package / "notes.py").write_text("def f():\n    import scipy.optimize\n    import pandas\n")
    assert not_allowed(imports_inside_functions(package)) == [
        "shardalg.costs:7 imports csv inside a function",
        "shardalg.costs:8 imports shardalg.cli inside a function",
        "shardalg.notes:3 imports pandas inside a function",
    ]
