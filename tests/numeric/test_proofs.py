"""Every proof runs and holds; the proof machinery itself can fail; breaking a rule on purpose makes the
matching proof fail (perturbation tests)."""

from __future__ import annotations

import importlib

import pytest
import sympy

from proofs.common import alltoall_link_loads, ring_allgather, ring_time, sent_per_device
from shardalg.cache import clear_caches
from shardalg.numeric.proofs import Proof, discover, prove, run_all

B, D, C, W = (sympy.Symbol(n, positive=True) for n in "B D C W".split())

EXPECTED_LEMMAS = {
    "allgather_time_independent_of_axis",
    "alltoall_quarter",
    "allreduce_is_rs_plus_ag",
    "allgather_reducescatter_transpose",
    "d_greater_2b",
    "x_opt",
    "compute_bound_dp_fsdp",
    "compute_bound_tp",
    "compute_bound_fsdp_tp",
    "y_max",
}


# ---- the machinery -----------------------------------------------------------------------------------


def test_every_expected_lemma_is_discovered():
    assert EXPECTED_LEMMAS <= set(discover())


def test_equal_fails_on_unequal_expressions():
    p = Proof("t", "t", "x")
    assert p.equal(2 * B, B + B, "same")
    assert not p.equal(2 * B, 3 * B, "different")
    lemma = p.lemma()
    assert not lemma.holds and [s.holds for s in lemma.steps] == [True, False]
    assert r"\neq" in lemma.steps[1].claim


def test_a_lemma_with_no_steps_does_not_hold():
    assert not Proof("t", "t", "x").lemma().holds


def test_equivalent_conditions():
    p = Proof("t", "t", "x")
    assert p.equivalent(D > 2 * B, 2 * B < D, "flipped")
    assert p.equivalent(D / B > 2, D > 2 * B, "divided by a positive symbol")
    assert p.equivalent(4 * B / W < 2 * D / W, D > 2 * B, "the seed's comparison")
    assert not p.equivalent(D > 3 * B, D > 2 * B, "a different threshold")
    assert not p.equivalent(D < 2 * B, D > 2 * B, "the opposite")


def test_matrix_equal_is_exact():
    p = Proof("t", "t", "x")
    assert p.matrix_equal(sympy.eye(2), sympy.Matrix([[1, 0], [0, 1]]), "I", "same")
    assert not p.matrix_equal(sympy.eye(2), sympy.ones(2, 2), "I", "differ")
    assert not p.matrix_equal(sympy.eye(2), sympy.eye(3), "I", "shapes differ")


def test_a_lemma_that_raises_is_reported_as_failing(monkeypatch):
    import proofs.alltoall_quarter as lemma

    def boom(model=None):
        raise ZeroDivisionError("on purpose")

    monkeypatch.setattr(lemma, "prove", boom)
    result = prove("alltoall_quarter")
    assert not result.holds and "ZeroDivisionError" in (result.failure or "")


def test_lemma_renders_latex_markdown_text_json():
    p = Proof("demo", "a demo", r"a = b")
    p.equal(B, B, "trivially, with an underscore_and & ampersand")
    p.equal(D, D, "again")
    lemma = p.lemma()
    tex = lemma.latex()
    assert r"\paragraph{Lemma (demo): a demo.}" in tex and r"underscore\_and \& ampersand" in tex
    assert "\\begin{itemize}" in tex and r"\item[$\checkmark$]" in tex and "holds" in tex
    assert lemma.derivation_latex().count("\\\\") == len(lemma.steps) - 1  # one row per step
    assert "$$a = b$$" in lemma.markdown()
    assert lemma.text().startswith("HOLDS  demo")
    assert lemma.to_json()["holds"] is True


# ---- the independent routes ----------------------------------------------------------------------------


@pytest.mark.parametrize("n", range(2, 17))
def test_ring_allgather_schedule_delivers_every_shard(n):
    s = ring_allgather(n)
    assert all(h == frozenset(range(n)) for h in s.received)
    assert s.hops == n // 2
    assert all(s.busiest(i) == 1 for i in range(s.hops))


def test_ring_time_is_v_over_w_for_even_rings():
    V = sympy.Symbol("V", positive=True)
    for n in range(2, 17, 2):
        assert sympy.simplify(ring_time(ring_allgather(n), V / n, W) - V / W) == 0
    # odd rings fall short of a full bidirectional ring by (n-1)/n
    assert sympy.simplify(ring_time(ring_allgather(5), V / 5, W) - sympy.Rational(4, 5) * V / W) == 0


