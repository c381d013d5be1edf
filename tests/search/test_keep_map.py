"""Keep or gather again on the strategy map (issue 27, item 2): by default each strategy whose backward reads
the forward's gathered copies is placed twice, gathering again (its name) and keeping them (``NAME kept``);
the map shows where keeping wins and says so; under a memory cap the kept copies count with the state, so the
cap forces gathering again where they do not fit; ``keep_gathered`` forces one way."""

from __future__ import annotations

import sympy

import shardalg as sa

from .mlp import M_X, B, C, D, F, H, N, W, same
from .test_phases import BOOK_X_OPT, MLP

OVER = ("B/N", "C/W_ici", "M_X")


def _conditions(m, name):
    return [c for r in m.map.regions_of(name) for c in r.conditions]


def test_keeping_wins_where_the_backward_would_be_communication_bound():
    m = sa.strategy_map(MLP, over=OVER, names=("DP", "FSDP"))
    assert [s.name for s in m.strategies] == ["DP", "FSDP", "FSDP kept"]
    kept = next(s for s in m.strategies if s.name == "FSDP kept")
    assert kept.strategy == "FSDP" and kept.kept != 0
    # FSDP gathering again never wins: keeping moves less and computes the same
    assert not m.map.regions_of("FSDP")
    (comms,) = [r for r in m.map.regions_of("FSDP kept") if r.term.label == "comms X"]
    assert any(same(c, B / N < C / (2 * M_X * W)) for c in comms.conditions[0])
    assert "FSDP: keeping its gathered copies wins where 'FSDP kept' wins (its backward moves less); " in (
        " ".join(m.notes) + " "
    )
    j = m.to_json()["strategies"]
    assert [(s["name"], s["strategy"], s["kept_gathered"] is not None) for s in j] == [
        ("DP", "DP", False),
        ("FSDP", "FSDP", False),
        ("FSDP kept", "FSDP", True),
    ]
    text = str(m)
    assert "strategies: DP, FSDP, FSDP kept" in text and "FSDP kept, comms X binds" in text


def test_the_cap_forces_gathering_again_where_the_copies_do_not_fit():
    """Keeping FSDP's gathered weights holds 4·D·F bytes a layer beside the state: under a cap H it wins only
    where D·F/H < 1/4; beyond, FSDP gathers again (and DP does not fit at all)."""
    m = sa.strategy_map(MLP, over=OVER, names=("DP", "FSDP"), memory="symbolic")
    ratio = D * F / H
    again = _conditions(m, "FSDP")
    kept = _conditions(m, "FSDP kept")
    assert again and kept
    assert all(any(same(c, ratio < sympy.Rational(1, 4)) for c in cs) for cs in kept)
    assert any(any(same(c, ratio > sympy.Rational(1, 4)) for c in cs) for cs in again)
    assert any("or the cap H leaves no room for the copies" in n for n in m.notes)
    assert any("the gathered copies a backward keeps" in n for n in m.notes)


def test_forced_either_way_places_one():
    kept = sa.strategy_map(MLP, over=OVER, names=("FSDP",), keep_gathered=True)
    again = sa.strategy_map(MLP, over=OVER, names=("FSDP",), keep_gathered=False)
    assert [s.name for s in kept.strategies] == ["FSDP"] and kept.strategies[0].kept
    assert [s.name for s in again.strategies] == ["FSDP"] and again.strategies[0].kept is None
    assert not any("gathered copies: each strategy" in n for n in kept.notes + again.notes)


def test_fsdp_tp_chooses_and_its_x_opt_is_the_books_when_keeping():
    m = sa.strategy_map(MLP, names=("FSDP+TP",))
    assert [s.name for s in m.strategies] == ["FSDP+TP", "FSDP+TP kept"]
    assert sympy.simplify(m.x_opt - BOOK_X_OPT) == 0
    text = str(m)
    assert "FSDP+TP has no single X_opt" in text and "FSDP+TP kept X_opt = " in text
    assert m.to_json()["x_opts"]["FSDP+TP"] is None
