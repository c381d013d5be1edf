"""The golden file holds: every query of ``queries.py`` prints today what it printed when ``golden.txt`` was
written (``python -m tests.golden.capture --write`` on the code before the refactor). The check runs as its
command does, in a process of its own (its caches warmed by nothing but the queries), in a shuffled order: the
file was written in the queries' own order, so one shuffled run that matches it shows both that every answer is
the golden one and that no answer depends on what ran before it (the in-order run, which adds nothing to that,
is ``python -m tests.golden.capture --check``). The whole set takes ~25 s of CPU a run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .capture import GOLDEN, header, parse
from .queries import QUERIES

ROOT = Path(__file__).resolve().parents[2]


def test_the_file_has_one_block_per_query_in_order() -> None:
    saved = parse(GOLDEN.read_text(encoding="utf-8"))
    assert len(saved) == len(QUERIES) >= 300
    assert [b.partition("\n")[0] for b in saved] == [header(q) for q in QUERIES]


def test_every_query_prints_as_golden_in_a_shuffled_order() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.golden.capture", "--check", "--shuffle", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(QUERIES)} queries checked, 0 differ" in done.stdout
