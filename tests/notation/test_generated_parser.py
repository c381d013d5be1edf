"""The generated parser (shardalg/notation/lalr.py, lark's standalone parser of the grammar): it is what the
generator makes of today's grammar, it parses as lark's own parser of the grammar does (trees, spans and
errors), and parsing imports no lark and writes nothing to the cache directory."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lark.exceptions import UnexpectedInput as LarkUnexpectedInput

from shardalg.notation import grammar
from shardalg.notation.grammar import GENERATED, START, lalr_parser
from shardalg.notation.lalr import UnexpectedInput
from tests.shared import ROOT
from tests.shared.fuzzing import SEEDS, build_parser, grammar_strings, mutations
from tests.shared.seed_expressions import SEED

UNBOUNDED = 2**32 - 1  # the least width Python's regex parser gives an unbounded repeat (sre MAXREPEAT)


def canonical(path: Path) -> tuple[list[str], Any]:
    """The file's code lines, and its tables with the parser states numbered in the order a walk from the start
    states finds them (lark numbers them in set order, which differs from run to run) and rules written out. A
    terminal's unbounded width is written as such: lark records the number Python's regex parser gives it,
    2**32 - 1 (MAXREPEAT) on CPython 3.11.2 and 2**64 (``re._parser.MAXWIDTH``) on 3.11.7, so a parser made on
    one Python and checked on another differs by that number only."""
    lines = path.read_text(encoding="utf-8").splitlines()
    at = {name: lines.index(f"{name} = (") + 1 for name in ("DATA", "MEMO")}
    data, memo = (ast.literal_eval(lines[i]) for i in at.values())

    def resolve(x: Any) -> Any:
        if isinstance(x, dict):
            if set(x) == {"@"}:
                return resolve(memo[x["@"]])
            if x.get("__type__") == "PatternRE":
                low, high = x["_width"]
                x = {**x, "_width": [low, "unbounded" if high >= UNBOUNDED else high]}
            return {k: resolve(v) for k, v in x.items()}
        return type(x)(resolve(v) for v in x) if isinstance(x, list | tuple) else x

    table = data["parser"].pop("parser")
    tokens, states = table["tokens"], table["states"]
    number: dict[int, int] = {}
    todo = deque(table["start_states"][s] for s in sorted(table["start_states"]))
    while todo:
        state = todo.popleft()
        if state not in number:
            number[state] = len(number)
            todo += [
                arg
                for t, (shift, arg) in sorted(states[state].items(), key=lambda kv: tokens[kv[0]])
                if shift == 0
            ]
    rows = {
        number[s]: {
            tokens[t]: (shift, number[arg] if shift == 0 else resolve(arg)) for t, (shift, arg) in row.items()
        }
        for s, row in states.items()
    }
    ends = {s: number[n] for s, n in table["end_states"].items()}
    code = [line for i, line in enumerate(lines) if i not in at.values()]
    return code, (resolve(data), rows, ends, sorted(number))


def test_the_committed_parser_is_what_the_generator_makes_of_the_grammar(tmp_path: Path) -> None:
    lines = GENERATED.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith(
        "# Generated file: do not edit. `python -m shardalg.notation.grammar` remakes it"
    )
    grammar.generate(tmp_path / "lalr.py")
    assert canonical(tmp_path / "lalr.py") == canonical(GENERATED)


def test_a_grammar_edit_without_regenerating_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edited = tmp_path / "shardalg.lark"
    edited.write_text(grammar.grammar_text().replace('| "(" expr ")"', '| "(" expr ")" | "<" expr ">"'))
    monkeypatch.setattr(grammar, "grammar_path", lambda: edited)
    grammar.generate(tmp_path / "lalr.py")
    assert canonical(tmp_path / "lalr.py")[1] != canonical(GENERATED)[1]


def test_parsing_imports_no_lark_and_writes_no_cache(tmp_path: Path) -> None:
    code = (
        "import sys\nfrom shardalg.errors import ParseError\nfrom shardalg.notation.parse import parse\n"
        "parse('A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]')\n"
        "try:\n    parse('A[I_X, ')\nexcept ParseError as err:\n    print(err.message)\n"
        "print('lark' in sys.modules)"
    )
    cache = tmp_path / "cache"
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=ROOT,
        timeout=60,
    )
    assert done.stdout.splitlines() == [
        "expected a number or a name after ',', found the end of the input",
        "False",
    ]
    assert not cache.exists()


# ---- the same trees, spans and errors as lark's own parser of the grammar ---------------------------------


def _tree(x: Any) -> Any:
    """A tree as plain data: rule, span and children; a token's type, text and span."""
    if hasattr(x, "data"):
        meta = None if x.meta.empty else (x.meta.start_pos, x.meta.end_pos)
        return (str(x.data), meta, [_tree(c) for c in x.children])
    if x is None:
        return None
    return (x.type, str(x), x.start_pos, x.end_pos)


def _outcome(parser: Any, error: type[Exception], text: str, start: str) -> Any:
    try:
        return _tree(parser.parse(text, start=start))
    except error as err:  # the state's number is the table's own; what was expected is not
        token = getattr(err, "token", None)
        return (
            type(err).__name__,
            getattr(err, "pos_in_stream", None),
            token and (token.type, str(token)),
            sorted(getattr(err, "expected", None) or getattr(err, "allowed", None) or ()),
        )


REFERENCE = build_parser()


def agree(text: str, kind: str = "program") -> None:
    start = START[kind]
    ours = _outcome(lalr_parser(), UnexpectedInput, text, start)
    assert ours == _outcome(REFERENCE, LarkUnexpectedInput, text, start), text


@pytest.mark.parametrize("text", [text for _, text, _ in SEED] + ["A[I_X, ", "A[I] B[I]", "A[I]#", ""])
def test_seed_expressions(text: str) -> None:
    agree(text)


@given(grammar_strings("start"))
def test_grammar_generated(text: str) -> None:
    agree(text)


@given(mutations())
def test_mutations(text: str) -> None:
    agree(text)


@given(st.sampled_from(SEEDS), st.sampled_from(["tensor", "statement"]))
def test_seeds_on_the_other_start_rules(text: str, kind: str) -> None:
    agree(text, kind)
