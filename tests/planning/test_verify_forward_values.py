"""verify keeps a forward value's own layouts held after a collective of the backward moves the name.

The forward stores its values, and the backward reads them; a collective writes a new buffer and leaves the
layout it read (:mod:`shardalg.planning.held`). So when the derived backward's plan for one gradient reshards a
forward value under its own name (``Slice_{XZ,T}(In[B, T, D_Y]) -> In[B, T_XZ, D_Y]``, for the product rule
of ``V2 .* In``) and a later gradient reads the value as the forward stored it (``layernorm'_T(In[B, T, D_Y],
...)``), the read is legal: T is whole in the buffer it reads, so the norm's statistics are the whole row's.
Each derived backward here is clean, and ``gradcheck`` confirms its numbers. A layout that neither the forward
nor a collective made, or a dim read whole where the program holds it only sharded, is still an error, and the
forward's own layouts stay readable after such an error (no cascade of findings on the later, right reads).

Before, verify forgot the forward's layout once a collective moved the name: the norm's gradient was reported
as ``local-statistics`` (``the program holds In[B, T_XZ, D_Y]``) and its contribution as missing (random layers
of ``refusals.py``, seeds 5 and 6: 17 of 600), and after a wrong read every later read of the forward's layout
was reported as ``not-local``."""

from __future__ import annotations

from shardalg.notation.printing import text
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.verify import verify

SIZES = {"B": 12, "T": 12, "D": 12, "F": 12}

# the reproduction: the product rule of V2 .* In moves In under its own name, then layernorm'_T, rmsnorm'_B and
# the gradients of In .* In read In as the forward stored it
PRODUCT_RULE = """In[B, T, D_Y] .* In[B, T, D_Y] -> V0[B, T, D]
rmsnorm_B(In[B, T, D_Y]) -> V1[B, T, D_XY]
layernorm_T(In[B, T, D_Y]) -> V2[B_Z, T_X, D]
V2[B_Z, T_X, D] .* In[B, T, D_Y] -> V3[B_Y, T_XZ, D]"""


def _derived_verifies_clean(forward: str, mesh: str, defer: bool, moved: str, read: str) -> list[str]:
    """The derived backward of ``forward``, checked to move the forward value (statement ``moved``, the name
    kept) before a later statement reads it as the forward stored it (``read``, a part of that statement), to be
    right by the numbers and to verify clean; its statements."""
    bw = backward(forward, mesh, SIZES, defer_reductions=defer)
    statements = [text(s) for s in bw.program().statements]
    assert moved in statements
    assert any(read in s for s in statements[statements.index(moved) + 1 :])
    assert gradcheck(bw).ok
    report = verify(forward, bw.program(), mesh, SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)
    return statements


def test_a_norm_reads_the_forward_layout_after_a_product_rule_moved_the_value() -> None:
    _derived_verifies_clean(
        PRODUCT_RULE,
        "X=2,Y=2,Z=3",
        True,
        moved="Slice_{XZ,T}(In[B, T, D_Y]) -> In[B, T_XZ, D_Y]",
        read="layernorm'_T(In[B, T, D_Y]",
    )


def test_an_rmsnorm_over_a_dim_the_move_shards_reads_the_forward_layout() -> None:
    # seed 5, reduced: the product rule of V1 .* In shards In's T over X; rmsnorm'_T reads T whole
    _derived_verifies_clean(
        "rmsnorm_T(In[B, T, D_YZ]) -> V0[B_Y, T, D_Z]\nV1[B_Y, T, D_Z] .* In[B, T, D_YZ] -> V2[B_Z, T_X, D_Y]",
        "X=3,Y=2,Z=2",
        False,
        moved="Slice_{X,T}(In[B, T, D_YZ]) -> In[B, T_X, D_YZ]",
        read="rmsnorm'_T(In[B, T, D_YZ]",
    )


def test_a_norm_reads_the_forward_layout_after_a_products_plan_moved_the_value() -> None:
    # seed 6, reduced: the plan of the matmul's weight gradient reshards In; layernorm'_T reads the stored In
    _derived_verifies_clean(
        "layernorm_T(In[B_Z, T, D_X]) -> V0[B_XZ, T, D]\nIn[B_Z, T, D_X] * W2[D_XY, F] -> V2[B_X, T, F_YZ]",
        "X=3,Y=2,Z=2",
        False,
        moved="Slice_{Y,T}(In[B_Z, T, D_X]) -> In[B_Z, T_Y, D_X]",
        read="layernorm'_T(In[B_Z, T, D_X]",
    )


