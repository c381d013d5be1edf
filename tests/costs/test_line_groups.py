"""A gather over several axes with a line is never priced below what its devices must receive.

Every device of a group of N ends an AllGather (or starts a ReduceScatter) holding (N − 1)/N of V it did not
have, so it receives that much over the links into it: ``W_ici·M`` along a ring (two neighbours, W_ici/2 each
way each) and ``W_ici·M/2`` at a line's end (one neighbour). One line's folded rate
``W_ici·M·(1/2)·|X|/(|X| − 1)`` is exactly that floor; summing the folded rates of several lines is not.
"""

from __future__ import annotations

from math import prod

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg import Dim, Mesh, Op, Tensor
from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.costs.plancost import collective_cost
from shardalg.costs.topology import slice_mesh

W = quantity("W_ici")
E, F = dim_size("E"), dim_size("F")
BYTES = 2  # bf16, the default dtype


def _gather(mesh: str, axes: tuple[str, ...], op: Op = Op.ALL_GATHER, **options: object):
    # V is A[E, F] whole: gathered from its shards, or scattered (reduced) from every device's partial copy
    a = Tensor("A", (Dim("E", axes if op is Op.ALL_GATHER else ()), Dim("F")))
    return collective_cost(op, a, axes, Mesh(mesh), **options)


def _bandwidth(cost) -> sympy.Expr:
    return cost.total(latency=False)


def _floor(sizes: list[int], into: list[sympy.Expr], v: sympy.Expr) -> sympy.Expr:
    """(N − 1)/N of V received over the links into the worst-placed device."""
    n = prod(sizes)
    return sympy.Rational(n - 1, n) * v / sum(into)


V = BYTES * E * F  # the gathered array's bytes: A[E, F] whole


def test_allgather_xyz_over_a_2x2x2_mesh_of_lines_is_priced_at_what_each_device_receives():
    # each device is a corner: it must receive 7/8 of V through its three incoming one-way links
    received = sympy.Rational(8 - 1, 8) * V
    incoming = 3 * (W / 2)
    got = _bandwidth(_gather("X=2:line,Y=2:line,Z=2:line", ("X", "Y", "Z")))
    assert got == received / incoming
    assert sympy.simplify(got - sympy.Rational(7, 12) * V / W) == 0  # 7V/(12·W_ici), not the old V/(3·W_ici)


def test_the_2x2x2_line_group_is_what_exact_counting_gives_and_allreduce_is_twice_it():
    mesh, axes = "X=2:line,Y=2:line,Z=2:line", ("X", "Y", "Z")
    floor = _floor([2, 2, 2], [W / 2] * 3, V)
    assert _bandwidth(_gather(mesh, axes, exact=True)) == floor
    assert _bandwidth(_gather(mesh, axes, Op.REDUCE_SCATTER)) == floor
    assert _bandwidth(_gather(mesh, axes, Op.ALL_REDUCE)) == 2 * floor


@pytest.mark.parametrize("n", [2, 3, 8, 16])
def test_a_single_line_keeps_its_folded_rate(n):
    # (|X| − 1)·(V/|X|) over one way of the link: the book's line, unchanged
    got = _bandwidth(_gather(f"X={n}:line", ("X",)))
    assert got == sympy.Rational(n - 1, n) * V / (W / 2)
    assert got == _floor([n], [W / 2], V)


def test_a_single_line_of_two_links_and_a_symbolic_line_are_unchanged():
    assert _bandwidth(_gather("X=8*2:line", ("X",))) == sympy.Rational(7, 8) * V / W
    x = axis_size("X")
    got = _bandwidth(_gather("X:line", ("X",)))
    assert sympy.simplify(got - (x - 1) / x * V / (W / 2)) == 0


@pytest.mark.parametrize(
    ("mesh", "axes", "links"),
    [
        ("X=4:ring,Y=2:ring", ("X", "Y"), 2),
        ("X=2:ring,Y=2:ring,Z=2:ring", ("X", "Y", "Z"), 3),
        ("X=16:ring,Y=4*2:ring", ("X", "Y"), 3),
    ],
)
def test_ring_groups_keep_the_books_v_over_w(mesh, axes, links):
    assert _bandwidth(_gather(mesh, axes)) == V / (links * W)


def test_ring_groups_under_exact_and_one_way_rings_are_unchanged():
    assert _bandwidth(_gather("X=4:ring,Y=2:ring", ("X", "Y"), exact=True)) == _floor([4, 2], [W, W], V)
    # one way round each ring: the book's exercise, 2·V/W on one ring, V/W over two
    assert _bandwidth(_gather("X=4:ring,Y=2:ring", ("X", "Y"), ring="uni")) == V / W


