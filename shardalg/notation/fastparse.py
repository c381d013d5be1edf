"""The parser's fast path: lark's own LALR tables and contextual lexers driven directly, calling the
transformer's methods at each reduction (spans computed as ``propagate_positions`` does). Anything off the
plain path gives up, and :mod:`.parse` takes lark's route, so errors are always lark's.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from lark import Lark, Token

from shardalg.errors import Span

from .build import TRANSFORMER, ToAST
from .grammar import lalr_parser

# lark's own route is parse -> Tree (propagate_positions) -> ToAST.transform; most of its time goes to
# building Trees and metas and to the Transformer's per-node dispatch. The fast path below drives the same
# LALR tables and the same contextual lexers (lark's compiled per-state regexes), and calls ToAST's
# functions straight at each reduction, computing spans exactly as propagate_positions does (a node spans
# its first to its last raw child; a rule inlined by `?` widens only its container). Whenever anything is
# off the plain path (a lexing or parsing error, a builder raising, a case it does not model, a long text)
# it gives up and the lark route runs, so errors and their order are lark's, unchanged.
_FAST_MAX_TOKENS = 400  # deeper trees go through lark's recursive Transformer as before ("nested too deeply")


class GiveUp(Exception):
    """The fast path cannot vouch for this text; parse it the lark way."""


def _no_builder(*args: Any) -> Any:
    raise GiveUp("a rule without a ToAST method")  # lark would leave a Tree here


class FastParser:
    """Parse tables, lexers and per-rule reducers taken from one built lark parser."""

    def __init__(self, lark: Lark) -> None:
        from lark.lexer import ContextualLexer
        from lark.parse_tree_builder import maybe_create_child_filter
        from lark.parsers.lalr_analysis import Shift

        frontend = lark.parser
        lexer = frontend.lexer
        if not isinstance(lexer, ContextualLexer) or lark.options.postlex is not None:
            raise GiveUp("unsupported lexer")
        table = frontend.parser.parser.parse_table
        self.start_states = table.start_states
        self.end_states = table.end_states
        # per parser state, built on first use as lark does (compiling all of them costs ~50 ms at start-up):
        # (compiled alternations, ignored types, newline types, token callbacks)
        self.basic = lexer.lexers
        self.lexers: dict[int, tuple[list[Any], frozenset[str], frozenset[str], dict[str, Any]]] = {}
        builders = {name: getattr(vars(ToAST)[name], "base_func", None) for name in vars(ToAST)}
        self.reducers: dict[Any, tuple[Any, ...]] = {}
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
                include, trailing = tuple(made.args[0]), made.args[1]
            expand1 = bool(options.expand1 and not rule.alias)
            if name.startswith("_"):
                build = None  # a `_rule`: its children are spliced into the parent
            else:
                build = builders.get(name) or _no_builder  # a `?rule` of one child never needs one
            self.reducers[rule] = (len(rule.expansion), rule.origin.name, include, trailing, expand1, build)
        # the action table with each reduce's Rule replaced by its reducer (no Rule hashing per reduction)
        self.actions = {
            state: {t: (a is Shift, arg if a is Shift else self.reducers[arg]) for t, (a, arg) in row.items()}
            for state, row in table.states.items()
        }

    def lexer(self, state: int) -> tuple[list[Any], frozenset[str], frozenset[str], dict[str, Any]]:
        basic = self.basic[state]
        scanner = basic.scanner
        made = self.lexers[state] = (list(scanner._mres), basic.ignore_types, basic.newline_types, basic.callback)
        return made

    def parse(self, text: str, start: str) -> Any:
        states = self.actions
        lexers = self.lexers
        end_state = self.end_states[start]
        state_stack = [self.start_states[start]]
        # each entry: (value, container start, container end, is_token); start None when empty
        value_stack: list[tuple[Any, int | None, int | None, bool]] = []
        transformer = TRANSFORMER
        pos, n, line, line_start, count = 0, len(text), 1, 0, 0
        last: Token | None = None
        while True:
            # ---- the next token, lexed in the current parser state's context
            token: Token | None = None
            context = lexers.get(state_stack[-1]) or self.lexer(state_stack[-1])
            mres, ignore, newlines, callbacks = context
            while pos < n:
                for mre in mres:
                    m = mre.match(text, pos)
                    if m:
                        break
                else:
                    raise GiveUp("lexing error")
                value, type_ = m.group(0), m.lastgroup
                start_pos, start_line, column = pos, line, pos - line_start + 1
                pos += len(value)
                if type_ in newlines and "\n" in value:
                    line += value.count("\n")
                    line_start = start_pos + value.rindex("\n") + 1
                if type_ in ignore:
                    if type_ in callbacks:
                        raise GiveUp("callback on an ignored terminal")
                    continue
                token = Token(type_, value, start_pos, start_line, column, line, pos - line_start + 1, pos)
                if type_ in callbacks:
                    token = callbacks[type_](token)
                    if not isinstance(token, Token):
                        raise GiveUp("token callback")
                count += 1
                if count > _FAST_MAX_TOKENS:
                    raise GiveUp("long text")
                break
            is_end = token is None
            if is_end:
                token = Token.new_borrow_pos("$END", "", last) if last is not None else Token("$END", "", 0, 1, 1)
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
                        node = build(transformer, span, *children)
                    except Exception as exc:  # lark reports these after the whole parse: let it
                        raise GiveUp("builder raised") from exc
                    entry = (node, first, last_end, False)
                new_state = states[state_stack[-1]][origin][1]
                state_stack.append(new_state)
                value_stack.append(entry)
                if is_end and new_state == end_state:
                    return entry[0]


@lru_cache(maxsize=1)
def fast_parser() -> FastParser | None:
    try:
        return FastParser(lalr_parser())
    except Exception:  # noqa: BLE001 - a lark whose internals differ from 1.x's: keep lark's own route
        return None
