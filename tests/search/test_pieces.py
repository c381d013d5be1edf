"""Statements priced once (shardalg.search.pieces): every candidate's price assembled from its statements'
equals the whole-program price (seconds, communication, bytes by part, FLOPs), on the search's programs."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.notation.parse import parse
from shardalg.search.groups import is_product, split_statements
from shardalg.search.numeric import prepare_search, search
from shardalg.search.pieces import StatementPricer, pricer_for
from shardalg.search.price import Pricer
from shardalg.search.space import Assignment, Pruned, enumerate_space
from tests.search.programs import HEADED_FN, LAYER_TRAIN, MLP, Q7, TRANSFORMER, TRANSFORMER_FN

# the layer with its attention core: H heads of E, the keys' positions S (the tokens T renamed)
SIZES_FN = "B=8,T=8,S=8,D=16,H=2,E=8,F=32"
SIZES_HEADED = SIZES_FN + ",V=32,L=4"


def _differences(eo, en) -> list[str]:
    """What differs between a candidate's whole-program entry ``eo`` and its entry from statements ``en``:
    seconds, communication, compute, HBM and FLOPs to 1e-12 relative, each axis's seconds likewise, bytes by
    part, the values gathered and whether it fits exactly (``[]``: they agree)."""
    if (eo is None) != (en is None):
        return ["priced"]
    if eo is None:
        return []
    out = [k for k in ("parts", "bytes", "fits", "gathers") if getattr(en, k) != getattr(eo, k)]
    if (eo.seconds is None) != (en.seconds is None):
        return [*out, "seconds"]
    if eo.seconds is None:
        return out
    for k in ("seconds", "comms", "compute", "hbm", "flops"):
        if getattr(en, k) != pytest.approx(getattr(eo, k), rel=1e-12, abs=1e-30):
            out.append(k)
    if en.axes != pytest.approx(eo.axes, rel=1e-12, abs=1e-30):
        out.append("axes")
    if (eo.keep and eo.keep.kept) != (en.keep and en.keep.kept):
        out.append("keep")
    return out


def _prepared(program, mesh, sizes, mode, overlap):
    return prepare_search(program, Mesh.parse(mesh), sizes, "tpu-v5e", None, mode, None, None, overlap, "")


def disagreements(program, mesh, sizes, mode, overlap, pick=None):
    """Every candidate of ``program`` (or those ``pick(n, a)`` takes, ``n`` its place in the enumeration)
    priced whole and from its statements: how many were priced both ways, the assignments that disagree
    with what differs, and the statement pricer (its table, its count of candidates priced whole)."""
    prog, space, st, _ = _prepared(program, mesh, sizes, mode, overlap)
    old, new = Pricer(prog, space, st, Pruned()), StatementPricer(prog, space, st, Pruned())
    seen, wrong = 0, []
    for n, a in enumerate(enumerate_space(space, Pruned())):
        if pick is not None and not pick(n, a):
            continue
        eo, en = old(a), new(a)
        seen += eo is not None
        if diff := _differences(eo, en):
            wrong.append((a, diff))
    return seen, wrong, new


def _both(program, mesh, sizes, mode, overlap):
    seen, wrong, new = disagreements(program, mesh, sizes, mode, overlap)
    assert not wrong, wrong
    return seen, new


@pytest.mark.parametrize("mode", ["train", "infer"])
@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_mlp_every_candidate(mode, overlap):
    seen, new = _both(MLP, "X=2,Y=2", "B=128,D=8192,F=32768", mode, overlap)
    assert seen > 20
    assert len({sub for sub, _ in new.table}) <= 2 * seen  # two statements per candidate, none priced twice


# the layer's non-causal form: its core's products are not halved (a causal core is tested below)
NONCAUSAL_FN = TRANSFORMER_FN.replace("softmax_{S,causal}", "softmax_S")
SIZES = "B=8,T=8,D=16,N=16,F=32"

# the layer's programs and modes on X=2,Y=2: (program, sizes, mode, overlap, every k-th candidate sampled in CI)
LAYERS = {
    "TRANSFORMER train": (TRANSFORMER, SIZES, "train", "steady", 4),
    "TRANSFORMER_FN train steady": (TRANSFORMER_FN, SIZES_FN, "train", "steady", 8),
    "TRANSFORMER_FN train serial": (TRANSFORMER_FN, SIZES_FN, "train", "serial", 8),
    "TRANSFORMER_FN infer": (TRANSFORMER_FN, SIZES_FN, "infer", "steady", 4),
    "NONCAUSAL_FN train": (NONCAUSAL_FN, SIZES_FN, "train", "steady", 8),
    "NONCAUSAL_FN infer": (NONCAUSAL_FN, SIZES_FN, "infer", "steady", 4),
    "HEADED_FN train": (HEADED_FN, SIZES_HEADED, "train", "steady", 8),
    "HEADED_FN infer": (HEADED_FN, SIZES_HEADED, "infer", "steady", 8),
}


def _on_2x2(params, activations, megatron):
    """An assignment on X=2,Y=2: the dims each axis shards in the parameters and activations, Megatron SP's axes."""
    return Assignment(("X", "Y"), params, activations, megatron)


