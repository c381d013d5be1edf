"""Collectives over a GPU mesh axis that spans nodes, priced level by level (How To Scale Your Model, the GPU
chapter, "Cross-node collectives"): NVLink inside a node, the scale-out network across nodes (a leaf switch
group, then the spine that joins the groups), the slowest level binds.

A group of ``n`` devices holds ``d`` in each node (an axis ``X=64:node8`` has ``d = 8``; an axis without a node
size lies in one node, ``d = n``), spans ``l`` nodes under each leaf switch group (a scalable unit: an axis
``X=1024:node8:leaf256`` has ``l = 32``; without a leaf size every node it spans is under one group) and ``s``
groups. Each GPU has its own NIC at ``W_dcn`` and the fabric above the node is a full-bisection fat tree, so a
child of the leaf level (a node) egresses ``d·W_dcn`` and a child of the spine level (a leaf group)
``l·d·W_dcn``. The book's rule for a ring at each level of the tree, the levels overlapped, is
``bytes · max_i (D_i − 1)/(D_i · W_i)`` with ``D_i`` the children a level joins and ``W_i`` the bandwidth of
one child's link. With V the bytes the group sees (as in :mod:`.stepcost`):

``AllGather``, ``ReduceScatter``
    ``((d-1) + (l-1) + (s-1))·α`` latency and
    ``max((d-1)/d · V/β, (l-1)/l · V/(d·W_dcn), (s-1)/s · V/(l·d·W_dcn))`` bandwidth;
``AllReduce``
    a ReduceScatter then an AllGather (twice the above);
``AllToAll``
    ``(n-1)·α`` and ``max((d-1)/d² · V/(m·β), (m-1)/m² · V/(d·W_dcn))`` with ``m = l·s`` nodes: spanning nodes
    it cannot use the node's bisection (the chapter's ``B·(M-1)/(M²·W_node)``);
``Permute``
    ``α`` and one shard over the slower of NVLink and the NIC.

Only the alpha-beta models (GPUs) describe nodes; the function returns the parts (latency, bandwidth) of
:class:`shardalg.costs.stepcost.CommCost`, which wraps them (that module calls this one, never the reverse).
The levels of a real GPU network (radix, switches, link bandwidths, with sources) are data in
:mod:`.topology`, which checks that they form the full-bisection tree priced here.
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


Group = Sequence[tuple[Expr, int | None, int | None]]  # (size, devices per node, devices per leaf group)


def _levels(group: Group) -> tuple[Expr, Expr, Expr]:
    """(devices of the group in one node, its nodes under one leaf group, the leaf groups it spans) for
    (size, devices per node, devices per leaf group) of each axis."""
    inside = sympy.Mul(*(size if node is None else sympy.Min(size, node) for size, node, _ in group))
    under = sympy.Mul(*(size if leaf is None else sympy.Min(size, leaf) for size, _, leaf in group))
    total = sympy.Mul(*(size for size, _, _ in group))
    return inside, under / inside, total / under


def _gather(v: Expr, d: Expr, m: Expr, s: Expr) -> tuple[Expr, Expr]:
    """One ring per level: NVLink over the d devices of a node, the leaf over m nodes, the spine over s
    groups (each child's link: one GPU's β; a node's d NICs; a group's m·d NICs)."""
    return ALPHA * ((d - 1) + (m - 1) + (s - 1)), Max(
        (d - 1) / d * v / BETA, (m - 1) / m * v / (d * W_DCN), (s - 1) / s * v / (m * d * W_DCN)
    )


def hierarchical_parts(model: str, op: Op, v: Expr, group: Group) -> Parts:
    """The (latency, bandwidth) parts of ``op`` on V bytes over a group of axes given as (size, devices per
    node or None, devices per leaf group or None); latency and bandwidth add within a part (the alpha-beta
    convention)."""
    if model not in NODE_MODELS:
        raise UsageError(
            f"devices per node (:nodeN) describe a GPU node; the {model} model has none",
            fix="use an alpha-beta model (a GPU chip, or --model alpha-beta), or --dcn for a TPU axis "
            "over the data-center network",
        )
    d, m, s = _levels(group)
    return NODE_FORMULAS.lookup(op)(v, d, m, s)


# (V, devices of the group in a node, its nodes under a leaf group, leaf groups) -> parts
NodeFormula = Callable[[Expr, Expr, Expr, Expr], Parts]
# op -> its parts over a group that spans nodes
NODE_FORMULAS: Layer[NodeFormula] = Layer(
    "the cross-node cost model (shardalg.costs.hierarchy)",
    fix="register the op's parts over nodes: @NODE_FORMULAS.register(op)",
)


@NODE_FORMULAS.register(Op.ALL_GATHER, Op.REDUCE_SCATTER)
def _gather_parts(v: Expr, d: Expr, m: Expr, s: Expr) -> Parts:
    return (_gather(v, d, m, s),)


@NODE_FORMULAS.register(Op.ALL_REDUCE)
def _all_reduce_parts(v: Expr, d: Expr, m: Expr, s: Expr) -> Parts:
    return (_gather(v, d, m, s), _gather(v, d, m, s))


@NODE_FORMULAS.register(Op.ALL_TO_ALL)
def _all_to_all_parts(v: Expr, d: Expr, m: Expr, s: Expr) -> Parts:
    m = m * s  # every node of the group: an AllToAll is not hierarchical
    n = d * m
    return (((n - 1) * ALPHA, Max((d - 1) / d**2 * v / (m * BETA), (m - 1) / m**2 * v / (d * W_DCN))),)


@NODE_FORMULAS.register(Op.PERMUTE)
def _permute_parts(v: Expr, d: Expr, m: Expr, s: Expr) -> Parts:
    return ((ALPHA, Max(v / BETA, v / W_DCN) if m * s != 1 else v / BETA),)