def test_a_ring_and_line_group_is_held_at_its_floor_where_the_folded_line_would_beat_it():
    # X=4 ring, Y=2 line: the folded sum gives V/(W + W) = V/(2W), but the Y-end device receives 7/8 of V
    # over W (its ring) + W/2 (its one line neighbour)
    got = _bandwidth(_gather("X=4:ring,Y=2:line", ("X", "Y")))
    floor = _floor([4, 2], [W, W / 2], V)
    assert got == floor
    assert floor > V / (2 * W)


def test_a_ring_and_line_group_keeps_the_books_count_where_it_is_above_the_floor():
    # X=2 ring, Y=16 line: V/(W + (W/2)·16/15) = 15V/(23W), above 31/32·V/(3W/2)
    got = _bandwidth(_gather("X=2:ring,Y=16:line", ("X", "Y")))
    book = V / (W + W / 2 * sympy.Rational(16, 15))
    assert got == book
    assert book > _floor([2, 16], [W, W / 2], V)
    # exact counting keeps the ring's (N − 1)/N too: the floor itself, below the book's count
    assert _bandwidth(_gather("X=2:ring,Y=16:line", ("X", "Y"), exact=True)) == _floor([2, 16], [W, W / 2], V)


def test_a_ring_used_one_way_with_a_line_is_at_least_its_floor():
    got = _bandwidth(_gather("X=4:ring,Y=2:line", ("X", "Y"), ring="uni"))
    assert got == _floor([4, 2], [W / 2, W / 2], V)  # 7/8 of V over two one-way links


def test_an_axis_over_two_line_sides_of_a_slice_is_priced_as_the_two_lines():
    # v5e-8: x=2, y=4, no wraparound below 16; X = x*y crosses both sides side by side
    a = Tensor("A", (Dim("E", ("X",)), Dim("F")))
    sizes = {"E": 8 * 4, "F": 1024}
    got = collective_cost(Op.ALL_GATHER, a, ("X",), slice_mesh("v5e-8", "X=x*y"), sizes, hw="tpu-v5e")
    v = BYTES * 8 * 4 * 1024
    assert got.total(latency=False) == _floor([2, 4], [W / 2, W / 2], v)


def test_the_per_axis_split_sums_to_the_bytes_each_device_receives():
    cost = _gather("X=2:line,Y=2:line,Z=2:line", ("X", "Y", "Z"))
    moved = sum(b for _, b in cost.axis_bytes)
    assert sympy.simplify(moved.sympy() - sympy.Rational(7, 8) * V) == 0
    mixed = _gather("X=4:ring,Y=2:line", ("X", "Y"))
    parts = dict(mixed.axis_bytes)
    assert sympy.simplify(sum(b.sympy() for b in parts.values()) - sympy.Rational(7, 8) * V) == 0
    # each axis's bytes over its links into the worst-placed device take the priced time
    assert sympy.simplify(parts["X"].sympy() / W - _bandwidth(mixed)) == 0
    assert sympy.simplify(parts["Y"].sympy() / (W / 2) - _bandwidth(mixed)) == 0


_AXIS = st.tuples(st.sampled_from([2, 3, 4, 8]), st.booleans(), st.sampled_from([1, 2]))


@settings(max_examples=60, deadline=None)
@given(st.lists(_AXIS, min_size=1, max_size=3), st.booleans(), st.booleans())
def test_no_gather_is_priced_below_what_its_devices_receive(axes, exact, uni):
    names = ("X", "Y", "Z")[: len(axes)]
    mesh = ",".join(
        f"{n}={size}{f'*{m}' if m > 1 else ''}:{'ring' if ring else 'line'}"
        for n, (size, ring, m) in zip(names, axes, strict=True)
    )
    options = {"exact": exact, "ring": "uni" if uni else "bi"}
    into = [W * m if ring and not uni else W * m / 2 for _, ring, m in axes]
    floor = _floor([size for size, _, _ in axes], into, V)
    for op, phases in ((Op.ALL_GATHER, 1), (Op.REDUCE_SCATTER, 1), (Op.ALL_REDUCE, 2)):
        got = _bandwidth(_gather(mesh, names, op, **options))
        ratio = sympy.simplify(got / (phases * floor))
        assert ratio.is_number and ratio >= 1, (mesh, options, op, got, floor)
