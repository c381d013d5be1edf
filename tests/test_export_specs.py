"""Shardings <-> JAX PartitionSpecs and DTensor placements; and the hand-built plans the export tests run.

The plans below are written step by step (not by the planner), so the export tests do not depend on the
planner's choices; ``test_hand_plans_are_right`` runs each on the numpy executor first.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.errors import AxisUsedTwice, UnknownAxis, UsageError
from shardalg.notation.parse import parse_tensor as T
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Dim, Op, Tensor

from shardalg.export.specs import (  # isort: skip
    Partial,
    Replicate,
    Shard,
    from_partition_spec,
    from_placements,
    partition_spec_source,
    to_partition_spec,
    to_placements,
)

# ------------------------------------------------------------------------------------ hand-built plans
_OPS = {o.value: o for o in Op}


def col(op: str, axes: str, before: str, after: str, dim: str | None = None) -> Step:
    return Step(_OPS[op], (T(before),), T(after), axes=tuple(axes), dim=dim)


def ein(left: str, right: str, out: str) -> Step:
    a, b, c = T(left), T(right), T(out)
    contract = tuple(n for n in a.dim_names if n in b.dim_names and n not in c.dim_names)
    return Step(Op.EINSUM, (a, b), c, contract=contract)


def chain(*steps: Step) -> Plan:
    produced = {s.output for s in steps}
    inputs: list[Tensor] = []
    for s in steps:
        inputs += [t for t in s.inputs if t not in produced and t not in inputs]
    return Plan(tuple(inputs), steps, steps[-1].output)


MESH = Mesh(X=4, Y=2)
HAND_PLANS: dict[str, Plan] = {
    "case1": chain(ein("A[I_X, J]", "B[J, K_Y]", "C[I_X, K_Y]")),
    "case2": chain(col("AllGather", "X", "A[I, J_X]", "A[I, J]"), ein("A[I, J]", "B[J, K]", "C[I, K]")),
    "case3": chain(ein("A[I, J_X]", "B[J_X, K]", "C[I, K]{U_X}"), col("AllReduce", "X", "C[I, K]{U_X}", "C[I, K]")),
    "case3_rs": chain(
        ein("A[I, J_X]", "B[J_X, K]", "C[I, K]{U_X}"), col("ReduceScatter", "X", "C[I, K]{U_X}", "C[I, K_X]", "K")
    ),
    "case4": chain(col("AllGather", "X", "B[J, K_X]", "B[J, K]"), ein("A[I_X, J]", "B[J, K]", "C[I_X, K]")),
    "dp": chain(ein("In[B_X, D]", "W[D, F]", "Out[B_X, F]")),
    "fsdp": chain(col("AllGather", "X", "W[D_X, F]", "W[D, F]"), ein("In[B_X, D]", "W[D, F]", "Out[B_X, F]")),
    "tp": chain(
        ein("In[B, D]", "Win[D, F_Y]", "H[B, F_Y]"),
        ein("H[B, F_Y]", "Wout[F_Y, D]", "Out[B, D]{U_Y}"),
        col("AllReduce", "Y", "Out[B, D]{U_Y}", "Out[B, D]"),
    ),
    "fsdp_tp": chain(
        col("AllGather", "Y", "In[B_X, D_Y]", "In[B_X, D]"),
        col("AllGather", "X", "Win[D_X, F_Y]", "Win[D, F_Y]"),
        ein("In[B_X, D]", "Win[D, F_Y]", "H[B_X, F_Y]"),
        col("AllGather", "X", "Wout[F_Y, D_X]", "Wout[F_Y, D]"),
        ein("H[B_X, F_Y]", "Wout[F_Y, D]", "Out[B_X, D]{U_Y}"),
        col("ReduceScatter", "Y", "Out[B_X, D]{U_Y}", "Out[B_X, D_Y]", "D"),
    ),
    "all_to_all": chain(col("AllToAll", "Y", "A[I_XY, J]", "A[I_X, J_Y]", "J")),
    "all_to_all_xy": chain(col("AllToAll", "XY", "A[I_XY, J]", "A[I, J_XY]", "J")),
    "slice": chain(col("Slice", "Y", "A[I_X, J]", "A[I_X, J_Y]", "J")),
    "zero_pad": chain(col("Slice", "Y", "A[I_X, J_Y]", "A[I_X, J]{U_Y}", "J")),
    "permute": chain(col("Permute", "XY", "A[I_XY, J]", "A[I_YX, J]")),
    "gather_two_dims": chain(col("AllGather", "XY", "A[I_X, J_Y]", "A[I, J]")),
    "reduce_scatter_in": chain(col("ReduceScatter", "Y", "C[I_X, K]{U_Y}", "C[I_XY, K]", "I")),
    "gather_yx": chain(col("AllGather", "YX", "A[I_YX, J]", "A[I, J]")),
}

# The forward programs in the notation (planned by the planner), on the mesh X=4, Y=2.
PROGRAMS = {
    "case1": "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]",
    "case2": "A[I, J_X] * B[J, K] -> C[I, K]",
    "case3": "A[I, J_X] * B[J_X, K] -> C[I, K]",
    "case4": "AllGather_X(B[J, K_X]) -> B[J, K]; A[I_X, J] * B[J, K] -> C[I_X, K]",
    "dp": "In[B_X, D] * W[D, F] -> Out[B_X, F]",
    "fsdp": "In[B_X, D] * W[D_X, F] -> Out[B_X, F]",
    "tp": "In[B, D] * Win[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * Wout[F_Y, D] -> Out[B, D]",
    "fsdp_tp": "AllGather_X(Win[D_X, F_Y]) -> Win[D, F_Y]; In[B_X, D] * Win[D, F_Y] -> H[B_X, F_Y]; "
    "AllGather_X(Wout[F_Y, D_X]) -> Wout[F_Y, D]; H[B_X, F_Y] * Wout[F_Y, D] -> Out[B_X, D]",
}

# A plan that lies: it all-reduces a replicated value, which multiplies it by |X|. The check must say no.
WRONG = Plan((T("A[I, J]"),), (Step(Op.ALL_REDUCE, (T("A[I, J]"),), T("A[I, J]"), axes=("X",)),), T("A[I, J]"))


@pytest.mark.parametrize("name", sorted(HAND_PLANS))
def test_hand_plans_are_right(name: str) -> None:
    from shardalg.numeric.execute import run_plan

    assert run_plan(HAND_PLANS[name], MESH).ok


def test_the_wrong_plan_is_wrong() -> None:
    """The executor rejects it outright (AllReduce of a value that is not unreduced)."""
    from shardalg.errors import IllegalSharding
    from shardalg.numeric.execute import run_plan

    with pytest.raises(IllegalSharding):
        run_plan(WRONG, MESH)


# ------------------------------------------------------------------------------------ PartitionSpec
SPEC_TABLE = [
    ("A[I_X, J]", ("X", None)),
    ("A[I, J_X]", (None, "X")),
    ("A[I, J]", (None, None)),
    ("A[I_XY, J]", (("X", "Y"), None)),
    ("A[I_YX, J_Z]", (("Y", "X"), "Z")),
    ("A[B_X, S, D_Y]", ("X", None, "Y")),
]


@pytest.mark.parametrize(("text", "spec"), SPEC_TABLE)
def test_partition_spec_both_ways(text: str, spec: tuple) -> None:
    t = T(text)
    assert to_partition_spec(t) == spec
    assert from_partition_spec(spec, t.dim_names, name=t.name) == t


def test_partition_spec_source() -> None:
    assert partition_spec_source(T("A[I_XY, J]")) == "P(('X', 'Y'), None)"
    assert partition_spec_source(T("C[I, K]{U_X}")) == "P(None, None, unreduced={'X'})"


def test_unreduced_has_no_plain_spec() -> None:
    with pytest.raises(UsageError) as err:
        to_partition_spec(T("C[I, K_Y]{U_X}"))
    assert str(err.value).startswith(
        "UsageError [usage]: C[I, K_Y]{U_X} is unreduced over X: a PartitionSpec's positional entries only say "
        "which dims are sharded"
    )
    assert "to_jax_partition_spec" in str(err.value)


def test_short_spec_replicates_the_rest_and_unreduced_comes_back() -> None:
    t = from_partition_spec(("X",), ["I", "J", "K"], name="A", unreduced=["Y"])
    assert t == T("A[I_X, J, K]{U_Y}")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        (("X", None, None), UsageError),  # too many entries for two dims
        ((3, None), UsageError),
        ("X", UsageError),
        (("X", "X"), AxisUsedTwice),
        ((("X", "Y"), "Y"), AxisUsedTwice),
    ],
)
def test_bad_specs(spec: object, error: type) -> None:
    with pytest.raises(error):
        from_partition_spec(spec, ["I", "J"])


def test_spec_axes_checked_against_a_mesh() -> None:
    with pytest.raises(UnknownAxis):
        from_partition_spec(("Z", None), ["I", "J"], mesh=MESH)


# ------------------------------------------------------------------------------------ placements
PLACEMENT_TABLE = [
    ("A[I_X, J]", (Shard(0), Replicate())),
    ("A[I, J_Y]", (Replicate(), Shard(1))),
    ("A[I_X, J]{U_Y}", (Shard(0), Partial())),
    ("A[I_XY, J]", (Shard(0), Shard(0))),
    ("C[I, K]{U_X, U_Y}", (Partial(), Partial())),
    ("A[I, J]{I_X}", (Replicate(), Replicate())),
]


@pytest.mark.parametrize(("text", "placements"), PLACEMENT_TABLE)
def test_placements_both_ways(text: str, placements: tuple) -> None:
    t = T(text)
    assert to_placements(t, MESH) == placements
    back = from_placements(placements, MESH, t.dim_names, name=t.name)
    assert back == Tensor(t.name, t.dims, t.unreduced, (), t.dtype)  # invariant marks have no placement


def test_placements_read_letters() -> None:
    assert from_placements(["S(1)", "P"], MESH, ["I", "J"], name="A") == T("A[I, J_X]{U_Y}")
    assert repr(to_placements(T("A[I_X, J]{U_Y}"), MESH)) == "(S(0), P)"


def test_minor_major_order_that_dtensor_cannot_spell() -> None:
    with pytest.raises(UsageError) as err:
        to_placements(T("A[I_YX, J]"), MESH)
    assert "DTensor cuts a dim shared by several mesh dims in mesh order (X, Y)" in str(err.value)
    assert to_placements(T("A[I_YX, J]"), Mesh(Y=2, X=4)) == (Shard(0), Shard(0))


@pytest.mark.parametrize(
    ("placements", "error"),
    [([Shard(2), Replicate()], UsageError), ([Shard(0)], UsageError), (["Q", "R"], UsageError)],
)
def test_bad_placements(placements: list, error: type) -> None:
    with pytest.raises(error):
        from_placements(placements, MESH, ["I", "J"])


def test_axes_outside_the_mesh() -> None:
    with pytest.raises(UnknownAxis):
        to_placements(T("A[I_Z, J]"), MESH)
    with pytest.raises(AxisUsedTwice):
        to_placements(T("A[I_X, J]{U_X}"), MESH)


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Mesh, Tensor]:
    """A mesh of 1-3 axes and a tensor of 1-3 dims using each axis at most once (mesh order within a dim)."""
    names = ["X", "Y", "Z"][: draw(st.integers(1, 3))]
    mesh = Mesh({n: draw(st.sampled_from([1, 2, 4])) for n in names})
    rank = draw(st.integers(1, 3))
    where = [draw(st.sampled_from(["R", "U", *range(rank)])) for _ in names]
    dims = tuple(Dim("IJK"[d], tuple(a for a, w in zip(names, where, strict=True) if w == d)) for d in range(rank))
    unreduced = tuple(a for a, w in zip(names, where, strict=True) if w == "U")
    return mesh, Tensor("A", dims, unreduced)


@given(layouts())
def test_placements_round_trip(case: tuple[Mesh, Tensor]) -> None:
    mesh, t = case
    assert from_placements(to_placements(t, mesh), mesh, t.dim_names, name="A") == t
    if not t.unreduced:
        assert from_partition_spec(to_partition_spec(t), t.dim_names, name="A") == t


# ------------------------------------------------------------------------------------ with the libraries
def test_jax_partition_spec_and_named_sharding() -> None:
    jax = pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]')")
    from jax.sharding import PartitionSpec as P

    from shardalg.export.specs import from_named_sharding, to_jax_partition_spec, to_named_sharding

    assert to_jax_partition_spec(T("A[I_XY, J]")) == P(("X", "Y"), None)
    spec = to_jax_partition_spec(T("C[I, K_Y]{U_X}"))
    assert spec.unreduced == frozenset({"X"})
    assert from_partition_spec(spec, ["I", "K"], name="C") == T("C[I, K_Y]{U_X}")
    mesh = jax.make_mesh((1, 1), ("X", "Y"), devices=jax.devices()[:1])
    ns = to_named_sharding(T("A[I_X, J_Y]"), mesh)
    assert ns.spec == P("X", "Y")
    assert from_named_sharding(ns, ["I", "J"], name="A") == T("A[I_X, J_Y]")
    with pytest.raises(UnknownAxis):
        to_named_sharding(T("A[I_Z, J]"), mesh)


def test_torch_placement_objects() -> None:
    pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]')")
    from torch.distributed.tensor import Partial as TP
    from torch.distributed.tensor import Replicate as TR
    from torch.distributed.tensor import Shard as TS

    from shardalg.export.specs import placements_source, to_torch_placements

    got = to_torch_placements(T("A[I, J_X]{U_Y}"), MESH)
    assert got == [TS(1), TP()]
    assert from_placements([TS(0), TR()], MESH, ["I", "J"], name="A") == T("A[I_X, J]")
    assert from_placements(got, MESH, ["I", "J"], name="A") == T("A[I, J_X]{U_Y}")
    with pytest.raises(UsageError):
        from_placements([TP("max"), TR()], MESH, ["I", "J"])
    assert placements_source(T("A[I, J_X]{U_Y}"), MESH) == "[Shard(1), Partial()]"
