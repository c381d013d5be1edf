"""Fuzzing the parser: strings made from the grammar itself (hypothesis.extra.lark), random text and
bytes, and random edits of valid inputs. Each input either parses or raises ParseError (or LimitExceeded, for a
number over the size limit, which the grammar can write), never anything else; and whatever parses prints back
to the same AST in every format."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shardalg.errors import LimitExceeded, ParseError
from shardalg.notation.parse import parse, parse_statement, parse_tensor
from shardalg.notation.printing import latex, text, unicode
from shardalg.notation.syntax import Program
from tests.shared.fuzzing import NOTATION_CHARS, SEEDS, grammar_strings, mutations


def _check(source: str, parse_fn=parse) -> None:
    """Parse, or ParseError or LimitExceeded with a span; a parsed program survives printing in every format."""
    try:
        node = parse_fn(source)
    except (ParseError, LimitExceeded) as err:
        assert err.span is not None and err.source == source
        assert 0 <= err.span.start <= err.span.end <= len(source)
        str(err)  # renders
        return
    for printer in (text, unicode, latex):
        assert parse_fn(printer(node)) == node, (source, printer(node))
    if isinstance(node, Program):
        assert node.source == source


@given(grammar_strings("start"))
def test_grammar_generated_programs(source: str) -> None:
    _check(source)


@given(grammar_strings("statement_start"))
def test_grammar_generated_statements(source: str) -> None:
    _check(source, parse_statement)


@given(grammar_strings("tensor_start"))
def test_grammar_generated_tensors(source: str) -> None:
    _check(source, parse_tensor)


@given(st.text())
def test_random_text(source: str) -> None:
    _check(source)


@given(st.text(alphabet=NOTATION_CHARS, max_size=60))
def test_random_notation_soup(source: str) -> None:
    _check(source)
    _check(source, parse_tensor)


@given(st.binary(max_size=80), st.sampled_from(["utf-8", "latin-1"]))
def test_random_bytes(data: bytes, encoding: str) -> None:
    _check(data.decode(encoding, errors="replace"))


@given(mutations())
def test_mutated_inputs(source: str) -> None:
    _check(source)
    _check(source, parse_statement)


def test_seeds_parse() -> None:
    for source in SEEDS:
        assert parse(source).statements
