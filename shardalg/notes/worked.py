"""The sections of the notes that compute: derivations step by step (aligned on the relation, each step named
on the right), the proofs, and the worked questions of the book's chapter 3, each answered by the engine.
"""

from __future__ import annotations

import re
from pathlib import Path

import sympy

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.shape import shape
from shardalg.algebra.symbols import axis_size, device_count
from shardalg.costs import hardware
from shardalg.costs.derive import compare, compute_bound, critical, optimum
from shardalg.costs.plancost import cost
from shardalg.costs.schedule import OverlapPolicy
from shardalg.notation.parse import parse, parse_statement
from shardalg.notation.printing import latex
from shardalg.notation.printing.symbology import latex_escape_text
from shardalg.numeric.proofs import run_all, sym_latex

from .costs import QUESTION_4, draw_question_4, fsdp_tp_cost, question_4_caption
from .document import Display, Figure, Math, Prose, Raw, Section, md_text, tex_text, text_math
from .mathtext import number_latex

__all__ = ["derivations", "proofs", "seed_questions", "question_4_costs", "aligned_derivation", "lemma_block"]

FIGURE = "question4-crossover.pdf"  # for the LaTeX notes
WEB_FIGURE = "question4-crossover.svg"  # for the Markdown notes: a browser shows SVG inline


def _us(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e6:.3g} microseconds"


def question_4_costs():  # -> tuple[PlanCost, PlanCost]
    mesh = Mesh(X=None)
    return tuple(cost(p, mesh=mesh, latency=False, overlap=OverlapPolicy.STEADY) for p in QUESTION_4)


def derivations() -> Section:

    gather, reduce = QUESTION_4
    small = compare(reduce, gather, solve_for="D", regime="comms", mesh=Mesh(X=None))
    large = compare(reduce, gather, solve_for="D", regime="compute", mesh=Mesh(X=None))
    X, Y, N = axis_size("X"), axis_size("Y"), device_count()
    best = optimum(fsdp_tp_cost(), over=X, subject_to=sympy.Eq(X * Y, N))
    dp = compute_bound(
        parse("In[B_X, D] *_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}\nAllReduce_X(dW[D, F]{U_X}) -> dW[D, F]"),
        solve_for="B",
        mesh=Mesh(X=None),
        symbolic_links=True,
    )
    crit = critical(hw="tpu-v5e")
    blocks = []
    for title, d in (
        (
            "Question 4, both plans communication-bound (plan a: local matmul then AllReduce; plan b: AllGather "
            "the weights):",
            small,
        ),
        ("Question 4 at large batch (plan b compute-bound):", large),
        ("The FSDP+TP split that communicates least:", best),
        ("When the weight-gradient AllReduce of data parallelism hides under the backward matmul:", dp),
        ("The buffer size below which an AllGather on TPU v5e is latency-bound, in bytes:", crit),
    ):
        unit = "bytes" if d is crit else ""
        blocks.append(Display(aligned_derivation(d, unit), title))
        value = (
            ()
            if d.value is None
            else (
                " (",
                Math("= " + number_latex(d.value) + rf"\ \text{{{unit}}}"),
                " with the chip's numbers)",
            )
        )
        blocks.append(Prose.of("Result: ", Math(sym_latex(d.result)), *value, "."))
    return Section(
        "Derivations",
        (
            Prose.of(
                "Each derivation below is computed from plans and the cost model; each row is one "
                "recorded step, aligned on its relation, the step named on the right."
            ),
            *blocks,
        ),
    )


def proofs() -> Section:
    lemmas = run_all()
    held = sum(lemma.holds for lemma in lemmas)
    blocks: list = [
        Prose.of(
            f"Each lemma is derived from the sharding rules and checked symbolically against an independent "
            f"route. {held} of {len(lemmas)} hold."
        )
    ]
    for n, lemma in enumerate(lemmas, 1):
        blocks.append(lemma_block(n, lemma))
    return Section("Proofs", tuple(blocks))


