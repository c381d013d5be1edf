"""The chapter 5 conditions (seed 002 §4.2, §4.3) come out of the region engine, from costs the engine derived
from the MLP block's plans, and equal the book's by sympy equality.

The book analyses each strategy on the pass it names: DP's backward pass (its forward pass does not
communicate), FSDP's whole step, TP's and FSDP+TP's forward pass ("it has the most communication per FLOP").
Each test feeds that pass's cost to ``strategy_map`` and reads the condition off the cell where the compute
term binds. The whole-step conditions, which differ by the backward pass's own ratio, are checked against
the per-pass ones through that ratio, itself read off the engine's costs."""

from __future__ import annotations

import pytest
import sympy

from shardalg.search import strategy_map

from .mlp import DOMAIN, M_X, M_Y, OVER, B, C, F, N, W, Y, candidate, ge, priced, same

BOOK_DP_FSDP = B / N > C / (W * M_X)  # seed 002 §4.2: B/X > C/(W_ici·M_X), with X = N devices
BOOK_TP = Y < F * M_Y / (C / W)  # seed 002 §4.2: Y < F·M_Y/(C/W_ici)
BOOK_FSDP_TP = B / N > (C / W) ** 2 / (M_X * M_Y * F)  # seed 002 §4.2, the overlapped (steady) view
BOOK_X_OPT = sympy.sqrt(B * M_X * N / (F * M_Y))  # seed 002 §4.3


def compute_cell(m, name: str):
    (cell,) = [c for c in m.cells_of(name) if c.term.label == "compute"]
    return cell


def only(cell) -> sympy.Basic:
    """The one facet of a cell that is a single polyhedron with a single facet."""
    (conj,) = cell.conditions
    (facet,) = conj
    return facet


@pytest.mark.parametrize("policy", ["steady", "serial"])
def test_dp_compute_bound_in_its_backward_pass(policy):
    m = strategy_map([candidate("DP", "backward", policy)], over=[B / N, C / W, M_X])
    assert same(only(compute_cell(m, "DP")), BOOK_DP_FSDP)


@pytest.mark.parametrize("policy", ["steady", "serial"])
def test_fsdp_compute_bound_over_its_step(policy):
    m = strategy_map([candidate("FSDP", "step", policy)], over=[B / N, C / W, M_X])
    assert same(only(compute_cell(m, "FSDP")), BOOK_DP_FSDP)


@pytest.mark.parametrize("policy", ["steady", "serial"])
def test_tp_limit_on_y_in_its_forward_pass(policy):
    m = strategy_map([candidate("TP", "forward", policy, all_devices=False)], over=[Y, F, C / W, M_Y])
    assert same(only(compute_cell(m, "TP")), BOOK_TP)


@pytest.mark.parametrize("policy", ["steady", "serial"])
def test_fsdp_tp_x_opt(policy):
    """The split that balances FSDP's and TP's communication; the same point under both policies (the sum of
    a rising and a falling term is least where p·u = q·v, which for slopes ±1 is where they cross)."""
    m = strategy_map([candidate("FSDP+TP", "forward", policy)], over=OVER, domain=DOMAIN)
    minimum = m.entries[0].minimum
    assert minimum is not None and sympy.simplify(minimum.optimum - BOOK_X_OPT) == 0


def _fsdp_tp_interior(policy):
    """The map of FSDP+TP's forward pass where X_opt lies in [1, N] (the engine's own interior conditions)."""
    first = strategy_map([candidate("FSDP+TP", "forward", policy)], over=OVER, domain=DOMAIN)
    interior = first.entries[0].minimum.interior()
    return strategy_map([candidate("FSDP+TP", "forward", policy)], over=OVER, domain=DOMAIN + interior)


def test_fsdp_tp_threshold_on_batch_per_device_steady():
    m = _fsdp_tp_interior("steady")
    assert same(only(compute_cell(m, "FSDP+TP")), BOOK_FSDP_TP)
    # without the interior conditions the clamps X = 1 and X = N add their own facets, the book's among them
    wide = strategy_map([candidate("FSDP+TP", "forward", "steady")], over=OVER, domain=DOMAIN)
    facets = [f for conj in compute_cell(wide, "FSDP+TP").conditions for f in conj]
    assert any(same(f, BOOK_FSDP_TP) for f in facets) and len(facets) == 3


