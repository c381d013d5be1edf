"""The sections of the lecture notes that explain the algebra: notation, the four cases, the collectives,
the transposes. Every formula, plan and table row comes out of the engine (parser, printers, planner, cost
model, rule table); this module only chooses the examples and arranges them.
"""

from __future__ import annotations

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.shape import shape
from shardalg.costs.plancost import collective_cost, plan_cost
from shardalg.notation.parse import parse_statement
from shardalg.notation.plan import Step
from shardalg.notation.printing import latex, text
from shardalg.notation.syntax import Op
from shardalg.numeric.operators import transpose_step
from shardalg.numeric.proofs import sym_latex
from shardalg.planning.planner import plans

from .document import Code, Display, Math, Prose, Section, Table

__all__ = ["notation", "four_cases", "collectives", "transposes"]

# (what it shows, the expression as one would type it)
NOTATION_EXAMPLES: tuple[tuple[str, str], ...] = (
    ("replicated", "A[I, J]"),
    ("I sharded over X", "A[I_X, J]"),
    ("both dims sharded", "A[I_X, J_Y]"),
    ("I over X then Y (X major)", "A[I_XY, J]"),
    ("unreduced over X", "C[I, K]{U_X}"),
    ("dtype and sizes", "bf16[B_X, D_Y]"),
    ("matmul, case 1", "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]"),
    ("local product", "A[I, J_X] *_LOCAL B[J_X, K] -> C[I, K]{U_X}"),
    ("collective", "AllGather_X(A[I_X, J]) -> A[I, J]"),
    ("collective with a dim", "ReduceScatter_{X,K}(C[I, K]{U_X}) -> C[I, K_X]"),
)

SHAPE_MESH = Mesh(X=4, Y=2)
SHAPE_SIZES = {"I": 1024, "J": 4096}
SHAPE_EXAMPLES = ("fp32[I, J]", "fp32[I_X, J]", "fp32[I_X, J_Y]", "fp32[I_XY, J]")

# (case title, statement, what the book says about it)
CASES: tuple[tuple[str, str, str], ...] = (
    (
        "Case 1: no contracted dim is sharded",
        "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]",
        "Each device multiplies its own blocks; the result follows the inputs' sharding.",
    ),
    (
        "Case 2: one input shards the contracted dim",
        "A[I, J_X] * B[J, K] -> C[I, K]",
        "Gather the sharded input, or slice the other and reduce the partial products afterwards.",
    ),
    (
        "Case 3: both inputs shard the contracted dim alike",
        "A[I, J_X] * B[J_X, K] -> C[I, K_X]",
        "The local products are partial sums {U_X}; a ReduceScatter (or AllReduce) finishes them.",
    ),
    (
        "Case 4: two result dims on one axis",
        "A[I_X, J] * B[J, K_X] -> C[I, K_X]",
        "The result cannot hold X twice: gather one input first.",
    ),
)
CASE_MESH = Mesh(X=4, Y=2)
PLANS_SHOWN = 3


def collective_examples() -> tuple[tuple[Op, str], ...]:
    """(op, the example statement whose input is priced), from each record that has one, in the records' order."""
    return tuple((op, r.example) for op, r in RULES.items() if r.example)


def _statement(text: str):  # -> Statement
    return parse_statement(text)


def _latex(node: object, **settings: object) -> str:
    return latex(node, **settings)


def notation() -> Section:
    rows = []
    for what, source in NOTATION_EXAMPLES:
        node = _statement(source)
        rows.append((what, Code(text(node)), Math(_latex(node))))
    shapes = []
    for source in SHAPE_EXAMPLES:
        info = shape(source, mesh=SHAPE_MESH, sizes=SHAPE_SIZES)
        local = ", ".join(str(v) for v in info.local_shape)
        shapes.append(
            (Math(_latex(info.tensor)), f"[{local}]", f"{info.bytes_per_device:,}", str(info.replication))
        )
    return Section(
        "Notation",
        (
            Prose.of(
                "A tensor's sharding says, for every mesh axis, whether the axis shards one of its dims "
                "(a subscript), holds partial sums (",
                Math(r"\{U_X\}"),
                "), or replicates it (the axis "
                "appears nowhere). The forms below are parsed and printed back by shardalg.",
            ),
            Table(
                ("meaning", "typed as", "printed"),
                tuple(rows),
                caption="Parsed, then printed in LaTeX.",
                columns=r"p{0.17\linewidth}ll",
                size="scriptsize",
            ),
            Prose.of(
                "On the mesh ",
                Math(r"X = 4,\ Y = 2"),
                " with ",
                Math(r"I = 1024,\ J = 4096"),
                " in fp32, the local shape, bytes per device and replication factor of each sharding:",
            ),
            Table(
                ("tensor", "local shape", "bytes per device", "replication"),
                tuple(shapes),
                caption=(
                    "The local shape divides each sharded dim by the sizes of the axes that shard it; "
                    "fp32 is 4 bytes an element."
                ),
            ),
        ),
    )


