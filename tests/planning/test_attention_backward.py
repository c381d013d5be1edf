"""The backward of the attention core's ring plan (issue 26): ``attend'`` (a block's flash backward) in the
notation, the ring backward derived from the forward ring plan (shifts transposed, the ring identity, Horner's
rule), run on the executor after the forward against dense gradients computed here, and its bytes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.algebra.transpose import transpose
from shardalg.costs.costmodel import CostModel
from shardalg.costs.plancost import priced
from shardalg.errors import ParseError
from shardalg.export.flow import Flow, as_flow
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse, parse_statement
from shardalg.notation.plan import Plan
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Op
from shardalg.numeric.devices import as_virtual, unshard
from shardalg.numeric.execute import execute_plan, place_inputs
from shardalg.planning.attention import core_of
from shardalg.planning.attention_backward import is_ring, ring_backward
from shardalg.planning.backward import backward, core_backwards
from shardalg.planning.planner import plans
from shardalg.planning.redistribute import plan_bytes


def core(t: str = "T_X", s: str = "S_X", flags: str = "", h: str = "H") -> str:
    sub = "S" if not flags else "{S," + flags + "}"
    sc = f"Sc[B, {h}, {t}, S]"
    return (
        f"Q[B, {t}, {h}, E] · K[B, {s}, {h}, E] -> {sc}\n"
        f"softmax_{sub}({sc}) -> P[B, {h}, {t}, S]\n"
        f"P[B, {h}, {t}, S] · V[B, {s}, {h}, E] -> O[B, {t}, {h}, E]"
    )


def dense_grads(q, k, v, do, causal):
    """dQ, dK, dV of softmax(Q·Kᵀ)V over [B, T, H, E] arrays, by the textbook formulas (not shardalg's)."""
    s = np.einsum("bthe,bshe->bhts", q, k)
    if causal:
        t_, s_ = q.shape[1], k.shape[1]
        s = np.where(np.arange(s_)[None, :] > np.arange(t_)[:, None] + (s_ - t_), -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = np.einsum("bthe,bshe->bhts", do, v)
    dv = np.einsum("bhts,bthe->bshe", p, do)
    ds = p * (dp - (dp * p).sum(-1, keepdims=True))
    return np.einsum("bhts,bshe->bthe", ds, k), np.einsum("bhts,bthe->bshe", ds, q), dv


def ring_and_backward(program: str, mesh: Mesh, sizes: dict[str, int]) -> tuple[Plan, Plan]:
    prog = parse(program)
    ring = next(p for p in plans(prog, mesh, sizes) if is_ring(p))
    return ring, ring_backward(ring, core_of(prog), mesh)


def grad_flow(ring: Plan, bw: Plan, mesh: Mesh, sizes: dict[str, int]) -> Flow:
    """The forward ring and its backward as one flow (the backward reads O's statistics): out dQ, dK, dV."""
    flow = as_flow([ring, bw], mesh, sizes)
    last = {s.output.name: s.output for s in bw.steps}
    return replace(flow, outputs=tuple(last[n] for n in ("dQ", "dK", "dV")))


# ---- notation ----------------------------------------------------------------------------------------------

FORM = (
    "attend'_{S,causal,dk,1}(Q[B, T_X, H, E], K[B, S_X, H, E], V[B, S_X, H, E], O[B, T_X, H, E], "
    "dO[B, T_X, H, E]) -> dK[B, S_X, H, E]"
)


def test_block_backward_round_trips_in_every_form():
    st_ = parse_statement(FORM)
    assert text(st_) == FORM
    for out in (text(st_), unicode(st_), latex(st_)):
        assert parse_statement(out) == st_
    assert from_json(to_json(st_)) == st_


@pytest.mark.parametrize(
    "bad, says",
    [
        ("attend'_{S,1}(Q[T, E], K[S, E], V[S, E], O[T, E], dO[T, E])", "the one gradient it writes"),
        ("attend'_{S,dq,dk,1}(Q[T, E], K[S, E], V[S, E], O[T, E], dO[T, E])", "the one gradient it writes"),
        ("attend'_{S,dq,1}(Q[T, E], K[S, E], V[S, E], O[T, E])", "takes Q, K, V, the forward's O"),
        ("softmax_{S,dq}(Sc[T, S])", "takes the flags causal and flash"),
    ],
)
def test_block_backward_refusals(bad, says):
    with pytest.raises(ParseError, match=says):
        parse_statement(bad)


# ---- the derivation ----------------------------------------------------------------------------------------

SIZES = {"B": 1, "T": 16, "S": 16, "H": 2, "E": 4}


def test_ring_backward_is_derived_from_the_forward_ring():
    ring, bw = ring_and_backward(core(flags="causal"), Mesh(X=4), SIZES)
    shifts = [s for s in bw.steps if s.op is Op.SHIFT]
    assert all(s.axes == ("X",) and s.offset == 1 for s in shifts)
    # K and V made again by the forward's own shifts (3 each), dK and dV passed 3 hops each
    assert sorted({s.inputs[0].name for s in shifts}) == ["K", "V", "dK", "dV"]
    assert [s.inputs[0].name for s in shifts].count("dK") == 3
    forward_shifts = [s for s in ring.steps if s.op is Op.SHIFT]
    assert [s for s in shifts if s.inputs[0].name in "KV"] == forward_shifts  # the same steps, run again
    blocks = [s for s in bw.steps if s.op is Op.ATTEND_D]
    assert len(blocks) == 12 and all("causal" in s.flags for s in blocks)
    assert sorted(s.offset for s in blocks if "dk" in s.flags) == [0, 1, 2, 3]  # one per forward block
    assert "Shift_{X,+4} = 1" in bw.note


def test_ring_backward_bytes_symbolic():
    """Each device receives 4·(n − 1) blocks of [B, S/n, H, E] (K, V again and dK, dV), bf16: twice the
    forward's, on X=4: 6·B·E·H·S against the forward's 3·B·E·H·S."""
    mesh = Mesh(X=4)
    ring, bw = ring_and_backward(core(flags="causal"), mesh, SIZES)
    assert str(plan_bytes(ring, mesh, Sizes({}))) == "3*B*E*H*S"
    assert str(plan_bytes(bw, mesh, Sizes({}))) == "6*B*E*H*S"


# ---- on numbers -------------------------------------------------------------------------------------------


def run_grads(program: str, mesh: Mesh, sizes: dict[str, int], seed: int, cut: int | None = None):
    """The forward ring on the executor, then its backward (from the forward's O, its statistics with it, and
    random dO): dQ, dK, dV gathered, and the dense gradients of the same inputs. ``cut``: a backward step
    left out."""
    ring, bw = ring_and_backward(program, mesh, sizes)
    if cut is not None:
        bw = replace(bw, steps=bw.steps[:cut] + bw.steps[cut + 1 :])
    vm = as_virtual(mesh)
    rng = np.random.default_rng(seed)
    placed = place_inputs(ring, vm, sizes, rng)
    fw = execute_plan(ring, vm, placed.buffers, placed.sizes)
    do_t = bw.inputs[4]
    do_placed = place_inputs(Plan((do_t,), (), do_t), vm, sizes, rng)
    given = {**placed.buffers, bw.inputs[3]: fw.buffers[ring.output], do_t: do_placed.buffers[do_t]}
    run = execute_plan(bw, vm, given, placed.sizes)
    last = {s.output.name: s.output for s in bw.steps}
    got = [unshard(run.buffers[last[n]], last[n], vm) for n in ("dQ", "dK", "dV")]
    q, k, v = (placed.dense[t] for t in ring.inputs)
    return got, dense_grads(q, k, v, do_placed.dense[do_t], "causal" in program)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.sampled_from([2, 3, 4]),
    per=st.integers(1, 2),
    causal=st.booleans(),
    heads_y=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_ring_backward_equals_dense_gradients(n, per, causal, heads_y, seed):
    mesh = Mesh(X=n, Y=2) if heads_y else Mesh(X=n)
    sizes = {"B": 2, "T": n * per * 2, "S": n * per * 2, "H": 2, "E": 3}
    got, want = run_grads(
        core(flags="causal" if causal else "", h="H_Y" if heads_y else "H"), mesh, sizes, seed
    )
    for g, w in zip(got, want, strict=True):
        assert np.max(np.abs(g - w)) <= 1e-9 * max(1.0, np.max(np.abs(w)))


def test_a_wrong_block_backward_is_caught():
    """The check can fail: without dV's last hop home, its shares land on the wrong devices."""
    mesh = Mesh(X=4)
    _, bw = ring_and_backward(core(flags="causal"), mesh, SIZES)
    last_hop = max(i for i, s in enumerate(bw.steps) if s.op is Op.SHIFT and s.inputs[0].name == "dV")
    got, want = run_grads(core(flags="causal"), mesh, SIZES, 1, cut=last_hop)
    assert np.max(np.abs(got[0] - want[0])) < 1e-9  # dQ untouched
    assert np.max(np.abs(got[2] - want[2])) > 1e-3


# ---- `backward` of the core: each forward plan's backward, and its costs -----------------------------------

BIG = {"B": 1, "T": 32768, "S": 32768, "H": 8, "E": 128}


def test_backward_of_the_core_is_the_backward_of_the_ring_the_planner_picks():
    bw = backward(core(flags="causal"), Mesh(X=4), BIG)
    assert bw.note.startswith("backward of the forward's ring plan")
    assert bw.collectives == (("Shift", ("X",)),) * 12
    assert [g.of for g in bw.grads] == ["Q", "K", "V"]
    assert {n: text(t) for n, t in bw.gradients} == {
        "Q": "dQ[B, T_X, H, E]",
        "K": "dK[B, S_X, H, E]",
        "V": "dV[B, S_X, H, E]",
    }
    assert str(bw).startswith("# backward of the forward's ring plan")
    assert bw.to_json()["note"] == bw.note


def _costs(plan: Plan, overlap: str = "serial"):
    return priced(plan, Mesh(X=4), {}, CostModel.of("tpu-v5e", overlap=overlap))


def test_each_backward_plan_with_its_bytes_and_time_symbolic():
    """The ring's backward moves 4 blocks a hop (K, V again; dK, dV), 12 shifts on X=4: 6·B·E·H·S bytes, twice
    the forward's; the gathered plan's backward gathers K and V again and reduce-scatters dK and dV (the
    gathers' transposes): 8·B·E·H·S, twice its forward's. Times: the ring's 12 shifts, each as the forward's
    6; its blocks' FLOPs 4 times the forward's (8 block products against 2: three passes that each remake
    the scores)."""
    mesh = Mesh(X=4)
    both = core_backwards(core(flags="causal"), mesh, BIG)
    (ring, rbw), (gather, gbw) = both[0], both[1]
    assert is_ring(ring) and gather.note.startswith("AllGather_X of K and V")
    assert str(plan_bytes(rbw.plan(), mesh, Sizes({}))) == "6*B*E*H*S"
    assert str(plan_bytes(gbw.plan(), mesh, Sizes({}))) == "8*B*E*H*S"
    assert str(plan_bytes(gather, mesh, Sizes({}))) == "4*B*E*H*S"
    gathers = [s for s in gather.steps if s.op is Op.ALL_GATHER]
    scatters = [s for s in gbw.steps if s.op is Op.REDUCE_SCATTER]
    assert [t.op for g in gathers for t in transpose(g, mesh)] == [Op.REDUCE_SCATTER] * 2
    assert [(s.inputs[0].name, s.axes) for s in scatters] == [("dV", ("X",)), ("dK", ("X",))]
    fw, bw = _costs(ring), _costs(rbw.plan())
    assert sympy.simplify(bw.comms - 2 * fw.comms) == 0
    assert str(fw.comms) == "6*Max(3*T_min, B*E*H*S/W_ici)"
    assert sympy.simplify(bw.flops - 4 * fw.flops) == 0
    assert sympy.simplify(_costs(gbw.plan()).comms - 2 * _costs(gather).comms) == 0
    # on numbers (tpu-v5e, the sizes above): the ring's backward against the gathered plan's
    costs = CostModel.of("tpu-v5e", overlap="schedule")
    ring_s = priced(rbw.plan(), mesh, BIG, costs).seconds
    gather_s = priced(gbw.plan(), mesh, BIG, costs).seconds
    assert 0 < ring_s < gather_s