# Megatron SP candidates, checked every time. A training candidate with Megatron SP is priced by blocks (the
# attention block, the MLP block; the layer without a core is one block: test_megatron_sp_without_a_core...). Before products reading one operand
# were one piece, its pieces cut at each product, each resharding its own part of the shared input's
# gradient, disagreed with the whole program on 77 of the causal layer's 280 candidates and 28 of the plain
# layer's 171 (steady), these eight among them. With Q, K and V's projections one piece, cut from the core
# (whose backward hands Q's projection a whole dQ from the gathered dSc), 28 of the causal layer's 89 Megatron
# SP candidates still disagree: CUT_AT_CORE_WRONG. The plain layer's agreed priced by pieces (the last here),
# at these sizes; an MLP with D sharded did not (test_megatron_sp_without_a_core_is_priced_by_blocks).
MEGATRON_SP = (
    _on_2x2(((), ("D",)), ((), ("D",)), ("Y",)),
    _on_2x2(((), ("H",)), ((), ("H",)), ("Y",)),
    _on_2x2(((), ("F",)), ((), ("F",)), ("Y",)),
    _on_2x2(((), ("F",)), (("B",), ("F",)), ("Y",)),
    _on_2x2((("D",), ("D",)), (("D",), ("T",)), ("X",)),
    _on_2x2((("E",), ("F",)), (("T",), ("F",)), ("Y",)),
    _on_2x2((("F",), ("H",)), (("F",), ("B",)), ("X",)),
    _on_2x2(((), ("N",)), ((), ("N",)), ("Y",)),  # the plain layer
)
CUT_AT_CORE_WRONG = (MEGATRON_SP[0], MEGATRON_SP[4], MEGATRON_SP[5])  # bytes; the first two seconds too


@pytest.mark.parametrize("case", list(LAYERS))
def test_transformer_layer_candidates(case):
    """A spread of each layer's candidates (every k-th, at least 30) and the Megatron SP candidates
    (:data:`MEGATRON_SP`) priced from their statements equal their whole programs.
    Every candidate agrees too (the long profile: ``test_every_layer_candidate``)."""
    program, sizes, mode, overlap, every = LAYERS[case]
    seen, wrong, new = disagreements(
        program, "X=2,Y=2", sizes, mode, overlap, lambda n, a: n % every == 0 or a in MEGATRON_SP
    )
    assert not wrong, wrong
    assert seen >= 30 and new.whole == 0
    if program is not TRANSFORMER:
        assert len({sub for sub, _ in new.table}) < 6 * seen  # a statement without F (or N) is shared


