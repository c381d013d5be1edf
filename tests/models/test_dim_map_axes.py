"""A dim map's mesh axes: an axis named twice in one dim, or an entry the map's order leaves sharding nothing
(every tensor with its dim has an earlier dim on the same axis), is refused up front, not dropped; where two
dims meet on one axis in some tensors only, the map's order places the axis (EP's ``B=X,E=X``)."""

from __future__ import annotations

import pytest

from shardalg.cli import main
from shardalg.errors import UsageError
from shardalg.models.expand import expand, parse_dim_map, shard
from shardalg.notation.printing import text


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("flag", "given", "kept", "dropped"),
    [
        ("--activations", "B=X,T=X", "B", "T"),
        ("--activations", "T=X,B=X", "T", "B"),
        ("--params", "D=X,F=X", "D", "F"),
    ],
)
def test_a_map_that_would_shard_nothing_on_an_axis_is_refused(capsys, flag, given, kept, dropped):
    code, out, err = run(capsys, "model", "show", "llama-3-8b", flag, given)
    assert code == 2, out
    assert out == ""
    first = err.splitlines()[0]
    assert given in first and f"{dropped}=X" in first and kept in first and "[usage]" in first
    assert "fix:" in err and f"{kept}=XY" in err


@pytest.mark.parametrize("given", ["D=XX", "D=X+X", "D=XYX"])
def test_an_axis_named_twice_in_one_dim_is_refused(capsys, given):
    code, out, err = run(capsys, "model", "show", "llama-3-8b", "--params", given)
    assert code == 2, out
    assert "X twice" in err and "D" in err and "fix:" in err
    with pytest.raises(UsageError, match="X twice"):
        parse_dim_map(given)


def test_maps_given_as_dicts_are_checked_too():
    llama = expand("llama-3-8b")
    with pytest.raises(UsageError, match="F=X would shard nothing"):
        shard(llama, {"D": ("X",), "F": ("X",)})
    with pytest.raises(UsageError, match="X twice"):
        shard(llama, {"D": ("X", "X")})


def test_the_maps_order_places_an_axis_two_dims_share_in_some_tensors():
    moe = text(shard(expand("mixtral-8x7b"), "E=X", "B=X,E=X"))  # EP: tokens by batch, experts' slots by E
    assert "R[B_X, T, E]" in moe and "X[E_X, C, D]" in moe
    book = text(shard(expand("llama-3-70b", "decode"), "F=XY,D=XY", "F=XY,D=XY,S=XY"))  # weight-stationary
    assert "W_in[D, F_XY]" in book and "W_q[D_XY, K, G, H]" in book
    assert "Kc[B, S_XY, K, H]" in book
