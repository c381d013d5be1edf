"""Costs the notes and ``shardalg plot`` draw: programs in the notation priced by the cost model, and the
question-4 crossover picture (drawn only when matplotlib, the optional [plot] extra, is installed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import as_expr, dim_size
from shardalg.costs.plancost import cost
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Arrow, Collective, Product
from shardalg.pictures.plot import crossover_plot

__all__ = [
    "FSDP_TP",
    "QUESTION_4",
    "fsdp_tp_cost",
    "program_costs",
    "program_label",
    "draw_question_4",
    "question_4_caption",
]

# The book's chapter 3, question 4: the two strategies for X[B, D] ._D Y[D_X, F] -> Z[B, F].
QUESTION_4 = (
    "AllGather_X(Y[D_X, F]) -> Y[D, F]\nX[B, D] * Y[D, F] -> Z[B, F]",
    "X[B, D_X] *_LOCAL Y[D_X, F] -> Z[B, F]{U_X}\nAllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
)

# The FSDP+TP plan of the MLP block: weights gathered over X, activations over Y.
FSDP_TP = """AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]
AllGather_X(Wout[F_Y, D_X]) -> Wout[F_Y, D]
AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]
In[B_X, D] * Win[D, F_Y] -> Tmp[B_X, F_Y]
Tmp[B_X, F_Y] *_LOCAL Wout[F_Y, D] -> Out[B_X, D]{U_Y}
ReduceScatter_{Y,D}(Out[B_X, D]{U_Y}) -> Out[B_X, D_Y]"""

REGIMES = ("comms", "total")


def fsdp_tp_cost():  # -> PlanCost
    return cost(
        FSDP_TP, mesh=Mesh(X=None, Y=None), latency=False, symbolic_links=True, overlap=OverlapPolicy.STEADY
    )


def program_costs(
    programs: Sequence[str],
    *,
    mesh: Mesh | str,
    sizes: Mapping[str, int] | None = None,
    hw: str | None = None,
    regime: str = "total",
) -> list[sympy.Expr]:
    """Each program's time (``comms`` or ``total``) with the chip's numbers and the given sizes substituted:
    what is left free is the swept dim."""
    if regime not in REGIMES:
        raise UsageError(f"regime is one of {', '.join(REGIMES)}, not {regime!r}")
    out = []
    for text in programs:
        pc = cost(
            text, mesh=mesh, sizes=sizes, hw=hw, overlap=OverlapPolicy.STEADY
        )  # the book's layer-level view
        out.append(as_expr(pc.term(regime)).subs(pc.values))
    return out


def program_label(program: str) -> str:
    """A program named by its collectives in the notation, in order: ``AllGather_X(Y), AllReduce_X(Z)``
    (``local product`` when it has none)."""
    found: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, Arrow):
            walk(node.expr)
        elif isinstance(node, Product):
            walk(node.left)
            walk(node.right)
        elif isinstance(node, Collective):
            walk(node.arg)
            inner = getattr(node.arg, "name", None) or "..."
            found.append(f"{node.op.value}_{''.join(node.axes)}({inner})")

    for statement in parse(program).statements:
        walk(statement)
    return ", ".join(found) or "local product"


# question 4's picture: TPU v5p, mesh X = 8, B and F fixed, D swept
Q4_CHIP, Q4_MESH, Q4_SIZES, Q4_RANGE = "tpu-v5p", {"X": 8}, {"B": 1024, "F": 16384}, (256, 65536)
Q4_LABELS = (
    r"$\mathrm{AllGather}_X(Y)$: gather the weights",
    r"$\mathrm{AllReduce}_X(Z)$: local matmul, then reduce",
)


def question_4_caption() -> str:
    """The figure's caption: what is drawn, on which chip, mesh and sizes."""
    sizes = ", ".join(f"{k} = {v:,}" for k, v in Q4_SIZES.items())
    mesh = ", ".join(f"{k} = {v}" for k, v in Q4_MESH.items())
    lo, hi = Q4_RANGE
    return (
        f"Question 4: the communication time of the two strategies, in seconds, against D from {lo:,} to "
        f"{hi:,} elements, on {Q4_CHIP}, mesh {mesh}, {sizes}; the dashed line marks the crossover."
    )


def draw_question_4(path: Path) -> Path | None:
    """The two strategies of the chapter's question 4 against D (see :data:`Q4_SIZES`); the caption is the
    document's (:func:`question_4_caption`). None when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return None

    gather, reduce = program_costs(
        QUESTION_4, mesh=Mesh(**Q4_MESH), sizes=Q4_SIZES, hw=Q4_CHIP, regime="comms"
    )
    crossover_plot(
        gather,
        reduce,
        over=dim_size("D"),
        lo=Q4_RANGE[0],
        hi=Q4_RANGE[1],
        out=path,
        labels=Q4_LABELS,
        title="Gather the weights, or reduce the product?",
    )
    return path