def test_megatron_sp_is_priced_by_blocks():
    """Megatron SP's training candidates are priced by the layer's blocks, cut where the residual stream is
    written; cut between Q, K and V's projections and the core that hands them their cotangents (a whole
    ``dQ``, from the gathered ``dSc``), some are wrong (:data:`CUT_AT_CORE_WRONG`)."""
    prog, space, st, _ = _prepared(TRANSFORMER_FN, "X=2,Y=2", SIZES_FN, "train", "steady")
    blocks = StatementPricer(prog, space, st, Pruned())
    assert blocks.alone.runs == ((0,), (1,), (2,), (3,), (4,))  # projections, core, W_o, gate and in, W_out
    assert blocks.blocks.runs == ((0, 1, 2), (3, 4))
    assert blocks.blocks.joins == ()  # In and Rs: each read by a norm and a residual add of one block
    cut = StatementPricer(prog, space, st, Pruned())
    cut.blocks = cut.alone
    whole = Pricer(prog, space, st, Pruned())
    for a in MEGATRON_SP[:7]:
        priced = whole(a)
        assert _differences(priced, blocks(a)) == []
        assert (_differences(priced, cut(a)) != []) is (a in CUT_AT_CORE_WRONG)


def test_a_block_ends_where_the_layer_does():
    """Megatron SP's blocks never join the layer with the head after it: a block is priced in one part of the
    step (the repeated layer, or once). The MLP block ran on into the head before (no residual stream is read
    after the layer's last ``+``), so the head was counted L times: every one of this model's 202 Megatron SP
    candidates on 2x2 came out wrong (LLaMA-3 8B's best Megatron SP on 2x2, B=8, T=1024: 660 ms against its
    whole program's 221 ms)."""
    prog, space, st, _ = _prepared(HEADED_FN, "X=2,Y=2", SIZES_HEADED, "train", "steady")
    pricer = StatementPricer(prog, space, st, Pruned())
    assert pricer.blocks.runs == ((0, 1, 2), (3, 4), (5,))
    seen, wrong, _ = disagreements(
        HEADED_FN, "X=2,Y=2", SIZES_HEADED, "train", "steady", lambda n, a: bool(a.megatron) and n % 4 == 0
    )
    assert seen >= 40 and wrong == []


def test_a_piece_outside_the_layer_is_counted_once():
    """The head's final norm, priced alone, is a layer of its own program (nothing before it): its statistics
    and its result were counted L times in every candidate's activations (13,056 bytes over the whole
    program's 168,192 for the replicated one here). A piece of the part outside the layer is priced with
    each of its values once, as the whole program holds them."""
    prog, space, st, _ = _prepared(HEADED_FN, "X=2,Y=2", SIZES_HEADED, "train", "steady")
    a = next(enumerate_space(space, Pruned()))
    assert str(a) == "params -; activations -"
    whole, summed = Pricer(prog, space, st, Pruned())(a), StatementPricer(prog, space, st, Pruned())(a)
    assert summed.parts == whole.parts and whole.parts["activations"] == 168_192


def test_a_piece_in_both_parts_is_priced_whole():
    """A head with no product of its own (a final norm and its gain) joins the layer's last piece: a piece in
    both parts of the step, which no part's count fits, so its candidates are priced whole, and agree."""
    program = MLP_ADD.replace("tokens B, T", "embeddings g_f\ntokens B, T\nlayers L") + (
        "\nrmsnorm_D(Xl[B, T, D]) -> Xr[B, T, D]\nXr[B, T, D] .* g_f[D] -> Xf[B, T, D]"
    )
    prog, space, st, _ = _prepared(program, "X=2,Y=2", "B=16,T=16,D=32,F=64,L=4", "train", "steady")
    assert StatementPricer(prog, space, st, Pruned())._once == [False, None]
    seen, wrong, new = disagreements(
        program, "X=2,Y=2", "B=16,T=16,D=32,F=64,L=4", "train", "steady", lambda n, a: n % 8 == 0
    )
    assert seen >= 10 and wrong == [] and new.whole >= seen and not new.table  # no piece priced


