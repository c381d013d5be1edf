"""Mesh text (every command's --mesh): sizes, symbolic sizes, link multiplicity, ring or line, devices per node;
each malformed axis a UsageError that shows the forms; the options reach the cost model."""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.costs.plancost import cost
from shardalg.errors import UsageError


@pytest.mark.parametrize(
    ("text", "axes"),
    [
        ("X=4,Y=2", [Axis("X", 4), Axis("Y", 2)]),
        ("X=4 Y=2", [Axis("X", 4), Axis("Y", 2)]),
        ("X:4", [Axis("X", 4)]),
        ("X,Y", [Axis("X", None), Axis("Y", None)]),
        ("X=16*2", [Axis("X", 16, links=2)]),
        ("X=4:ring,Y=4:line", [Axis("X", 4, wraps=True), Axis("Y", 4, wraps=False)]),
        ("X*2:ring", [Axis("X", None, links=2, wraps=True)]),
        ("X=64:node8", [Axis("X", 64, node=8)]),
        ("X=16*2:line:node4", [Axis("X", 16, links=2, wraps=False, node=4)]),
    ],
)
def test_forms(text, axes):
    assert Mesh.parse(text) == Mesh(axes)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("X=4:torus", "unknown option :torus of mesh axis X: the options are :ring, :line, :nodeN"),
        ("X=320:torus16x21", "mesh axis X has 320 devices, but its torus sides 16x21 hold 336"),
        ("X=320*3:torus16x20", "mesh axis X stands on 2 torus axes but says 3 links"),
        ("X=64:leaf16", "X: its devices per leaf group .16. must be a multiple of its devices per node"),
        ("X=64:node8:leaf12", "X: its devices per leaf group .12. must be a multiple"),
        ("X=96:node8:leaf64", "mesh axis X has 96 devices, not a multiple of 64 per leaf group"),
        ("P=2:dcn:node2", "mesh axis P runs over DCN: it has no node or torus sides"),
        ("X=4:ring:line", "says ring or line twice"),
        ("X=0", "mesh axis X needs a positive size, not 0"),
        ("X=6:node4", "mesh axis X has 6 devices, not a multiple of 4 per node"),
        ("X=4*0", "needs a positive integer link count"),
        ("X=4,X=2", "mesh axis X is declared twice"),
        ("4=X", "bad mesh axis '4=X': write NAME[=SIZE][*LINKS]"),
        ("", "the mesh has no axes"),
    ],
)
def test_mistakes(text, message):
    with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("*", r"\*")):
        Mesh.parse(text)


def test_ring_and_line_override_the_chips_rule_and_links_multiply_bandwidth():
    # v5e wraps an axis only at length 16: X=4 is a line unless the mesh says ring.
    line = cost(
        "AllGather_X(A[I_X, J])", mesh=Mesh.parse("X=4"), sizes="I=1024,J=1024", hw="tpu-v5e", latency=False
    ).seconds
    ring = cost(
        "AllGather_X(A[I_X, J])",
        mesh=Mesh.parse("X=4:ring"),
        sizes="I=1024,J=1024",
        hw="tpu-v5e",
        latency=False,
    ).seconds
    two = cost(
        "AllGather_X(A[I_X, J])",
        mesh=Mesh.parse("X=4*2:ring"),
        sizes="I=1024,J=1024",
        hw="tpu-v5e",
        latency=False,
    ).seconds
    assert ring == pytest.approx(2 * 1024 * 1024 / 9e10)  # V / W_ici
    assert line == pytest.approx(ring * 2 * 3 / 4)  # (|X|-1)/|X| of V at the one-way W_ici/2
    assert two == pytest.approx(ring / 2)


def test_slice_options_read_back_as_the_axis_fields():
    assert Mesh.parse("X:torus16x20") == Mesh([Axis("X", 320, 2, torus=(16, 20))])
    assert Mesh.parse("X=320:torus16x20,P=2:dcn,G=1024:node8:leaf256") == Mesh(
        [Axis("X", 320, 2, torus=(16, 20)), Axis("P", 2, dcn=True), Axis("G", 1024, node=8, leaf=256)]
    )
