"""Unreduced targets are planned whenever some sequence of rules reaches them (issue 13): a contracted dim sliced
on both sides leaves the partial sums a result asks for, and a Permute renames partial sums between axes of one
size. Each plan is run on numbers; reachability is decided by the brute force of :mod:`.bruteforce`, which
knows only the rule table."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.errors import NoPlan, UnreachableUnreduced
from shardalg.notation.syntax import Arrow, Dim, Product, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning.order import plan_bytes
from shardalg.planning.planner import Problem, plans
from shardalg.planning.redistribute import redistribute

from .bruteforce import Brute, best_bytes, key

AXES = "XYZ"
SIZES = {d: 12 for d in "IJKL"}  # divisible by 2, 3, 4 and 2 x 3 (not by every group: some layouts are out)


def _ok(found: list, mesh: Mesh) -> None:
    for p in found:
        r = run_plan(p, mesh, SIZES, np.random.default_rng(1))
        assert r.ok, f"{p}\nmax error {r.max_error}"


def test_sliced_on_both_sides_for_partial_sums() -> None:
    mesh = Mesh({"X": 4})
    found = plans("A[I, J] · B[J, K] -> C[I, K]{U_X}", mesh, SIZES)
    first = found[0]
    assert [s.op.value for s in first.steps] == ["Slice", "Slice", "Einsum"]
    assert plan_bytes(first, mesh, Sizes(SIZES)).number == 0 and str(first.output) == "C[I, K]{U_X}"
    _ok(found, mesh)


def test_permute_renames_partial_sums() -> None:
    mesh = Mesh({"X": 2, "Y": 2})
    found = plans("A[I]{U_X} -> A[I]{U_Y}", mesh, SIZES)
    assert [(s.op.value, s.axes) for s in found[0].steps] == [("Permute", ("X", "Y"))]
    _ok(found, mesh)


def test_two_operands_unreduced_over_one_axis_leave_partial_sums_over_two() -> None:
    """Each operand's partial sums are a sum of their own: B's are permuted onto Z, and the product of a sum over
    Y and a sum over Z is a sum over YZ. The rule counted the operands' axes as one set and refused it."""
    mesh = Mesh({"X": 2, "Y": 2, "Z": 2})
    source = "A[I]{U_Y} · B[J]{U_Y} -> C[I, J]{U_YZ}"
    assert not check(source, mesh, SIZES)
    found = plans(source, mesh, SIZES)
    assert [(s.op.value, s.axes) for s in found[0].steps] == [("Permute", ("Y", "Z")), ("Einsum", ())]
    _ok(found, mesh)


def _tensor(draw: st.DrawFn, name: str, labels: list[str], mesh: Mesh, unreduced: bool) -> Tensor:
    dims: dict[str, list[str]] = {d: [] for d in labels}
    u = []
    for a in mesh.names:
        kind = draw(st.sampled_from(["R", "S", "U", "U"] if unreduced else ["R", "S"]))
        if kind == "U":
            u.append(a)
        elif kind == "S" and labels:
            dims[draw(st.sampled_from(labels))].append(a)
    return Tensor(name, tuple(Dim(d, tuple(draw(st.permutations(dims[d])))) for d in labels), tuple(u))


def _mesh(draw: st.DrawFn) -> Mesh:
    n = draw(st.integers(1, 3))
    return Mesh({a: draw(st.sampled_from([2, 2, 3, 4])) for a in AXES[:n]})


