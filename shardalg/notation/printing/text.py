"""The canonical ASCII notation: ``A[I_XY, J]{U_Z}``, ``A[I, J_X] *_LOCAL B[J_X, K] -> C[I, K]{U_X}``,
``ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]``, ``Shift_{X,+1}(A[I_X, J])``.

Choices (each parses back to the same AST, see ``grammar/shardalg.lark``):
products are `` * `` (``*_D``, ``*_{D,E}``, ``*_LOCAL`` with a subscript), arrows `` -> ``, a collective's
argument is always parenthesized, a dtype follows the name after ``: `` (``A: bf16[B_X, D]``), axes that are
single capital letters print run together (``I_XY``), any other axis list prints in the comma form
(``I_{data,model}``), a program prints ``mesh`` first and ``where`` last, and a plan step's reason follows
as a ``  # comment``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from .base import Node, Printer
from .symbology import ASCII, GLYPHS, INFIX, PRECEDENCE, ROLE_KEYWORDS, precedence

__all__ = ["TextPrinter", "axes_subscript", "text"]

_BARE = re.compile(r"[A-Z]+|[A-Za-z0-9]\Z")  # subscripts written without braces: _X, _XY, _LOCAL, _D
_CAPITALS = re.compile(r"[A-Z]{2,}\Z")
ROUTED = ("dispatch", "combine")  # the functions whose subscript is a dim, k= and cf= (a MoE routing)


def _letter_axes(axes: tuple[str, ...]) -> bool:
    """Axes that print run together: each one capital letter (``XY`` is X then Y)."""
    return bool(axes) and all(len(a) == 1 and "A" <= a <= "Z" for a in axes)


class TextPrinter(Printer):
    """ASCII text. Subclasses change the glyph column (``style``) and the word hooks."""

    style: ClassVar[int] = ASCII
    _default_settings: ClassVar[dict[str, Any]] = {"reasons": True}

    def g(self, name: str) -> str:
        return GLYPHS[name][self.style]

    # ------------------------------------------------------------------ words (hooks for LaTeX)
    def _tensor_name(self, name: str) -> str:
        return name

    def _dim_word(self, name: str) -> str:
        return name

    def _axis_word(self, name: str) -> str:
        """One axis as one comma item: a word of capitals would be read as one axis per letter."""
        return rf"\text{{{name}}}" if _CAPITALS.fullmatch(name) else name

    def _dtype(self, dtype: Any) -> str:
        return dtype.value

    def _op(self, name: str) -> str:
        return name

    def _sub(self, items: list[str]) -> str:
        """``_X``, ``_XY``, ``_LOCAL`` bare; any other word or list in braces: ``_{data}``, ``_{X,K}``."""
        if len(items) == 1 and _BARE.fullmatch(items[0]):
            return "_" + items[0]
        return self.g("sub_open") + self.g("item_sep").join(items) + self.g("sub_close")

    def _axes_items(self, axes: tuple[str, ...], *, one_item: bool = False) -> list[str]:
        """The subscript items naming ``axes``; ``one_item`` keeps them in one item (no commas), for a
        ReduceScatter, AllToAll or Slice without a target dim, whose last comma item would be the dim."""
        if _letter_axes(axes):
            return ["".join(axes)]
        words = [self._axis_word(a) for a in axes]
        return [self.g("piece_sep").join(words)] if one_item else words

    def _axes_sub(self, axes: tuple[str, ...]) -> str:
        return self._sub(self._axes_items(axes))

    # ------------------------------------------------------------------ nodes
    def _print_Dim(self, dim: Node) -> str:
        word = self._dim_word(dim.name) if dim.name is not None else str(dim.size)
        return word + (self._axes_sub(dim.axes) if dim.axes else "")

    def _print_Tensor(self, t: Node) -> str:
        head = self._tensor_name(t.name) if t.name is not None else ""
        if t.dtype is not None:
            head = (head + self.g("colon") if head else "") + self._dtype(t.dtype)
        dims = self.g("sep").join(self._print(d) for d in t.dims)
        out = head + self.g("dims_open") + dims + self.g("dims_close")
        marks = [
            self.g(kind) + self._axes_sub(axes)
            for kind, axes in (("unreduced", t.unreduced), ("invariant", t.invariant))
            if axes
        ]
        if marks:
            out += self.g("marks_open") + self.g("sep").join(marks) + self.g("marks_close")
        return out

    def _operand(self, node: Node, strict: bool, level: str = "Product") -> str:
        """A product's (or infix operator's) operand, parenthesized when it binds less tightly than ``level``
        (``strict``: also when equal)."""
        inner = self._print(node)
        p, q = precedence(node), PRECEDENCE[level]
        if p < q or (strict and p == q):
            return self.g("paren_open") + inner + self.g("paren_close")
        return inner

    def _print_Product(self, p: Node) -> str:
        items = ([self.g("local")] if p.local else []) + [self._dim_word(d) for d in p.contract or ()]
        op = self.g("product_tight") + self._sub(items) if items else None
        left, right = self._operand(p.left, strict=False), self._operand(p.right, strict=True)
        return f"{left} {op} {right}" if op else left + self.g("product") + right

    def _print_Collective(self, c: Node) -> str:
        if c.dim is not None:
            items = self._axes_items(c.axes) + [self._dim_word(c.dim)]
        elif c.offset is not None:  # a Shift: the axes, then the signed offset (Shift_{X,+1})
            items = self._axes_items(c.axes) + [f"{c.offset:+d}"]
        else:
            items = self._axes_items(c.axes, one_item=c.op.takes_dim)
        arg = self.g("paren_open") + self._print(c.arg) + self.g("paren_close")
        return self._op(c.op.value) + self._sub(items) + arg

    def _fn(self, name: str) -> str:
        return name

    @staticmethod
    def _decimal(factor: Any) -> str:
        """A scale's factor as the decimal it was written as (the grammar takes decimals only)."""
        sign = "-" if factor < 0 else ""
        whole, rest = divmod(abs(factor.numerator), factor.denominator)
        digits = ""
        while rest and len(digits) < 40:
            rest *= 10
            d, rest = divmod(rest, factor.denominator)
            digits += str(d)
        return sign + (f"{whole}.{digits}" if digits else str(whole))

    def _flag(self, word: str) -> str:
        """A function's flag in its subscript (``causal``, ``flash``)."""
        return word

    def _print_Apply(self, a: Node) -> str:
        level = INFIX.get(a.op.value)
        if level is not None:
            left, right = a.operands
            lhs, rhs = self._operand(left, False, level), self._operand(right, True, level)
            return lhs + self.g(a.op.value) + rhs
        word = self._dim_word if a.to is not None else self._flag  # a rename's flag is a dim's new name
        items = [self._dim_word(a.dim), *(word(f) for f in a.flags)] if a.dim is not None else []
        if a.offset is not None:
            items.append(str(a.offset))
        if a.factor is not None:
            items = [self._decimal(a.factor)]
        if a.op.value in ROUTED:  # a routing: its new dim, then k and the capacity factor
            bind = self.g("bind")
            items = [self._dim_word(a.dim), f"k{bind}{a.offset}", f"cf{bind}{self._decimal(a.factor)}"]
        sub = self._sub(items) if items else ""
        args = self.g("sep").join(self._print(x) for x in a.operands)
        return self._fn(a.op.value) + sub + self.g("paren_open") + args + self.g("paren_close")

    def _print_Arrow(self, a: Node) -> str:
        return self._print(a.expr) + self._arrow() + self._print(a.result)

    def _arrow(self) -> str:
        return self.g("arrow")

    def _bindings(self, pairs: tuple[tuple[str, int], ...]) -> str:
        return self.g("sep").join(f"{name}{self.g('bind')}{value}" for name, value in pairs)

    def _print_MeshDecl(self, m: Node) -> str:
        return self.g("mesh") + self._bindings(m.axes)

    def _role_lines(self, roles: Node) -> list[str]:
        """``params W_in, W_out`` ... ``layers L``: one line per declared role, in a fixed order."""
        sep = self.g("sep")
        lines = [
            self.g(k) + sep.join(self._tensor_name(n) for n in getattr(roles, k))
            for k in ROLE_KEYWORDS
            if getattr(roles, k)
        ]
        if roles.tokens:
            lines.append(self.g("tokens") + sep.join(self._dim_word(d) for d in roles.tokens))
        if roles.layers is not None:
            count = roles.layers
            lines.append(self.g("layers") + (self._dim_word(count) if isinstance(count, str) else str(count)))
        return lines

    def _print_Roles(self, roles: Node) -> str:
        return self.g("line_sep").join(self._role_lines(roles))

    def _program_lines(self, prog: Node) -> list[str]:
        lines = [self._print(prog.mesh)] if prog.mesh is not None else []
        lines += self._role_lines(prog.roles) if prog.roles is not None else []
        lines += [self._print(s) for s in prog.statements]
        if prog.sizes:
            lines.append(self.g("where") + self._bindings(prog.sizes))
        return lines

    def _print_Program(self, prog: Node) -> str:
        return self.g("line_sep").join(self._program_lines(prog))

    def _reason(self, reason: str) -> str:
        if not reason or not self._settings["reasons"]:
            return ""
        return self.g("comment") + " ".join(reason.split()) + self.g("comment_end")

    def _print_Step(self, step: Node) -> str:
        return self._print(step.statement()) + self._reason(step.reason)

    def _print_Plan(self, plan: Node) -> str:
        return self.g("line_sep").join(self._print(s) for s in plan.steps)


def text(node: object, **settings: Any) -> str:
    """``node`` in the canonical ASCII notation."""
    return TextPrinter(**settings).doprint(node)


def axes_subscript(axes: tuple[str, ...], *, one_item: bool = False) -> str:
    """The subscript naming ``axes`` as a collective's step prints it (``_XY``, ``_{X:(1)2}``,
    ``_{data,model}``); ``one_item`` as for a ReduceScatter, AllToAll or Slice without its target dim."""
    printer = TextPrinter()
    return printer._sub(printer._axes_items(tuple(axes), one_item=one_item))