MLP_ADD = """params W1, W2
tokens B, T
In[B, T, D] * W1[D, F] -> H[B, T, F]
H[B, T, F] * W2[F, D] -> Out[B, T, D]
In[B, T, D] + Out[B, T, D] -> Y[B, T, D]"""


def test_megatron_sp_without_a_core_is_priced_by_blocks():
    """Without an attention core too, Megatron SP's backward hands a cotangent on in another layout: priced
    product by product, 18 of this MLP's 110 candidates on 2x2 differed from their whole programs (the
    backward's communication; with their memory too, before each value's bytes came from the piece that first
    writes it). Priced by blocks, every candidate agrees; the layer without its core is one block."""
    seen, wrong, _ = disagreements(MLP_ADD, "X=2,Y=2", "B=512,T=256,D=4096,F=4096", "train", "steady")
    assert seen == 110 and wrong == []
    prog, space, st, _ = _prepared(TRANSFORMER, "X=2,Y=2", SIZES, "train", "steady")
    pricer = StatementPricer(prog, space, st, Pruned())
    a = MEGATRON_SP[7]
    assert _differences(Pricer(prog, space, st, Pruned())(a), pricer(a)) == []
    products = {sum(map(is_product, sub.statements)) for sub, _ in pricer.table}
    assert products == {sum(map(is_product, prog.statements))} == {6}


def test_products_reading_one_operand_are_one_piece():
    """Q's, K's and V's projections read Ha, the gate's and W_in's read Hn: each set is one piece, as the whole
    program reshards the operand once for them all (a gradient reads a version another made, free) and keeps
    one gathered copy of it. Priced apart, on X=2,Y=2,Z=2 with the layer's real sizes this candidate (the
    gate and W_in read Hn[B, T_X, D] gathered over Z) came to 46.1 ms of communication against its whole
    program's 44.6 ms, and 1,409,286,144 bytes of kept copies against 1,275,068,416 (Hn's counted twice)."""
    made = [[s.result.name for s in g] for g in split_statements(parse(TRANSFORMER_FN))]
    assert made == [
        ["Hr", "Ha", "Q", "Kp", "Vp"],
        ["K", "V", "Sc", "P", "A"],
        ["Att", "Rs"],
        ["Hm", "Hn", "Gt", "U"],
        ["Sg", "M", "Out", "Y"],
    ]
    prog, space, st, _ = _prepared(TRANSFORMER_FN, "X=2,Y=2,Z=2", LAYER_TRAIN["sizes"], "train", "steady")
    (a,) = [a for a in enumerate_space(space, Pruned()) if str(a) == "params D=YZ; activations T=X,D=Z"]
    whole, summed = Pricer(prog, space, st, Pruned())(a), StatementPricer(prog, space, st, Pruned())(a)
    assert _differences(whole, summed) == []
    assert whole.keep.copies == summed.keep.copies == 1_275_068_416


@pytest.mark.skipif(
    os.environ.get("HYPOTHESIS_PROFILE") != "fuzz", reason="long: HYPOTHESIS_PROFILE=fuzz (docs/testing.md)"
)
@pytest.mark.parametrize("case", list(LAYERS))
def test_every_layer_candidate(case):
    """Every candidate of each layer priced from its statements equals its whole program (about 4 minutes of
    CPU for the six)."""
    program, sizes, mode, overlap, _ = LAYERS[case]
    seen, wrong, _ = disagreements(program, "X=2,Y=2", sizes, mode, overlap)
    assert not wrong, wrong
    assert seen > 150


