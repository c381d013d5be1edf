"""What a losing candidate pays that the winner does not (:mod:`shardalg.search.paid`), and a row's figure
being its step: on one axis of 2 with small sizes (the 2x2x2 search takes many minutes of CPU), SP's row names
the gathers of K and V and the reduce-scatters of dK and dV with their bytes and seconds, hidden under
compute under ``steady`` and exposed under ``serial``; every printed row's seconds are its step, also where a
phase is bound by communication and the step's compute is not its time."""

from __future__ import annotations

import json

import pytest

from shardalg.api import cost
from shardalg.notation.plan import Op
from shardalg.search.numeric import search
from shardalg.search.paid import breakdown, paid
from shardalg.search.price import time_text
from tests.search.programs import TRANSFORMER_FN

SMALL = {
    "mesh": "X=2",
    "sizes": "B=8,T=1024,S=1024,D=1024,H=8,E=128,F=4096",
    "hw": "tpu-v5e",
    "mode": "train",
}
# a batch of 2 short sequences: weight gradients outweigh the backward's compute, so some phases wait on X
THIN = {**SMALL, "sizes": "B=2,T=256,S=256,D=1024,H=8,E=128,F=4096"}


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
def steady():
    return search(TRANSFORMER_FN, **SMALL)


@pytest.fixture(scope="module")
def serial():
    return search(TRANSFORMER_FN, overlap="serial", **SMALL)


@pytest.fixture(scope="module")
def thin():
    return search(TRANSFORMER_FN, **THIN)


def _gather_seconds() -> float:
    return cost(
        "AllGather_X(Kp[B, T_X, H, E]) -> Kp[B, T, H, E]", SMALL["mesh"], SMALL["sizes"], SMALL["hw"]
    ).seconds


def test_sp_row_names_the_gathers_of_k_and_v_with_their_bytes(steady):
    dp, sp = _pure(steady, "B=X"), _pure(steady, "T=X")
    assert steady.winner is dp
    kv = 8 * 1024 * 8 * 128 * 2  # K (and V) whole on each device: B*S*H*E bf16 = 16.8 MB
    moves = steady.pays(sp)
    assert [(m.phase, m.op, m.axes, m.tensor, m.bytes) for m in moves] == [
        ("forward", Op.ALL_GATHER, ("X",), "K", kv),
        ("forward", Op.ALL_GATHER, ("X",), "V", kv),
        ("backward", Op.REDUCE_SCATTER, ("X",), "dV", kv),
        ("backward", Op.REDUCE_SCATTER, ("X",), "dK", kv),
    ]
    gather = _gather_seconds()
    assert [m.seconds for m in moves] == pytest.approx([gather] * 4, rel=1e-9)
    assert all(m.hidden for m in moves)  # compute-bound: each hides under its phase's compute
    assert sum(m.seconds for m in moves) == pytest.approx(sp.comms - dp.comms, rel=1e-9)  # all SP pays
    row = next(str(line) for line in str(steady).splitlines() if line.split()[:2] == ["6", "SP"])
    assert (
        "beyond the winner's collectives: AllGather_X of K, V: 2 x 16.8 MB, 373 us (forward, hidden under "
        "compute); ReduceScatter_X of dV, dK: 2 x 16.8 MB, 373 us (backward, hidden under compute)"
    ) in row
    assert steady.pays(dp) == ()  # the winner pays nothing beyond itself


def test_the_json_and_explain_say_what_sp_pays(steady):
    data = json.loads(json.dumps(steady.to_json()))
    pays = data["strategies"]["SP"]["pays"]
    assert [(p["op"], p["tensor"], p["bytes_per_device"], p["hidden"]) for p in pays] == [
        ("AllGather", "K", 16777216.0, True),
        ("AllGather", "V", 16777216.0, True),
        ("ReduceScatter", "dV", 16777216.0, True),
        ("ReduceScatter", "dK", 16777216.0, True),
    ]
    assert data["strategies"]["SP"]["pays_against"] == {"strategy": "DP", "params": "-", "activations": "B=X"}
    assert data["strategies"]["DP"]["pays"] == [] and data["strategies"]["DP"]["pays_against"] is None
    from shardalg.search.emit import explain

    (lost,) = [line for line in explain(steady).splitlines() if line.startswith("    lost: 0.0011%")][:1]
    assert "AllGather_X of K, V: 2 x 16.8 MB" in lost


