"""An audit as text, JSON, LaTeX and HTML.

The text opens with what was audited and assumed (mesh, sizes, chip, overlap policy), then the program in
the notation with XLA's shardings, then per statement XLA's plan (its steps in the notation, sub-axes in
Shardy's spelling), where it ranks among ``shardalg plan --all``'s plans, its bytes and seconds against the
best plan's, and a ``FLAG`` line with the ratio and the cheaper plan where XLA's costs more; then the backward
pairs (``jax.grad``), the collectives that could not be mapped, the verdict and the notes. The report is
one record (:func:`report_lines`, a :class:`Line` each) that text, LaTeX and HTML each print, so all three
carry the same lines; the JSON holds the same facts as data. The LaTeX fragment writes the program and plans
with the notation's LaTeX printer (which parses back), a plan's reasons listed under it; the HTML writes them
as ``<pre>`` blocks.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from shardalg.errors import ShardalgError
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex

from .records import XlaStep
from .run import Audit
from .verdict import BackwardVerdict, StatementVerdict

__all__ = ["Line", "report_lines", "report_text", "report_json", "report_latex", "report_html"]


def _seconds(x: float | None) -> str:
    if x is None:
        return "not priced"
    if x >= 1e-3:
        return f"{x * 1e3:.3g} ms"
    if x >= 1e-6:
        return f"{x * 1e6:.3g} us"
    return f"{x * 1e9:.3g} ns"


def _bytes(x: float | None) -> str:
    return "?" if x is None else f"{int(x)}"


def _where(v: StatementVerdict) -> str:
    if v.rank is not None:
        return f"plan {v.rank} of {v.plans} of shardalg plan --all"
    if v.problem:
        return f"not among shardalg's {v.plans} plans: {v.problem}"
    return f"not among shardalg's {v.plans} plans"


@dataclass(frozen=True)
class Line:
    """One line of the report record, which every format prints. ``kind``: ``title`` (what was audited and
    assumed), ``say`` (a line of prose), ``item`` (one of a list: the backward pairs), ``flag``, ``note``, or
    ``plan`` (a program or plan in the notation, one statement a line, each maybe with a ``  # reason``). A
    ``{ratio}`` in ``text`` stands for ``ratio``, which each format writes its own way (``3.2x``,
    ``$3.2\\times$``)."""

    kind: str
    text: str
    ratio: float | None = None

    def parts(self) -> tuple[str, str, str]:
        """The text before the ratio, the ratio as ``3.2`` ("" without one), the text after it."""
        if self.ratio is None:
            return self.text, "", ""
        before, after = self.text.split("{ratio}", 1)
        return before, f"{self.ratio:.3g}", after


def report_lines(a: Audit) -> list[Line]:
    """The audit as one record: what the text, LaTeX and HTML reports each print, line by line."""
    p = a.program
    mesh = ", ".join(f"{k}={n}" for k, n in p.mesh.items())
    sizes = ", ".join(f"{k}={n}" for k, n in sorted(p.sizes.items()))
    chip = f"{a.chip}{' (default)' if a.chip_default else ''}"
    lines = [
        Line("title", f"audit of {a.name} on mesh {mesh}; sizes {sizes}; priced on {chip}"),
        Line(
            "say",
            "XLA's plans are matched to shardalg's by their collectives (op, axes, tensor), free slices aside",
        ),
        Line("say", "the program, in XLA's shardings"),
        Line("plan", "\n".join(st.text for st in p.statements)),
    ]
    for k, v in enumerate(a.verdicts, 1):
        lines.append(Line("say", f"statement {k}: {v.statement.text}"))
        lines.append(
            Line("say", f"XLA's plan ({_where(v)}): {_bytes(v.xla_bytes)} bytes, {_seconds(v.xla_seconds)}")
        )
        lines.append(Line("plan", v.xla_plan))
        if v.flagged:
            lines.append(
                Line(
                    "flag",
                    f"XLA's plan costs {{ratio}} shardalg's best ({_bytes(v.best_bytes)} bytes, "
                    f"{_seconds(v.best_seconds)}):",
                    v.ratio,
                )
            )
            lines.append(Line("plan", v.best_plan))
        elif v.ratio is not None:
            lines.append(
                Line(
                    "say",
                    f"XLA's plan is the cheapest: shardalg's best costs the same ({_seconds(v.best_seconds)})",
                )
            )
        else:
            lines.append(
                Line("say", f"shardalg's best: {_bytes(v.best_bytes)} bytes, {_seconds(v.best_seconds)}")
            )
            lines.append(Line("plan", v.best_plan))
        lines += [Line("note", n) for n in v.notes]
    if a.backward is not None:
        lines += _backward_lines(a.backward)
    lines += [Line("say", f"not mapped: {s.text}") for s in p.outside]
    flagged = a.flagged
    worst = max((v.ratio or 0 for v in flagged), default=None)
    lines.append(
        Line(
            "say",
            f"verdict: {len(flagged)} of {len(a.verdicts)} statements flagged"
            + ("; worst {ratio}" if flagged else "; XLA's plans cost no more than shardalg's best"),
            worst,
        )
    )
    lines += [Line("note", n) for n in a.notes]
    return lines


def _backward_lines(b: BackwardVerdict) -> list[Line]:
    lines = [
        Line("say", "backward (jax.grad of the sum of the output): each collective and its forward transpose")
    ]
    for pair in b.pairs:
        axes = "".join(pair.axes) if all(len(x) == 1 for x in pair.axes) else "{" + ",".join(pair.axes) + "}"
        head = f"{pair.op}_{axes} ({pair.shard_bytes} bytes a shard, line {pair.line})"
        if pair.forward is not None:
            lines.append(Line("item", f"{head} is the transpose of the forward {pair.forward.text}"))
        else:
            lines.append(Line("item", f"{head}: no forward collective transposes to it"))
    derived = ", ".join(f"{op}_{''.join(ax)}" for op, ax in b.derived) or "none"
    same = "the same" if b.matches_derived else "not the same"
    if b.problem:
        lines.append(Line("say", b.problem))
    else:
        lines.append(
            Line(
                "say",
                f"shardalg's derived backward (planned by bytes, as shardalg backward plans it) communicates: "
                f"{derived} ({same} as XLA's)",
            )
        )
    paired = sum(x.forward is not None for x in b.pairs)
    lines.append(
        Line("say", f"{paired} of {len(b.pairs)} backward collectives are transposes of forward ones")
    )
    return lines


_TEXT_HEAD = {"title": "# ", "say": "# ", "item": "#   ", "flag": "# FLAG: ", "note": "# note: ", "plan": ""}


def report_text(a: Audit) -> str:
    """The audit as text: every line of :func:`report_lines`, prose as ``#`` comments."""
    out = []
    for line in report_lines(a):
        before, ratio, after = line.parts()
        out.append(_TEXT_HEAD[line.kind] + before + (f"{ratio}x" if ratio else "") + after)
    return "\n".join(out) + "\n"


def _step_json(s: XlaStep) -> dict[str, Any]:
    out: dict[str, Any] = {
        "op": s.op,
        "axes": list(s.axes),
        "sub_axes": list(s.sub_axes),
        "text": s.text,
        "tensor": s.before.name if s.before is not None else None,
    }
    if s.hlo is not None and s.op != "Slice":
        out["hlo"] = {
            "name": s.hlo.name,
            "replica_groups": [list(g) for g in s.hlo.groups],
            "operand": list(s.hlo.operand),
            "result": list(s.hlo.result),
            "dtype": s.hlo.dtype,
            "operand_bytes": s.bytes_per_device,
            "line": s.hlo.line,
        }
    else:
        out["inferred"] = "a free slice (a dynamic-slice in HLO, no collective)"
    if s.problem:
        out["problem"] = s.problem
    return out


def report_json(a: Audit) -> dict[str, Any]:
    p = a.program
    out: dict[str, Any] = {
        "function": a.name,
        "mesh": dict(p.mesh),
        "sizes": dict(sorted(p.sizes.items())),
        "chip": a.chip,
        "chip_default": a.chip_default,
        "program": [st.text for st in p.statements],
        "statements": [
            {
                "statement": v.statement.text,
                "xla_plan": v.xla_plan,
                "xla_steps": [_step_json(s) for s in v.statement.steps],
                "rank": v.rank,
                "plans": v.plans,
                "xla_bytes": v.xla_bytes,
                "xla_seconds": v.xla_seconds,
                "best_plan": v.best_plan,
                "best_bytes": v.best_bytes,
                "best_seconds": v.best_seconds,
                "ratio": v.ratio,
                "flagged": v.flagged,
                **({"problem": v.problem} if v.problem else {}),
            }
            for v in a.verdicts
        ],
        "not_mapped": [_step_json(s) for s in p.outside],
        "notes": list(a.notes),
    }
    if a.backward is not None:
        out["backward"] = {
            "pairs": [
                {
                    "op": x.op,
                    "axes": list(x.axes),
                    "shard_bytes": x.shard_bytes,
                    "line": x.line,
                    "transpose_of": x.forward.text if x.forward is not None else None,
                }
                for x in a.backward.pairs
            ],
            "derived": [{"op": op, "axes": list(ax)} for op, ax in a.backward.derived],
            **({"problem": a.backward.problem} if a.backward.problem else {}),
            "matches_derived": a.backward.matches_derived,
            "all_paired": a.backward.all_paired,
        }
    return out


def _latex_block(text: str) -> str:
    """A plan or program in the notation's LaTeX (it parses back to the same program); text the notation
    cannot parse as verbatim text."""
    try:
        return "\\[\n" + latex(parse(text)) + "\n\\]"
    except ShardalgError:
        return "\\begin{verbatim}\n" + text + "\n\\end{verbatim}"


def _reasons(plan: str) -> tuple[str, list[str]]:
    """A plan's statements without their ``  # reason`` comments, and the reasons as ``step k: reason``."""
    steps, reasons = [], []
    for k, line in enumerate(plan.splitlines(), 1):
        step, _, reason = line.partition("  # ")
        steps.append(step)
        if reason:
            reasons.append(f"step {k}: {reason}")
    return "\n".join(steps), reasons


def _runs(lines: list[Line]) -> list[list[Line]]:
    """The record with consecutive items grouped (one list each); every other line alone."""
    out: list[list[Line]] = []
    for line in lines:
        if line.kind == "item" and out and out[-1][0].kind == "item":
            out[-1].append(line)
        else:
            out.append([line])
    return out


def report_latex(a: Audit) -> str:
    """The audit as a LaTeX fragment (needs amsmath): every line of :func:`report_lines`, the programs and
    plans with the notation's LaTeX printer (each parses back), a plan's reasons listed under it."""
    out = []
    for run in _runs(report_lines(a)):
        line = run[0]
        if line.kind == "item":
            out.append(
                "\\begin{itemize}\n" + "\n".join(f"\\item {_tex(x.text)}" for x in run) + "\n\\end{itemize}"
            )
        elif line.kind == "plan":
            steps, reasons = _reasons(line.text)
            out.append(_latex_block(steps))
            if reasons:
                items = "\n".join(f"\\item {_tex(r)}" for r in reasons)
                out.append("\\begin{itemize}\n" + items + "\n\\end{itemize}")
        elif line.kind == "title":
            out.append(f"\\paragraph{{{_tex(line.text)}}}")
        else:
            before, ratio, after = line.parts()
            head = {"flag": "\\textbf{FLAG}: ", "note": "\\emph{note}: "}.get(line.kind, "")
            times = f"${ratio}\\times$" if ratio else ""
            out.append(f"\\noindent {head}{_tex(before)}{times}{_tex(after)}")
    return "\n\n".join(out) + "\n"


def _tex(s: str) -> str:
    for a, b in (
        ("\\", "\\textbackslash{}"),
        ("_", "\\_"),
        ("%", "\\%"),
        ("&", "\\&"),
        ("#", "\\#"),
        ("$", "\\$"),
    ):
        s = s.replace(a, b)
    return s.replace("{", "\\{").replace("}", "\\}").replace("\\textbackslash\\{\\}", "\\textbackslash{}")


def report_html(a: Audit) -> str:
    """The audit as an HTML fragment: every line of :func:`report_lines`, the programs and plans (with their
    reasons) as ``<pre>`` blocks."""
    out = []
    for run in _runs(report_lines(a)):
        line = run[0]
        if line.kind == "item":
            out.append("<ul>" + "".join(f"<li>{html.escape(x.text)}</li>" for x in run) + "</ul>")
        elif line.kind == "plan":
            out.append(f"<pre>{html.escape(line.text)}</pre>")
        elif line.kind == "title":
            out.append(f"<h3>{html.escape(line.text)}</h3>")
        else:
            before, ratio, after = line.parts()
            head = {"flag": "<b>FLAG</b>: ", "note": "<em>note</em>: "}.get(line.kind, "")
            times = f"<b>{ratio}x</b>" if ratio else ""
            out.append(f"<p>{head}{html.escape(before)}{times}{html.escape(after)}</p>")
    return "\n".join(out) + "\n"
