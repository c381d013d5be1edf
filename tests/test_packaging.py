"""Packaging: the wheel carries the grammar and the console script, and an installed copy of the package
finds the grammar inside itself (not the checkout's ``grammar/``) and parses without lark."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # without build isolation: the test extras bring setuptools and wheel (pyproject.toml)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=out,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("shardalg-*.whl")
    return built


def test_wheel_holds_the_grammar_and_the_console_script(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        assert "shardalg/grammar/shardalg.lark" in names
        assert z.read("shardalg/grammar/shardalg.lark") == (ROOT / "grammar" / "shardalg.lark").read_bytes()
        assert {"shardalg/__init__.py", "shardalg/notation/parse.py", "shardalg/cli/notation.py"} <= names
        (entry,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "shardalg = shardalg.cli:run" in z.read(entry).decode()
        (meta,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta).decode()
        assert "Requires-Python: >=3.11" in metadata
        requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
        assert any(r.startswith("Requires-Dist: sympy") and "extra ==" not in r for r in requires)
        lark = [r for r in requires if r.startswith("Requires-Dist: lark")]
        assert lark and all('extra == "test"' in r for r in lark), lark  # the parser is generated: tests only


def test_installed_package_finds_its_own_grammar(wheel, tmp_path):
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)  # a pure-Python wheel installs by unpacking
    code = (
        "import sys; sys.modules['lark'] = None  # no lark: the generated parser needs none\n"
        "import shardalg\n"
        "from shardalg.notation.parse import grammar_path\n"
        f"assert shardalg.__file__.startswith({str(site)!r}), shardalg.__file__\n"
        f"assert str(grammar_path()).startswith({str(site)!r}), grammar_path()\n"
        "from shardalg.cli import main\n"
        "raise SystemExit(main(['shape', 'A: int8[I_XY, J] where I=128, J=2048', '--mesh', 'X=2,Y=8,Z=2', '--json']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert '"bytes_per_device": 16384' in done.stdout
