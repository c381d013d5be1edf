"""Plan choices decided at a point of one size (shardalg.planning.atpoint): the cheapest at the point, the
interval where it stays the cheapest, exactly, and the same plans the symbolic choice makes there."""

from __future__ import annotations

from fractions import Fraction

import pytest
import sympy

from shardalg.algebra.traffic import Bytes
from shardalg.planning import atpoint
from shardalg.planning.backward import backward
from shardalg.planning.symbolic import assuming, strict

B = ("dim", "B")


def _b(*terms: tuple[int, int]) -> Bytes:
    """sum of coefficient * B**power."""
    acc: dict = {}
    for power, c in terms:
        acc[((B, power),) if power else ()] = Fraction(c)
    return Bytes._from(acc)


def test_a_choice_is_decided_at_the_point_and_its_interval_is_where_the_winner_stays_cheapest():
    flat, grows, square = _b((0, 4096)), _b((1, 24)), _b((2, 1))  # 4096; 24*B; B**2
    with atpoint.deciding_at(B, 10) as made:
        assert atpoint.decide([flat, grows, square]) == 2  # 100 < 240 < 4096
    assert [c.winner for c in made] == [2] and made[0].costs[1] == ((1, Fraction(24)),)
    lo, hi = atpoint.around(made, 10)
    assert lo is None and hi == 24  # B**2 = 24*B at 24
    assert atpoint.after(made, 24) == 64  # B**2 = 4096 at 64: the next crossing
    assert atpoint.around(made, 24) is None  # a tie: no interval around a crossing
    with atpoint.deciding_at(B, 100) as made:
        assert atpoint.decide([flat, grows, square]) == 1  # 2400 < 4096 < 10000
    lo, hi = atpoint.around(made, 100)
    assert lo == 24 and hi == Fraction(512, 3)  # 24*B = 4096 at 512/3


def test_a_root_of_even_multiplicity_is_no_boundary_and_irrational_roots_are_exact():
    touch = _b((2, 1), (1, -20), (0, 100))  # (B - 10)**2, never below 0
    with atpoint.deciding_at(B, 3) as made:
        assert atpoint.decide([touch, _b()]) == 1  # 0 bytes against (3 - 10)**2 = 49
    assert atpoint.around(made, 3) == (
        None,
        None,
    )  # the zero bytes stay cheapest: touching at 10 is no change
    with atpoint.deciding_at(B, 1) as made:
        assert atpoint.decide([_b((2, 1)), _b((0, 2))]) == 0
    lo, hi = atpoint.around(made, 1)
    assert lo is None and sympy.simplify(hi - sympy.sqrt(2)) == 0


def test_outside_a_point_or_with_another_size_nothing_is_decided():
    other = Bytes._from({((("dim", "D"), 1),): Fraction(2)})
    assert atpoint.decide([_b((1, 1)), _b((0, 8))]) is None
    with atpoint.deciding_at(B, 4) as made:
        assert atpoint.decide([_b((1, 1)), other]) is None
    assert made == []


@pytest.mark.parametrize("at", [Fraction(1, 2), Fraction(4000), Fraction(10**6)])
def test_the_plans_decided_at_a_point_are_the_symbolic_choice_within_its_interval(at):
    # DP over X=2,Y=2,Z=2 with D, F known: the gradients' plans change with B (activations moved below a batch,
    # AllReduce of the gradients above); planned at a point, each interval's backward is the one the symbolic
    # choice makes assuming that interval
    program = "In[B_XYZ, D] * W_in[D, F] -> H[B_XYZ, F]\nH[B_XYZ, F] * W_out[F, D] -> Out[B_XYZ, D]"
    sizes = {"D": 1024, "F": 4096}
    with strict(), atpoint.deciding_at(B, at) as made:
        here = backward(program, "X=2,Y=2,Z=2", sizes)
    lo, hi = atpoint.around(made, at)
    with strict(), assuming(B, lo, hi):
        there = backward(program, "X=2,Y=2,Z=2", sizes)
    assert str(here) == str(there)
    assert made and (lo, hi) != (None, None)  # B decided some choice, and the plans change with B


class _Planned:
    """A stand-in for a memory report planned at a point: a first choice crossing at B = 10 and, where its
    flat plan wins (B > 10), a second choice crossing at B = 12 that a planning below 10 never meets."""

    class analysis:  # noqa: N801 - read as report.analysis by fit
        mode, mode_chosen, remat = "train", False, None

    def __init__(self) -> None:
        self.at: list[Fraction] = []

    def again(self, _analysis: object) -> _Planned:
        x = atpoint._AT.get()[1]
        self.at.append(x)
        b = sympy.Symbol("B", positive=True)
        first = atpoint.decide([_b((0, 100)), _b((1, 10))])
        second = atpoint.decide([_b((1, 1), (0, 12)), _b((1, 2))]) if first == 0 else None
        done = _Planned()
        done.total = b * (1 + first) + (0 if second is None else 1000 * (1 + second))
        return done


@pytest.mark.parametrize("start", [4, 10])
def test_the_walk_finds_every_interval_once_even_past_a_choice_the_last_planning_did_not_make(
    monkeypatch, start
):
    # from 4: (0, 10) planned at 4; past 10 the next planning (at 20) meets the second choice and finds
    # (12, oo), so the gap (10, 12) is planned on its own (at 11). From 10, a crossing: planned past it.
    from shardalg.models import fit

    monkeypatch.setattr(fit, "analyze", lambda *_a: None)
    report = _Planned()
    found = fit._intervals(report, None, "B", start)  # type: ignore[arg-type]
    spans = [leaf[2] for leaf in found]
    b = sympy.Symbol("B", positive=True)
    if start == 4:
        assert spans == [(None, 10), (10, 12), (12, None)]
        assert [leaf[1] for leaf in found] == [2 * b, b + 2000, b + 1000]
        assert report.at == [4, 20, 11]
    else:
        assert spans == [(10, 12), (12, None)]
        assert report.at == [10, 11, 12 * 2]  # 10 is a crossing; past (10, 12), the next crossing is none
