"""The sections of the lecture notes that explain the algebra: notation, the four cases, the collectives,
the transposes. Every formula, plan and table row comes out of the engine (parser, printers, planner, cost
model, rule table); this module only chooses the examples and arranges them.
"""

from __future__ import annotations

import re

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.ops import RULES
from shardalg.algebra.shape import shape
from shardalg.costs import hardware
from shardalg.costs.plancost import collective_cost, cost, plan_cost
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

# the symbols of chapter 3, each with its unit, defined before any formula uses them
SYMBOLS: tuple[tuple[str, str], ...] = (
    ("X, Y, Z", "mesh axes; in a cost, X also stands for the axis's size |X| in devices"),
    ("I, J, K, B, D, F", "array dims; in a cost, the dim's size in elements"),
    ("V", "the bytes of an array"),
    (r"W_{\text{ici}}", "the bidirectional ICI bandwidth of one link, in bytes per second"),
    (r"T_{\min}", "the latency of one ICI hop, in seconds"),
    ("C", "the chip's peak FLOP/s (floating-point operations per second)"),
    (r"\alpha", "the latency of one message on a GPU switch, in seconds"),
    (r"\beta", "the bandwidth of one GPU link, in bytes per second"),
    ("M_X, M_Y", "the links each device has along X and Y"),
    ("N", "the number of devices"),
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
CASE_CHIP = "tpu-v5e"  # the chip of the book's chapter 3
CASE_SIZES = {"I": 8192, "J": 8192, "K": 8192}
PLANS_SHOWN = 3


def collective_examples() -> tuple[tuple[Op, str], ...]:
    """(op, the example statement whose input is priced), from each record that has one, in the records' order."""
    return tuple((op, r.example) for op, r in RULES.items() if r.example)


def notation() -> Section:
    rows = []
    for what, source in NOTATION_EXAMPLES:
        node = parse_statement(source)
        rows.append((what, Code(text(node)), Math(latex(node))))
    shapes = []
    for source in SHAPE_EXAMPLES:
        info = shape(source, mesh=SHAPE_MESH, sizes=SHAPE_SIZES)
        local = ", ".join(str(v) for v in info.local_shape)
        shapes.append(
            (
                Math(latex(info.tensor)),
                f"[{local}]",
                f"{info.bytes_per_device:,} bytes",
                f"{info.replication} cop{'y' if info.replication == 1 else 'ies'}",
            )
        )
    return Section(
        "Notation",
        (
            Prose.of(
                "A tensor's sharding says, for every mesh axis, whether the axis shards one of its dims "
                "(a subscript), holds partial sums (",
                Math(r"\{U_X\}"),
                "), or replicates it (the axis "
                "appears nowhere). The forms below are parsed and printed back.",
            ),
            Table(
                ("symbol", "meaning"),
                tuple((Math(sym), what) for sym, what in SYMBOLS),
                caption="The symbols of the costs that follow; a time is in seconds, a size in bytes.",
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


def book_case(lines: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The planner's classification lines split as the book reads them: (the statement's case, the roles of
    the other dims). Case 4 (two dims of the result on one axis) decides the statement when it is there; else
    the contracted dims' cases do."""
    collisions = tuple(line for line in lines if line.startswith("case 4"))
    contracted = tuple(line for line in lines if re.match(r"case [123]\b", line))
    case = collisions or contracted
    return case, tuple(re.sub(r"^case \d: ", "", line) for line in lines if line not in case)


_CASE_REASON = re.compile(r"\bcase \d\b(?! alternative)")


def is_books_plan(p: object) -> bool:
    """A plan that does what the book says for the case: every step is the case's own remedy (its reason
    cites the case), with no slice, permutation or AllToAll the book does not ask for."""
    return all(_CASE_REASON.search(s.reason) for s in p.steps)  # type: ignore[attr-defined]


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}"


def four_cases() -> Section:
    hw = hardware.get(CASE_CHIP)
    sizes = ", ".join(f"{k} = {v:,}" for k, v in CASE_SIZES.items())
    subs = []
    for title, source, gist in CASES:
        stmt = parse_statement(source)
        found = plans(stmt, mesh=CASE_MESH)
        priced = sorted(
            (
                (cost(p, mesh=CASE_MESH, sizes=CASE_SIZES, hw=CASE_CHIP).seconds or 0.0, k, p)
                for k, p in enumerate(found)
            ),
            key=lambda t: (t[0], t[1]),
        )
        blocks: list = [Prose.of(gist), Display(latex(stmt), "The matmul:")]
        if found and found[0].cases:
            case, roles = book_case(found[0].cases)
            blocks.append(Prose.of("The book's case: " + "; ".join(case) + "."))
            if roles:
                blocks.append(Prose.of("The other dims: " + "; ".join(roles) + "."))
        books = [p for _, _, p in priced if is_books_plan(p)]
        book = books[0] if books else None
        shown = [t for t in priced[:PLANS_SHOWN]]
        if book is not None and all(p is not book for _, _, p in shown):
            shown.append(next(t for t in priced if t[2] is book))
        many = (
            f"{len(found)} plans; the {len(shown)} fastest"
            if len(shown) < len(found)
            else f"{len(found)} plan{'s' if len(found) > 1 else ''}"
        )
        if len(shown) > PLANS_SHOWN:
            many = f"{len(found)} plans; the {PLANS_SHOWN} fastest and the book's"
        blocks.append(
            Prose.of(
                f"There are {many}, fastest first by their time on {hw.name} ({sizes} in bf16), each with its "
                "bandwidth-bound communication time:"
            )
        )
        for i, (seconds, _, p) in enumerate(shown, 1):
            comms = plan_cost(p, CASE_MESH, latency=False).comms
            whose = "; the book's plan" if p is book else ""
            label = f"Plan {i} ({p.note or 'no communication'}{whose}), {_us(seconds)} microseconds:"
            blocks.append(Display(latex(p, reasons=False), label))
            blocks.append(
                Prose.of(
                    "Communication: ",
                    Math("T_{\\text{comms}} = " + sym_latex(comms)),
                    ". Why each step: " + " ".join(f"({k}) {s.reason}." for k, s in enumerate(p.steps, 1)),
                )
            )
        subs.append(Section(title, tuple(blocks)))
    return Section(
        "The four cases of a sharded matmul",
        (
            Prose.of(
                "Each case below is planned on the mesh ",
                Math(r"X = 4,\ Y = 2"),
                " and priced by the cost model (bf16, sizes symbolic, ",
                Math(r"W_{\text{ici}}"),
                " the bidirectional link bandwidth in bytes per second); the plans are ordered by their time "
                f"on {hw.name} with {sizes}, and the plan the book gives for the case is named.",
            ),
        ),
        tuple(subs),
    )


def collectives() -> Section:
    mesh = Mesh(X=None)
    rows, free = [], []
    for op, source in collective_examples():
        stmt = parse_statement(source)
        arg = stmt.expr.arg
        ici = collective_cost(op, arg, stmt.expr.axes, mesh, model="ici")
        ab = collective_cost(op, arg, stmt.expr.axes, mesh, model="alpha-beta")
        rows.append(
            (
                Math(latex(stmt)),
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
                " hops), and the alpha-beta ring of a GPU switch (",
                Math(r"\alpha"),
                " per message, ",
                Math(r"\beta"),
                " bytes per second). AllReduce is a ReduceScatter followed by an AllGather; AllToAll moves a quarter; "
                f"{', '.join(free) or 'nothing'} communicates nothing.",
            ),
            Table(
                ("collective", "ICI, bandwidth", "ICI with latency", "alpha-beta"),
                tuple(rows),
                caption="From the cost model; times in seconds.",
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
        stmt = parse_statement(source)
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
                caption="From the table of rules.",
                size="footnotesize",
            ),
            Display(
                "\\begin{aligned}\n" + " \\\\\n".join(examples) + "\n\\end{aligned}",
                "Each example collective and its derived transpose:",
            ),
        ),
    )