def test_reading_a_layout_neither_the_forward_nor_a_collective_made_is_still_an_error() -> None:
    statements = _derived_verifies_clean(
        PRODUCT_RULE,
        "X=2,Y=2,Z=3",
        True,
        moved="Slice_{XZ,T}(In[B, T, D_Y]) -> In[B, T_XZ, D_Y]",
        read="layernorm'_T(In[B, T, D_Y]",
    )
    n = next(k for k, s in enumerate(statements, 1) if s.startswith("layernorm'_T("))
    wrong = list(statements)  # In[B, T_X, D_Y]: the forward holds T whole, the collectives made T_XZ
    wrong[n - 1] = wrong[n - 1].replace("In[B, T, D_Y]", "In[B, T_X, D_Y]")
    report = verify(PRODUCT_RULE, "\n".join(wrong), "X=2,Y=2,Z=3", SIZES, defer_reductions=True)
    assert not report.ok
    (f,) = [f for f in report.findings if f.rule == "layout"]
    assert (f.severity, f.statement) == ("error", n)
    assert f.message.startswith("In[B, T_X, D_Y] is read")
    # the later reads of In as the forward stored it (rmsnorm'_B, the two of In .* In) are right: no cascade
    assert {f.statement for f in report.findings} == {n, len(statements)}
    assert [f.rule for f in report.findings if f.statement == len(statements)] == ["missing-contribution"]


def test_a_moved_forward_value_is_read_whole_over_a_dim_only_where_the_forward_stored_it_whole() -> None:
    # the forward stores In with D whole; a collective moves it to D_X blocks: rmsnorm'_D may still read the
    # stored In[B, D] (each device the whole row), as a hand-written backward that slices In for nothing does
    whole = "rmsnorm_D(In[B, D]) -> H[B, D]; H[B, D] * W[D_X, F] -> Out[B, F]{U_X}"
    written = (
        "Slice_{X,D}(In[B, D]) -> In[B, D_X]; dOut[B, F] * W[D_X, F] -> dH[B, D_X]; "
        "Slice_{X,D}(H[B, D]) -> H[B, D_X]; H[B, D_X] * dOut[B, F] -> dW[D_X, F]; "
        "AllGather_X(dH[B, D_X]) -> dH[B, D]; rmsnorm'_D(In[B, D], dH[B, D]) -> dIn[B, D]"
    )
    report = verify(whole, written, "X=2", SIZES)
    assert report.ok and report.findings == (), str(report)
    # the forward stores In only as D_X blocks; a collective moves it to B_Y blocks, still D_X: read with D
    # whole, each device would normalize its block of D by its own block's statistics
    sharded = "rmsnorm_D(In[B, D_X]) -> H[B, D_X]; H[B, D_X] * W[D_X, F] -> Out[B, F]{U_X}"
    head = (
        "Slice_{Y,B}(In[B, D_X]) -> In[B_Y, D_X]; dOut[B, F] * W[D_X, F] -> dH[B, D_X]; "
        "H[B, D_X] * dOut[B, F] -> dW[D_X, F]; Slice_{Y,B}(dH[B, D_X]) -> dH[B_Y, D_X]; "
    )
    report = verify(sharded, head + "rmsnorm'_D(In[B_Y, D], dH[B_Y, D]) -> dIn[B_Y, D]", "X=2,Y=2", SIZES)
    assert [(f.severity, f.rule, f.statement) for f in report.findings] == [("error", "local-statistics", 5)]
    assert "but the program holds In[B_Y, D_X]" in report.findings[0].message
    # read as the collective made it, or as the forward stored it: right
    moved = (
        "rmsnorm'_D(In[B_Y, D_X], dH[B_Y, D_X]) -> dIn[B_Y, D_X]; AllGather_Y(dIn[B_Y, D_X]) -> dIn[B, D_X]"
    )
    assert verify(sharded, head + moved, "X=2,Y=2", SIZES).ok
    stored = verify(sharded, head + "rmsnorm'_D(In[B, D_X], dH[B, D_X]) -> dIn[B, D_X]", "X=2,Y=2", SIZES)
    assert stored.ok and stored.findings == ()