@pytest.mark.parametrize("n", range(4, 17, 2))
def test_alltoall_routing_matches_footnote_5(n):
    load = alltoall_link_loads(n)
    m = n // 2
    assert load[(0, 1)] == m * (m + 1) // 2 and load[(0, n - 1)] == m * (m - 1) // 2
    assert set(sent_per_device(load, n)) == {n * n // 4}


# ---- every lemma holds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(EXPECTED_LEMMAS))
def test_lemma_holds(name):
    lemma = prove(name)
    assert lemma.holds, lemma.text()
    assert len(lemma.steps) >= 3


def test_run_all_runs_every_discovered_lemma():
    lemmas = run_all()
    assert [lemma.name for lemma in lemmas] == discover()


# ---- breaking a rule on purpose breaks the matching proof ------------------------------------------------


def _scaled(formula, factor):
    from shardalg.costs.stepcost import CommCost

    def perturbed(v, group):
        c = formula(v, group)
        return CommCost(tuple((lat, bw * factor) for lat, bw in c.parts), c.overlapped)

    return perturbed


def _fails(name: str) -> None:
    """The lemma fails under a perturbation of the cost model's module constants or formulas. The memos of
    step costs are keyed by the CostModel, which the perturbation does not change: the caches are cleared
    before the proof (so it reads the perturbed module) and after (so no perturbed cost outlives the test)."""
    clear_caches()
    try:
        lemma = prove(name)
    finally:
        clear_caches()
    assert not lemma.holds, f"{name} still holds after the perturbation:\n{lemma.text()}"


def test_allgather_proof_fails_when_the_ring_hop_count_is_wrong(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")

    monkeypatch.setattr(cost, "RING_HOPS", sympy.Integer(1))  # |X| hops on a ring instead of |X|/2
    _fails("allgather_time_independent_of_axis")


def test_allgather_proof_fails_when_the_gather_bandwidth_is_wrong(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")
    from shardalg.notation.syntax import Op

    monkeypatch.setitem(cost.FORMULAS["ici"], Op.ALL_GATHER, _scaled(cost._ici_gather, sympy.Rational(3, 2)))
    _fails("allgather_time_independent_of_axis")


def test_alltoall_proof_fails_with_another_share(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")

    monkeypatch.setattr(cost, "ALL_TO_ALL_SHARE", sympy.Rational(1, 2))
    _fails("alltoall_quarter")


def test_allreduce_proof_fails_when_allreduce_is_not_rs_plus_ag(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")
    from shardalg.notation.syntax import Op

    monkeypatch.setitem(
        cost.FORMULAS["ici"], Op.ALL_REDUCE, (Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.ALL_GATHER)
    )
    _fails("allreduce_is_rs_plus_ag")


def test_transpose_proof_fails_when_allgather_transposes_to_allreduce(monkeypatch):
    import shardalg.numeric.operators as operators
    from shardalg.notation.plan import Step
    from shardalg.notation.syntax import Op

    def wrong(step):
        (t,) = step.inputs
        partial = step.output.replace(unreduced=step.axes)
        return Step(Op.ALL_REDUCE, (partial,), step.output, step.axes)

    monkeypatch.setitem(operators.TRANSPOSE_OF, Op.ALL_GATHER, wrong)
    _fails("allgather_reducescatter_transpose")


def test_d_greater_2b_fails_when_allreduce_costs_one_phase(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")
    from shardalg.notation.syntax import Op

    monkeypatch.setitem(cost.FORMULAS["ici"], Op.ALL_REDUCE, (Op.REDUCE_SCATTER,))  # would give D > B
    _fails("d_greater_2b")


@pytest.mark.parametrize("name", ["compute_bound_dp_fsdp", "compute_bound_tp", "compute_bound_fsdp_tp"])
def test_compute_bound_proofs_fail_when_a_mac_is_one_flop(monkeypatch, name):
    cost = importlib.import_module("shardalg.costs.stepcost")

    monkeypatch.setattr(cost, "FLOPS_PER_MAC", 1)
    _fails(name)


def test_x_opt_fails_when_allgather_costs_double(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")
    from shardalg.notation.syntax import Op

    monkeypatch.setitem(cost.FORMULAS["ici"], Op.ALL_GATHER, _scaled(cost._ici_gather, 2))
    _fails("x_opt")


def test_y_max_fails_when_hbm_is_twice_as_fast(monkeypatch):
    cost = importlib.import_module("shardalg.costs.stepcost")

    monkeypatch.setattr(cost, "W_HBM", 2 * cost.W_HBM)
    _fails("y_max")
