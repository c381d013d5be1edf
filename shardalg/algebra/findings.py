"""What a legality check reports, and where: a finding is (message, span, fix), and the span points at the
offending part of a node (a dim ``J_X``, the ``{U_X}`` suffix, a collective's name and subscript).

The rules of :mod:`shardalg.algebra.legality` and :mod:`shardalg.algebra.product_rules` yield findings; the
table there turns them into violations (:class:`Violation`, one broken rule as it is reported).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from shardalg.errors import IllegalSharding, Span, render_caret
from shardalg.notation.printing import text
from shardalg.notation.printing.display import html_table, short
from shardalg.notation.syntax import Collective, Node, Tensor

from .context import Context
from .factors import Factor, factor_of, parent_of
from .mesh import Mesh

__all__ = [
    "Violation",
    "Violations",
    "Found",
    "CheckFn",
    "text_of",
    "slice_span",
    "suffix_span",
    "head_span",
    "dim_span",
    "operand_dim_span",
    "unknown_axis_fix",
    "factors_apart",
]

# a check yields (message, span, fix)
Found = tuple[str, Span | None, str | None]
CheckFn = Callable[[Node, Context], Iterator[Found]]


def text_of(node: Node) -> str:
    """A node in the text notation, as messages and fixes show it."""
    return text(node)


def slice_span(node: Node, source: str | None, start_at: int, end_at: int) -> Span | None:
    """The span of ``source[start_at:end_at]`` without its surrounding blanks."""
    if source is None:
        return node.span
    part = source[start_at:end_at]
    lead = len(part) - len(part.lstrip())
    trail = len(part) - len(part.rstrip())
    if lead + trail >= len(part):
        return node.span
    return Span(start_at + lead, end_at - trail)


def suffix_span(t: Tensor, source: str | None) -> Span | None:
    """The ``{U_X}`` / ``\\{ U_X \\}`` suffix of a tensor: what follows its closing bracket."""
    if t.span is None or source is None:
        return t.span
    close = source.rfind("]", t.span.start, t.span.end)
    if close < 0:
        return t.span
    return slice_span(t, source, close + 1, t.span.end)


def head_span(c: Collective, source: str | None) -> Span | None:
    """A collective's name and subscript, ``AllGather_X``, without its argument."""
    if c.span is None or source is None or c.arg.span is None:
        return c.span
    head = source[c.span.start : c.arg.span.start].rstrip()
    head = head[:-1] if head.endswith(("(", ":")) else head
    return slice_span(c, source, c.span.start, c.span.start + len(head))


def dim_span(t: Tensor, label: str) -> Span | None:
    """The first dim of ``t`` called ``label``, else the whole tensor."""
    for d in t.dims:
        if d.label == label:
            return d.span or t.span
    return t.span


def operand_dim_span(expr: Node, label: str) -> Span | None:
    """A dim of a product's operand when the operand is written as a tensor, else the whole operand."""
    return dim_span(expr, label) if isinstance(expr, Tensor) else expr.span


# ---- fixes that name axes

FACTORS_LISTED = 4096  # the largest axis whose factors the fix lists (the rest get the rule)


def unknown_axis_fix(axis: str, mesh: Mesh) -> str:
    """The fix for an axis the mesh lacks: a sub-axis as large as its axis is the axis, so write that; a
    sub-axis that is no factor of its axis gets the factors there are (adding it to the mesh would not do)."""
    f = factor_of(axis)
    if f is None or f.parent not in mesh.names:  # a sub-axis of an axis the mesh lacks: add the axis
        return f"use an axis of the mesh ({', '.join(mesh.names)}), or add {parent_of(axis)} to it"
    n = mesh[f.parent].size
    if f.stop == f.size == n:
        return f"write {f.parent}"
    rule = f"its pre-size times its size must divide {n}" if n is not None else f"give {f.parent} a size"
    if n is None or n > FACTORS_LISTED:
        return f"use a factor of {f.parent} ({rule}), or {f.parent} itself"
    factors = [
        Factor(f.parent, pre, size).name
        for pre in range(1, n // 2 + 1)
        for size in range(2, n // pre + 1)
        if n % (pre * size) == 0 and size < n
    ]
    if not factors:
        return f"{f.parent}={n} has no factor smaller than itself: write {f.parent}"
    shown = ", ".join(factors[:6]) + (f", ... ({len(factors)} in all)" if len(factors) > 6 else "")
    return f"use a factor of {f.parent}={n} ({shown}), or {f.parent} itself"


def factors_apart(first: str, second: str, mesh: Mesh | None) -> str:
    """Two factors that do not overlap, for the fix of an overlap: the first sub-axis named and the rest of
    its axis beside it (``Y:(1)2 and Y:(2)4 of Y=8``), or the rule's example when the size is not known."""
    f = factor_of(first) or factor_of(second)
    n = mesh[f.parent].size if f is not None and mesh is not None and f.parent in mesh else None
    if f is None or n is None or n % f.stop:
        return "Y:(1)2 and Y:(2)2 of Y=4"
    rest = Factor(f.parent, f.stop, n // f.stop) if f.stop < n else Factor(f.parent, 1, f.pre)
    return f"{f.name} and {rest.name} of {f.parent}={n}"


@dataclass(frozen=True)
class Violation:
    """One broken rule: which, where (``span`` into ``source``), why and what would fix it."""

    rule: str
    error: type[IllegalSharding]
    message: str
    span: Span | None = None
    fix: str | None = None
    source: str | None = field(default=None, compare=False, repr=False)

    def to_error(self) -> IllegalSharding:
        return self.error(self.message, span=self.span, source=self.source, fix=self.fix, rule=self.rule)

    def __str__(self) -> str:
        return str(self.to_error())

    def note(self) -> str:
        """The finding as a note on a statement the planner plans: what every plan must fix first."""
        lines = [
            f"note: {self.message}; the shards cannot simply be multiplied, so a plan communicates first "
            f"[{self.rule}]"
        ]
        if self.source is not None and self.span is not None:
            lines.append(render_caret(self.source, self.span))
        if self.fix:
            lines.append(f"  plans: {self.fix}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return short("Violation", f"[{self.rule}] {self.message}")


class Violations(list):
    """What :func:`check` found: a list of :class:`Violation` (empty when legal), a table in a notebook."""

    def _repr_html_(self) -> str:
        rows = []
        for v in self:
            where = render_caret(v.source, v.span) if v.source is not None and v.span is not None else ""
            rows.append([v.rule, v.message, where, v.fix or ""])
        caption = "legal: no rule is broken" if not self else f"{len(self)} broken rule(s)"
        return html_table(["rule", "what is wrong", "where", "fix"], rows, caption, code=(2,))
