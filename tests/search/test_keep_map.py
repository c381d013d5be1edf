"""Keep or gather again on the strategy map (issue 27, item 2): by default each strategy whose backward reads
the forward's gathered copies is placed twice, gathering again (its name) and keeping them (``NAME kept``);
the map shows where keeping wins and says so; under a memory cap the kept copies count with the state, so the
cap forces gathering again where they do not fit; ``keep_gathered`` forces one way."""

from __future__ import annotations

import math

import pytest
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
    """Keeping FSDP's gathered weights holds 4·D·F bytes a layer beside the state 24·D·F/N: their sum is no
    half-space of the map, so each of the two terms is held to H/2 (8·D·F <= H, 48·D·F/N <= H) and the sum
    fits wherever the map keeps them; beyond, FSDP gathers again (and DP does not fit at all)."""
    m = sa.strategy_map(MLP, over=OVER, names=("DP", "FSDP"), memory="symbolic")
    ratio = D * F / H
    again = _conditions(m, "FSDP")
    kept = _conditions(m, "FSDP kept")
    assert again and kept
    assert all(any(same(c, ratio < sympy.Rational(1, 8)) for c in cs) for cs in kept)
    assert all(any(same(c, ratio < N / 48) for c in cs) for cs in kept)
    assert any(any(same(c, ratio > sympy.Rational(1, 8)) for c in cs) for cs in again)
    assert any("or the cap H leaves no room for the copies" in n for n in m.notes)
    assert any("the gathered copies a backward keeps" in n for n in m.notes)
    assert any("held to H/k" in n for n in m.notes)
    # on numbers: inside each kept region the state and the copies fit under H; where the map gathers again
    # because of the cap, keeping would not fit (or only within the factor 2 the notes name)
    fsdp_kept = next(s for s in m.strategies if s.name == "FSDP kept")
    for r in m.map.regions_of("FSDP kept"):
        y = m.map.example(r)
        values = dict(zip(m.map.parameters, (math.exp(t) for t in y), strict=True))
        n, df_h = values[N], values[D * F / H]
        held = (
            fsdp_kept.held().subs(fsdp_kept.substitute).subs({D: df_h, F: 1, N: n})
        )  # D·F/H as D, F = H = 1
        assert held <= 1, (r.term.name, held)


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


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_fsdp_tp_kept_x_opt_from_a_whole_step_is_the_books(overlap):
    """The must-show of issue 27: with keeping allowed (the default), 'FSDP+TP kept' over the whole step
    (passes default: the forward and the backward) has the book's X_opt = sqrt(B·M_X·N/(F·M_Y)), under steady
    and under serial; gathering again it has none under steady and the 10/12 one under serial."""
    m = sa.strategy_map(MLP, overlap=overlap, names=("FSDP+TP",))
    assert m.passes == "step"
    assert [s.name for s in m.strategies] == ["FSDP+TP", "FSDP+TP kept"]
    kept = m._fsdp_tp("FSDP+TP kept")
    assert len(kept.minimum.optima) == 1
    assert sympy.simplify(kept.minimum.optimum - BOOK_X_OPT) == 0
    assert sympy.simplify(m.x_opt - BOOK_X_OPT) == 0
    assert m.to_json()["x_opts"]["FSDP+TP kept"] == sympy.sstr(kept.minimum.optimum)
    again = m.to_json()["x_opts"]["FSDP+TP"]
    if overlap == "steady":
        assert again is None
    else:
        (a,) = [e for e in m.map.entries if e.parent == "FSDP+TP" and e.minimum is not None][:1]
        assert sympy.simplify(a.minimum.optimum**2 / BOOK_X_OPT**2) == sympy.Rational(10, 12)
    # the map says where keeping wins: its regions are named 'FSDP+TP kept'
    assert m.map.regions_of("FSDP+TP kept")
    assert any(
        n.startswith("FSDP+TP: keeping its gathered copies wins where 'FSDP+TP kept' wins") for n in m.notes
    )
