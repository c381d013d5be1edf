"""The parser's fast path: lark's own LALR tables and contextual lexers, kept as plain data and driven
directly, calling the builders (:class:`.build.Builders`) at each reduction (spans computed as
``propagate_positions`` does). Anything off the plain path gives up, and :mod:`.parse` takes lark's route, so
errors are always lark's.

The tables are read off lark's built parser once and kept in the per-user cache directory (``marshal`` of
plain dicts, lists, tuples and strings, checked against the grammar's text and lark's installed file on
load), so a process that parses well-formed text never imports lark: lark's import and its cached parser
cost a cold start ~30 ms.
"""

from __future__ import annotations

import marshal
import os
import re
import zlib
from pathlib import Path
from typing import Any

from shardalg.cache import Kind, memoized
from shardalg.errors import Span

from .build import BUILDERS, Builders
from .grammar import START, cache_dir, grammar_text

# lark's own route is parse -> Tree (propagate_positions) -> transformer; most of its time goes to
# building Trees and metas and to the Transformer's per-node dispatch. The fast path below drives the same
# LALR tables and the same contextual lexers' regular expressions, and calls the builders straight at each
# reduction, computing spans exactly as propagate_positions does (a node spans its first to its last raw
# child; a rule inlined by `?` widens only its container). Whenever anything is off the plain path (a lexing
# or parsing error, a builder raising, a case it does not model, a long text) it gives up and the lark route
# runs, so errors and their order are lark's, unchanged.
_FAST_MAX_TOKENS = 400  # deeper trees go through lark's recursive Transformer as before ("nested too deeply")
FORMAT = 1  # the tables' layout below; a cache of another layout is rebuilt

# Tables, as plain data:
#   start, end: {start rule: parser state}
#   actions:    {state: {terminal: (is_shift, next state | reducer index)}}
#   reducers:   [(size, origin, include, trailing, expand1, builder name | None for a spliced `_rule`)]
#   lexers:     {state: ([(pattern, flags)], ignored types, newline types, {type: [(pattern, flags)]})}
#               the last: lark's "unless" re-typing (a keyword that also matches a wider terminal)
Tables = dict[str, Any]


class GiveUp(Exception):
    """The fast path cannot vouch for this text; parse it the lark way."""


class Token(str):
    """A terminal as the fast path reads it: the fields of lark's Token the builders use."""

    type: str
    start_pos: int
    end_pos: int

    def __new__(cls, type_: str, value: str, start_pos: int, end_pos: int) -> Token:
        tok = super().__new__(cls, value)
        tok.type, tok.start_pos, tok.end_pos = type_, start_pos, end_pos
        return tok


def _no_builder(*args: Any) -> Any:
    raise GiveUp("a rule without a builder")  # lark would leave a Tree here


def _patterns(mres: list[Any]) -> list[tuple[str, int]]:
    if not all(isinstance(m, re.Pattern) for m in mres):
        raise GiveUp("lark compiled its terminals with another regex module")
    return [(m.pattern, m.flags) for m in mres]