def _plans_found(n: int, shown: list) -> str:
    """How many plans the planner found and which are shown, in words a reader expects."""
    time = "bandwidth-bound communication time on a ring"
    if n == 1:
        return f"The planner finds one plan, with its {time}:"
    which = (
        "here they are by bytes communicated"
        if len(shown) == n
        else f"the {len(shown)} that communicate fewest bytes"
    )
    text = f"The planner finds {n} plans; {which}, with their {time}"
    if any("spare axes" in (p.note or "") for p in shown):
        text += (
            " (a plan that slices onto a spare axis first moves the same bytes over more links, so it can be "
            "faster than one listed before it)"
        )
    return text + ":"


def four_cases() -> Section:
    subs = []
    for title, source, gist in CASES:
        stmt = _statement(source)
        found = plans(stmt, mesh=CASE_MESH)
        blocks: list = [Prose.of(gist), Display(_latex(stmt), "The matmul:")]
        if found and found[0].cases:
            blocks.append(Prose.of("Classification: " + "; ".join(found[0].cases) + "."))
        shown = found[:PLANS_SHOWN]
        blocks.append(Prose.of(_plans_found(len(found), shown)))
        for i, p in enumerate(shown, 1):
            comms = plan_cost(p, CASE_MESH, latency=False).comms
            blocks.append(Display(_latex(p, reasons=False), f"Plan {i} ({p.note or 'no communication'}):"))
            blocks.append(
                Prose.of(
                    "Communication: ",
                    Math("T = " + sym_latex(comms)),
                    ". Why each step: " + " ".join(f"({k}) {s.reason}." for k, s in enumerate(p.steps, 1)),
                )
            )
        subs.append(Section(title, tuple(blocks)))
    return Section(
        "The four cases of a sharded matmul",
        (
            Prose.of(
                "Each case below is planned by shardalg on the mesh ",
                Math(r"X = 4,\ Y = 2"),
                " and priced by its cost model (bf16, sizes symbolic, ",
                Math(r"W_{\text{ici}}"),
                " the bidirectional link bandwidth).",
            ),
        ),
        tuple(subs),
    )


def collectives() -> Section:
    mesh = Mesh(X=None)
    rows, free = [], []
    for op, source in collective_examples():
        stmt = _statement(source)
        arg = stmt.expr.arg
        ici = collective_cost(op, arg, stmt.expr.axes, mesh, model="ici")
        ab = collective_cost(op, arg, stmt.expr.axes, mesh, model="alpha-beta")
        rows.append(
            (
                Math(_latex(stmt)),
                Math(sym_latex(ici.total(latency=False))),
                Math(sym_latex(ici.total())),
                Math(sym_latex(ab.total())),
            )
        )
        if not RULES[op].communicates:
            free.append(op.value)
    return Section(
        "The collectives and what they cost",
        (
            Prose.of(
                "Times from the cost model for a bf16 array ",
                Math("A[I, J]"),
                " on one axis of size ",
                Math("X"),
                ": the bandwidth-bound ICI time, the ICI time with the hop latency ",
                Math(r"T_{\min}"),
                " (a ring: ",
                Math("X/2"),
                " hops), and the alpha-beta ring of a GPU "
                "switch. AllReduce is a ReduceScatter followed by an AllGather; AllToAll moves a quarter; "
                f"{', '.join(free) or 'nothing'} communicates nothing.",
            ),
            Table(
                ("collective", "ICI, bandwidth", "ICI with latency", "alpha-beta"),
                tuple(rows),
                caption="From shardalg's cost model.",
                size="footnotesize",
            ),
        ),
    )


def transposes() -> Section:
    rows = []
    for op, rule in RULES.items():
        t = rule.transpose
        back = t.op.value if t.op is not None else "(no collective)"
        placement = Math(t.placement.replace("<-", r"\leftarrow")) if "<-" in t.placement else t.placement
        rows.append((op.value, back, placement, t.note))
    examples = []
    for _, source in collective_examples():
        stmt = _statement(source)
        step = Step(stmt.expr.op, (stmt.expr.arg,), stmt.result, stmt.expr.axes, stmt.expr.dim)
        back = transpose_step(step)
        examples.append(rf"{latex(step.statement())} &\quad\Longrightarrow\quad {latex(back.statement())}")
    return Section(
        "Backward: the transposes",
        (
            Prose.of(
                "In a per-device program each collective is a linear map of the stacked buffers, and its "
                "backward is its transpose. On placements the transpose swaps R and U and keeps S(d):"
            ),
            Table(
                ("forward", "backward", "placement", "why"),
                tuple(rows),
                caption="From shardalg's rule table.",
                size="footnotesize",
            ),
            Display(
                "\\begin{aligned}\n" + " \\\\\n".join(examples) + "\n\\end{aligned}",
                "Each example collective and the transpose shardalg derives for it:",
            ),
        ),
    )
