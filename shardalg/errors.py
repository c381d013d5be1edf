"""One exception family for everything shardalg rejects.

Every error can carry the source text and the span of the offending part; ``str(err)`` then shows the
message and the rule's name, the source line and a caret under the span, and the fix when one is known::

    error: mesh axis X shards both I and J [axis-used-twice]
      A[I_X, J_X]
             ^^^
      fix: shard J over another axis, or replicate it: A[I_X, J]
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "Span",
    "ShardalgError",
    "IncompleteWarning",
    "NoteWarning",
    "ParseError",
    "IllegalSharding",
    "AxisUsedTwice",
    "UnknownAxis",
    "IndivisibleDim",
    "UnreducedProduct",
    "BatchDimMismatch",
    "SameAxisResultDims",
    "UnreachableUnreduced",
    "ShapeMismatch",
    "IllegalCollective",
    "IllegalOperand",
    "NoPlan",
    "UsageError",
    "LimitExceeded",
    "FileError",
    "closest",
]


@dataclass(frozen=True)
class Span:
    """Half-open character offsets ``[start, end)`` into the source text."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"bad span {self.start}..{self.end}")


def closest(word: str, choices: Iterable[str], cutoff: float = 0.6, *, fold_case: bool = True) -> str | None:
    """The choice ``word`` most likely misspells (compared in lower case unless ``fold_case`` is False, as
    for dim names, where case tells two dims apart), for "did you mean"; None when no choice is close."""
    from difflib import get_close_matches

    fold = str.lower if fold_case else str
    by_key = {fold(c): c for c in choices}
    found = get_close_matches(fold(word), list(by_key), n=1, cutoff=cutoff)
    return by_key[found[0]] if found else None


def render_caret(source: str, span: Span) -> str:
    """The source line that holds ``span.start`` and a caret line under the span (clipped to the line)."""
    start = min(span.start, len(source))
    line_start = source.rfind("\n", 0, start) + 1
    line_end = source.find("\n", start)
    if line_end < 0:
        line_end = len(source)
    line = source[line_start:line_end]
    end = max(min(span.end, line_end), start + 1)
    width = max(1, min(end, line_end if line_end > start else start + 1) - start)
    pad = "".join("\t" if ch == "\t" else " " for ch in line[: start - line_start])
    return f"  {line}\n  {pad}{'^' * width}"


class ShardalgError(Exception):
    """Base of every error shardalg raises on bad input.

    ``rule`` names the check that failed (stable, used in tests and JSON); ``fix`` says what would make
    the input legal, when that is known.
    """

    rule: str = "error"

    def __init__(
        self,
        message: str,
        *,
        span: Span | None = None,
        source: str | None = None,
        fix: str | None = None,
        rule: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.source = source
        self.fix = fix
        if rule is not None:
            self.rule = rule

    def with_source(self, source: str) -> ShardalgError:
        """Attach the source text (if none is attached yet) and return self, for re-raising."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        head = f"error: {self.message} [{self.rule}]"
        parts = [head]
        if self.source is not None and self.span is not None:
            parts.append(render_caret(self.source, self.span))
        if self.fix:
            parts.append(f"  fix: {self.fix}")
        return "\n".join(parts)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"error": type(self).__name__, "rule": self.rule, "message": self.message}
        if self.span is not None:
            out["span"] = [self.span.start, self.span.end]
        if self.fix:
            out["fix"] = self.fix
        return out


class ParseError(ShardalgError):
    """The text is not in the notation."""

    rule = "syntax"


class UsageError(ShardalgError):
    """An API or CLI argument is malformed (a bad --mesh, an unknown dtype, ...)."""

    rule = "usage"


class LimitExceeded(UsageError):
    """An input too large to take on: over one of the limits of :mod:`shardalg.limits`, refused up front.
    The message names the limit and its value; the fix says how to lift it."""

    rule = "limit"


class FileError(UsageError):
    """A file or directory named on the command line cannot be read or written."""

    rule = "file"


class IllegalSharding(ShardalgError):
    """A well-formed expression that breaks a legality rule of DESIGN.md section 2."""

    rule = "illegal"


class AxisUsedTwice(IllegalSharding):
    rule = "axis-used-twice"


class UnknownAxis(IllegalSharding):
    rule = "unknown-axis"


class IndivisibleDim(IllegalSharding):
    rule = "indivisible-dim"


class UnreducedProduct(IllegalSharding):
    rule = "unreduced-product"


class BatchDimMismatch(IllegalSharding):
    rule = "batch-dim-mismatch"


class SameAxisResultDims(IllegalSharding):
    rule = "case-4"


class UnreachableUnreduced(IllegalSharding):
    """A product's result asks for partial sums over axes no plan can leave them on."""

    rule = "unreduced-result"


class ShapeMismatch(IllegalSharding):
    """Two statements or operands disagree about a tensor (its dims, its sharding, its result)."""

    rule = "shape-mismatch"


class IllegalCollective(IllegalSharding):
    """A collective applied to a tensor whose sharding does not meet its precondition."""

    rule = "collective-precondition"


class IllegalOperand(IllegalSharding):
    """A function's operand whose sharding its rule refuses: an unreduced operand of a nonlinear function,
    operands that do not meet in one layout, a dim the function works along that the operand lacks."""

    rule = "function-operand"


class NoPlan(ShardalgError):
    """No sequence of rules reaches the requested sharding."""

    rule = "no-plan"


class IncompleteWarning(UserWarning):
    """A search hit a budget: the answer it gives may be a subset (its ``complete`` is False and its note
    names the limit and how to lift it)."""


class NoteWarning(UserWarning):
    """Something the caller should know about an answer that has no notes of its own to say it in: a value
    the caller gave in place of one the program writes (``--sizes L=2`` for its ``where L=80``, ``--mesh`` for
    its ``mesh`` line). The command line prints it on stderr as ``shardalg: note: ...``."""
