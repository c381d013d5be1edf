"""Exact ring bytes (``exact=True``: the ring's (N − 1)/N, as ``jax.experimental.roofline`` counts) and one-way
rings (``ring="uni"``: the book's chapter 3 counting exercise), each checked against an independent count."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import sympy

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.algebra.symbols import axis_size, dim_size, quantity
from shardalg.cli import main
from shardalg.costs.plancost import cost
from shardalg.errors import UsageError

B, D = dim_size("B"), dim_size("D")
X = axis_size("X")
W, T = quantity("W_ici"), quantity("T_min")


def bandwidth(text: str, mesh, **kw) -> sympy.Expr:
    return cost(text, mesh, latency=False, **kw).comms


def ring(n: int) -> Mesh:
    return Mesh([Axis("X", n, wraps=True)])


# ---- exact: (N - 1)/N -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 4, 8, 16])
def test_exact_allgather_bytes_are_n_minus_one_over_n_of_the_default(n):
    text = "AllGather_X(bf16[B_X, D])"
    book, exact = bandwidth(text, ring(n)), bandwidth(text, ring(n), exact=True)
    assert sympy.simplify(exact / book) == sympy.Rational(n - 1, n)
    sizes = {"B": 1024, "D": 512}
    step, book_step = (cost(text, ring(n), sizes, exact=e).steps[0] for e in (True, False))
    assert book_step.bytes.sympy() == 1024 * 512 * 2  # the book's V: the array's bytes
    assert step.bytes.sympy() == sympy.Rational(n - 1, n) * 1024 * 512 * 2  # what the ring moves
    ((axis, moved),) = step.comm.axis_bytes
    assert axis == "X" and moved.sympy() == sympy.Rational(n - 1, n) * 1024 * 512 * 2


def test_exact_with_a_symbolic_axis_keeps_the_factor():
    assert (
        sympy.simplify(
            bandwidth("AllGather_X(bf16[B_X, D])", Mesh(X=None), exact=True) - 2 * B * D * (X - 1) / (X * W)
        )
        == 0
    )


def test_exact_reduce_scatter_and_allreduce():
    mesh = ring(8)
    rs = bandwidth("ReduceScatter_{X,B}(bf16[B, D]{U_X})", mesh, exact=True)
    ar = bandwidth("AllReduce_X(bf16[B, D]{U_X})", mesh, exact=True)
    assert sympy.simplify(rs - sympy.Rational(7, 8) * 2 * B * D / W) == 0
    assert sympy.simplify(ar - 2 * rs) == 0


def roofline_ring_bytes(local_bytes: Fraction, sizes: list[int]) -> Fraction:
    """Bytes per axis of a ring AllGather counted phase by phase, the way jax.experimental.roofline does:
    the data splits evenly over the axes; along each axis, largest first, a device receives its shard from
    each of the other |axis| − 1 devices, and the shard grows by |axis| for the next phase."""
    shard, moved = local_bytes / len(sizes), Fraction(0)
    for n in sorted(sizes, reverse=True):
        moved += shard * (n - 1)
        shard *= n
    return moved


@pytest.mark.parametrize("x, y", [(4, 2), (2, 2), (8, 4), (4, 4)])
def test_the_per_axis_split_matches_the_roofline_count(x, y):
    mesh = Mesh([Axis("X", x, wraps=True), Axis("Y", y, wraps=True)])
    sizes = {"B": 4096, "D": 256}
    step = cost("AllGather_XY(bf16[B_XY, D])", mesh, sizes, exact=True).steps[0]
    want = roofline_ring_bytes(Fraction(4096 * 256 * 2, x * y), [x, y])
    assert {a: b.sympy() for a, b in step.comm.axis_bytes} == {"X": want, "Y": want}
    # and the time is those bytes at one axis's bandwidth: the two axes carry their halves at once
    t = cost("AllGather_XY(bf16[B_XY, D])", mesh, sizes, exact=True, latency=False).comms
    assert sympy.simplify(t - sympy.Rational(want.numerator, want.denominator) / W) == 0


def test_a_line_already_counts_its_n_minus_one():
    line = Mesh([Axis("X", 4, wraps=False)])
    text = "AllGather_X(bf16[B_X, D])"
    assert sympy.simplify(bandwidth(text, line) - bandwidth(text, line, exact=True)) == 0


# ---- one-way rings -----------------------------------------------------------------------------------------
def one_way_link_loads(n: int, all_to_all: bool) -> int:
    """Chunks crossing the busiest link of a ring of n devices sending one way only (link k joins device k
    to k + 1). AllToAll: device src sends its chunk dst (a shard of its shard) to dst. AllGather: device
    src's shard reaches every other device, forwarded along the ring, so it crosses each link of the union of
    those paths once."""
    load = [0] * n
    for src in range(n):
        links: list[int] = []
        crossed: set[int] = set()
        for dst in range(n):
            if src == dst:
                continue
            path = [(src + h) % n for h in range((dst - src) % n)]
            if all_to_all:
                links.extend(path)
            else:
                crossed.update(path)
        for k in links if all_to_all else crossed:
            load[k] += 1
    return max(load)


@pytest.mark.parametrize("n", [4, 6, 8, 16])
def test_one_way_ring_counts_equal_a_routing_simulation(n):
    mesh, v = ring(n), Fraction(2 * 1536 * 768)  # bf16 [B, D] with B = 1536, D = 768: V bytes in all
    sizes = {"B": 1536, "D": 768}
    a2a = cost("AllToAll_{X,D}(bf16[B_X, D])", mesh, sizes, ring="uni", exact=True, latency=False).comms
    ag = cost("AllGather_X(bf16[B_X, D])", mesh, sizes, ring="uni", exact=True, latency=False).comms
    chunk, shard, one_way = v / n**2, v / n, W / 2
    assert sympy.simplify(a2a - one_way_link_loads(n, True) * sympy.Rational(chunk) / one_way) == 0
    assert sympy.simplify(ag - one_way_link_loads(n, False) * sympy.Rational(shard) / one_way) == 0


def test_the_book_exercise_alltoall_is_a_quarter_both_ways_and_a_half_one_way():
    mesh = Mesh(X=None)
    for ring_kind, share in (("bi", sympy.Rational(1, 4)), ("uni", sympy.Rational(1, 2))):
        a2a = bandwidth("AllToAll_{X,D}(bf16[B_X, D])", mesh, ring=ring_kind)
        ag = bandwidth("AllGather_X(bf16[B_X, D])", mesh, ring=ring_kind)
        assert sympy.simplify(a2a / ag) == share
    assert sympy.simplify(bandwidth("AllGather_X(bf16[B_X, D])", mesh, ring="uni") - 4 * B * D / W) == 0
    assert sympy.simplify(bandwidth("AllToAll_{X,D}(bf16[B_X, D])", mesh, ring="uni") - 2 * B * D / W) == 0


def test_one_way_hops_are_n_minus_one():
    t = cost("AllGather_X(bf16[B_X, D])", ring(8), ring="uni").comms
    assert t.func is sympy.Max and 7 * T in t.args


def test_ring_and_model_errors():
    with pytest.raises(UsageError, match="ring is 'bi'"):
        cost("AllGather_X(bf16[B_X, D])", ring(4), ring="one")
    with pytest.raises(UsageError, match="has no rings"):
        cost("AllGather_X(bf16[B_X, D])", ring(4), model="alpha-beta", ring="uni")
    # alpha-beta already counts (n - 1)/n: exact changes nothing there
    ab = {"model": "alpha-beta"}
    assert bandwidth("AllGather_X(bf16[B_X, D])", ring(4), **ab) == bandwidth(
        "AllGather_X(bf16[B_X, D])", ring(4), exact=True, **ab
    )


def test_cli_exact_and_ring(capsys):
    code = main(
        [
            "cost",
            "AllGather_X(bf16[B_X, D])",
            "--mesh",
            "X=8",
            "--sizes",
            "B=1024,D=512",
            "--hw",
            "tpu-v5p",
            "--exact",
            "--ring",
            "uni",
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["exact"] is True and data["ring"] == "uni"
    assert data["steps"][0]["axis_bytes"]["X"]["value"] == pytest.approx(7 / 8 * 1024 * 512 * 2)
    code = main(
        ["cost", "AllGather_X(bf16[B_X, D])", "--mesh", "X=8", "--model", "alpha-beta", "--ring", "uni"]
    )
    assert code == 2 and "has no rings" in capsys.readouterr().err