def _plain(x: Any) -> Any:
    """The same data in built-in types only (lark's names are str subclasses, which marshal refuses)."""
    if isinstance(x, str):
        return str(x)
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, dict):
        return {_plain(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, tuple):
        return tuple(_plain(v) for v in x)
    raise GiveUp(f"a table entry of type {type(x).__name__}")


def tables_from_lark(lark: Any) -> Tables:
    """Read the tables off one built lark parser (every state's lexer compiled: ~50 ms, once per cache)."""
    from lark.lexer import ContextualLexer, UnlessCallback
    from lark.parse_tree_builder import maybe_create_child_filter
    from lark.parsers.lalr_analysis import Shift

    frontend = lark.parser
    lexer = frontend.lexer
    if not isinstance(lexer, ContextualLexer) or lark.options.postlex is not None:
        raise GiveUp("unsupported lexer")
    table = frontend.parser.parser.parse_table
    reducers: list[tuple[Any, ...]] = []
    index: dict[Any, int] = {}
    for rule in frontend.parser.parser.callbacks:
        options = rule.options
        name = rule.alias or options.template_source or rule.origin.name
        made = maybe_create_child_filter(rule.expansion, options.keep_all_tokens, False, options.empty_indices)
        if made is None:
            include = tuple((i, False, 0) for i in range(len(rule.expansion)))
            trailing = 0
        elif len(made.args) == 1:  # lark's filter without placeholders: (index, expand) pairs
            include, trailing = tuple((i, expand, 0) for i, expand in made.args[0]), 0
        else:
            include, trailing = tuple(tuple(x) for x in made.args[0]), made.args[1]
        expand1 = bool(options.expand1 and not rule.alias)
        index[rule] = len(reducers)
        reducers.append((len(rule.expansion), rule.origin.name, include, trailing, expand1,
                         None if name.startswith("_") else name))  # fmt: skip
    actions = {state: {t: (a is Shift, arg if a is Shift else index[arg]) for t, (a, arg) in row.items()}
               for state, row in table.states.items()}  # fmt: skip
    lexers = {}
    for state, basic in lexer.lexers.items():
        scanner = basic.scanner  # built on first access, with the callbacks
        unless = {}
        for type_, callback in basic.callback.items():
            if type(callback) is not UnlessCallback:
                raise GiveUp("a token callback other than lark's keyword re-typing")
            unless[type_] = _patterns(callback.scanner._mres)
        lexers[state] = (_patterns(scanner._mres), sorted(basic.ignore_types), sorted(basic.newline_types),
                         unless)  # fmt: skip
    return _plain({"format": FORMAT, "start": dict(table.start_states), "end": dict(table.end_states),
                   "actions": actions, "reducers": reducers, "lexers": lexers})  # fmt: skip


def _lark_stamp() -> str:
    """Which lark the tables came from: its package file's path, size and time (its version without
    importing it)."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("lark")
    if spec is None or not spec.origin:
        return ""
    st = os.stat(spec.origin)
    return f"{spec.origin}:{st.st_size}:{st.st_mtime_ns}"


def _cache_path(grammar: str) -> Path | None:
    base = cache_dir()
    return None if base is None else base / f"fastparse-{FORMAT}-{zlib.crc32(grammar.encode()):08x}.marshal"


def load_tables() -> Tables:
    """The tables from the cache when they were made from this grammar by this lark; else read off lark's
    parser and written to the cache (when there is one)."""
    grammar, stamp = grammar_text(), _lark_stamp()
    path = _cache_path(grammar)
    if path is not None:
        try:
            got = marshal.loads(path.read_bytes())
            if got["format"] == FORMAT and got["grammar"] == grammar and got["lark"] == stamp:
                return got
        except (OSError, EOFError, ValueError, TypeError, KeyError):
            pass  # none yet, or unreadable: made again below
    from .grammar import lalr_parser

    tables = tables_from_lark(lalr_parser())
    tables.update(grammar=grammar, lark=stamp)
    if path is not None:
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(marshal.dumps(tables))
            os.replace(tmp, path)
        except (OSError, ValueError):  # not writable (or not marshallable): kept in this process only
            tmp.unlink(missing_ok=True)
    return tables


class FastParser:
    """Parse tables and per-state lexers (compiled on first use, as lark does), driving the builders."""

    def __init__(self, tables: Tables) -> None:
        self.start_states, self.end_states = tables["start"], tables["end"]
        self._lexer_data = tables["lexers"]
        self.lexers: dict[int, tuple[list[Any], frozenset[str], frozenset[str], dict[str, list[Any]]]] = {}
        reducers = [(size, origin, include, trailing, expand1, None if name is None else BUILDERS.get(name) or
                     _no_builder) for size, origin, include, trailing, expand1, name in tables["reducers"]]  # fmt: skip
        self.actions = {state: {t: (is_shift, arg if is_shift else reducers[arg]) for t, (is_shift, arg) in row.items()}
                        for state, row in tables["actions"].items()}  # fmt: skip

    def lexer(self, state: int) -> tuple[list[Any], frozenset[str], frozenset[str], dict[str, list[Any]]]:
        mres, ignore, newlines, unless = self._lexer_data[state]
        made = self.lexers[state] = (
            [re.compile(p, f) for p, f in mres], frozenset(ignore), frozenset(newlines),
            {t: [re.compile(p, f) for p, f in alts] for t, alts in unless.items()},
        )  # fmt: skip
        return made

    def parse(self, text: str, start: str) -> Any:
        states = self.actions
        lexers = self.lexers
        end_state = self.end_states[start]
        state_stack = [self.start_states[start]]
        # each entry: (value, container start, container end, is_token); start None when empty
        value_stack: list[tuple[Any, int | None, int | None, bool]] = []
        builders = Builders()
        pos, n, count = 0, len(text), 0
        last: Token | None = None
        while True:
            # ---- the next token, lexed in the current parser state's context
            token: Token | None = None
            context = lexers.get(state_stack[-1]) or self.lexer(state_stack[-1])
            mres, ignore, newlines, unless = context
            while pos < n:
                for mre in mres:
                    m = mre.match(text, pos)
                    if m:
                        break
                else:
                    raise GiveUp("lexing error")
                value, type_ = m.group(0), m.lastgroup
                start_pos = pos
                pos += len(value)
                if type_ in ignore:
                    if type_ in unless:
                        raise GiveUp("callback on an ignored terminal")
                    continue
                if type_ in unless:  # lark's UnlessCallback: a keyword spelled as the wider terminal
                    for alt in unless[type_]:
                        k = alt.fullmatch(value)
                        if k:
                            type_ = k.lastgroup
                            break
                token = Token(type_, value, start_pos, pos)
                count += 1
                if count > _FAST_MAX_TOKENS:
                    raise GiveUp("long text")
                break
            is_end = token is None
            if is_end:
                at = last.end_pos if last is not None else 0
                token = Token("$END", "", last.start_pos if last is not None else 0, at)
            else:
                last = token
            type_ = token.type
            # ---- feed it: reduce as often as needed, then shift (or accept)
            while True:
                is_shift, arg = states[state_stack[-1]].get(type_, (None, None))
                if is_shift is None:
                    raise GiveUp("syntax error")
                if is_shift:
                    if is_end:
                        raise GiveUp("shift at the end")
                    state_stack.append(arg)
                    value_stack.append((token, token.start_pos, token.end_pos, True))
                    break
                size, origin, include, trailing, expand1, build = arg
                if size:
                    raw = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
                else:
                    raw = []
                first = last_end = None
                for entry in raw:
                    if entry[1] is not None:
                        first = entry[1]
                        break
                for entry in reversed(raw):
                    if entry[1] is not None:
                        last_end = entry[2]
                        break
                children: list[Any] = []
                for i, expand, nones in include:
                    if nones:
                        children += [None] * nones
                    if expand:
                        children += raw[i][0]
                    else:
                        children.append(raw[i][0])
                if trailing:
                    children += [None] * trailing
                if expand1 and len(children) == 1:
                    if len(include) != 1 or include[0][1] or include[0][2] or trailing:
                        raise GiveUp("a `?rule` whose one child is spliced or a placeholder")
                    kept = raw[include[0][0]]
                    if kept[3]:  # a token stays where it is
                        entry = kept
                    elif kept[0] is None:
                        entry = (None, None, None, False)
                    elif first is None:
                        entry = kept
                    elif kept[1] is None:
                        raise GiveUp("empty node inlined")  # lark would set its own span late
                    else:
                        entry = (kept[0], first, last_end, False)
                elif build is None:
                    entry = (children, first, last_end, False)
                else:
                    span = Span(first, last_end) if first is not None else None
                    try:
                        node = build(builders, span, *children)
                    except Exception as exc:  # lark reports these after the whole parse: let it
                        raise GiveUp("builder raised") from exc
                    entry = (node, first, last_end, False)
                new_state = states[state_stack[-1]][origin][1]
                state_stack.append(new_state)
                value_stack.append(entry)
                if is_end and new_state == end_state:
                    return entry[0]


@memoized(Kind.TABLE)
def fast_parser() -> FastParser | None:
    try:
        tables = load_tables()
        if set(tables["start"]) != set(START.values()):
            raise GiveUp("the tables' start rules are not the grammar's")
        return FastParser(tables)
    except Exception:  # noqa: BLE001 - a lark whose internals differ from 1.x's: keep lark's own route
        return None
