"""From the parse tree to the AST: the builders (one small method per grammar alias), as a transformer
(:func:`transformer`) over the generated parser's trees (:mod:`.lalr`); and the reading of subscripts.

How subscripts read (the one rule for every ``_`` that holds mesh axes): a bare word of capital letters
is one axis per letter (``I_XY``, ``I_{XY}``: X then Y); any other word is one axis (``I_{data}``,
``I_X1``); ``\\text{DP}`` is always one axis; commas separate items (``I_{data,model}``). For
ReduceScatter, AllToAll and Slice the last comma item, when there are two or more, is the target dim; a
Shift's last item is its signed offset (``Shift_{X,+1}``), and a signed number is an offset nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from shardalg import limits
from shardalg.cache import Kind, memoized
from shardalg.errors import ParseError, Span

from .lalr import Transformer, v_args
from .op import ROUTES
from .syntax import (
    FLAGS,
    GRADIENT_FLAGS,
    Apply,
    Arrow,
    Collective,
    Dim,
    DType,
    MeshDecl,
    Op,
    Product,
    Program,
    Role,
    Roles,
    Statement,
    Tensor,
    dtype_named,
    flags_of,
)

_OFFSET_DIGITS = 18  # longer offsets are refused before int() sees them
LOCAL = "LOCAL"  # the contraction subscript that marks a local (unreduced) product: A ·_LOCAL B
_LETTER_AXES = re.compile(r"[A-Z]{2,}")
# A terminal as the builders see it: the parser's Token, a str with ``type``, ``start_pos`` and ``end_pos``.
# Names the builders make are plain str.
Token = Any

# ------------------------------------------------------------------------------------------------ subscripts
# A piece of a subscript is (text, quoted); quoted pieces came from \text{...} and are never split.
Piece = tuple[str, bool]
Item = tuple[Piece, ...]


class Offset(int):
    """A signed integer subscript item (a Shift's offset), with where it was written."""

    span: Span

    def __new__(cls, value: int, span: Span) -> Offset:
        out = super().__new__(cls, value)
        out.span = span
        return out


def split_axes(text: str, quoted: bool = False) -> tuple[str, ...]:
    """The axes one subscript word names: ``"XY"`` is X, Y; ``"data"`` and quoted words are one axis."""
    if not quoted and _LETTER_AXES.fullmatch(text):
        return tuple(text)
    return (text,)


def _axes_of(items: Iterable[Item | Offset]) -> tuple[str, ...]:
    for item in items:
        if isinstance(item, Offset):
            raise ParseError(
                "a signed number in a subscript is a Shift's offset, not a mesh axis", span=item.span
            )
    return tuple(a for item in items for text, quoted in item for a in split_axes(text, quoted))  # type: ignore[union-attr]


def _span(meta: Any) -> Span | None:
    """A node's span, from the tree's meta (None for a node that covers no text)."""
    if getattr(meta, "empty", True):
        return None
    return Span(meta.start_pos, meta.end_pos)


def _tok_span(tok: Token) -> Span:
    return Span(tok.start_pos or 0, tok.end_pos or (tok.start_pos or 0) + len(tok))


def _positive(tok: Token, what: str) -> int:
    value = limits.require_digits(str(tok), what, span=_tok_span(tok))
    if value < 1:
        raise ParseError(f"{what} must be a positive integer, not {tok}", span=_tok_span(tok))
    return value


@dataclass(frozen=True)
class RoleLine:
    """One role declaration as parsed: ``params W_in, W_out`` (role and names), ``tokens B, T`` or
    ``layers L``; ``start`` gathers them into the program's :class:`Roles`."""

    kind: str  # "role", "tokens" or "layers"
    role: Role | None
    values: tuple[str | int, ...]
    span: Span | None


Head = tuple[Op, tuple[str, ...], str | None, int | None]  # a collective's op, axes, target dim, offset
# a function's op, the dim it works along, a scale's factor, its flags (``causal``, ``flash``), a block of
# attention's ring offset
FnHead = tuple[Op, str | None, Fraction | None, tuple[str, ...], int | None]


@dataclass(frozen=True)
class Keyed:
    """A keyed setting in a function's subscript (``k=2``, ``cf=1.25``): its key, its text and its span."""

    key: str
    value: str
    span: Span | None


_ROUTE_KEYS = ("k", "cf")  # a routing's settings, in this order: top-k, then the capacity factor


def _route_head(op: Op, items: tuple[Any, ...], span: Span | None) -> FnHead:
    """A routing's head: its capacity dim (the slots dispatch makes and combine reads), k (a whole number of
    experts a token goes to) and cf (the capacity factor, a positive decimal), as the step's offset and factor."""
    example = f"{op.value}_{{C,k=2,cf=1.25}}(...)"
    if not items or isinstance(items[0], Keyed) or items[0].type != "NAME":
        raise ParseError(
            f"{op.value}'s subscript names the capacity dim first, then k and cf: {example}", span=span
        )
    keyed = items[1:]
    if [x.key if isinstance(x, Keyed) else str(x) for x in keyed] != list(_ROUTE_KEYS):
        raise ParseError(
            f"after its dim, {op.value}'s subscript takes k= (top-k) and cf= (capacity factor), each once and "
            f"in that order: {example}",
            span=next((x.span for x in keyed if isinstance(x, Keyed) and x.key not in _ROUTE_KEYS), span),
        )
    k, cf = keyed
    if not k.value.isdigit() or int(k.value) < 1 or len(k.value) > _OFFSET_DIGITS:
        raise ParseError(
            f"k is how many experts each token goes to, a whole number >= 1, not {k.value}", span=k.span
        )
    if cf.value.startswith("-") or Fraction(cf.value) == 0 or len(cf.value) > _OFFSET_DIGITS:
        raise ParseError(
            f"cf is the capacity factor, a positive decimal (1.25: each expert holds 1.25x its even share), "
            f"not {cf.value}",
            span=cf.span,
        )
    return op, str(items[0]), Fraction(cf.value), (), int(k.value)


def _is_token(x: object) -> bool:
    return isinstance(x, str) and type(x) is not str


# ------------------------------------------------------------------------------------------------ builders
class Builders:
    """Parse to AST nodes; one method per rule or alias, each a line or two. Each takes the node's meta
    (its span) and the rule's children."""

    # subscripts -> tuples of items
    def bare(self, meta: Any, tok: Token) -> Piece:
        return (str(tok), False)

    def quoted(self, meta: Any, tok: Token) -> Piece:
        return (str(tok), True)

    def subaxis(self, meta: Any, name: Token, pre: Token, size: Token) -> Piece:
        """``Y:(1)2``: one axis name (quoted, so it is never split into letters), spelled as Shardy does."""
        digits = {"pre-size": pre, "size": size}
        for what, tok in digits.items():
            if len(str(tok)) > 9 or int(str(tok)) < 1:
                raise ParseError(
                    f"a sub-axis's {what} is a positive number of at most 9 digits", span=_tok_span(tok)
                )
        return (f"{name}:({int(str(pre))}){int(str(size))}", True)

    def item(self, meta: Any, *pieces: Piece) -> Item:
        return pieces

    def offset(self, meta: Any, tok: Token) -> Offset:
        digits = str(tok).lstrip("+-")
        if len(digits) > _OFFSET_DIGITS:
            raise ParseError(
                f"an offset of {len(digits)} digits; a shift moves by at most {_OFFSET_DIGITS} digits' "
                "worth (only its remainder modulo the axis size matters)",
                span=_tok_span(tok),
            )
        return Offset(int(str(tok)), _tok_span(tok))

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
        name = next((p for p in parts if type(p) is str), None)
        dtype = next((dtype_named(str(p)) for p in parts if _is_token(p) and p.type == "DTYPE_WORD"), None)
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

    def tensor(
        self, meta: Any, head: tuple[str | None, DType | None], dims: tuple[Dim, ...], red: Any
    ) -> Tensor:
        name, dtype = head
        red = red or {"U": (), "I": ()}
        return Tensor(name, dims, red["U"], red["I"], dtype, span=_span(meta))

    # products
    def product_op(
        self, meta: Any, sub: tuple[Item | Offset, ...] | None
    ) -> tuple[tuple[str, ...] | None, bool]:
        for item in sub or ():
            if isinstance(item, Offset):
                raise ParseError(
                    "a signed number in a subscript is a Shift's offset; a product's subscript "
                    "names contracted dims or LOCAL",
                    span=item.span,
                )
        names = [text for item in sub or () for text, _ in item]  # type: ignore[union-attr]
        local = LOCAL in names
        contract = tuple(n for n in names if n != LOCAL)
        return (contract or None), local

    def product(self, meta: Any, left: Any, op: tuple[tuple[str, ...] | None, bool], right: Any) -> Product:
        return Product(left, right, op[0], op[1], span=_span(meta))

    # collectives
    def coll_head(self, meta: Any, word: Token, sub: tuple[Item | Offset, ...]) -> Head:
        op = Op(str(word))
        offsets = [i for i in sub if isinstance(i, Offset)]
        if op.takes_offset:
            if not offsets or not isinstance(sub[-1], Offset) or len(offsets) > 1 or len(sub) < 2:
                raise ParseError(
                    f"{op.value} names one mesh axis and then a signed offset, e.g. {op.value}_{{X,+1}}",
                    span=offsets[-1].span if offsets else _span(meta),
                )
            if sub[-1] == 0:
                raise ParseError(
                    f"{op.value} by 0 moves nothing: write a nonzero offset, e.g. {op.value}_{{X,+1}}",
                    span=sub[-1].span,
                )
            return op, _axes_of(sub[:-1]), None, int(sub[-1])  # type: ignore[arg-type]
        if offsets:
            raise ParseError(
                f"a signed number in a subscript is a Shift's offset; {op.value} takes mesh axes"
                + (" and a target dim" if op.takes_dim else ""),
                span=offsets[0].span,
            )
        items: tuple[Item, ...] = sub  # type: ignore[assignment]
        if op.takes_dim and len(items) >= 2:
            target = items[-1]
            if len(target) != 1:
                raise ParseError(f"the target dim of {op.value} is one name", span=_span(meta))
            return op, _axes_of(items[:-1]), target[0][0], None
        return op, _axes_of(items), None, None

    def collective(self, meta: Any, head: Head, arg: Any) -> Collective:
        op, axes, dim, offset = head
        return Collective(op, axes, arg, dim, offset, span=_span(meta))

    def colon_arrow(self, meta: Any, head: Any, arg: Any, result: Tensor) -> Arrow:
        return Arrow(self.collective(meta, head, arg), result, span=_span(meta))

    def stackrel(self, meta: Any, arg: Any, head: Any, result: Tensor) -> Arrow:
        return Arrow(self.collective(meta, head, arg), result, span=_span(meta))

    # functions and elementwise operators
    def fn_sub(self, meta: Any, *items: Token) -> tuple[Token, ...]:
        return items

    def keyed(self, meta: Any, key: Token, value: Token) -> Keyed:
        return Keyed(str(key), str(value), _span(meta))

    def fn_head(self, meta: Any, word: Token, sub: tuple[Token, ...] | None) -> FnHead:
        op = Op(str(word))
        span = _span(meta)
        items = sub or ()
        if op in ROUTES:
            return _route_head(op, items, span)
        keyed = next((x for x in items if isinstance(x, Keyed)), None)
        if keyed is not None:
            raise ParseError(
                f"{op.value} takes no keyed setting ({keyed.key}=); dispatch and combine take k= and cf=",
                span=keyed.span or span,
            )
        if op is Op.SCALE:
            if len(items) != 1 or items[0].type != "DECIMAL":
                raise ParseError(
                    "scale takes its factor as a subscript, a decimal: scale_{0.125}(X[B, D])",
                    span=span,
                )
            factor = Fraction(str(items[0]))
            if factor == 0 or len(str(items[0])) > _OFFSET_DIGITS:
                raise ParseError(f"a scale's factor is a nonzero decimal, not {items[0]}", span=span)
            return op, None, factor, (), None
        offset = None
        if op.takes_offset and items and items[-1].type == "DECIMAL" and str(items[-1]).isdigit():
            if len(str(items[-1])) > _OFFSET_DIGITS:
                raise ParseError(f"{op.value}'s offset has at most {_OFFSET_DIGITS} digits", span=span)
            offset, items = int(str(items[-1])), items[:-1]
        elif op.takes_offset:
            raise ParseError(
                f"{op.value}'s subscript ends in the devices its K and V came round the ring: "
                f"{op.value}_{{S,0}}(Q[..], K[..], V[..])",
                span=span,
            )
        if op is Op.RENAME:
            if len(items) != 2 or any(x.type == "DECIMAL" for x in items) or str(items[0]) == str(items[1]):
                raise ParseError(
                    "rename names the dim, then its new name: rename_{T,S}(K[B, T, N]) -> K2[B, S, N]",
                    span=span,
                )
            return op, str(items[0]), None, (str(items[1]),), None
        if op.takes_dim:
            words = [str(x) for x in items[1:]]
            allowed = flags_of(op)
            if not items or any(x.type == "DECIMAL" for x in items) or (words and not allowed):
                raise ParseError(
                    f"{op.value} names the one dim it works along: {op.value}_D(X[B, D])", span=span
                )
            if op is Op.ATTEND_D and (
                len([w for w in words if w in GRADIENT_FLAGS]) != 1
                or any(w not in allowed for w in words)
                or words != sorted(set(words), key=allowed.index)
            ):
                raise ParseError(
                    f"{op.value}'s subscript names its dim, causal (optional) and the one gradient it writes "
                    f"(dq, dk or dv), then the offset: {op.value}_{{S,causal,dk,1}}(Q, K, V, O, dO)",
                    span=span,
                )
            if any(w not in allowed for w in words) or words != sorted(set(words), key=allowed.index):
                raise ParseError(
                    f"after its dim, {op.value}'s subscript takes the flags {' and '.join(FLAGS)}, each once "
                    f"and in that order: {op.value}_{{S,causal}}(...), {op.value}_{{S,causal,flash}}(...)",
                    span=span,
                )
            return op, str(items[0]), None, tuple(words), offset
        if items:
            raise ParseError(
                f"{op.value} is elementwise and takes no subscript: {op.value}(X[B, D])", span=span
            )
        return op, None, None, (), None

    def apply(self, meta: Any, head: FnHead, *args: Any) -> Apply:
        op, dim, factor, flags, offset = head
        if op is Op.ATTEND and len(args) not in (3, 4):
            raise ParseError(
                f"attend takes Q, K, V and the state so far (optional), not {len(args)} operands",
                span=_span(meta),
            )
        if op is Op.ATTEND_D and len(args) != 5:
            raise ParseError(
                f"attend' takes Q, K, V, the forward's O and its cotangent dO, not {len(args)} operands",
                span=_span(meta),
            )
        if op is not Op.ATTEND and len(args) != op.operands:
            want = "one operand" if op.operands == 1 else f"{op.operands} operands"
            raise ParseError(f"{op.value} takes {want}, not {len(args)}", span=_span(meta))
        return Apply(op, args, dim, factor, flags, offset, span=_span(meta))

    def add(self, meta: Any, left: Any, right: Any) -> Apply:
        return Apply(Op.ADD, (left, right), span=_span(meta))

    def subtract(self, meta: Any, left: Any, right: Any) -> Apply:
        return Apply(Op.SUBTRACT, (left, right), span=_span(meta))

    def multiply(self, meta: Any, left: Any, right: Any) -> Apply:
        return Apply(Op.MULTIPLY, (left, right), span=_span(meta))

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

    # role declarations
    def role_word(self, meta: Any, word: Token) -> Role:
        return Role(str(word))

    def role_names(self, meta: Any, role: Role, *names: str) -> RoleLine:
        return RoleLine("role", role, names, _span(meta))

    def token_dims(self, meta: Any, *dims: Token) -> RoleLine:
        for d in dims:
            if d.type == "INT":
                raise ParseError(
                    f"tokens takes dim names (tokens B, T), not the number {d}", span=_tok_span(d)
                )
        return RoleLine("tokens", None, tuple(str(d) for d in dims), _span(meta))

    def layer_count(self, meta: Any, word: Token) -> RoleLine:
        value: str | int = _positive(word, "the layer count") if word.type == "INT" else str(word)
        return RoleLine("layers", None, (value,), _span(meta))

    def where_clause(
        self, meta: Any, *bindings: tuple[str, int, Span | None]
    ) -> list[tuple[str, int, Span | None]]:
        return list(bindings)

    def stmt_where(self, meta: Any, statement: Statement, where: list[Any]) -> tuple[Statement, list[Any]]:
        return statement, where

    def start(self, meta: Any, *lines: Any) -> Program:
        statements: list[Statement] = []
        mesh: MeshDecl | None = None
        sizes: dict[str, int] = {}
        roles: list[RoleLine] = []
        for line in lines:
            if line is None:
                continue
            if isinstance(line, RoleLine):
                roles.append(line)
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
        return Program(tuple(statements), mesh, tuple(sizes.items()), _roles(roles), span=_span(meta))

    def tensor_start(self, meta: Any, tensor: Tensor) -> Tensor:
        return tensor

    def statement_start(self, meta: Any, statement: Statement) -> Statement:
        return statement


def _bind(sizes: dict[str, int], bindings: list[tuple[str, int, Span | None]]) -> None:
    for name, value, span in bindings:
        if sizes.setdefault(name, value) != value:
            raise ParseError(f"{name} is bound twice, to {sizes[name]} and to {value}", span=span)


def _roles(lines: list[RoleLine]) -> Roles | None:
    """The program's Roles from its role lines; a ParseError for a name declared twice (a tensor has one
    role), a dim listed twice in ``tokens``, or a second ``layers``."""
    if not lines:
        return None
    named: dict[Role, list[str]] = {role: [] for role in Role}
    seen: dict[str, Role] = {}
    tokens: list[str] = []
    layers: str | int | None = None
    for line in lines:
        if line.kind == "layers":
            if layers is not None:
                raise ParseError(f"layers is declared twice ({layers} and {line.values[0]})", span=line.span)
            layers = line.values[0]
        elif line.kind == "tokens":
            for d in line.values:
                if d in tokens:
                    raise ParseError(f"the token dim {d} is listed twice", span=line.span)
                tokens.append(str(d))
        else:
            assert line.role is not None
            for name in line.values:
                if name in seen:
                    again = (
                        "twice"
                        if seen[name] is line.role
                        else f"as {seen[name].value} and as {line.role.value}"
                    )
                    raise ParseError(f"{name} is declared {again}: a tensor has one role", span=line.span)
                seen[str(name)] = line.role
                named[line.role].append(str(name))
    return Roles(*(tuple(named[role]) for role in Role), tuple(tokens), layers)


# Each rule's or alias's builder by name: what the transformer wraps.
BUILDERS: dict[str, Callable[..., Any]] = {
    name: fn for name, fn in vars(Builders).items() if not name.startswith("_")
}


@memoized(Kind.TABLE)
def transformer() -> Any:
    """The parser's Transformer over the builders (a parse tree to the AST), made on first use."""
    return v_args(inline=True, meta=True)(type("ToAST", (Transformer,), dict(BUILDERS)))()
