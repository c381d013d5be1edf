"""An audit as text, JSON, LaTeX and HTML.

The text opens with what was audited and assumed (mesh, sizes, chip, overlap policy), then the program in
the notation with XLA's shardings, then per statement XLA's plan (its steps in the notation, sub-axes in
Shardy's spelling), where it ranks among ``shardalg plan --all``'s plans, its bytes and seconds against the
best plan's, and a ``FLAG`` line with the ratio and the cheaper plan where XLA's costs more; then the backward
pairs (``jax.grad``), the collectives that could not be mapped, and the notes. The JSON holds the same; the
LaTeX fragment writes the program and plans with the notation's LaTeX printer (which parses back), the HTML
one a table of the statements.
"""

from __future__ import annotations

import html
from typing import Any

from shardalg.errors import ShardalgError
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex

from .program import XlaStep
from .run import Audit
from .verdict import StatementVerdict

__all__ = ["report_text", "report_json", "report_latex", "report_html"]


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


def report_text(a: Audit) -> str:
    p = a.program
    mesh = ", ".join(f"{k}={n}" for k, n in p.mesh.items())
    sizes = ", ".join(f"{k}={n}" for k, n in sorted(p.sizes.items()))
    chip = f"{a.chip}{' (default)' if a.chip_default else ''}"
    lines = [
        f"# audit of {a.name} on mesh {mesh}; sizes {sizes}; priced on {chip}",
        "# XLA's plans are matched to shardalg's by their collectives (op, axes, tensor), free slices aside",
        "# the program, in XLA's shardings",
    ]
    lines += [st.text for st in p.statements]
    for k, v in enumerate(a.verdicts, 1):
        lines.append(f"# statement {k}: {v.statement.text}")
        lines.append(f"# XLA's plan ({_where(v)}): {_bytes(v.xla_bytes)} bytes, {_seconds(v.xla_seconds)}")
        lines += v.xla_plan.splitlines()
        if v.flagged:
            lines.append(
                f"# FLAG: XLA's plan costs {v.ratio:.3g}x shardalg's best ({_bytes(v.best_bytes)} bytes, "
                f"{_seconds(v.best_seconds)}):"
            )
            lines += v.best_plan.splitlines()
        elif v.ratio is not None:
            lines.append(
                f"# XLA's plan is the cheapest: shardalg's best costs the same ({_seconds(v.best_seconds)})"
            )
        else:
            lines.append(f"# shardalg's best: {_bytes(v.best_bytes)} bytes, {_seconds(v.best_seconds)}")
            lines += v.best_plan.splitlines()
        for n in v.notes:
            lines.append(f"# note: {n}")
    if a.backward is not None:
        b = a.backward
        lines.append(
            "# backward (jax.grad of the sum of the output): each collective and its forward transpose"
        )
        for pair in b.pairs:
            axes = (
                "".join(pair.axes) if all(len(x) == 1 for x in pair.axes) else "{" + ",".join(pair.axes) + "}"
            )
            head = f"{pair.op}_{axes} ({pair.shard_bytes} bytes a shard, line {pair.line})"
            if pair.forward is not None:
                lines.append(f"#   {head} is the transpose of the forward {pair.forward.text}")
            else:
                lines.append(f"#   {head}: no forward collective transposes to it")
        derived = ", ".join(f"{op}_{''.join(ax)}" for op, ax in b.derived) or "none"
        same = "the same" if b.matches_derived else "not the same"
        lines.append(
            f"# shardalg's derived backward (planned by bytes, as shardalg backward plans it) communicates: "
            f"{derived} ({same} as XLA's)"
        )
        paired = sum(x.forward is not None for x in b.pairs)
        lines.append(f"# {paired} of {len(b.pairs)} backward collectives are transposes of forward ones")
    for s in p.outside:
        lines.append(f"# not mapped: {s.text}")
    flagged = a.flagged
    lines.append(
        f"# verdict: {len(flagged)} of {len(a.verdicts)} statements flagged"
        + (
            "; worst " + f"{max(v.ratio or 0 for v in flagged):.3g}x"
            if flagged
            else "; XLA's plans cost no more than shardalg's best"
        )
    )
    for n in a.notes:
        lines.append(f"# note: {n}")
    return "\n".join(lines) + "\n"


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


def report_latex(a: Audit) -> str:
    """The audit as a LaTeX fragment (needs amsmath): the program, and per statement XLA's plan, its rank
    and cost, and shardalg's cheaper plan where XLA's is flagged."""
    p = a.program
    mesh = ", ".join(f"${k}={n}$" for k, n in p.mesh.items())
    out = [
        f"\\paragraph{{Audit of \\texttt{{{_tex(a.name)}}}}} on the mesh {mesh}, priced on {_tex(a.chip)}."
    ]
    out.append(_latex_block(p.text))
    for k, v in enumerate(a.verdicts, 1):
        out.append(
            f"\\noindent Statement {k}: XLA's plan ({_tex(_where(v))}), {_bytes(v.xla_bytes)} bytes, "
            f"{_tex(_seconds(v.xla_seconds))}:"
        )
        out.append(_latex_block(v.xla_plan))
        if v.flagged:
            best = "\n".join(line.split("  #")[0] for line in v.best_plan.splitlines())
            out.append(f"\\noindent\\textbf{{Flag}}: it costs ${v.ratio:.3g}\\times$ shardalg's best:")
            out.append(_latex_block(best))
    for n in a.notes:
        out.append(f"\\noindent Note: {_tex(n)}")
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
    """The audit as an HTML fragment: one table row per statement."""
    rows = []
    for k, v in enumerate(a.verdicts, 1):
        ratio = f"{v.ratio:.3g}x" if v.ratio is not None else ""
        rows.append(
            "<tr>"
            f"<td>{k}</td><td><pre>{html.escape(v.statement.text)}</pre></td>"
            f"<td><pre>{html.escape(v.xla_plan)}</pre></td><td>{html.escape(_where(v))}</td>"
            f"<td>{_bytes(v.xla_bytes)}</td><td>{html.escape(_seconds(v.xla_seconds))}</td>"
            f"<td>{html.escape(_seconds(v.best_seconds))}</td>"
            f"<td>{'<b>FLAG ' + ratio + '</b>' if v.flagged else ratio}</td>"
            "</tr>"
        )
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in a.notes)
    return (
        f"<h3>Audit of <code>{html.escape(a.name)}</code></h3>\n<table>\n"
        "<tr><th>#</th><th>statement</th><th>XLA's plan</th><th>among shardalg's</th><th>bytes</th>"
        "<th>seconds</th><th>best seconds</th><th>XLA / best</th></tr>\n"
        + "\n".join(rows)
        + "\n</table>\n"
        + (f"<ul>{notes}</ul>\n" if notes else "")
    )
