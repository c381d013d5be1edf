"""Text to AST: load ``grammar/shardalg.lark`` once, parse with LALR, transform to :mod:`shardalg.syntax`.

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

from .errors import ParseError, ShardalgError, Span, UsageError
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

