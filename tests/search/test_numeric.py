"""The numeric strategy search: the book's chapter 3 question 7, the brute-force oracle on 2x2 and 2x2x2
meshes, pricing that agrees with the public memory and step-time API, the outputs and the refusals."""

from __future__ import annotations

import json
import re
from itertools import product

import pytest

import shardalg as sa
from shardalg.algebra.mesh import Mesh
from shardalg.costs.chipspec import as_chip_text
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.search.numeric import parse_bytes, search
from shardalg.search.price import Pricer, Settings
from shardalg.search.space import MAX_CANDIDATES, Assignment, Pruned, space_of
from tests.search.programs import MLP, Q7


@pytest.fixture(scope="module")
def q7():
    return search(MLP, **Q7)


def test_q7_the_winner_fits_and_is_the_fastest_that_does(q7):
    w = q7.winner
    assert w is not None and w.fits and w.bytes <= 300e6
    assert all(w.seconds <= e.seconds for e in q7.ranked)
    assert not any(e.fits for e in q7.rejected)
    # the two weights split four ways: each device holds a quarter of 2·D·F bf16 numbers
    assert w.bytes == 2 * 8192 * 32768 * 2 / 4
    # it reads its quarter of the weights from HBM once: HBM-bound, at the chip's bandwidth
    chip = as_chip_text("tpu-v5e")
    assert w.bound == "HBM"
    assert w.seconds == pytest.approx(w.bytes / chip.hbm_bandwidth.value, rel=1e-9)
    # the output is sharded like the input
    out = [s for s in w.program.statements if getattr(s, "result", None) is not None][-1].result
    first = w.program.statements[0].expr.left
    assert out.dims == first.dims


def test_q7_rejects_fsdp_and_dp_with_the_memory_reason(q7):
    best = q7.best
    for name in ("FSDP", "DP", "FSDP+TP"):
        e = best[name]
        assert not e.fits
        assert re.fullmatch(r"[0-9.]+ [MG]B per device > 300 MB( before any plan)? \(.*\)", q7.reason(e)), (
            q7.reason(e)
        )
    assert best["TP"] is q7.winner
    text = str(q7)
    assert re.search(r"^FSDP +params .*: [0-9.]+ [MG]B per device > 300 MB", text, flags=re.M)


def test_q7_fsdp_over_both_axes_is_over_because_of_the_gathered_weights(q7):
    fsdp = [
        e
        for e in q7.rejected
        if e.assignment.params_text == "D=XY" and e.assignment.activations_text == "B=XY"
    ]
    assert len(fsdp) == 1
    e = fsdp[0]
    assert e.parts["transient"] == 2 * 8192 * 32768 * 2  # both weights whole, while the layer runs
    assert "transient 1.07 GB" in e.memory_reason()


def _all_assignments(space):
    """Every assignment, enumerated simply: per axis a parameter dim or none, and an activation dim (none,
    the parameter's, or a batch dim)."""
    per_axis = [
        (p, d) for p in (None, *space.param_dims) for d in (None, *((p,) if p else ()), *space.batch_dims)
    ]
    for combo in product(per_axis, repeat=len(space.mesh.axes)):
        yield Assignment(space.mesh.names, tuple(p for p, _ in combo), tuple(d for _, d in combo))


def _brute_force(program: str, mesh: str, sizes: dict, mode: str, cap: float):
    """The fastest fitting time over all assignments: no symmetry, nothing dropped before pricing."""
    base, m = parse(program), Mesh.parse(mesh)
    space = space_of(base, m, sizes)
    settings = Settings(m, sizes, as_chip_text("tpu-v5e"), mode, None, None, "steady", float("inf"))
    best = None
    for a in _all_assignments(space):
        pricer = Pricer(base, space, settings, Pruned())  # a fresh one: nothing is skipped as seen
        try:
            e = pricer(a)
        except sa.IllegalSharding:
            continue
        if e is None or e.bytes > cap:
            continue
        if best is None or e.seconds < best.seconds:
            best = e
    return best


@pytest.mark.parametrize(
    ("program", "mesh", "sizes", "mode", "cap"),
    [
        (MLP, "X=2,Y=2", {"B": 128, "D": 8192, "F": 32768}, "infer", 300e6),
        (MLP, "X=2,Y=2", {"B": 256, "D": 1024, "F": 4096}, "train", 40e6),
        (
            "params W\nIn[B, D] * W[D, F] -> Out[B, F]",
            "X=2,Y=2,Z=2",
            {"B": 64, "D": 2048, "F": 8192},
            "infer",
            12e6,
        ),
        (
            "params W\nIn[B, D] * W[D, F] -> Out[B, F]",
            "X=2,Y=2,Z=2",
            {"B": 8192, "D": 1024, "F": 2048},
            "infer",
            1e6,
        ),
    ],
    ids=["q7-2x2-infer", "mlp-2x2-train", "matmul-2x2x2-infer", "matmul-2x2x2-infer-compute"],
)
def test_the_search_equals_a_brute_force_over_all_assignments(program, mesh, sizes, mode, cap):
    got = search(program, mesh=mesh, sizes=sizes, hw="tpu-v5e", memory=cap, mode=mode)
    want = _brute_force(program, mesh, sizes, mode, cap)
    assert (got.winner is None) == (want is None)
    if want is not None:
        assert got.winner.seconds == pytest.approx(want.seconds, rel=1e-12)
        assert got.winner.bytes <= cap
    p = got.pruned
    assert p.symmetric > 0  # interchangeable axes: most of the space is a permutation of the rest
    assert p.visited == got.space.size


