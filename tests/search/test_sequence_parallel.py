"""Sequence parallelism pays for its keys and values (issue 26): in the searched transformer layer with its
attention core written over the renamed tokens (``tests/search/programs.py``), sharding the sequence T makes
the core gather K and V over T's axis (S whole on each device), so SP communicates more than DP and, with
communication not hidden (``serial``), is strictly slower; with the attention core's output an input (the
layer before), the two tied. Run on one axis of 2 and small sizes: the 2x2x2 search takes minutes of CPU."""

from __future__ import annotations

import pytest

from shardalg.api import cost
from shardalg.models.analysis import analyze
from shardalg.models.program import model_program
from shardalg.notation.printing import text
from shardalg.notation.syntax import Apply, Op
from shardalg.search.numeric import search
from tests.search.programs import TRANSFORMER_FN

SMALL = {
    "mesh": "X=2",
    "sizes": "B=8,T=1024,S=1024,D=1024,H=8,E=128,F=4096",
    "hw": "tpu-v5e",
    "mode": "train",
}


def _pure(r, activations: str):
    """The candidate with whole parameters and the activations split as given (DP: B=X; SP: T=X)."""
    (e,) = [
        e
        for e in r.ranked
        if e.assignment.params_text == "-"
        and e.assignment.activations_text == activations
        and not e.assignment.megatron
    ]
    return e


@pytest.fixture(scope="module")
def serial():
    return search(TRANSFORMER_FN, overlap="serial", **SMALL)


@pytest.fixture(scope="module")
def steady():
    return search(TRANSFORMER_FN, **SMALL)


def _analysis(e):
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in SMALL["sizes"].split(","))}
    return analyze(model_program(e.program, SMALL["mesh"], sizes), "train")


def _is_rename(info) -> bool:
    return isinstance(info.statement.expr, Apply) and info.statement.expr.op is Op.RENAME


def _rename_plans(e) -> list[list[tuple[Op, tuple[str, ...]]]]:
    """The collectives of each rename's forward plan in the candidate's priced program."""
    a = _analysis(e)
    return [
        [(s.op, s.axes) for s in a.forward_plans[info.index].steps if s.communicates]
        for info in a.model.statements
        if _is_rename(info)
    ]


def test_sp_gathers_k_and_v_over_the_sequence_axis(serial):
    sp, dp = _pure(serial, "T=X"), _pure(serial, "B=X")
    renames = [text(s) for s in sp.program.statements if isinstance(s.expr, Apply) and s.expr.op is Op.RENAME]
    assert renames == [
        "rename_{T,S}(Kp[B, T_X, H, E]) -> K[B, S, H, E]",
        "rename_{T,S}(Vp[B, T_X, H, E]) -> V[B, S, H, E]",
    ]
    assert _rename_plans(sp) == [[(Op.ALL_GATHER, ("X",))]] * 2  # K and V gathered over the sequence's axis
    assert _rename_plans(dp) == [[], []]  # DP's keys are its own tokens: the rename moves nothing


def test_sp_is_strictly_slower_than_dp_when_communication_is_not_hidden(serial):
    dp, sp = _pure(serial, "B=X"), _pure(serial, "T=X")
    assert dp.fits and sp.fits
    assert sp.flops == pytest.approx(dp.flops)  # the same matmul FLOPs on each device
    assert sp.comms > dp.comms  # the gathers of K and V (and their gradients' reduce-scatters)
    assert sp.seconds > dp.seconds
    assert sp.seconds - dp.seconds > (dp.compute - sp.compute)  # not the functions' HBM time: the comms
    assert serial.ranked.index(sp) > serial.ranked.index(dp)


def test_sp_communicates_more_than_dp_under_steady_overlap(serial, steady):
    """Under the default overlap the gathers hide behind compute at these sizes (compute-bound): the two
    compute the same, DP ranks above SP, and SP's row says what it pays (K and V gathered in the forward, from
    the difference of the two candidates' plans: :mod:`shardalg.search.paid`). SP's functions once took 5 us
    less: its norms' gain gradients summed B first into a [T_X, D] where DP's was a whole [T, D] (the
    broadcast sums now take the largest dim first)."""
    dp, sp = _pure(steady, "B=X"), _pure(steady, "T=X")
    assert sp.comms > dp.comms
    assert sp.comms - dp.comms == pytest.approx(_pure(serial, "T=X").comms - _pure(serial, "B=X").comms)
    assert sp.compute == pytest.approx(dp.compute, rel=1e-4)  # was 5.1 us (0.14%) lower
    assert steady.ranked.index(dp) < steady.ranked.index(sp)
    assert sp.gathers == ("K", "V") and dp.gathers == ()
    assert steady.winner is dp
    assert (
        "; beyond the winner's collectives: AllGather_X of K, V: 2 x 16.8 MB, 373 us (forward"
        in steady.reason(sp)
    )


def test_sp_reduce_scatters_the_gradients_of_k_and_v(serial):
    """The transpose of the forward's AllGather of K (and V) over the sequence's axis is a ReduceScatter: dK,
    a partial sum over the axis (each device's queries' part), is reduced into Kp's shards by the rename back,
    not all-reduced whole and then sliced (which cost 373 us more a layer here, under ``serial``). So SP's
    communication over DP's is the two gathers and their two transposes, each one pass of K over the ring."""
    sp, dp = _pure(serial, "T=X"), _pure(serial, "B=X")
    a = _analysis(sp)
    moves = {
        (s.op, s.axes, s.inputs[0].name)
        for info, p in a.grad_plans
        for s in p.steps
        if s.communicates and s.inputs[0].name in ("dK", "dV")
    }
    assert moves == {(Op.REDUCE_SCATTER, ("X",), "dK"), (Op.REDUCE_SCATTER, ("X",), "dV")}
    renames = [p for info, p in a.grad_plans if _is_rename(info)]
    assert [[s.op for s in p.steps] for p in renames] == [[Op.REDUCE_SCATTER, Op.RENAME]] * 2  # V's, then K's
    gather = cost(
        "AllGather_X(Kp[B, T_X, H, E]) -> Kp[B, T, H, E]", SMALL["mesh"], SMALL["sizes"], SMALL["hw"]
    ).seconds
    assert sp.comms - dp.comms == pytest.approx(4 * gather, rel=1e-9)
