"""The parser's fast path (lark's LALR tables as data, driven directly: shardalg.notation.fastparse.FastParser) against lark's own route
(parse to a tree, then transform): on every input the fast path either gives up or returns exactly what
lark's route returns, spans included (compared through the JSON printer, which carries spans)."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.errors import ShardalgError
from shardalg.notation.build import transformer
from shardalg.notation.fastparse import GiveUp, fast_parser
from shardalg.notation.grammar import START as _START
from shardalg.notation.grammar import grammar_text, lalr_parser
from shardalg.notation.printing import to_json
from tests.shared import ROOT
from tests.shared.fuzzing import SEEDS, grammar_strings, mutations
from tests.shared.seed_expressions import SEED

FAST = fast_parser()


def lark_route(text: str, start: str):
    return transformer().transform(lalr_parser().parse(text, start=start))


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


# ---- the tables as data, cached per user --------------------------------------------------------------


def test_the_cached_tables_are_what_lark_built():
    from shardalg.notation.fastparse import load_tables, tables_from_lark

    cached = load_tables()
    assert cached["grammar"] == grammar_text()
    assert {k: v for k, v in cached.items() if k not in ("grammar", "lark")} == tables_from_lark(lalr_parser())


def test_a_stale_or_broken_cache_is_made_again(tmp_path, monkeypatch):
    from shardalg.notation import fastparse

    monkeypatch.setattr(fastparse, "cache_dir", lambda: tmp_path)
    path = fastparse._cache_path(grammar_text())
    fresh = fastparse.load_tables()
    assert path.is_file()
    for broken in (b"", b"\x00garbage", marshal.dumps({**fresh, "grammar": "start: X"}), marshal.dumps([1, 2])):
        path.write_bytes(broken)
        assert fastparse.load_tables() == fresh
        assert marshal.loads(path.read_bytes()) == fresh  # written again


def test_a_process_that_parses_well_formed_text_never_imports_lark(tmp_path):
    code = ("import sys; from shardalg.notation.parse import parse; "
            "parse('A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]'); print('lark' in sys.modules)")  # fmt: skip
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True,
                           cwd=ROOT, timeout=60).stdout.strip() for _ in range(2)]  # fmt: skip
    assert runs == ["True", "False"]  # the first run reads the tables off lark and keeps them; the next does not
    # an error still takes lark's route, with lark's message
    bad = subprocess.run([sys.executable, "-c", "from shardalg.notation.parse import parse; parse('A[I_X, ')"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)  # fmt: skip
    assert bad.returncode == 1 and "ParseError" in bad.stderr
