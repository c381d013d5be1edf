"""Collectives over a GPU mesh axis that spans nodes, priced level by level (How To Scale Your Model, the GPU
chapter, "Cross-node collectives"): NVLink inside a node, the scale-out network across nodes, the slower level
binds.

A group of ``n`` devices holds ``d`` in each node (an axis ``X=64:node8`` has ``d = 8``; an axis without a node
size lies in one node, ``d = n``) and spans ``m = n / d`` nodes. Each GPU has its own NIC, so a node egresses
``d * W_dcn`` to the scale-out network. With V the bytes the group sees (as in :mod:`.stepcost`):

``AllGather``, ``ReduceScatter``
    ``((d-1) + (m-1))·α`` latency and ``max((d-1)/d · V/β, (m-1)/m · V/(d·W_dcn))`` bandwidth: a ring
    reduction at each level, the levels overlapped, so the slower one binds;
``AllReduce``
    a ReduceScatter then an AllGather (twice the above);
``AllToAll``
    ``(n-1)·α`` and ``max((d-1)/d² · V/(m·β), (m-1)/m² · V/(d·W_dcn))``: spanning nodes it cannot use the
    node's bisection (the chapter's ``B·(M-1)/(M²·W_node)``);
``Permute``
    ``α`` and one shard over the slower of NVLink and the NIC.

Only the alpha-beta models (GPUs) describe nodes; the function returns the parts (latency, bandwidth) of
:class:`shardalg.costs.stepcost.CommCost`, which wraps them (that module calls this one, never the reverse).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import sympy
from sympy import Expr, Max

from shardalg.algebra.registry import Layer
from shardalg.algebra.symbols import quantity
from shardalg.errors import UsageError
from shardalg.notation.syntax import Op

__all__ = ["hierarchical_parts", "NODE_MODELS", "NODE_FORMULAS"]

ALPHA, BETA, W_DCN = quantity("alpha"), quantity("beta"), quantity("W_dcn")
NODE_MODELS = ("alpha-beta", "alpha-beta-rd")
Parts = tuple[tuple[Expr, Expr], ...]


def _levels(group: Sequence[tuple[Expr, int | None]]) -> tuple[Expr, Expr]:
    """(devices of the group in one node, nodes it spans) for (size, devices per node) of each axis."""
    inside = sympy.Mul(*(size if node is None else sympy.Min(size, node) for size, node in group))
    total = sympy.Mul(*(size for size, _ in group))
    return inside, total / inside


def _gather(v: Expr, d: Expr, m: Expr) -> tuple[Expr, Expr]:
    return ALPHA * ((d - 1) + (m - 1)), Max((d - 1) / d * v / BETA, (m - 1) / m * v / (d * W_DCN))


def hierarchical_parts(model: str, op: Op, v: Expr, group: Sequence[tuple[Expr, int | None]]) -> Parts:
    """The (latency, bandwidth) parts of ``op`` on V bytes over a group of axes given as (size, devices per
    node or None); latency and bandwidth add within a part (the alpha-beta convention)."""
    if model not in NODE_MODELS:
        raise UsageError(
            f"devices per node (:nodeN) describe a GPU node; the {model} model has none",
            fix="use an alpha-beta model (a GPU chip, or --model alpha-beta), or --dcn for a TPU axis "
            "over the data-center network",
        )
    d, m = _levels(group)
    return NODE_FORMULAS.lookup(op)(v, d, m)


NodeFormula = Callable[[Expr, Expr, Expr], Parts]  # (V, devices of the group in a node, nodes) -> parts
# op -> its parts over a group that spans nodes
NODE_FORMULAS: Layer[NodeFormula] = Layer(
    "the cross-node cost model (shardalg.costs.hierarchy)",
    fix="register the op's parts over nodes: @NODE_FORMULAS.register(op)",
)


@NODE_FORMULAS.register(Op.ALL_GATHER, Op.REDUCE_SCATTER)
def _gather_parts(v: Expr, d: Expr, m: Expr) -> Parts:
    return (_gather(v, d, m),)


@NODE_FORMULAS.register(Op.ALL_REDUCE)
def _all_reduce_parts(v: Expr, d: Expr, m: Expr) -> Parts:
    return (_gather(v, d, m), _gather(v, d, m))


@NODE_FORMULAS.register(Op.ALL_TO_ALL)
def _all_to_all_parts(v: Expr, d: Expr, m: Expr) -> Parts:
    n = d * m
    return (((n - 1) * ALPHA, Max((d - 1) / d**2 * v / (m * BETA), (m - 1) / m**2 * v / (d * W_DCN))),)


@NODE_FORMULAS.register(Op.PERMUTE)
def _permute_parts(v: Expr, d: Expr, m: Expr) -> Parts:
    return ((ALPHA, Max(v / BETA, v / W_DCN) if m != 1 else v / BETA),)
