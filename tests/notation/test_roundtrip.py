"""Printing is the inverse of parsing: for random ASTs x and every format f, parse(f(x)) == x; and the
JSON form reads back to the same node."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from shardalg.notation.printing import latex, text, to_json, unicode
from tests.shared.strategies import programs, statements, tensors

PRINTERS = (text, unicode, latex)


@given(tensors(legal=False))
def test_tensor_round_trip(t) -> None:
    for printer in PRINTERS:
        assert parse_tensor(printer(t)) == t, printer(t)


@given(statements())
def test_statement_round_trip(s) -> None:
    for printer in PRINTERS:
        assert parse_statement(printer(s)) == s, printer(s)


@given(programs())
def test_program_round_trip(p) -> None:
    for printer in PRINTERS:
        assert parse(printer(p)) == p, printer(p)
    assert parse(latex(p, mode="display")) == p


@given(programs(axes=("X", "Y", "Z"), dims=("I", "J", "K"), names=("A", "B", "W_in", "A'")))
def test_book_style_program_round_trip(p) -> None:
    for printer in PRINTERS:
        out = printer(p)
        assert parse(out) == p, out
        assert printer(parse(out)) == out  # printing is a fixed point after one round


@given(programs())
def test_json_round_trip(p) -> None:
    j = to_json(p)
    assert from_json(json.loads(json.dumps(j))) == p
    assert to_json(from_json(j), spans=False) == to_json(p, spans=False)


@given(
    programs(),
    st.lists(st.text(st.characters(blacklist_characters="\n\r"), max_size=20), max_size=4),
    st.data(),
)
def test_latex_with_percent_comments_round_trip(p, comments, data) -> None:
    """`%` runs a comment to the end of its line, as in LaTeX (the printers write a program's provenance so):
    comment lines anywhere among a LaTeX program's lines, and after a line's end, leave the program as it was."""
    for mode in ("inline", "display"):
        lines = latex(p, mode=mode).split("\n")
        for c in comments:
            at = data.draw(st.integers(0, len(lines)))
            lines.insert(at, "% " + c)
        lines[-1] += " % " + (comments[0] if comments else "")
        assert parse("\n".join(lines)) == p, lines
