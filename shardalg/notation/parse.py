"""Text to AST: load ``grammar/shardalg.lark`` once, parse with LALR, transform to :mod:`shardalg.notation.syntax`.

    >>> parse_tensor("A[I_XY, J]{U_Z}")
    Tensor(name='A', dims=(Dim(name='I', axes=('X', 'Y'), size=None), Dim(name='J', axes=(), size=None)), unreduced=('Z',), invariant=(), dtype=None)

Every failure is a :class:`~shardalg.errors.ParseError` with a span into the text and a short message that
says what was expected. Nothing here evaluates user text: numbers and names come from grammar tokens.

How subscripts read (the one rule for every ``_`` that holds mesh axes): a bare word of capital letters
is one axis per letter (``I_XY``, ``I_{XY}``: X then Y); any other word is one axis (``I_{data}``,
``I_X1``); ``\\text{DP}`` is always one axis; commas separate items (``I_{data,model}``). For
ReduceScatter, AllToAll and Slice the last comma item, when there are two or more, is the target dim.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from shardalg.errors import ParseError, ShardalgError, Span, UsageError

from .syntax import (
    Arrow,
    Collective,
    Dim,
    DType,
    MeshDecl,
    Op,
    Product,
    Program,
    Statement,
    Tensor,
    dtype_named,
)

__all__ = ["parse", "parse_tensor", "parse_statement", "grammar_text", "grammar_path", "split_axes", "LOCAL"]

LOCAL = "LOCAL"  # the contraction subscript that marks a local (unreduced) product: A ·_LOCAL B
_LETTER_AXES = re.compile(r"[A-Z]{2,}")
_START = {"program": "start", "tensor": "tensor_start", "statement": "statement_start"}


# ------------------------------------------------------------------------------------------------ grammar
def grammar_path() -> Path:
    """Where the grammar file is: inside the installed package, else in the source checkout."""
    try:
        from importlib.resources import files

        found = files("shardalg.grammar").joinpath("shardalg.lark")
        if found.is_file():
            return Path(str(found))
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    return Path(__file__).resolve().parent.parent / "grammar" / "shardalg.lark"


def grammar_text() -> str:
    return grammar_path().read_text(encoding="utf-8")


def _cache_file(grammar: str) -> str | bool:
    """A per-user cache file for the built parser, named by the grammar's and lark's versions, or False
    when no private cache directory can be made (then the parser is built each process, ~0.1 s)."""
    import hashlib
    import os

    import lark

    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "shardalg"
    try:
        base.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.access(base, os.W_OK):
            return False
    except OSError:
        return False
    digest = hashlib.sha256(f"{lark.__version__}\n{grammar}".encode()).hexdigest()[:16]
    return str(base / f"grammar-{digest}.lark-cache")


def build_parser(*, cache: str | bool = False) -> Lark:
    """A new LALR parser for the grammar. Uncached it keeps lark's grammar objects (what
    ``hypothesis.extra.lark.from_lark`` reads); a parser loaded from the disk cache does not."""
    return Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        start=list(_START.values()),
        propagate_positions=True,
        maybe_placeholders=True,
        cache=cache,
    )


@lru_cache(maxsize=1)
def _parser() -> Lark:
    """The one LALR parser of the process, built on first use (and cached on disk per user)."""
    return build_parser(cache=_cache_file(grammar_text()))


# ------------------------------------------------------------------------------------------------ subscripts
# A piece of a subscript is (text, quoted); quoted pieces came from \text{...} and are never split.
Piece = tuple[str, bool]
Item = tuple[Piece, ...]


def split_axes(text: str, quoted: bool = False) -> tuple[str, ...]:
    """The axes one subscript word names: ``"XY"`` is X, Y; ``"data"`` and quoted words are one axis."""
    if not quoted and _LETTER_AXES.fullmatch(text):
        return tuple(text)
    return (text,)


def _axes_of(items: Iterable[Item]) -> tuple[str, ...]:
    return tuple(a for item in items for text, quoted in item for a in split_axes(text, quoted))


def _span(meta: Any) -> Span | None:
    """A node's span: from lark's meta (the tree path), or the Span the fast path passes directly."""
    if meta is None or type(meta) is Span:
        return meta
    if getattr(meta, "empty", True):
        return None
    return Span(meta.start_pos, meta.end_pos)


def _tok_span(tok: Token) -> Span:
    return Span(tok.start_pos or 0, tok.end_pos or (tok.start_pos or 0) + len(tok))


def _positive(tok: Token, what: str) -> int:
    value = int(tok)
    if value < 1:
        raise ParseError(f"{what} must be a positive integer, not {tok}", span=_tok_span(tok))
    return value


# ------------------------------------------------------------------------------------------------ transformer
@v_args(inline=True, meta=True)
class _ToAST(Transformer):
    """Tree to AST nodes; one method per rule or alias, each a line or two."""

    # subscripts -> tuples of items
    def bare(self, meta: Any, tok: Token) -> Piece:
        return (str(tok), False)

    def quoted(self, meta: Any, tok: Token) -> Piece:
        return (str(tok), True)

    def item(self, meta: Any, *pieces: Piece) -> Item:
        return pieces

    def sub(self, meta: Any, *parts: Piece | Item) -> tuple[Item, ...]:
        if len(parts) == 1 and isinstance(parts[0][0], str):  # a bare piece, no braces
            return ((parts[0],),)  # type: ignore[return-value]
        return parts  # type: ignore[return-value]

    # tensors
    def dim(self, meta: Any, word: Token, sub: tuple[Item, ...] | None) -> Dim:
        axes = _axes_of(sub or ())
        if word.type == "INT":
            return Dim(None, axes, size=_positive(word, "a dim's size"), span=_span(meta))
        return Dim(str(word), axes, span=_span(meta))

    def dims(self, meta: Any, *dims: Dim) -> tuple[Dim, ...]:
        return dims

    def tname(self, meta: Any, word: Token, sub: Token | None, *primes: Token) -> str:
        return str(word) + (f"_{sub}" if sub is not None else "") + "'" * len(primes)

    def head(self, meta: Any, *parts: Any) -> tuple[str | None, DType | None]:
        name = next((p for p in parts if isinstance(p, str) and not isinstance(p, Token)), None)
        dtype = next((dtype_named(str(p)) for p in parts if isinstance(p, Token) and p.type == "DTYPE_WORD"), None)
        return name, dtype

    def mark(self, meta: Any, kind: Token, sub: tuple[Item, ...]) -> tuple[str, tuple[str, ...]]:
        if str(kind) not in ("U", "I"):
            raise ParseError(
                f"inside {{...}} after a tensor write U_<axes> (unreduced) or I_<axes> (invariant), not {kind}_",
                span=_tok_span(kind),
            )
        return str(kind), _axes_of(sub)

    def reduction(self, meta: Any, *marks: tuple[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {"U": (), "I": ()}
        for kind, axes in marks:
            out[kind] += axes
        return out

    def tensor(self, meta: Any, head: tuple[str | None, DType | None], dims: tuple[Dim, ...], red: Any) -> Tensor:
        name, dtype = head
        red = red or {"U": (), "I": ()}
        return Tensor(name, dims, red["U"], red["I"], dtype, span=_span(meta))

    # products
    def product_op(self, meta: Any, sub: tuple[Item, ...] | None) -> tuple[tuple[str, ...] | None, bool]:
        names = [text for item in sub or () for text, _ in item]
        local = LOCAL in names
        contract = tuple(n for n in names if n != LOCAL)
        return (contract or None), local

    def product(self, meta: Any, left: Any, op: tuple[tuple[str, ...] | None, bool], right: Any) -> Product:
        return Product(left, right, op[0], op[1], span=_span(meta))

    # collectives
    def coll_head(self, meta: Any, word: Token, sub: tuple[Item, ...]) -> tuple[Op, tuple[str, ...], str | None]:
        op = Op(str(word))
        if op.takes_dim and len(sub) >= 2:
            target = sub[-1]
            if len(target) != 1:
                raise ParseError(f"the target dim of {op.value} is one name", span=_span(meta))
            return op, _axes_of(sub[:-1]), target[0][0]
        return op, _axes_of(sub), None

    def collective(self, meta: Any, head: tuple[Op, tuple[str, ...], str | None], arg: Any) -> Collective:
        op, axes, dim = head
        return Collective(op, axes, arg, dim, span=_span(meta))

    def colon_arrow(self, meta: Any, head: Any, arg: Any, result: Tensor) -> Arrow:
        return Arrow(self.collective(meta, head, arg), result, span=_span(meta))

    def stackrel(self, meta: Any, arg: Any, head: Any, result: Tensor) -> Arrow:
        return Arrow(self.collective(meta, head, arg), result, span=_span(meta))

    def arrow(self, meta: Any, expr: Any, result: Tensor) -> Arrow:
        return Arrow(expr, result, span=_span(meta))

    # program
    def binding(self, meta: Any, name: Token, value: Token) -> tuple[str, int, Span | None]:
        return str(name), _positive(value, f"the size of {name}"), _span(meta)

    def mesh_decl(self, meta: Any, *bindings: tuple[str, int, Span | None]) -> MeshDecl:
        seen: set[str] = set()
        for name, _, span in bindings:
            if name in seen:
                raise ParseError(f"mesh axis {name} is declared twice", span=span)
            seen.add(name)
        return MeshDecl(tuple((n, v) for n, v, _ in bindings), span=_span(meta))

    def where_clause(self, meta: Any, *bindings: tuple[str, int, Span | None]) -> list[tuple[str, int, Span | None]]:
        return list(bindings)

    def stmt_where(self, meta: Any, statement: Statement, where: list[Any]) -> tuple[Statement, list[Any]]:
        return statement, where

    def start(self, meta: Any, *lines: Any) -> Program:
        statements: list[Statement] = []
        mesh: MeshDecl | None = None
        sizes: dict[str, int] = {}
        for line in lines:
            if line is None:
                continue
            if isinstance(line, tuple) and len(line) == 2 and isinstance(line[1], list):
                statement, where = line
                statements.append(statement)
                _bind(sizes, where)
            elif isinstance(line, list):
                _bind(sizes, line)
            elif isinstance(line, MeshDecl):
                if mesh is not None:
                    raise ParseError("a program declares its mesh at most once", span=line.span)
                mesh = line
            else:
                statements.append(line)
        return Program(tuple(statements), mesh, tuple(sizes.items()), span=_span(meta))

    def tensor_start(self, meta: Any, tensor: Tensor) -> Tensor:
        return tensor

    def statement_start(self, meta: Any, statement: Statement) -> Statement:
        return statement


def _bind(sizes: dict[str, int], bindings: list[tuple[str, int, Span | None]]) -> None:
    for name, value, span in bindings:
        if sizes.setdefault(name, value) != value:
            raise ParseError(f"{name} is bound twice, to {sizes[name]} and to {value}", span=span)


_TRANSFORMER = _ToAST()


# ------------------------------------------------------------------------------------------------ fast path
# lark's own route is parse -> Tree (propagate_positions) -> _ToAST.transform; most of its time goes to
# building Trees and metas and to the Transformer's per-node dispatch. The fast path below drives the same
# LALR tables and the same contextual lexers (lark's compiled per-state regexes), and calls _ToAST's
# functions straight at each reduction, computing spans exactly as propagate_positions does (a node spans
# its first to its last raw child; a rule inlined by `?` widens only its container). Whenever anything is
# off the plain path (a lexing or parsing error, a builder raising, a case it does not model, a long text)
# it gives up and the lark route runs, so errors and their order are lark's, unchanged.
_FAST_MAX_TOKENS = 400  # deeper trees go through lark's recursive Transformer as before ("nested too deeply")


class _GiveUp(Exception):
    """The fast path cannot vouch for this text; parse it the lark way."""


def _no_builder(*args: Any) -> Any:
    raise _GiveUp("a rule without a _ToAST method")  # lark would leave a Tree here


class _Fast:
    """Parse tables, lexers and per-rule reducers taken from one built lark parser."""

    def __init__(self, lark: Lark) -> None:
        from lark.lexer import ContextualLexer
        from lark.parse_tree_builder import maybe_create_child_filter
        from lark.parsers.lalr_analysis import Shift

        frontend = lark.parser
        lexer = frontend.lexer
        if not isinstance(lexer, ContextualLexer) or lark.options.postlex is not None:
            raise _GiveUp("unsupported lexer")
        table = frontend.parser.parser.parse_table
        self.start_states = table.start_states
        self.end_states = table.end_states
        # per parser state, built on first use as lark does (compiling all of them costs ~50 ms at start-up):
        # (compiled alternations, ignored types, newline types, token callbacks)
        self.basic = lexer.lexers
        self.lexers: dict[int, tuple[list[Any], frozenset[str], frozenset[str], dict[str, Any]]] = {}
        builders = {name: getattr(vars(_ToAST)[name], "base_func", None) for name in vars(_ToAST)}
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
        transformer = _TRANSFORMER
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
                    raise _GiveUp("lexing error")
                value, type_ = m.group(0), m.lastgroup
                start_pos, start_line, column = pos, line, pos - line_start + 1
                pos += len(value)
                if type_ in newlines and "\n" in value:
                    line += value.count("\n")
                    line_start = start_pos + value.rindex("\n") + 1
                if type_ in ignore:
                    if type_ in callbacks:
                        raise _GiveUp("callback on an ignored terminal")
                    continue
                token = Token(type_, value, start_pos, start_line, column, line, pos - line_start + 1, pos)
                if type_ in callbacks:
                    token = callbacks[type_](token)
                    if not isinstance(token, Token):
                        raise _GiveUp("token callback")
                count += 1
                if count > _FAST_MAX_TOKENS:
                    raise _GiveUp("long text")
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
                    raise _GiveUp("syntax error")
                if is_shift:
                    if is_end:
                        raise _GiveUp("shift at the end")
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
                        raise _GiveUp("a `?rule` whose one child is spliced or a placeholder")
                    kept = raw[include[0][0]]
                    if kept[3]:  # a token stays where it is
                        entry = kept
                    elif kept[0] is None:
                        entry = (None, None, None, False)
                    elif first is None:
                        entry = kept
                    elif kept[1] is None:
                        raise _GiveUp("empty node inlined")  # lark would set its own span late
                    else:
                        entry = (kept[0], first, last_end, False)
                elif build is None:
                    entry = (children, first, last_end, False)
                else:
                    span = Span(first, last_end) if first is not None else None
                    try:
                        node = build(transformer, span, *children)
                    except Exception as exc:  # lark reports these after the whole parse: let it
                        raise _GiveUp("builder raised") from exc
                    entry = (node, first, last_end, False)
                new_state = states[state_stack[-1]][origin][1]
                state_stack.append(new_state)
                value_stack.append(entry)
                if is_end and new_state == end_state:
                    return entry[0]


@lru_cache(maxsize=1)
def _fast() -> _Fast | None:
    try:
        return _Fast(_parser())
    except Exception:  # noqa: BLE001 - a lark whose internals differ from 1.x's: keep lark's own route
        return None


# ------------------------------------------------------------------------------------------------ errors
# How expected terminals read in a message; None hides one (its plain spelling is listed already).
_DESCRIBE: dict[str, str | None] = {
    "NAME": "a name",
    "INT": "a number",
    "PRIME": "a prime (')",
    "OP_WORD": "a collective (AllGather, ReduceScatter, ...)",
    "DTYPE_WORD": "a dtype (bf16, fp32, ...)",
    "_MESH": "'mesh'",
    "_WHERE": "'where'",
    "_FONT": None,
    "_ARROW": "'->'",
    "_DOT": "'·'",
    "_STACKREL": None,
    "_SEP": "a new line or ';'",
    "$END": "the end of the input",
}

# Common mistakes: an error whose parser state and offending token kind match those of one of these
# inputs gets the label (lark's match_examples, keyed exactly on the token kind).
_MISTAKES: dict[str, list[str]] = {
    "write a product with '·', '*' or '@', or put the two expressions on separate lines": [
        "A[I] B[I]", "A[I] (B[I])", "A[I] -> B[I] C[I]", "A[I] [J]", "A[I] -> B[I] (C[I])", "A[I] AllGather_X(B[I])",
    ],
    "a collective needs its mesh axes as a subscript, e.g. AllGather_X(A[I_X, J])": [
        "AllGather(A[I])", "AllGather A[I]", "AllGather[I]", "AllGather: A[I]",
    ],
    "unreduced and invariant axes are written {U_X} or {I_X}": ["A[I]{X}", "A[I]{X, Y}"],
    "a tensor needs at least one dim inside [...]": ["A[]", "[]"],
    "dims are separated by ','": ["A[I J]", "A[I_X J]", "A[I_{X} J]", "A[I 1]", "A[I_X 1]"],
}  # fmt: skip


@cache
def _mistake_index(start: str) -> dict[tuple[int, str], str]:
    """(parser state, token kind) -> label, from the failures of the _MISTAKES examples."""
    index: dict[tuple[int, str], str] = {}
    for label, examples in _MISTAKES.items():
        for example in examples:
            try:
                _parser().parse(example, start=start)
            except UnexpectedToken as err:
                index.setdefault((_state_key(err.state), err.token.type), label)
    return index


def _state_key(state: Any) -> int:
    """The LALR state number, whether lark reports the number or a parser state object."""
    return state if isinstance(state, int) else int(getattr(state, "position", -1))


def _describe(names: Iterable[str]) -> str:
    parser = _parser()
    words: list[str] = []
    for name in sorted(names, key=lambda n: (n == "$END", n)):
        if name in _DESCRIBE:
            word = _DESCRIBE[name]
        else:
            try:
                value = parser.get_terminal(name).pattern.value
            except KeyError:
                value = name
            word = None if value.startswith("\\") and len(value) > 1 else f"'{value}'"
        if word is not None and word not in words:
            words.append(word)
    if not words:
        return "something else"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _previous_word(text: str, pos: int) -> str | None:
    """The word or symbol just before ``pos`` (skipping blanks), for 'after ...' in messages."""
    before = text[:pos].rstrip(" \t")
    if not before:
        return None
    m = re.search(r"(\\?[A-Za-z0-9]+|->|\S)\Z", before)
    return m.group(0) if m else None


def _token_text(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the input"
    if tok.type == "_SEP":
        return "the end of the line" if str(tok) == "\n" else f"'{tok}'"
    return f"'{tok}'"


def _from_lark(err: UnexpectedInput, text: str, start: str) -> ParseError:
    label: str | None = None
    if isinstance(err, UnexpectedToken):
        label = _mistake_index(start).get((_state_key(err.state), err.token.type))
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream
        cmd = re.match(r"\\[A-Za-z]+", text[pos:])
        if cmd:
            message = f"unknown LaTeX command {cmd.group(0)}"
            span = Span(pos, pos + cmd.end())
        else:
            message = f"unexpected character {text[pos]!r}; expected {_describe(err.allowed or ())}"
            span = Span(pos, pos + 1)
    elif isinstance(err, UnexpectedToken):
        tok = err.token
        pos = tok.start_pos if tok.type != "$END" else len(text)
        pos = pos if pos is not None else len(text)
        after = _previous_word(text, pos)
        where = f" after '{after}'" if after else ""
        message = f"expected {_describe(err.accepts or err.expected)}{where}, found {_token_text(tok)}"
        span = Span(pos, max(pos, tok.end_pos or pos) if tok.type != "$END" else pos)
    elif isinstance(err, UnexpectedEOF):
        message = f"unexpected end of the input; expected {_describe(err.expected)}"
        span = Span(len(text), len(text))
    else:  # pragma: no cover - lark has no other UnexpectedInput kinds
        message, span = str(err).splitlines()[0], Span(0, 0)
    if label:
        message = f"{message} ({label})"
    return ParseError(message, span=span, source=text)


# ------------------------------------------------------------------------------------------------ API
def _run(text: object, kind: str) -> Any:
    if not isinstance(text, str):
        raise UsageError(f"parse takes text (a str), not {type(text).__name__}")
    start = _START[kind]
    fast = _fast()
    if fast is not None:
        try:
            return fast.parse(text, start)
        except Exception:  # noqa: BLE001 - _GiveUp, or anything else: lark's route below is the reference
            pass
    try:
        tree = _parser().parse(text, start=start)
        return _TRANSFORMER.transform(tree)
    except UnexpectedInput as err:
        raise _from_lark(err, text, start) from None
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, ShardalgError):
            raise inner.with_source(text) from None
        raise ParseError(f"not in the notation: {inner}", span=Span(0, len(text)), source=text) from None
    except RecursionError:
        raise ParseError("the expression is nested too deeply", span=Span(0, len(text)), source=text) from None


def parse(text: str) -> Program:
    """Parse a program: statements separated by newlines or ``;``, an optional ``mesh`` line and
    ``where`` bindings. Always returns a :class:`Program` with ``source`` set to ``text``."""
    program: Program = _run(text, "program")
    return Program(program.statements, program.mesh, program.sizes, span=program.span, source=text)


def parse_tensor(text: str) -> Tensor:
    """Parse one tensor: ``A[I_X, J]{U_Y}``, ``bf16[B_X, D]``, ``\\mathbf{A}[I_{XY}, J]``."""
    tensor: Tensor = _run(text, "tensor")
    return tensor


def parse_statement(text: str) -> Statement:
    """Parse one statement: an expression, or ``expr -> tensor``."""
    statement: Statement = _run(text, "statement")
    return statement

