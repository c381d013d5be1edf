"""The layers contract (pyproject's ``[tool.importlinter]``) holds, and it has teeth: the same tree with one
upward import added (the AST importing the command line) breaks it, naming the import."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import ROOT

LINT = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
needs_linter = pytest.mark.skipif(not Path(LINT).exists(), reason="import-linter is not installed")


def _lint(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT, "--no-cache"], cwd=where, capture_output=True, text=True, timeout=120)


@needs_linter
def test_the_layers_contract_holds() -> None:
    run = _lint(ROOT)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Contracts: 3 kept, 0 broken." in run.stdout


@needs_linter
def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "shardalg", tmp_path / "shardalg", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    syntax = tmp_path / "shardalg" / "notation" / "syntax.py"
    syntax.write_text(syntax.read_text() + "\nfrom shardalg.cli import main  # an upward import\n")
    run = _lint(tmp_path)
    assert run.returncode == 1
    assert "layers: imports point down BROKEN" in run.stdout
    assert "shardalg.notation is not allowed to import shardalg.cli" in run.stdout
    assert "shardalg.notation.syntax -> shardalg.cli" in run.stdout


def test_every_package_says_what_it_holds_and_may_import() -> None:
    for init in sorted((ROOT / "shardalg").glob("*/__init__.py")):
        doc = init.read_text().split('"""')[1]
        assert "Imports:" in doc, f"{init.parent.name}/__init__.py does not say what it may import"


def test_no_module_is_over_600_lines() -> None:
    """Written modules; a generated one (its first line says so: the parser's tables and runtime) is exempt."""
    long = {
        str(p.relative_to(ROOT)): n
        for p in (ROOT / "shardalg").rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 600 and not p.read_text().startswith("# Generated file")
    }
    assert not long, long


def test_no_module_re_exports_through_getattr() -> None:
    """Only the package's public API loads lazily (PEP 562); no submodule hides a re-export that way."""
    shims = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "shardalg").rglob("*.py")
        if "\ndef __getattr__(" in p.read_text() and p != ROOT / "shardalg" / "__init__.py"
    ]
    assert not shims, shims