def test_pricing_agrees_with_the_public_memory_and_step_time():
    """The search's seconds and bytes are what sa.memory and sa.step_time say for the same program."""
    sizes = {"B": 256, "D": 1024, "F": 4096}
    r = search(MLP, mesh="X=2,Y=2", sizes=sizes, hw="tpu-v5e", memory="1GB", mode="train", top=100)
    for e in [*r.ranked[:3], r.best["FSDP"], r.best["DP"]]:
        kept = e.keep is not None and e.keep.kept  # the backward keeps what the forward gathered
        where = {"mesh": "X=2,Y=2", "sizes": sizes, "hw": "tpu-v5e", "mode": "train", "keep_gathered": kept}
        mem = sa.memory(e.program, **where)
        step = sa.step_time(e.program, overlap="steady", **where)
        assert e.bytes == pytest.approx(float(mem.total), rel=1e-12)
        assert e.seconds == pytest.approx(step.seconds, rel=1e-9)


def test_named_strategies():
    space = space_of(parse("params W\ntokens B, T\nIn[B, T, D] * W[D, F] -> Out[B, T, F]"), Mesh(X=2, Y=2))
    names = ("X", "Y")
    cases = {
        ((None, None), ("B", "B")): "DP",
        (("D", "D"), ("B", "B")): "FSDP",
        (("F", "F"), ("F", "F")): "TP",
        (("D", "F"), ("B", "F")): "FSDP+TP",
        ((None, "F"), ("B", "F")): "DP+TP",
        ((None, None), ("B", "T")): "DP+SP",
        ((None, None), (None, None)): "replicated",
    }
    for (params, acts), name in cases.items():
        assert space.strategy(Assignment(names, params, acts)) == name
    moe = space_of(parse("params W\nX[E, C, D] * W[E, D, F] -> U[E, C, F]"), Mesh(X=2))
    assert moe.expert_dims == ("E",)
    # the experts split with every token on every device is tensor parallelism over E; EP splits the tokens too
    assert moe.strategy(Assignment(("X",), ("E",), ("E",))) == "TP"
    routed = space_of(
        parse(
            "params W_r, W\ntokens B\nH[B, D] * W_r[D, E] -> R[B, E]\n"
            "dispatch_{C,k=1,cf=1}(H[B, D], R[B, E]) -> X[E, C, D]\nX[E, C, D] * W[E, D, F] -> U[E, C, F]"
        ),
        Mesh(X=2),
    )
    assert routed.expert_dims == ("E",) and (("E",), ("B", "E")) in routed.choices
    assert routed.strategy(Assignment(("X",), ("E",), (("B", "E"),))) == "EP"


def test_outputs_json_and_latex(q7):
    data = q7.to_json()
    json.dumps(data)
    assert data["winner"]["strategy"] == "TP" and data["winner"]["fits"]
    assert data["strategies"]["FSDP"]["fits"] is False
    assert "> 300 MB" in data["strategies"]["FSDP"]["reason"]
    assert data["space"] == 64 and sum(data["pruned"].values()) + data["priced"] == 64
    latex = q7.latex()  # the document's table (search --format latex)
    assert latex.startswith(r"\begin{tabular}") and latex.endswith(r"\end{tabular}")
    assert r"$>$ 300 MB" in latex
    shown = q7._repr_latex_()  # a notebook's: math, which a tabular is not
    assert shown.startswith(r"$$\begin{gathered}") and r"\begin{array}" in shown and "tabular" not in shown


def test_the_winner_is_a_program_plan_and_backward_take(q7):
    from shardalg.planning.backward import backward
    from shardalg.planning.planner import plan

    program = parse(q7.winner_program)
    for s in program.statements:
        plan(s, Mesh(X=2, Y=2), {"B": 128, "D": 8192, "F": 32768})
    backward(program, Mesh(X=2, Y=2))


