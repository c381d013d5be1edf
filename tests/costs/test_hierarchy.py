"""A GPU mesh axis across nodes is priced level by level (the book's GPU chapter, cross-node collectives):
NVLink inside a node, the scale-out network across nodes (each GPU its own NIC), the slower level binds."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.symbols import quantity
from shardalg.costs.hierarchy import hierarchical_parts
from shardalg.costs.plancost import cost
from shardalg.errors import UsageError
from shardalg.notation.syntax import Op

ALPHA, BETA, W_DCN = quantity("alpha"), quantity("beta"), quantity("W_dcn")
V = 2 * 4096 * 65536  # bf16[D_X, F] with D = 4096, F = 65536 (the chapter's example array)


def gather(mesh: str, op: str = "AllGather_X", hw: str | None = "h100"):
    return cost(
        f"{op}(A[D_X, F])" if op == "AllGather_X" else op,
        mesh=Mesh.parse(mesh),
        sizes="D=4096,F=65536",
        hw=hw,
    )


def test_across_nodes_the_scale_out_network_binds():
    c = gather("X=64:node8")
    (step,) = c.steps
    assert step.comm.total() == 14 * ALPHA + sympy.Max(
        sympy.Rational(7, 8) * V / BETA, sympy.Rational(7, 8) * V / (8 * W_DCN)
    )
    # H100: 450 GB/s NVLink per GPU one way, 8 x 400 Gb/s NICs = 400 GB/s per node: "the cost of an AllGather
    # ... beyond the node level ... is roughly B / 400e9" (the chapter's takeaway)
    assert c.seconds == pytest.approx(14 * 2e-6 + 7 / 8 * V / 400e9)


def test_within_one_node_it_is_the_ring_over_nvlink():
    inside = gather("X=8:node8").steps[0].comm.total()
    flat = gather("X=8").steps[0].comm.total()
    assert inside == 7 * ALPHA + sympy.Rational(7, 8) * V / BETA == flat


def test_allreduce_is_two_levels_twice_and_alltoall_loses_the_node_bisection():
    ar = (
        cost("AllReduce_X(A[D, F]{U_X})", mesh=Mesh.parse("X=16:node8"), sizes="D=4096,F=65536", hw="h100")
        .steps[0]
        .comm
    )
    assert len(ar.parts) == 2 and ar.parts[0] == ar.parts[1]
    a2a = (
        cost("AllToAll_{X,F}(A[D_X, F])", mesh=Mesh.parse("X=16:node8"), sizes="D=4096,F=65536", hw="h100")
        .steps[0]
        .comm
    )
    (latency, bandwidth) = (t.sympy() for t in a2a.parts[0])  # the parts are light terms
    assert latency == 15 * ALPHA
    assert bandwidth == sympy.Max(
        sympy.Rational(7, 64) * V / (2 * BETA), sympy.Rational(1, 4) * V / (8 * W_DCN)
    )


def test_nodes_belong_to_gpu_models():
    with pytest.raises(UsageError, match="devices per node"):
        gather("X=16:node8", hw="tpu-v5p")


def test_an_op_without_parts_over_nodes_is_refused_naming_the_model() -> None:
    with pytest.raises(UsageError) as err:
        hierarchical_parts("alpha-beta", Op.SLICE, sympy.Integer(1), [(sympy.Integer(16), 8, None)])
    assert err.value.message == "the cross-node cost model (shardalg.costs.hierarchy) has no method for Slice"
