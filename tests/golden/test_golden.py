"""The golden file holds: every query of ``queries.py`` prints today what it printed when ``golden.txt`` was
written (``python -m tests.golden.capture --write`` on the code before the refactor). The check runs as its
command does, in a process of its own (its caches warmed by nothing but the queries), once in the file's order
and once in a shuffled one: an answer must not depend on what ran before it. The whole set takes ~12 s of CPU a
run, so the test runs all of it, twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .capture import GOLDEN, header, parse
from .queries import QUERIES

ROOT = Path(__file__).resolve().parents[2]


def test_the_file_has_one_block_per_query_in_order() -> None:
    saved = parse(GOLDEN.read_text(encoding="utf-8"))
    assert len(saved) == len(QUERIES) >= 300
    assert [b.partition("\n")[0] for b in saved] == [header(q) for q in QUERIES]


@pytest.mark.parametrize("order", [[], ["--shuffle", "1"]], ids=["in order", "shuffled"])
def test_every_query_prints_as_golden(order: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.golden.capture", "--check", *order],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(QUERIES)} queries checked, 0 differ" in done.stdout
