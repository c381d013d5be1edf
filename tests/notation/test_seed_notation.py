r"""Every sharding expression written in the seed documents (/work/shared/seeds), quoted exactly as it
appears there (LaTeX, dollars and all), parses to the AST it means.

Where a seed writes several formulas on one line they are one entry each; a display block
(``$$\begin{aligned} ... \end{aligned}$$``) is one entry. ``NOT_NOTATION`` lists the bracketed text in the
seeds that is not the sharding notation (arithmetic inside brackets, ``\ldots``, a bare operator name,
block-matrix notation, Python), each with the reason, and pins that it is rejected with a ParseError.
"""

from __future__ import annotations

import pytest

from shardalg.errors import ParseError
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex, text, unicode
from tests.shared.seed_expressions import NOT_NOTATION, SEED


@pytest.mark.parametrize(("where", "source", "expected"), SEED, ids=[f"{w}:{s[:40]}" for w, s, _ in SEED])
def test_seed_expression_parses_to_its_meaning(where: str, source: str, expected: tuple) -> None:
    program = parse(source)
    assert program.statements == expected
    assert program.source == source


@pytest.mark.parametrize(("where", "source", "expected"), SEED, ids=[f"{w}:{s[:40]}" for w, s, _ in SEED])
def test_seed_expression_prints_back(where: str, source: str, expected: tuple) -> None:
    program = parse(source)
    for printer in (text, unicode, latex):
        assert parse(printer(program)) == program


@pytest.mark.parametrize(("where", "source", "why"), NOT_NOTATION, ids=[w for w, _, _ in NOT_NOTATION])
def test_not_notation_is_a_parse_error(where: str, source: str, why: str) -> None:
    with pytest.raises(ParseError) as info:
        parse(source)
    assert info.value.span is not None and info.value.source == source


def test_every_tensor_and_statement_has_a_span_inside_its_source() -> None:
    for _, source, _ in SEED:
        for statement in parse(source).statements:
            assert statement.span is not None
            assert 0 <= statement.span.start < statement.span.end <= len(source)
            piece = source[statement.span.start : statement.span.end]
            assert piece == piece.strip() and piece[0] not in "$&"