def test_under_serial_what_sp_pays_is_exposed(serial):
    sp = _pure(serial, "T=X")
    moves = serial.pays(sp)
    assert serial.winner.strategy == "FSDP"  # under serial the weights' reduce-scatters beat DP's all-reduces
    assert serial.against(sp) is _pure(serial, "B=X")  # the fastest with whole parameters, not the winner
    assert {m.tensor for m in moves} == {"K", "V", "dK", "dV"}
    assert not any(m.hidden for m in moves)
    assert (
        "; beyond the collectives of DP: params -; activations B=X (the fastest with these parameters): "
        "AllGather_X of K, V: 2 x 16.8 MB, 373 us (forward, exposed)"
    ) in serial.reason(sp)
    # the figure of a serial step is its compute plus its communication, not its compute alone
    assert f"in series: {time_text(sp.seconds)}" in sp.binding_reason()
    assert sp.seconds == pytest.approx(sp.compute + sp.comms, rel=1e-12)


def _figure(reason: str) -> str:
    """The step a row's reason gives: the time after the lead (``compute-bound: 3.59 ms (...)``)."""
    (lead, *_) = [part for part in reason.split("; ") if "-bound" in part or "in series" in part]
    return lead.split(": ", 1)[1].split(" (")[0]


@pytest.mark.parametrize("which", ["steady", "serial", "thin"])
def test_every_rows_figure_is_its_step(which, request):
    r = request.getfixturevalue(which)
    rows = [e for _, e in r.rows()]
    assert len(rows) == 10 and all(e.detail is not None for e in rows)
    for e in rows:
        assert _figure(r.reason(e)) == time_text(e.seconds), r.reason(e)


def test_a_price_off_its_whole_programs_plans_is_said(thin):
    """Where a candidate's price, summed from its statements, is not its whole program's (on the thin batch
    DP's is 339 us against 304 us), its row says both: the collectives it lists come from the whole
    program's plans. Every other row's plans sum to its price."""
    for _, e in thin.rows():
        off = e.detail.seconds != pytest.approx(e.seconds, rel=1e-9)
        said = (
            f"; its whole program's plans take {time_text(e.detail.seconds)} (its statements' sum: "
            f"{time_text(e.seconds)})"
        )
        assert (said in thin.reason(e)) is off


def test_a_phase_bound_by_communication_is_said_and_the_figure_is_the_step(thin):
    """Megatron-SP over H on a thin batch: its forward is compute-bound, its backward waits on X; the step
    (282 us) is longer than its compute (232 us) and than its communication summed over the step (237 us):
    the row said ``compute-bound: 232 us`` before, the sum of its compute, not its step. What it pays beyond
    the winner in the backward is exposed."""
    (e,) = [e for e in thin.ranked if e.strategy == "Megatron-SP" and e.assignment.params_text == "H=X"]
    d = e.detail
    assert [p.bound for p in d.phases] == ["compute", "comms X"]
    assert e.seconds > e.compute and e.seconds > e.comms
    assert e.seconds == pytest.approx(sum(max(p.compute, p.comms) for p in d.phases), rel=1e-9)
    _, bwd = d.phases
    said = (
        f"comms X-bound backward ({time_text(bwd.total)}, compute {time_text(bwd.compute)}), compute-bound "
        f"otherwise: {time_text(e.seconds)}"
    )
    assert e.binding_reason().startswith(said)
    exposed = [m for m in thin.pays(e) if m.phase == "backward"]
    assert exposed and not any(m.hidden for m in exposed)


def test_paid_is_a_multiset_difference(steady):
    dp, sp = _pure(steady, "B=X"), _pure(steady, "T=X")
    settings = steady.settings
    b_sp, b_dp = breakdown(sp.program, settings, False), breakdown(dp.program, settings, False)
    assert paid(b_sp, b_sp) == ()
    more, fewer = paid(b_sp, b_dp), paid(b_dp, b_sp)
    assert fewer == ()  # DP runs nothing SP does not
    assert len(b_sp.moves) - len(more) == len(b_dp.moves)  # the rest of SP's cancel DP's one for one
    assert b_sp.seconds == pytest.approx(sp.seconds, rel=1e-9)