def test_the_attention_core_is_one_piece():
    """The renames of K and V, Q·K, the softmax and P·V: one piece, so a causal mask is seen inside it."""
    pieces = [[s.result.name for s in g] for g in split_statements(parse(TRANSFORMER_FN))]
    assert ["K", "V", "Sc", "P", "A"] in pieces
    assert sum(map(len, pieces)) == len(parse(TRANSFORMER_FN).statements)


# one candidate of each of these strategies (SP's sequence split gathers K and V before the causal core)
CAUSAL_STRATEGIES = ("DP", "SP", "TP", "FSDP", "Megatron-SP", "DP+SP", "FSDP+SP", "TP+SP")


@pytest.mark.parametrize("overlap", ["steady", "serial"])
def test_a_causal_core_priced_by_statements(overlap):
    """A causal core's products are halved by its mask (models.analysis.causal_products), seen inside its
    piece: each candidate's price from its statements equals its whole program's (seconds, communication,
    compute, FLOPs to 1e-12 relative; bytes by part exactly), SP's among them."""
    prog, space, st, _ = prepare_search(
        TRANSFORMER_FN, Mesh.parse("X=2,Y=2"), SIZES_FN, "tpu-v5e", None, "train", None, None, overlap, ""
    )
    notes: list = []
    new = pricer_for(prog, space, st, Pruned(), notes)
    assert type(new) is StatementPricer and "each statement's shardings" in notes[0][1]
    old = Pricer(prog, space, st, Pruned())
    chosen: dict[str, object] = {}
    for a in enumerate_space(space, Pruned()):
        chosen.setdefault(space.strategy(a), a)
    for name in CAUSAL_STRATEGIES:
        a = chosen[name]
        eo, en = old(a), new(a)
        assert eo.seconds and en.parts == eo.parts and en.gathers == eo.gathers, (name, a)
        for k in ("seconds", "comms", "compute", "flops"):
            assert getattr(en, k) == pytest.approx(getattr(eo, k), rel=1e-12, abs=1e-30), (name, k)
        assert en.axes == pytest.approx(eo.axes, rel=1e-12)
    sp = Pricer(prog, space, st, Pruned())(chosen["SP"])  # a new pricer: the first has seen its program
    assert "T=" in chosen["SP"].activations_text and sp.gathers == ("K", "V")  # SP gathers K and V


def test_remat_block_keeps_whole_program_pricing():
    prog = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
    p, space, st, _ = prepare_search(
        prog, Mesh.parse("X=2"), "B=8,D=16,F=32", "tpu-v5e", None, "train", None, "block", "steady", ""
    )
    notes: list = []
    assert type(pricer_for(p, space, st, Pruned(), notes)) is Pricer
    assert "remat block" in notes[0][1]
    assert type(pricer_for(p, space, replace(st, remat="none"), Pruned(), [])) is StatementPricer


def test_split_keeps_gathers_with_their_product():
    s = parse("params W\nAllGather_X(W[D_X, F]) -> W[D, F]\nIn[B, D] * W[D, F] -> O[B, F]")
    assert [len(g) for g in split_statements(s)] == [2]


def test_split_puts_a_rename_with_the_product_that_reads_it():
    """K's and V's renames are written together before ``Q·K``; V's goes with ``P·V``, which reads it, so the
    piece's backward reduces dV through the rename back (a ReduceScatter under SP), as the whole program's
    does: split with ``Q·K``, the piece of ``P·V`` would all-reduce dV as an input's gradient. The core is one
    piece, so V's rename is in it with ``P·V``."""
    groups = split_statements(parse(NONCAUSAL_FN))
    made = [[s.result.name for s in g] for g in groups]
    assert made[1] == ["K", "V", "Sc", "P", "A"]  # the whole core, V's rename with P·V, as written
    assert [g for g in made if "V" in g] == [made[1]]