def aligned_derivation(d: object, unit: str = "") -> str:
    """A derivation's steps as an ``aligned`` block: each relation aligned on its sign (``&<``, ``&=``), an
    expression as ``name &= ...``, and the step named in a right-hand ``\\text{}``."""
    rows = []
    before = None
    for label, expr in d.steps:  # type: ignore[attr-defined]
        if label == "result" and expr == before:
            continue  # the last step already shows it
        before = expr
        name = latex_escape_text(label)
        if isinstance(expr, sympy.Float):  # a value on the chip's numbers
            body = rf"&\phantom{{=}} {number_latex(float(expr))}" + (rf"\ \text{{{unit}}}" if unit else "")
        elif isinstance(expr, sympy.core.relational.Relational):
            sign = sym_latex(type(expr)(sympy.Symbol("a"), sympy.Symbol("b"), evaluate=False)).split(" ")[1]
            body = f"{sym_latex(expr.lhs)} &{sign} {sym_latex(expr.rhs)}"
        elif isinstance(expr, sympy.logic.boolalg.Boolean):
            body = rf"&\phantom{{=}} {sym_latex(expr)}"
        elif re.fullmatch(r"[A-Za-z](?:_[A-Za-z0-9]+)?", label):  # the step names its quantity: T_a = ...
            rows.append(f"{text_math(label)[0] if '_' in label else label} &= {sym_latex(expr)}")
            continue
        else:
            body = rf"&\phantom{{=}} {sym_latex(expr)}"
        rows.append(f"{body} && \\text{{({name})}}")
    return "\\begin{aligned}\n" + " \\\\\n".join(rows) + "\n\\end{aligned}"


def lemma_block(n: int, lemma: object) -> Raw:
    """A lemma for the notes: numbered (its module name is ours, not the reader's), title and notes with their
    math set as math, each step's claim inline or, when it is a block, displayed."""
    title, prose = lemma.title, lemma.prose  # type: ignore[attr-defined]
    tex = [rf"\paragraph{{Lemma {n}: {tex_text(title)}.}}", rf"\[ {lemma.statement} \]"]  # type: ignore[attr-defined]
    md = [f"**Lemma {n}: {md_text(title)}.**", "", f"$${lemma.statement}$$", ""]  # type: ignore[attr-defined]
    frags = [lemma.statement, *text_math(title), *text_math(prose)]  # type: ignore[attr-defined]
    if prose:
        tex.append(tex_text(prose))
        md += [md_text(prose), ""]
    tex.append(r"\emph{Proof, step by step, each step checked:}")
    items = []
    for s in lemma.steps:  # type: ignore[attr-defined]
        mark = r"$\checkmark$" if s.holds else r"\textbf{FAILS}"
        note = tex_text(s.note) + ": " if s.note else ""
        long = "\\begin{" in s.claim or len(s.claim) > 110  # a block, or too long for the line: displayed
        claim = rf"\[ {s.claim} \]" if long else f"${s.claim}$"
        items.append(rf"\item[{mark}] {note}{claim}")
        md.append(
            f"- {md_text(s.note) + ': ' if s.note else ''}${s.claim}$" + ("" if s.holds else " **(fails)**")
        )
        frags += [s.claim, *text_math(s.note)]
    tex.append("\\begin{itemize}\\small\n" + "\n".join(items) + "\n\\end{itemize}")
    verdict = "holds" if lemma.holds else "does NOT hold"  # type: ignore[attr-defined]
    tex.append(rf"\emph{{Checked: the lemma {verdict} ({len(lemma.steps)} steps).}}")  # type: ignore[attr-defined]
    md += ["", f"*{'Holds' if lemma.holds else 'Does NOT hold'}* ({len(lemma.steps)} steps)."]  # type: ignore[attr-defined]
    if lemma.failure:  # type: ignore[attr-defined]
        tex.append(r"\emph{Failure:} " + tex_text(lemma.failure))  # type: ignore[attr-defined]
        md.append(f"Failure: {md_text(lemma.failure)}")  # type: ignore[attr-defined]
    return Raw("\n".join(tex) + "\n", "\n".join(md) + "\n", tuple(frags))


def _quick_memory() -> Section:
    a = shape("fp32[I_XY, J]", mesh=Mesh(X=8, Y=2), sizes={"I": 1024, "J": 4096})
    h100 = hardware.get("h100")
    load = a.bytes_per_device / h100.hbm_bandwidth.value
    b = shape("int8[I_XY, J]", mesh=Mesh(X=2, Y=8, Z=2), sizes={"I": 128, "J": 2048})
    return Section(
        "Quick questions: memory",
        (
            Prose.of(
                "fp32[1024, 4096] as ",
                Math(latex(a.tensor)),
                " on X = 8, Y = 2: local shape ",
                f"[{', '.join(map(str, a.local_shape))}], {a.bytes_per_device:,} bytes per device; loading it at "
                f"the H100's {h100.hbm_bandwidth.value / 1e12:.3g} TB/s of HBM takes {load * 1e9:.0f} ns.",
            ),
            Prose.of(
                "int8[128, 2048] as ",
                Math(latex(b.tensor)),
                " on X = 2, Y = 8, Z = 2: "
                f"{b.bytes_per_device:,} bytes per device, {b.total_bytes:,} bytes on all "
                f"{b.devices} devices (replication {b.replication}).",
            ),
        ),
    )