@st.composite
def unreduced_einsums(draw: st.DrawFn) -> tuple[Mesh, Tensor, Tensor, Tensor]:
    """``A · B -> C{U_..}`` on a mesh of 1-3 axes of sizes 2-4: the result always asks for partial sums."""
    mesh = _mesh(draw)
    left = draw(st.lists(st.sampled_from("IJK"), min_size=1, max_size=2, unique=True))
    right = draw(st.lists(st.sampled_from("JKL"), min_size=1, max_size=2, unique=True))
    out = [d for d in left if d not in right] + [d for d in right if d not in left]
    a = _tensor(draw, "A", left, mesh, draw(st.booleans()))
    b = _tensor(draw, "B", right, mesh, draw(st.booleans()))
    c = _tensor(draw, "C", list(draw(st.permutations(out))), mesh, True)
    if not c.unreduced:
        c = Tensor("C", c.dims, (mesh.names[-1],)) if all(mesh.names[-1] not in d.axes for d in c.dims) else c
    return mesh, a, b, c


def _divides(case: tuple[Mesh, Tensor, Tensor, Tensor]) -> bool:
    mesh, *tensors = case
    sizes = Sizes(SIZES)
    return all(sizes.check_divisible(t, mesh, tuple(d.axes for d in t.dims)) for t in tensors)


@settings(max_examples=60, deadline=None)
@given(unreduced_einsums())
def test_every_reachable_unreduced_product_is_planned(case: tuple[Mesh, Tensor, Tensor, Tensor]) -> None:
    if not _divides(case):
        return
    mesh, a, b, c = case
    sizes = Sizes(SIZES)
    brute = best_bytes(a, b, c, mesh, sizes, 2, 2)
    try:
        found = plans(Arrow(Product(a, b), c), mesh, SIZES)
    except (NoPlan, UnreachableUnreduced) as err:
        assert brute is None, f"NoPlan ({err.message}), yet\n{brute[1] if brute else ''}"
        return
    assert found and found.complete
    if brute is not None:
        assert plan_bytes(found[0], mesh, sizes).number <= brute[0]
    _ok(found[:3], mesh)


@settings(max_examples=60, deadline=None)
@given(unreduced_einsums())
def test_the_planner_alone_refuses_what_the_unreduced_rule_refuses(
    case: tuple[Mesh, Tensor, Tensor, Tensor],
) -> None:
    """A gradient einsum is planned without the rules run again (``gradients.candidates``: its targets leave
    partial sums on axes the product may not reach): the planner alone must refuse exactly the results the
    unreduced-result rule refuses, and plan every other one."""
    if not _divides(case):
        return
    mesh, a, b, c = case
    stmt = Arrow(Product(a, b), c)
    refused = [v.rule for v in check(stmt, mesh, SIZES)]
    try:
        found = plans(Problem(stmt, mesh, Sizes(SIZES), None, checked=True))
    except NoPlan as err:
        assert refused == ["unreduced-result"], (
            f"{stmt} on {mesh}: the rules say {refused}, the planner {err}"
        )
        return
    assert found, f"{stmt} on {mesh}: no plan and no NoPlan"
    assert not refused, f"{stmt} on {mesh}: planned without the rules, yet they refuse it: {refused}"


@st.composite
def unreduced_reshardings(draw: st.DrawFn) -> tuple[Mesh, Tensor, Tensor]:
    mesh = _mesh(draw)
    labels = draw(st.lists(st.sampled_from("IJ"), min_size=1, max_size=2, unique=True))
    return mesh, _tensor(draw, "A", labels, mesh, True), _tensor(draw, "A", labels, mesh, True)


@settings(max_examples=80, deadline=None)
@given(unreduced_reshardings())
def test_every_reachable_unreduced_resharding_is_planned(case: tuple[Mesh, Tensor, Tensor]) -> None:
    mesh, src, dst = case
    sizes = Sizes(SIZES)
    if not all(sizes.check_divisible(t, mesh, tuple(d.axes for d in t.dims)) for t in (src, dst)):
        return
    reachable = key(dst) in Brute(mesh, sizes).cheapest(src, 4)
    try:
        found = redistribute(src, dst, mesh, SIZES)
    except (NoPlan, UnreachableUnreduced) as err:
        assert not reachable, f"{src} -> {dst} on {mesh}: NoPlan ({err.message}) though rules reach it"
        return
    assert found
    _ok(found[:2], mesh)
