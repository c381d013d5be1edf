"""The golden file holds: every query of ``queries.py`` prints today what it printed when ``golden.txt`` was
written (``python -m tests.golden.capture --write`` on the code before the refactor). One test a query, so a
failure names the query and shows its diff; the whole set takes ~12 s of CPU, so the test runs all of it."""

from __future__ import annotations

import difflib

import pytest

from .capture import GOLDEN, header, parse, run
from .queries import QUERIES

SAVED = parse(GOLDEN.read_text(encoding="utf-8"))


def test_the_file_has_one_block_per_query_in_order() -> None:
    assert len(SAVED) == len(QUERIES)
    assert [b.partition("\n")[0] for b in SAVED] == [header(q) for q in QUERIES]


@pytest.mark.parametrize("index", range(len(QUERIES)), ids=lambda i: f"q{i + 1:03d}")
def test_query_prints_as_golden(index: int) -> None:
    now = run(QUERIES[index])
    saved = SAVED[index] if index < len(SAVED) else ""
    diff = "".join(difflib.unified_diff(saved.splitlines(True), now.splitlines(True), "golden", "now"))
    assert now == saved, f"query {index + 1} prints differently:\n{diff}"
