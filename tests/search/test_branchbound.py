"""The branch and bound of a training search (shardalg.search.branchbound): every bound is at most its candidate's
step, and the result shows what pricing every candidate shows while it leaves candidates unpriced."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.models.trainstate import TrainState
from shardalg.planning import symbolic
from shardalg.search import branchbound, numeric
from shardalg.search.pieces import StatementPricer, pricer_for
from shardalg.search.price import Admitted, rank_key
from shardalg.search.space import Pruned, enumerate_space
from tests.search.programs import MLP, Q7, TRANSFORMER, TRANSFORMER_FN
from tests.search.test_pieces import SMALL_FN
from tests.search.test_search_oracle import programs, sizes_of

# a layer repeated L times with an unembedding once after it: the bound's two parts
HEADED = """params W1, W2; embeddings W_un; layers L
In[B, D] * W1[D, F] -> H[B, F]
H[B, F] * W2[F, D] -> Out[B, D]
Out[B, D] * W_un[D, V] -> Lg[B, V]
"""
HEADED_ON = {"mesh": "X=2,Y=2", "sizes": "B=64,D=256,F=1024,V=4096,L=8", "hw": "tpu-v5e", "mode": "train"}
MLP_TRAIN = {**Q7, "mode": "train", "memory": None}
LAYER_2X2 = {"mesh": "X=2,Y=2", "sizes": "B=8,T=2048,D=8192,N=8192,F=32768", "hw": "tpu-v5e", "mode": "train"}

CASES = [
    pytest.param(MLP, MLP_TRAIN, id="mlp"),
    pytest.param(MLP, {**MLP_TRAIN, "overlap": "serial"}, id="mlp-serial"),
    pytest.param(MLP, {**MLP_TRAIN, "keep_gathered": True}, id="mlp-kept"),
    pytest.param(HEADED, HEADED_ON, id="headed"),
    # one ranked row: a shown candidate (a strategy's best) is set against a candidate priced only as the best
    # with its parameters, once the shown ones are known (the second round)
    pytest.param(HEADED, {**HEADED_ON, "top": 1}, id="headed-top1"),
    pytest.param(TRANSFORMER, LAYER_2X2, id="layer"),
]
# priced whole (remat reruns statements by the whole layer), bounded all the same: a fused attention's cost model
# names its scores on chip, so the forward's bound derives no backward
FLASH_FN = TRANSFORMER_FN.replace("softmax_{S,causal}", "softmax_{S,causal,flash}")
FLASH_ON = {
    "mesh": "X=2",
    "sizes": "B=64,T=512,S=512,D=1024,H=8,E=128,F=4096",
    "hw": "tpu-v5e",
    "mode": "train",
    "remat": "block",
}
WHOLE = [
    pytest.param(HEADED, {**HEADED_ON, "remat": "block"}, id="headed-remat"),
    pytest.param(FLASH_FN, {**FLASH_ON, "top": 3}, id="flash-remat"),
    # ZeRO adds the parameters' gathers and reduces the gradients onto shards: priced whole, bounded too
    pytest.param(HEADED, {**HEADED_ON, "zero": 3}, id="headed-zero3"),
    pytest.param(MLP, {**MLP_TRAIN, "zero": 1, "remat": "block", "top": 1}, id="mlp-zero1-remat"),
    # a precision recipe changes the bytes held, not the seconds
    pytest.param(HEADED, {**HEADED_ON, "precision": "fp8"}, id="headed-fp8"),
]


def _priced_whole(kw: dict) -> bool:
    """Whether a case's candidates are priced whole (each of WHOLE's settings makes a step no sum of statements)."""
    return any(k in kw for k in ("remat", "zero", "precision"))


def _priced_every_candidate(program: str, kw: dict) -> list[tuple[Any, ...]]:
    """For every admitted candidate of the search's space, priced in the space's order: (candidate, its first
    bound, its bound again just before it is priced (the pieces of the candidates before it priced), its bound
    again once every candidate is priced, its step, the least step of its keep choices, its least rank key
    just before it is priced and once every candidate is (:func:`branchbound.low_key`), and its rank key)."""
    mesh, sizes, hw, mode = Mesh.parse(kw["mesh"]), kw["sizes"], kw["hw"], kw["mode"]
    with symbolic.strict():
        prog, space, st, _ = numeric.prepare_search(
            program,
            mesh,
            sizes,
            hw,
            kw.get("memory"),
            mode,
            None,
            kw.get("remat"),
            kw.get("overlap"),
            "x",
            TrainState(zero=kw.get("zero"), precision=kw.get("precision")),
        )
        st = replace(st, keep=kw.get("keep_gathered"))
        pruned = Pruned()
        pricer = pricer_for(prog, space, st, pruned, [])
        floor, floors, prices = branchbound._floor(prog, st), branchbound.group_floors(pricer), {}
        rows = []
        for a in enumerate_space(space, pruned):
            got = pricer.admit(a)
            if isinstance(got, Admitted):
                c = branchbound._Candidate(0, got, branchbound.forward_phase(got, st, prices))
                before = branchbound.bound_again(pricer, c, floor, floors)
                low = branchbound.low_key(c, before, branchbound.comms_again(pricer, c, floor, floors))
                e = pricer.price(got)
                keeps = [] if e.keep is None else [e.keep.again, e.keep.keep]  # None: not priced
                least = min([x for x in keeps if x is not None] or [e.seconds])
                key = rank_key(e, c.order) if e.fits else None
                rows.append(
                    (str(a), branchbound.lower_bound(c, st, floor), before, c, e.seconds, least, low, key)
                )
        out = []
        for a, first, before, c, step, least, low, key in rows:
            after = branchbound.bound_again(pricer, c, floor, floors)
            low_after = branchbound.low_key(c, after, branchbound.comms_again(pricer, c, floor, floors))
            out.append((a, first, before, after, step, least, low, low_after, key))
        return out


@pytest.mark.parametrize(("program", "kw"), CASES + WHOLE)
def test_every_bound_is_at_most_its_candidates_step(program: str, kw: dict) -> None:
    """The forward priced exactly plus the backward's least compute never exceeds a priced step, under each
    keep choice, nor does the bound again with some of its pieces priced (those of the candidates before it)
    or all of them (the float sums of a bound and of a step differ in their last bits: by less than the
    search's ``EPS``); with all of them priced it is the least step of its keep choices. The first bound is no
    trivial zero (it is within 2x of the step for most candidates), and pieces priced raise some bounds. A
    candidate priced whole (remat) has no pieces: its bound is the first, below its step by what remat reruns.

    What the search compares with a place, the least rank key a candidate can have (that bound, its
    communication at least, its bytes counted before any plan), is at most its rank key before its pieces are
    priced and with all of them; its communication is no trivial zero either (with its pieces priced)."""
    rows = _priced_every_candidate(program, kw)
    whole = _priced_whole(kw)
    eps = branchbound.EPS
    assert rows
    for a, first, before, after, step, least, low, low_after, key in rows:
        assert first <= least * (1 + eps), a
        assert first <= before * (1 + eps) and before <= least * (1 + eps), a
        if whole:
            assert first == before == after, a
        else:
            assert after == pytest.approx(least, rel=1e-9), a
        assert least <= step
        if key is not None:
            assert low <= low_after <= key, a
    # no trivial zero: within 2x of the step for most candidates (3x priced whole: remat reruns the forward)
    share = 3 if whole else 2
    assert sum(r[1] > r[4] / share for r in rows) > len(rows) / 2
    if not whole:
        assert any(r[3] > r[1] * (1 + 1e-9) for r in rows)
    # the communication a candidate's key holds: at least half of it bounded, with its pieces priced, for most
    # that communicate (priced whole, only its forward's is known)
    talk = [r for r in rows if r[8] is not None and r[8][1]]
    if not whole:
        assert sum(r[7][1] >= r[8][1] / 2 for r in talk) > len(talk) / 2


def _shows_what_pricing_every_candidate_shows(program: str, kw: dict) -> tuple[Any, Any]:
    """The bounded search and the one that prices every candidate (``top`` above the space's size leaves
    nothing unpriced), shown alike: the same lines but the space line's counts, and the same JSON winner,
    program, strategies (each one's best, its reason and what it is set against) and ranked rows."""
    got = numeric.search(program, **kw)
    every = numeric.search(program, **{**kw, "top": 10**6})
    every.top = got.top
    mine, theirs = str(got).splitlines(), str(every).splitlines()
    assert [x for x in mine if not x.startswith("space")] == [x for x in theirs if not x.startswith("space")]
    a, b = got.to_json(), every.to_json()
    for key in ("winner", "winner_program", "strategies", "ranked"):
        assert a[key] == b[key], key
    return got, every


@settings(max_examples=max(3, settings.default.max_examples // 20))
@given(
    program=programs(),
    mesh=st.sampled_from(["X=2,Y=2", "X=4", "X=2,Y=4"]),
    b=st.sampled_from([16, 512]),
    d=st.sampled_from([256, 4096]),
    f=st.sampled_from([1024, 16384]),
    overlap=st.sampled_from(["steady", "serial"]),
    top=st.integers(1, 4),
    whole=st.sampled_from([{}, {"remat": "block"}, {"zero": 1}, {"zero": 3}, {"precision": "fp8"}]),
)
def test_on_random_layers_the_bounded_search_shows_what_pricing_every_candidate_shows(
    program: str, mesh: str, b: int, d: int, f: int, overlap: str, top: int, whole: dict
) -> None:
    """On the oracle's random layers in training, few ranked rows (so most strategies' bests, and what they
    are set against, lie below them), the bounded search shows what pricing every candidate shows: priced
    from statements, or whole under remat, a ZeRO stage or a precision recipe."""
    sizes = sizes_of(program, b, d, f, 256)
    kw = {"mesh": mesh, "sizes": sizes, "hw": "tpu-v5e", "mode": "train", "overlap": overlap, "top": top}
    _shows_what_pricing_every_candidate_shows(program, {**kw, **whole})


@pytest.mark.parametrize(("program", "kw"), CASES + WHOLE)
def test_the_bounded_search_shows_what_pricing_every_candidate_shows(program: str, kw: dict) -> None:
    """The same winner, ranked rows, best of each strategy, reasons and what each is set against as the search
    that prices every candidate; some are unpriced, counted in the space line and the JSON (and, priced from
    statements, fewer statements are priced; priced whole, the line says what the bound read)."""
    got, every = _shows_what_pricing_every_candidate_shows(program, kw)
    unpriced = got.solver["bound"]["unpriced"]
    assert unpriced > 0 and every.solver["bound"]["unpriced"] == 0
    assert len(got.ranked) + len(got.rejected) + unpriced == len(every.ranked) + len(every.rejected)
    (line,) = [x for x in str(got).splitlines() if x.startswith("space")]
    assert f"branch and bound: {unpriced:,} candidates left unpriced" in line
    assert got.to_json()["solver"]["bound"]["unpriced"] == unpriced
    if _priced_whole(kw):
        assert (
            got.solver["pricing"] == "whole program"
            and "its forward plans and the least compute of its backward put" in line
        )
    else:
        assert got.solver["pieces"] < every.solver["pieces"]


def test_the_bound_says_its_progress_and_the_total_grows_by_the_candidates_priced() -> None:
    """Progress runs over the space's assignments, then over the admitted candidates in the order of their
    bounds: the total grows once, never goes down, and the last call is done == total."""
    calls: list[tuple[int, int]] = []
    numeric.search(MLP, **MLP_TRAIN, progress=lambda d, t: calls.append((d, t)))
    totals = [t for _, t in calls]
    assert totals == sorted(totals) and len(set(totals)) == 2
    assert calls[-1][0] == calls[-1][1] and all(d <= t for d, t in calls)


def test_inference_and_the_whole_program_pricer_have_no_bound() -> None:
    """Inference prices only a forward (nothing to bound); a step priced whole under overlap ``schedule`` (steps
    as their dependencies allow, no phases) has no bound: neither says a bound. Under remat, ZeRO or a precision
    recipe it has (they add work to the phases, or bytes)."""
    assert "bound" not in numeric.search(MLP, **Q7).solver
    assert "bound" not in numeric.search(MLP, **{**MLP_TRAIN, "overlap": "schedule"}).solver
    both = {**MLP_TRAIN, "overlap": "schedule", "remat": "block"}
    assert "bound" not in numeric.search(MLP, **both).solver
    assert (
        "bound"
        in numeric.search(MLP, **{**MLP_TRAIN, "zero": 2, "remat": "block", "precision": "fp8"}).solver
    )
    assert "bound" in numeric.search(TRANSFORMER_FN, **{**SMALL_FN, "mesh": "X=2", "mode": "train"}).solver


@pytest.mark.parametrize(("program", "kw"), CASES)
def test_pieces_priced_one_at_a_time_raise_the_bound_to_the_step(program: str, kw: dict) -> None:
    """The search prices a candidate's pieces one at a time, bounding it again after each: the piece it names
    is one of the candidate's not priced yet; the bound never falls as they are priced, never exceeds the
    least step of the candidate's keep choices, and once no piece is left to name (every piece of the keep
    choice that gives the bound priced) it is that choice's step but for its gradients' additions (priced with
    the candidate), so at most the least step and within 1e-9 of it where the candidate has none."""
    mesh, sizes, hw, mode = Mesh.parse(kw["mesh"]), kw["sizes"], kw["hw"], kw["mode"]
    with symbolic.strict():
        prog, space, st, _ = numeric.prepare_search(
            program, mesh, sizes, hw, kw.get("memory"), mode, None, None, kw.get("overlap"), "x", TrainState()
        )
        st = replace(st, keep=kw.get("keep_gathered"))
        pricer = StatementPricer(prog, space, st, Pruned())
        floor, floors, prices = branchbound._floor(prog, st), branchbound.group_floors(pricer), {}
        named = exact = 0
        for a in enumerate_space(space, pricer.pruned):
            got = pricer.admit(a)
            if not isinstance(got, Admitted):
                continue
            c = branchbound._Candidate(0, got, branchbound.forward_phase(got, st, prices))
            bounds, nxt = [], None
            for _ in range(2 * len(got.program.statements) + 1):
                bound, _, nxt = branchbound._bound_and_next(pricer, c, floor, floors)
                bounds.append(bound)
                if nxt is None:
                    break
                sub, keep, once = nxt
                assert c.pieces is not None and sub in c.pieces.subs, a
                assert pricer.found(sub, keep) is None, a  # not priced yet
                pricer.piece(sub, keep, once)
                named += 1
            assert nxt is None, a  # every piece named ends it
            e = pricer.price(got)
            keeps = [] if e.keep is None else [e.keep.again, e.keep.keep]
            least = min([x for x in keeps if x is not None] or [e.seconds])
            # never falls but by the float sums' last bits (a piece priced at its floor adds the same terms in
            # another order), which the search's EPS covers when it compares a bound
            falls = [
                b for b, after in zip(bounds, bounds[1:], strict=False) if after < b * (1 - branchbound.EPS)
            ]
            assert not falls and bounds[-1] <= least * (1 + 1e-12), a
            if c.pieces is not None and not c.pieces.joins:
                assert bounds[-1] == pytest.approx(least, rel=1e-9), a
                exact += 1
        assert named > 0 and (exact > 0 or program == TRANSFORMER)