def _quick_allgather() -> Section:
    source = "AllGather_Y(bf16[E_Y, F]) -> bf16[E, F]"
    stmt_latex = latex(parse_statement(source))
    big = {"E": 2048, "F": 8192}
    line = cost(source, mesh=Mesh(X=8, Y=4), sizes=big, hw="tpu-v5e")
    ring = cost(source, mesh=Mesh([Axis("X", 8), Axis("Y", 4, wraps=True)]), sizes=big, hw="tpu-v5e")
    small = cost(source, mesh=Mesh(X=8, Y=4), sizes={"E": 256, "F": 256}, hw="tpu-v5e")
    return Section(
        "Quick question: how long does an AllGather take?",
        (
            Display(stmt_latex, "On TPU v5e with mesh X = 8, Y = 4:"),
            Prose.of(
                "With E = 2048, F = 8192 the cost model gives ",
                Math("T = " + sym_latex(line.total)),
                f", {_us(line.seconds)}: v5e has no wraparound on an axis of 4, so the axis is a line. "
                f"Had it a full ring: {_us(ring.seconds)}. With E = F = 256: {_us(small.seconds)}, "
                "latency-bound (three hops).",
            ),
        ),
    )


def _question_1() -> Section:
    a = shape("A[I_X, J, K]", mesh=Mesh(X=4, Y=8, Z=2))
    return Section(
        "Question 1: replicated sharding",
        (
            Prose.of(
                Math(latex(a.tensor)),
                f" on X = 4, Y = 8, Z = 2 is replicated over Y and Z: all chips together "
                f"hold {a.replication} copies' worth of the array (the replication factor).",
            ),
        ),
    )


def _question_2_3() -> Section:
    mesh, sizes = Mesh(X=4, Y=4, Z=4), {"B": 1024, "D": 4096}
    rows = []
    for source in (
        "AllGather_X(bf16[B_X, D_Y]) -> bf16[B, D_Y]",
        "AllGather_XY(bf16[B_X, D_Y]) -> bf16[B, D]",
        "AllReduce_Z(bf16[B_X, D_Y]{U_Z}) -> bf16[B_X, D_Y]",
    ):
        c = cost(source, mesh=mesh, sizes=sizes, hw="tpu-v4p")
        rows.append(Prose.of(Math(latex(parse_statement(source))), f": {_us(c.seconds)}."))
    small = "AllGather_X(bf16[B_X]) -> bf16[B]"
    tiny = cost(small, mesh=mesh, sizes={"B": 128}, hw="tpu-v4p")
    return Section(
        "Questions 2 and 3: AllGather latency on TPU v4p 4x4x4",
        (
            Prose.of("B = 1024, D = 4096 in bf16 on the mesh X = Y = Z = 4 (a full cube: every axis wraps):"),
            *rows,
            Prose.of(
                "With B = 128, ",
                Math(latex(parse_statement(small))),
                f" takes {_us(tiny.seconds)}: ",
                Math("T = " + sym_latex(tiny.total)),
                ", latency-bound.",
            ),
        ),
    )


def _question_4(out_dir: Path | None) -> Section:
    one, two = question_4_costs()
    blocks: list = [
        Display(latex(parse(QUESTION_4[0]), reasons=False), "Strategy 1: gather the weights (case 2)."),
        Prose.of(
            "Its time: ",
            Math(r"\max\left(" + sym_latex(one.compute) + ", " + sym_latex(one.comms) + r"\right)"),
            ".",
        ),
        Display(
            latex(parse(QUESTION_4[1]), reasons=False),
            "Strategy 2: multiply locally, then AllReduce (case 3).",
        ),
        Prose.of(
            "Its time: ",
            Math(r"\max\left(" + sym_latex(two.compute) + ", " + sym_latex(two.comms) + r"\right)"),
            ". The derivations section solves when strategy 2 wins: D > 2B when both are communication-bound.",
        ),
    ]
    if out_dir is not None:
        figure = draw_question_4(out_dir / FIGURE)
        if figure is not None:
            draw_question_4(out_dir / WEB_FIGURE)
            blocks.append(Figure(FIGURE, WEB_FIGURE, question_4_caption()))
    return Section("Question 4: AllGather the weights, or AllReduce the partial sums?", tuple(blocks))


def seed_questions(out_dir: Path | None = None) -> Section:
    return Section(
        "Worked examples: the questions of chapter 3",
        (
            Prose.of(
                "The questions of chapter 3, answered from the notation and the chips' published numbers."
            ),
        ),
        (_quick_memory(), _quick_allgather(), _question_1(), _question_2_3(), _question_4(out_dir)),
    )