def test_fsdp_tp_threshold_serial_is_four_times_the_steady_one():
    """Serial: compute must beat the SUM of the two communications. At X_opt they are equal, so the sum is
    twice the max, and since communication grows as sqrt(B) the threshold on B/N grows by 2^2. This is the
    threshold an earlier edition of the book derived by setting T_FSDP + T_MP = T_math:
    B/N > 4·α²/(F·M_X·M_Y), α = C/W_ici."""
    m = _fsdp_tp_interior("serial")
    (cell,) = [c for c in m.cells_of("FSDP+TP") if c.term.label == "compute" and "X_opt" in c.winner]
    serial = only(cell)
    assert same(serial, B / N > 4 * (C / W) ** 2 / (F * M_X * M_Y))
    assert not same(serial, BOOK_FSDP_TP)
    assert sympy.simplify(serial.rhs / BOOK_FSDP_TP.rhs) == 4
    assert cell.cost_bracket == 2  # compute + comms: the cost in the cell is between compute and twice it


def _ratio(name: str, passes: str) -> sympy.Expr:
    """(comms / compute) of the whole step over that of the pass the book analyses, from the engine's costs
    (under ``serial``, where the passes' terms add)."""
    step, one = priced(name, "step", "serial"), priced(name, passes, "serial")
    return sympy.simplify((step.comms / step.compute) / (one.comms / one.compute))


def test_whole_step_under_steady_is_the_books():
    """Under ``steady`` each collective hides behind its own pass's compute (DP's gradient AllReduce behind
    the backward's, never the forward's): over a whole step DP is compute-bound exactly where its backward
    is, the book's B/N > C/(W·M_X), and TP exactly where its forward is (the pass with the most
    communication per FLOP, the book's Y limit). Where one pass is compute-bound and the other is not, the
    cell says what the binding term is added to."""
    dp = strategy_map([candidate("DP", "step", "steady")], over=[B / N, C / W, M_X])
    assert same(only(compute_cell(dp, "DP")), BOOK_DP_FSDP)
    tp = strategy_map([candidate("TP", "step", "steady", all_devices=False)], over=[Y, F, C / W, M_Y])
    assert same(only(compute_cell(tp, "TP")), BOOK_TP)
    mixed = [c.term.label for c in tp.cells_of("TP") if c.term.label not in ("compute", "comms Y")]
    assert mixed == ["compute (in comms Y + compute)"]


def test_whole_step_under_serial_differs_from_the_book_by_the_engine_ratio():
    """Under ``serial`` everything adds: DP's forward pass adds compute and no communication (12:8 against
    the backward's 8:8), and TP's backward gathers In again for dW_in (5 collectives to 4 matmuls' worth of
    compute, against 2 to 4 in the forward pass): the thresholds move by exactly those ratios."""
    dp = strategy_map([candidate("DP", "step", "serial")], over=[B / N, C / W, M_X])
    assert same(only(compute_cell(dp, "DP")), B / N > BOOK_DP_FSDP.rhs * _ratio("DP", "backward"))
    assert _ratio("DP", "backward") == sympy.Rational(2, 3)
    tp = strategy_map([candidate("TP", "step", "serial", all_devices=False)], over=[Y, F, C / W, M_Y])
    assert same(only(compute_cell(tp, "TP")), Y < BOOK_TP.rhs / _ratio("TP", "forward"))
    assert _ratio("TP", "forward") == sympy.Rational(5, 6)


def test_the_derivation_shows_the_steps():
    m = strategy_map([candidate("FSDP", "step", "steady")], over=[B / N, C / W, M_X])
    d = compute_cell(m, "FSDP").derivation
    text = str(d)
    assert "compute above comms X" in text and "solve for B/N" in text
    assert same(d.result, BOOK_DP_FSDP)
    assert d.latex().startswith("\\begin{aligned}")


def test_x_opt_derivation_crosses_the_two_communications():
    m = strategy_map([candidate("FSDP+TP", "forward", "steady")], over=OVER, domain=DOMAIN)
    d = m.entries[0].minimum.derivation
    assert "comms X and comms Y cross" in str(d)
    assert [label for label, _ in d.steps][-2:] == ["X optimal", "minimum"]


def test_interior_conditions_are_the_bounds_on_x_opt():
    m = strategy_map([candidate("FSDP+TP", "forward", "steady")], over=OVER, domain=DOMAIN)
    low, high = m.entries[0].minimum.interior()
    assert same(low, sympy.LessThan(1, BOOK_X_OPT, evaluate=False))
    assert same(high, sympy.LessThan(BOOK_X_OPT, N, evaluate=False))
    assert ge(N, 1) in DOMAIN
