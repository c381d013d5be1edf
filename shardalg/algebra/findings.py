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