def test_progress_is_reported_to_the_end():
    seen: list[tuple[int, int]] = []
    search(MLP, progress=lambda done, total: seen.append((done, total)), **Q7)
    assert seen[-1] == (64, 64)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_refusals():
    with pytest.raises(UsageError, match="declares no parameters"):
        search("In[B, D] * W[D, F] -> O[B, F]", mesh="X=2", sizes="B=8,D=8,F=8", hw="tpu-v5e")
    with pytest.raises(UsageError, match="already has one"):
        search("params W\nIn[B_X, D] * W[D, F] -> O[B_X, F]", mesh="X=2", sizes="B=8,D=8,F=8", hw="tpu-v5e")
    with pytest.raises(UsageError, match="needs every size: F unbound"):
        search("params W\nIn[B, D] * W[D, F] -> O[B, F]", mesh="X=2", sizes="B=8,D=8", hw="tpu-v5e")
    with pytest.raises(UsageError, match="needs a chip"):
        search("params W\nIn[B, D] * W[D, F] -> O[B, F]", mesh="X=2", sizes="B=8,D=8,F=8")
    with pytest.raises(UsageError, match="MAX_CANDIDATES"):
        search(
            "params W\nIn[B, D] * W[D, F, G, H] -> O[B, F, G, H]",
            mesh="X=2,Y=2,Z=2,V=2,U=2",
            sizes="B=8,D=8,F=8,G=8,H=8",
            hw="tpu-v5e",
        )
    assert parse_bytes("300MB") == 300e6 and parse_bytes("1GiB") == 2**30
    with pytest.raises(UsageError, match="memory cap"):
        parse_bytes("300 parsecs")
    assert MAX_CANDIDATES > 0


def test_sa_search_is_the_search_even_after_importing_the_subpackage():
    import shardalg.search  # noqa: F401  (binds shardalg.search to the subpackage)

    r = sa.search("params W\nIn[B, D] * W[D, F] -> O[B, F]", mesh="X=2", sizes="B=8,D=8,F=8", hw="tpu-v5e")
    assert r.winner is not None


def test_an_mfu_at_peak_is_said_in_words():
    """A compute-bound candidate priced at the chip's peak reaches MFU 1.00: the text says peak, never a bare
    1.00, and an MFU below it stays a number."""
    r = search(MLP, mesh="X=2,Y=2", sizes="B=128,D=8192,F=32768", hw="tpu-v5e", mode="train", top=8)
    assert r.winner is not None and round(r.winner.mfu, 2) == 1
    text = str(r)
    assert "MFU 1.00 (peak: the step is priced at the chip's peak FLOP/s)" in text
    assert not re.search(r"MFU 1\.00(?! \(peak)", text)
    rows = [ln.split() for ln in text.splitlines() if re.match(r"\s+\d+\s+TP\s", ln)]
    assert (
        rows[0][0] == "1" and rows[0][8] == "peak"
    )  # rank, strategy, params, activations, time, memory, MFU
    below = [e for e in r.ranked if e.mfu is not None and round(e.mfu, 2) < 1]
    assert below and f"{below[0].mfu:.2f}" in text


def test_a_strategy_whose_assignment_writes_another_candidates_program_counts_it_as_its_best():
    """Megatron SP over the TP axis of one product writes the program TP+SP writes (no statement outside the
    TP region to split by the sequence): the candidate is priced once, under TP+SP, and is SP+Megatron-SP's
    best too, as its own assignment, saying whose program it is. Dropped as equivalent, it left SP+Megatron-SP
    with a candidate ten times slower (27.7 us against 2.73 us)."""
    prog = "params W1\ntokens B, T\nIn[B, T, D] * W1[D, F] -> H[B, T, F]"
    sizes = {"B": 16, "T": 256, "D": 256, "F": 1024}
    r = search(prog, mesh="X=2,Y=2", sizes=sizes, hw="tpu-v5e", memory=1e6, mode="infer")
    sp, tp = r.best["SP+Megatron-SP"], r.best["TP+SP"]
    assert str(sp.assignment) == "params F=Y; activations T=X,F=Y; megatron-sp Y"
    assert sp.same_as is tp and sp.program == tp.program and sp.seconds == tp.seconds
    assert r.reason(sp).startswith("the same program as TP+SP's params F=Y; activations T=X,F=Y: ")
    assert "SP+Megatron-SP    params F=Y; activations T=X,F=Y; megatron-sp Y: the same program as" in str(r)
    same = r.to_json()["strategies"]["SP+Megatron-SP"]["same_program_as"]
    assert same == {"strategy": "TP+SP", "params": "F=Y", "activations": "T=X,F=Y", "megatron_sp": None}
    assert all(
        e.same_as is None for e in (*r.ranked, *r.rejected)
    )  # the ranked table lists each program once


def test_a_chosen_precision_recipe_says_what_it_changes():
    # a recipe changes the bytes held (fp32 gradients: 2 bytes a parameter more), not the seconds: said
    on = {"mesh": "X=2,Y=2", "sizes": "B=65536,D=2048,F=2048", "hw": "tpu-v5e", "mode": "train"}
    book = search(MLP, **on)
    fp32 = search(MLP, **on, precision="deepspeed,grads=fp32")
    note = dict(fp32.notes)["precision"]
    assert "sets the bytes held" in note and "priced in the program's own dtypes" in note
    assert "precision" not in dict(book.notes) or "sets the bytes held" not in dict(book.notes)["precision"]
    assert fp32.winner.seconds == book.winner.seconds and fp32.winner.bytes > book.winner.bytes