def test_schedule_keeps_whole_program_pricing():
    prog, space, st, _ = prepare_search(
        MLP,
        Mesh.parse("X=2,Y=2"),
        "B=128,D=8192,F=32768",
        "tpu-v5e",
        None,
        "train",
        None,
        None,
        "schedule",
        "",
    )
    notes: list = []
    assert type(pricer_for(prog, space, st, Pruned(), notes)) is Pricer
    assert "schedule" in notes[0][1]


def _searches(monkeypatch, program, **kw):
    """The search as it runs (statements summed where they can be) and with every candidate priced whole."""
    from shardalg.search import numeric

    got = numeric.search(program, **kw)
    with monkeypatch.context() as m:
        m.setattr(
            numeric, "pricer_for", lambda base, space, st, pruned, notes: Pricer(base, space, st, pruned)
        )
        whole = numeric.search(program, **kw)
    return got, whole


SMALL = {"mesh": "X=2,Y=2", "sizes": "B=8,T=8,D=16,N=16,F=32", "hw": "tpu-v5e"}
SMALL_FN = {**SMALL, "sizes": SIZES_FN}


@pytest.mark.parametrize(
    ("program", "kw"),
    [
        (MLP, Q7),
        (MLP, {**Q7, "mode": "train", "memory": None}),
        (TRANSFORMER, {**SMALL, "mode": "infer"}),
        (NONCAUSAL_FN, {**SMALL_FN, "mesh": "X=2", "mode": "train"}),
        (TRANSFORMER_FN, {**SMALL_FN, "mesh": "X=2", "mode": "train"}),
    ],
)
def test_the_search_has_the_same_winner_and_ranking(monkeypatch, program, kw):
    """The search sums its candidates' statements, and ranks them as pricing each whole program does: the
    same winner, the same ranked table (seconds, bytes), the same best of each strategy. (TRANSFORMER_FN on
    X=2,Y=2 agrees too: 60 s of CPU in inference, 366 s in training.) Every candidate is priced: ``top``
    above the space's size leaves the branch and bound of training nothing to leave unpriced."""
    got, whole = _searches(monkeypatch, program, top=10**6, **kw)
    assert got.solver["pricing"] == "statements" and whole.solver["pricing"] == "whole program"
    assert got.solver["method"] == "enumeration" and got.solver["optimal"]
    assert got.winner is not None and got.winner.assignment == whole.winner.assignment
    # the same candidates in the same order but for ties (equal to 1e-12: the sums' last bits differ)
    assert [e.seconds for e in got.ranked] == pytest.approx([e.seconds for e in whole.ranked], rel=1e-12)
    theirs = {e.assignment: e for e in whole.ranked}
    assert set(theirs) == {e.assignment for e in got.ranked}
    for a in got.ranked:
        b = theirs[a.assignment]
        assert a.seconds == pytest.approx(b.seconds, rel=1e-12) and a.bytes == b.bytes
        assert (a.keep and a.keep.kept) == (b.keep and b.keep.kept)
    assert list(got.best) == list(whole.best)
    for s, e in got.best.items():
        w = whole.best[s]
        assert e.bytes == w.bytes and (e.seconds is None) == (w.seconds is None), s
        assert e.seconds is None or e.seconds == pytest.approx(w.seconds, rel=1e-12), s
    text = str(got)
    assert "priced (enumerated: optimal over the space; " in text
    assert f"; {got.solver['pieces']:,} sharded statements priced once" in text
    assert got.solver.get("bound", {"unpriced": 0})["unpriced"] == 0
    assert got.to_json()["solver"]["pieces"] == got.solver["pieces"] > 0


