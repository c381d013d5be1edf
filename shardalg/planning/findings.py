"""What :func:`shardalg.planning.verify.verify` reports: each finding (severity, rule, message, the statement
and its span, a fix) and the report that holds them, with the backward shardalg derives.

Imports: :mod:`shardalg.errors`, the notation's display helpers, and the backward program's type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shardalg.errors import Span, render_caret
from shardalg.notation.printing.display import short

from .backward import BackwardProgram

__all__ = ["ERROR", "WARNING", "Finding", "VerifyReport"]

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Finding:
    """One difference between a hand-written backward and a right one."""

    severity: str  # "error" or "warning"
    rule: str
    message: str
    statement: int | None = None  # 1-based index into the backward program
    span: Span | None = None
    fix: str | None = None

    def render(self, source: str | None = None) -> str:
        where = f" (statement {self.statement})" if self.statement else ""
        lines = [f"{self.severity} [{self.rule}]{where}: {self.message}"]
        if source is not None and self.span is not None:
            lines.append(render_caret(source, self.span))
        if self.fix:
            lines.append(f"  fix: {self.fix}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        where = f" (statement {self.statement})" if self.statement else ""
        return short("Finding", f"{self.severity} [{self.rule}]{where}: {self.message}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"severity": self.severity, "rule": self.rule, "message": self.message}
        if self.statement is not None:
            out["statement"] = self.statement
        if self.span is not None:
            out["span"] = [self.span.start, self.span.end]
        if self.fix:
            out["fix"] = self.fix
        return out


@dataclass(frozen=True)
class VerifyReport:
    """The findings; ``ok`` is False when any is an error. ``derived`` is the backward shardalg derives."""

    findings: tuple[Finding, ...]
    derived: BackwardProgram
    source: str | None = field(default=None, repr=False)
    bytes_written: object = None
    bytes_derived: object = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == WARNING)

    def __str__(self) -> str:
        if not self.findings:
            return "ok: the backward computes every gradient exactly, in its parameter's sharding"
        head = "ok (with warnings)" if self.ok else "WRONG"
        return "\n".join([head, *(f.render(self.source) for f in self.findings)])

    def __repr__(self) -> str:
        head = "ok" if not self.findings else "ok (with warnings)" if self.ok else "WRONG"
        rules = ", ".join(f.rule for f in self.findings)
        return short(
            "VerifyReport",
            f"{head}: {len(self.errors)} errors, {len(self.warnings)} warnings"
            + (f" ({rules})" if rules else ""),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "findings": [f.to_json() for f in self.findings],
            "bytes_written": str(self.bytes_written),
            "bytes_derived": str(self.bytes_derived),
            "derived": self.derived.to_json(),
        }
