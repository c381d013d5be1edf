"""The search's mesh symmetry (shardalg.search.symmetry): interchangeable axes, a program's axes renamed, and a
piece priced for one member of its orbit renamed back equal to pricing it directly, on numbers."""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.models.expand import shard
from shardalg.notation.parse import parse
from shardalg.search.numeric import prepare_search
from shardalg.search.pieces import (
    StatementPricer,
    _piece_renamed,
    _price_piece,
    _sub_program,
    split_statements,
)
from shardalg.search.space import Pruned, enumerate_space
from shardalg.search.symmetry import interchangeable, rename_axes, renamings
from tests.search.programs import TRANSFORMER_FN

SIZES_FN = "B=8,T=8,S=8,D=16,H=2,E=8,F=32"


@pytest.mark.parametrize(
    ("mesh", "classes"),
    [
        ("X=2,Y=2,Z=2", (("X", "Y", "Z"),)),
        ("X=2,Y=4,Z=2", (("X", "Z"),)),
        ("X=2,Y=4", ()),  # sizes differ
        ("X=4:ring,Y=4:line", ()),  # one wraps, one does not
        ("X=2*2,Y=2", ()),  # X has two links
        ("X=2,Y=2:dcn", ()),  # Y runs over DCN
        ("X=4,Y=2x2", ()),  # Y is declared factored: its sub-axes are planned
    ],
)
def test_interchangeable_axes(mesh, classes):
    m = Mesh.parse(mesh)
    assert interchangeable(m) == classes
    n = 1
    for c in classes:
        for k in range(2, len(c) + 1):
            n *= k
    got = renamings(m)
    assert len(got) == n and got[0] == {} and len({tuple(sorted(r.items())) for r in got}) == n


def test_rename_axes_of_a_program():
    p = parse("params W\nAllGather_X(W[D_X, F_Y]) -> W[D, F_Y]\nIn[B_XY, D] * W[D, F_Y] -> O[B_XY, F]{U_Y}")
    q = rename_axes(p, {"X": "Y", "Y": "X"})
    assert str(q) == str(
        parse("params W\nAllGather_Y(W[D_Y, F_X]) -> W[D, F_X]\nIn[B_YX, D] * W[D, F_X] -> O[B_YX, F]{U_X}")
    )
    assert rename_axes(q, {"X": "Y", "Y": "X"}) == p and rename_axes(p, {}) is p
    t = parse("A[I, J]{U_Z, U_X} -> A[I_X, J]").statements[0].expr
    assert rename_axes(t, {"X": "Z", "Z": "X"}).unreduced == ("X", "Z")  # kept sorted


def _pieces_of(strategies):
    prog, space, st, _ = prepare_search(
        TRANSFORMER_FN,
        Mesh.parse("X=2,Y=2,Z=2"),
        SIZES_FN,
        "tpu-v5e",
        None,
        "train",
        None,
        None,
        "steady",
        "",
    )
    pricer = StatementPricer(prog, space, st, Pruned())
    chosen = {}
    for a in enumerate_space(space, Pruned()):
        name = space.strategy(a)
        if name in strategies and name not in chosen and not a.megatron:
            chosen[name] = a
    return st, pricer, chosen


def test_a_renamed_piece_is_priced_as_its_orbit():
    """On 2x2x2, every piece of an FSDP+TP and a DP+SP candidate (gathered weights kept: rows that name a
    layout; the attention core; sequence splits that gather K and V) priced under each of the six renamings
    of X, Y, Z equals its own price renamed: the same seconds per lane and axis, bytes, FLOPs and rows."""
    st, pricer, chosen = _pieces_of(("FSDP+TP", "DP+SP"))
    assert set(chosen) == {"FSDP+TP", "DP+SP"}
    checked = 0
    for a in chosen.values():
        program = shard(pricer.base, a.param_map, a.activation_map, sequence=a.megatron)
        for g in split_statements(program):
            sub = _sub_program(program, g)
            if not any(ax in str(sub) for ax in "XYZ"):
                continue
            mine = _price_piece(sub, st, True)
            for m in renamings(st.mesh)[1:]:
                there = rename_axes(sub, m)
                if there == sub:
                    continue
                assert _price_piece(there, st, True) == _piece_renamed(mine, m), (str(sub), m)
                checked += 1
    assert checked >= 20