def test_a_search_priced_whole_says_why():
    from shardalg.search.numeric import search

    r = search(MLP, **{**Q7, "mode": "train", "memory": None, "overlap": "schedule"})
    assert r.solver == {
        "method": "enumeration",
        "optimal": True,
        "pricing": "whole program",
        "why": "overlap schedule is not a sum of statements",
    }
    assert (
        "priced (enumerated: optimal over the space; whole programs priced: overlap schedule is not a sum of statements)"
        in str(r)
    )
    assert r.to_json()["solver"]["why"] == r.solver["why"]


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_a_layer_with_its_attention_core_is_priced_by_statements(mode):
    """The attention core (a softmax between products, K and V renamed from the tokens), causal, is priced
    from its statements like the rest of the layer (its products, softmax and renames one piece)."""
    got = search(TRANSFORMER_FN, mesh="X=4", sizes=SIZES_FN, hw="tpu-v5e", mode=mode, memory="40kB")
    assert got.solver["pricing"] == "statements"


def test_the_gradients_added_across_pieces_are_priced():
    """A value read by a function and by a statement in another piece (the residual stream In and Rs: a norm
    and a residual add) has its gradient's parts added by a step of the backward's own, which no piece writes:
    the pricer finds them on the unsharded program and prices each at the candidate's sharding. Without them
    the layer's replicated candidate came to 169 ns against the whole program's 184 ns."""
    prog, space, st, _ = prepare_search(
        NONCAUSAL_FN, Mesh.parse("X=4"), SIZES_FN, "tpu-v5e", None, "train", None, None, "steady", ""
    )
    new = StatementPricer(prog, space, st, Pruned())
    assert new.alone.joins == (("In", False), ("Rs", False))
    a = next(iter(enumerate_space(space, Pruned())))  # the replicated candidate
    whole, summed = Pricer(prog, space, st, Pruned())(a), new(a)
    assert summed.seconds == pytest.approx(whole.seconds, rel=1e-12)
    short = StatementPricer(prog, space, st, Pruned())
    short.alone = replace(short.alone, joins=())
    assert short(a).seconds < whole.seconds - 1e-8  # 15 ns short without the two additions


def test_a_piece_is_priced_for_its_own_axes():
    """A piece is priced for its own program, not looked up as another's with interchangeable axes renamed:
    the planner breaks a tie between plans of equal bytes by their text, which names the axes, so the renamed
    program may take the other plan (here a latency-bound gather of a norm's scale on another axis: 2 us moved
    between Y's and Z's seconds). Its image under Y <-> Z has Y 26.852 ms and Z 24.611 ms of collectives,
    its whole program Y 24.615 and Z 26.848 (the tie rule of search._order): looked up as the image renamed,
    it would be off by 4 us on each."""
    prog, space, st, _ = _prepared(TRANSFORMER_FN, "X=2,Y=2,Z=2", LAYER_TRAIN["sizes"], "train", "steady")
    axes = ("X", "Y", "Z")
    a = Assignment(axes, (("D",), ("F",), ("H",)), (("T",), (), ()))
    image = Assignment(axes, (("D",), ("H",), ("F",)), (("T",), (), ()))
    assert str(a) == "params D=X,F=Y,H=Z; activations T=X"
    pricer = StatementPricer(prog, space, st, Pruned())
    pricer(image)
    whole, summed = Pricer(prog, space, st, Pruned())(a), pricer(a)
    assert _differences(whole, summed) == []
    assert whole.axes["Y"] == pytest.approx(0.024614583466666663, rel=1e-12)


def test_the_pieces_said_are_those_priced(monkeypatch):
    """The space line's count of sharded statements priced once is the pieces priced, not the table's entries
    (a piece read under the other keep choice is looked up, not priced): the layer with its core in training on
    X=2 prices 100 pieces and its table holds 127 entries."""
    from shardalg.search import numeric, pieces

    priced = []
    price = pieces.price_piece

    def counted(*args):
        priced.append(args)
        return price(*args)

    monkeypatch.setattr(pieces, "price_piece", counted)
    got = numeric.search(TRANSFORMER_FN, **{**SMALL_FN, "mesh": "X=2", "mode": "train"})
    assert got.solver["pieces"] == len(priced) == 100
    assert f"{len(priced):,} sharded statements priced once" in str(got)
