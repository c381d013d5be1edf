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
from shardalg.notation.syntax import Dim, Tensor
from tests.shared.plans import HAND_PLANS, MESH, WRONG

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
        "error: C[I, K_Y]{U_X} is unreduced over X: a PartitionSpec's positional entries only say "
        "which dims are sharded"
    )
    assert "shardalg.to_partition_spec(t)" in str(err.value)
    import shardalg

    assert "to_partition_spec" in shardalg.__all__  # the function the fix names is public


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
    dims = tuple(
        Dim("IJK"[d], tuple(a for a, w in zip(names, where, strict=True) if w == d)) for d in range(rank)
    )
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


def test_top_level_bridges_give_real_library_objects() -> None:
    import importlib.util

    import shardalg as sa

    if importlib.util.find_spec("jax") is None:
        assert sa.to_partition_spec("A[I_XY, J]") == (("X", "Y"), None)
    else:
        from jax.sharding import PartitionSpec

        spec = sa.to_partition_spec("C[I, K_Y]{U_X}")
        assert isinstance(spec, PartitionSpec) and spec == PartitionSpec(None, "Y", unreduced={"X"})
    if importlib.util.find_spec("torch") is None:
        with pytest.raises(UsageError, match="pip install 'shardalg\\[torch\\]'"):
            sa.to_torch_placements("A[I_X, J]", "X=4,Y=2")
        return
    from torch.distributed.tensor import Partial as TP
    from torch.distributed.tensor import Replicate as TR
    from torch.distributed.tensor import Shard as TS

    got = sa.to_torch_placements("A[I_X, J]{U_Y}", "X=4,Y=2")
    assert got == [TS(0), TP()] and all(type(p).__module__.startswith("torch.") for p in got)
    assert sa.to_torch_placements("A[I, J_Y]", "X=4,Y=2") == [TR(), TS(1)]
    back = sa.from_torch_placements([TS(0), TP()], "X=4,Y=2", ["I", "J"], name="A")
    assert back == T("A[I_X, J]{U_Y}")


def test_to_torch_placements_without_torch_is_a_clear_error(monkeypatch) -> None:
    import sys

    import shardalg as sa

    for name in ("torch", "torch.distributed", "torch.distributed.tensor"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(UsageError) as err:
        sa.to_torch_placements("A[I_X, J]", "X=4")
    assert str(err.value).startswith(
        "error: DTensor placements need torch (torch.distributed.tensor) [usage]"
    )
