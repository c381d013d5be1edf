"""The parser's fast path (lark's LALR tables driven directly, shardalg.notation.fastparse.FastParser) against lark's own route
(parse to a tree, then transform): on every input the fast path either gives up or returns exactly what
lark's route returns, spans included (compared through the JSON printer, which carries spans)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.errors import ShardalgError
from shardalg.notation.build import TRANSFORMER
from shardalg.notation.fastparse import GiveUp, fast_parser
from shardalg.notation.grammar import START as _START
from shardalg.notation.grammar import lalr_parser
from shardalg.notation.printing import to_json
from tests.shared.fuzzing import SEEDS, grammar_strings, mutations
from tests.shared.seed_expressions import SEED

FAST = fast_parser()


def lark_route(text: str, start: str):
    return TRANSFORMER.transform(lalr_parser().parse(text, start=start))


def agree(text: str, kind: str = "program") -> None:
    start = _START[kind]
    try:
        fast = FAST.parse(text, start)
    except (GiveUp, ShardalgError):
        return  # lark's route runs instead (and reports any error)
    assert to_json(fast) == to_json(lark_route(text, start)), text


def test_the_fast_path_is_built():
    assert FAST is not None, "lark's internals changed: the fast path is off (parsing still works, slower)"


@pytest.mark.parametrize("text", [text for _, text, _ in SEED])
def test_seed_expressions(text: str) -> None:
    agree(text)


@given(grammar_strings("start"))
def test_grammar_generated(text: str) -> None:
    agree(text)


@given(mutations())
def test_mutations(text: str) -> None:
    agree(text)


@given(st.sampled_from(SEEDS))
def test_seeds_as_statements(text: str) -> None:
    agree(text)
