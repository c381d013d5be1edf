"""A search admits a candidate after checking its program statement by statement, each statement once per
search (:meth:`shardalg.search.price.Pricer.check`): it admits exactly what checking each whole program
admits, and refuses the rest with the same error. It refuses one whose bytes that need no plan exceed the cap
(:func:`shardalg.models.unplanned.unplanned_bytes`): never one that pricing finds fits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from shardalg.algebra.context import as_sizes
from shardalg.algebra.mesh import Mesh
from shardalg.errors import ShardalgError
from shardalg.models.expand import shard
from shardalg.models.program import model_program
from shardalg.models.trainstate import TrainState
from shardalg.models.unplanned import unplanned_bytes
from shardalg.models.zero import check_zero
from shardalg.search import price
from shardalg.search.numeric import prepare_search, search
from shardalg.search.price import Admitted, Pricer
from shardalg.search.space import Pruned, enumerate_space
from tests.search.programs import TRANSFORMER_FN
from tests.search.test_branchbound import HEADED

from .test_pieces import _prepared


def _outcome(program, mesh, sizes, **check):
    """The model of ``program``, or the error (its class and message) that refuses it."""
    try:
        return model_program(program, mesh, sizes, **check)
    except ShardalgError as err:
        return type(err), str(err)


@pytest.mark.parametrize("mesh", ["X=2,Y=2", "X=2,Y=3"])
def test_statement_by_statement_admits_what_the_whole_program_check_admits(mesh):
    """Every candidate of the causal layer checked under the sizes it was made for, and under sizes some of its
    shardings do not divide (the space's own filter drops those before admission: here they reach it)."""
    prog, space, st, _ = _prepared(TRANSFORMER_FN, mesh, "B=12,T=12,S=12,D=24,H=6,E=6,F=48", "train", None)
    odd = as_sizes("B=4,T=6,S=6,D=12,H=3,E=4,F=24")
    pricer = Pricer(prog, space, st, Pruned())
    refused = admitted = 0
    for a in enumerate_space(space, Pruned(), symmetry=False):
        program = shard(pricer.base, a.param_map, a.activation_map, sequence=a.megatron)
        for sizes in (st.sizes, odd):
            whole = _outcome(program, st.mesh, sizes)
            assert _outcome(program, st.mesh, sizes, check=pricer.check) == whole, (a, sizes)
            refused += isinstance(whole, tuple)
            admitted += not isinstance(whole, tuple)
    assert refused and admitted  # both ways are seen


# a decode step: its KV cache is counted before any plan too (inference counts no activations)
DECODE = """params W_q, W_o
kvcache Kc, Vc
tokens B
X[B, D] * W_q[D, H, E] -> Q[B, H, E]
Q[B, H, E] · Kc[B, S, H, E] -> Sc[B, H, S]
softmax_S(Sc[B, H, S]) -> P[B, H, S]
P[B, H, S] · Vc[B, S, H, E] -> O[B, H, E]
O[B, H, E] * W_o[H, E, D] -> Y[B, D]"""

LAYER_SIZES = "B=12,T=12,S=12,D=24,H=6,E=6,F=48"
UNPLANNED_CASES = [
    pytest.param(TRANSFORMER_FN, LAYER_SIZES, "train", None, None, id="layer"),
    pytest.param(TRANSFORMER_FN, LAYER_SIZES, "train", "block", None, id="layer-block"),
    pytest.param(
        TRANSFORMER_FN, LAYER_SIZES, "train", None, TrainState(zero=3, precision="deepspeed"), id="zero3"
    ),
    pytest.param(HEADED, "B=64,D=256,F=1024,V=4096,L=8", "train", None, None, id="headed"),
    pytest.param(HEADED, "B=64,D=256,F=1024,V=4096,L=8", "train", "block", None, id="headed-block"),
    pytest.param(DECODE, "B=8,D=64,H=4,E=16,S=256", "infer", None, None, id="decode"),
]


@pytest.mark.parametrize(("program", "sizes", "mode", "remat", "state"), UNPLANNED_CASES)
def test_what_admission_counts_before_any_plan_is_what_pricing_counts_of_it(
    program, sizes, mode, remat, state
):
    """A candidate is refused before any plan when the bytes that follow from its program alone exceed the
    cap: its parameters with their gradients and optimizer state, the activations the backward keeps (the
    unsharded program's names) as its program holds them, its KV cache. Each is the priced memory's own part
    (the activations at most the priced ones: those add the kept copies and the functions' statistics, and a
    head's logits as their policy says), for every candidate, so no candidate that fits is refused."""
    prog, space, st, _ = prepare_search(
        program, Mesh.parse("X=2,Y=2"), sizes, "tpu-v5e", None, mode, None, remat, None, "", state
    )
    # no cap, and the backward gathering again: the least activations a candidate is priced with
    pricer = Pricer(prog, space, replace(st, cap=float("inf"), keep=False), Pruned())
    seen = acts = 0
    for a in enumerate_space(space, Pruned()):
        got = pricer.admit(a)
        if not isinstance(got, Admitted):
            continue
        choices = {"precision": st.state.precision, "zero": st.state.zero}
        before = unplanned_bytes(got.model, st.mode, pricer.saved, st.optimizer, **choices)
        e = pricer.price(got)
        params = sum(e.parts[p] for p in ("params", "grads", "optimizer"))
        assert float(
            before.pop("params, grads and optimizer" if mode == "train" else "params")
        ) == pytest.approx(params, rel=1e-12)
        assert float(before.pop("kv_cache", 0)) == pytest.approx(e.parts["kv_cache"], rel=1e-12)
        held = float(before.pop("activations", 0))
        assert held <= e.parts["activations"] * (1 + 1e-12), a
        assert not before
        seen += 1
        acts += held > 0
    assert seen > 20
    assert (acts == seen) if mode == "train" else (acts == 0)  # every training candidate keeps activations


def test_a_candidate_whose_activations_alone_exceed_the_cap_is_refused_before_any_plan(monkeypatch):
    """The causal layer with a cap that some candidates' parameters fit under but not with their activations:
    those are refused before any plan (fewer priced), saying so, and the result's rows are those of the same
    search counting only the parameters before any plan (as it did before it counted the activations)."""
    on = {"mesh": "X=2,Y=2", "sizes": "B=12,T=12,S=12,D=24,H=6,E=6,F=48", "hw": "tpu-v5e", "mode": "train"}
    fits = sorted(e.bytes for e in search(TRANSFORMER_FN, **on).ranked)
    cap = fits[len(fits) // 2]
    got = search(TRANSFORMER_FN, **on, memory=cap)
    refused = [e for e in got.rejected if e.seconds is None and "activations" in e.parts]
    assert refused and all("before any plan" in e.memory_reason() for e in refused)
    assert all(e.parts["activations"] > 0 and e.bytes > cap for e in refused)

    def params_only(model, mode, saved, *args, **kw):
        return unplanned_bytes(model, mode, (), *args, **kw)

    monkeypatch.setattr(price, "unplanned_bytes", params_only)
    old = search(TRANSFORMER_FN, **on, memory=cap)
    assert got.pruned.over_cap > old.pruned.over_cap

    def priced(r):
        return len(r.ranked) + len(r.rejected) - r.pruned.over_cap

    assert priced(got) < priced(old)
    # the rows shown (the branch and bound leaves unpriced what the bytes before any plan put behind them)
    rows = [(e.assignment, e.seconds, e.bytes, e.comms) for e in got.ranked[: got.top]]
    assert rows and rows == [(e.assignment, e.seconds, e.bytes, e.comms) for e in old.ranked[: old.top]]
    fitting = {s: e.assignment for s, e in got.best.items() if e.fits}
    assert fitting == {s: e.assignment for s, e in old.best.items() if e.fits}


# a norm's gain: one dim, which a candidate that shards it leaves none free for ZeRO to shard over the data axes
NORMED = """params W, g
tokens B
rmsnorm_D(In[B, D]) -> Hr[B, D]
Hr[B, D] .* g[D] -> Hg[B, D]
Hg[B, D] * W[D, F] -> Out[B, F]"""


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_a_candidate_zero_cannot_shard_is_left_out_exactly_when_pricing_it_refuses(stage):
    """ZeRO shards each parameter and its gradient over the data axes onto a dim it leaves unsharded: where
    none divides (``g[D_Y]`` with the batch over X), pricing the step refuses the candidate. Admission leaves
    exactly those out (counted), so the search answers where it stopped at the first one."""
    prog, space, st, _ = prepare_search(
        NORMED,
        Mesh.parse("X=2,Y=2"),
        "B=16,D=32,F=64",
        "tpu-v5e",
        None,
        "train",
        None,
        None,
        None,
        "",
        TrainState(zero=stage),
    )
    pricer = Pricer(prog, space, st, Pruned())
    left_out = refused = 0
    for a in enumerate_space(space, Pruned()):
        program = shard(pricer.base, a.param_map, a.activation_map, sequence=a.megatron)
        model = model_program(program, st.mesh, st.sizes)
        try:
            check_zero(model, st.state.stage, require_axes=False)
        except ShardalgError:
            continue  # ZeRO-1/2 and FSDP: left out before (their own count)
        before = pricer.pruned.undivided
        admitted = isinstance(pricer.admit(a), Admitted)
        out = pricer.pruned.undivided > before
        try:
            pricer.price(Admitted(a, space.strategy(a), program, model))
        except ShardalgError as err:
            assert "no unsharded dim of it divides" in str(err)
            assert out, a
            refused += 1
        else:
            assert not out, a
            left_out += admitted
    assert refused and left_out
    got = search(NORMED, mesh="X=2,Y=2", sizes="B=16,D=32,F=64", hw="tpu-v5e", mode="train", zero=stage)
    assert got.pruned.undivided == refused and got.winner is not None
    assert f"{refused} left out by ZeRO-{stage} (a parameter with no unsharded dim" in str(got)
    assert got.to_json()["pruned"]["zero_undivided"] == refused
