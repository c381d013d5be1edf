"""The per-statement search over a chain of layers: the DP and the integer program against a brute force over
every combination of choices, a binding cap, the chain against the uniform search, the API, CLI and refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from itertools import product

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

import shardalg as sa
from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.search.chain import chain_problem, layout_key
from shardalg.search.chainsolve import solve, solve_dp, solve_milp
from shardalg.search.numeric import search
from shardalg.search.price import Pricer, Settings
from shardalg.search.space import Pruned, space_of

# three layers of different widths: wide (F), narrow (G), back to D
CHAIN = (
    "params W1, W2, W3\nIn[B, D] * W1[D, F] -> H1[B, F]\nH1[B, F] * W2[F, G] -> H2[B, G]\n"
    "H2[B, G] * W3[G, D] -> Out[B, D]"
)
TRAIN = {
    "mesh": Mesh.parse("X=2,Y=2"),
    "sizes": "B=2048,D=1024,F=8192,G=256",
    "hw": "tpu-v5e",
    "mode": "train",
    "overlap": "serial",
}
INFER = {"mesh": Mesh.parse("X=2,Y=2"), "sizes": "B=64,D=256,F=4096,G=512", "hw": "tpu-v5e", "mode": "infer"}


@pytest.fixture(scope="module")
def train():
    return chain_problem(CHAIN, **TRAIN)


@pytest.fixture(scope="module")
def infer():
    return chain_problem(CHAIN, **INFER)


def _brute(p, cap=float("inf")):
    """The fastest combination within ``cap``: every choice of every statement, no DP, no solver."""
    best = None
    for picks in product(*[range(len(cs)) for cs in p.choices]):
        if p.param_bytes(list(picks)) > cap:
            continue
        t = p.total(list(picks))
        if best is None or t < best:
            best = t
    return best


@pytest.mark.parametrize("which", ["train", "infer"])
def test_dp_and_milp_equal_a_brute_force(which, request):
    p = request.getfixturevalue(which)
    assert len(p.choices) == 3 and all(len(cs) > 1 for cs in p.choices)
    want = _brute(p)
    dp, milp = solve_dp(p), solve_milp(p)
    assert p.total(dp) == pytest.approx(want, rel=1e-12)
    assert p.total(milp) == pytest.approx(want, rel=1e-9)
    assert solve(p) == (dp, "dp")  # the cap (the chip's HBM) does not bind
    # the edges are not all free: the optimum is a real trade-off, not the sum of per-statement minima
    assert any(s > 0 for e in p.edges for s in e.values())


def test_dropping_dominated_choices_keeps_the_optimum(infer):
    full = chain_problem(CHAIN, dominance=False, **INFER)
    assert [len(cs) for cs in full.choices] == [64 - p.equivalent - p.illegal for p in full.pruned]
    assert sum(infer.dominated) > 0 and all(
        len(a) < len(b) for a, b in zip(infer.choices, full.choices, strict=True)
    )
    assert full.total(solve_dp(full)) == pytest.approx(infer.total(solve_dp(infer)), rel=1e-12)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    b=hs.sampled_from([16, 64, 512]),
    d=hs.sampled_from([128, 1024]),
    f=hs.sampled_from([256, 4096, 16384]),
    g=hs.sampled_from([64, 512, 8192]),
    overlap=hs.sampled_from(["steady", "serial"]),
)
def test_random_sizes_dp_milp_and_brute_force_agree(b, d, f, g, overlap):
    p = chain_problem(
        CHAIN,
        mesh=Mesh.parse("X=2,Y=2"),
        sizes={"B": b, "D": d, "F": f, "G": g},
        hw="tpu-v5e",
        mode="infer",
        overlap=overlap,
    )
    want = _brute(p)
    assert p.total(solve_dp(p)) == pytest.approx(want, rel=1e-12)
    assert p.total(solve_milp(p)) == pytest.approx(want, rel=1e-9)
    cap = sum(min(c.param_bytes for c in cs) for cs in p.choices) * 1.5
    q = replace(p, settings=replace(p.settings, cap=cap))
    picks = solve_milp(q)
    assert q.param_bytes(picks) <= cap and q.total(picks) == pytest.approx(_brute(q, cap), rel=1e-9)


@pytest.mark.parametrize("which", ["train", "infer"])
def test_a_binding_cap_changes_the_answer_and_milp_is_exact(which, request):
    p = request.getfixturevalue(which)
    free = solve_dp(p)
    lightest = sum(min(c.param_bytes for c in cs) for cs in p.choices)
    cap = (lightest + p.param_bytes(free)) / 2
    assert cap < p.param_bytes(free)
    q = replace(p, settings=replace(p.settings, cap=cap))
    picks, how = solve(q)
    assert how == "milp" and picks is not None
    assert q.param_bytes(picks) <= cap
    assert q.total(picks) == pytest.approx(_brute(q, cap), rel=1e-9)
    assert q.total(picks) > p.total(free)
    below = replace(p, settings=replace(p.settings, cap=lightest * 0.99))
    assert solve(below) == (None, "milp")  # nothing fits: said, not a wrong answer


def test_the_chain_beats_the_best_uniform_assignment():
    """Under serial training the chain's objective is the whole program's step (a uniform assignment priced
    both ways agrees); layers of different widths then want different shardings, strictly faster."""
    # D=2048: at TRAIN's D=1024 TP over F=XY everywhere ties the chain, as X=2 and Y=2 are lines on v5e and
    # a collective over XY moves 3/4 of V over W_ici (the receive floor), not V over 2·W_ici
    wide = {**TRAIN, "sizes": "B=1024,D=2048,F=8192,G=256"}
    train = chain_problem(CHAIN, **wide)
    uniform = search(CHAIN, memory="1TB", top=1000, **wide)
    # additivity: DP (activations B over both axes, parameters whole) in every statement = the whole program
    dp_entry = next(
        e for e in uniform.ranked if e.strategy == "DP" and e.assignment.activations_text == "B=XY"
    )
    picks = [
        next(
            k
            for k, c in enumerate(cs)
            if c.assignment.activations_text == "B=XY" and c.assignment.params_text == "-"
        )
        for cs in train.choices
    ]
    assert train.total(picks) == pytest.approx(dp_entry.seconds, rel=1e-12)
    best = solve_dp(train)
    assert train.total(best) < uniform.winner.seconds * (1 - 1e-6)
    kinds = {str(train.choices[i][k].assignment) for i, k in enumerate(best)}
    assert len(kinds) > 1  # not one assignment for all


def test_choices_are_priced_as_the_numeric_search_prices_them(train):
    """A statement's choice's seconds are the Pricer's for that one-statement program, and nothing is
    pruned as symmetric (an axis permutation meets the neighbours on other axes)."""
    st = train.settings
    for sub, cs, pr in zip(train.statements, train.choices, train.pruned, strict=True):
        assert pr.symmetric == 0 and pr.visited == 64
        c = cs[len(cs) // 2]
        space = replace(space_of(sub, st.mesh, st.sizes), batch_dims=("B",))
        # as the chain prices: no cap, and the backward gathers again (the knapsack holds no kept copies)
        e = Pricer(sub, space, Settings(**{**st.__dict__, "cap": float("inf"), "keep": False}), Pruned())(
            c.assignment
        )
        assert e.seconds == c.seconds


def test_search_chain_api_text_and_json():
    r = sa.search_chain(CHAIN, memory="3MB", **INFER)
    assert r.method == "milp" and r.bytes <= 3e6 and len(r.choices) == 3
    free = sa.search_chain(CHAIN, **INFER)
    assert free.method == "dp" and free.seconds < r.seconds
    text = str(r)
    assert "solved by   milp" in text and "none truncated" in text and "reshard H1" in text
    data = r.to_json()
    json.dumps(data)
    assert data["truncated"] is False and data["method"] == "milp" and len(data["statements"]) == 3
    assert data["choices_per_statement"] == [len(cs) for cs in r.problem.choices]
    keys = {d["key"] for d in sa.search_chain(CHAIN, **{**INFER, "mode": None}).to_json()["defaults"]}
    assert {"mode", "optimizer", "remat", "memory", "objective", "memory cap"} <= keys


def test_refusals():
    with pytest.raises(UsageError, match="not a chain"):
        sa.search_chain(
            "params W1, W2\nIn[B, D] * W1[D, F] -> H[B, F]\nIn[B, D] * W2[D, F] -> K[B, F]", **INFER
        )
    with pytest.raises(UsageError, match="used by two statements"):
        sa.search_chain(
            "params W\nIn[B, D] * W[D, D2] -> H[B, D2]\nH[B, D2] * W[D, D2] -> O[B, D]",
            mesh="X=2",
            sizes="B=8,D=8,D2=8",
            hw="tpu-v5e",
        )
    with pytest.raises(UsageError, match="at least two statements"):
        sa.search_chain(
            "params W\nIn[B, D] * W[D, F] -> O[B, F]", mesh="X=2", sizes="B=8,D=8,F=8", hw="tpu-v5e"
        )
    with pytest.raises(UsageError, match="dp or milp"):
        sa.search_chain(CHAIN, method="greedy", **INFER)


def test_cli_per_statement():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "shardalg",
            "search",
            CHAIN.replace("\n", "; "),
            "--mesh",
            "X=2,Y=2",
            "--sizes",
            INFER["sizes"],
            "--hw",
            "tpu-v5e",
            "--mode",
            "infer",
            "--per-statement",
            "--memory",
            "3MB",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert done.returncode == 0, done.stderr
    assert "solved by   milp" in done.stdout and "  3. " in done.stdout
    assert "note: memory cap: a knapsack on parameter bytes" in done.stdout
    latex = subprocess.run(
        [
            sys.executable,
            "-m",
            "shardalg",
            "search",
            CHAIN.replace("\n", "; "),
            "--mesh",
            "X=2,Y=2",
            "--sizes",
            INFER["sizes"],
            "--hw",
            "tpu-v5e",
            "--per-statement",
            "--format",
            "latex",
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert latex.returncode == 2 and "do not apply" in latex.stderr and "Traceback" not in latex.stderr


def test_progress_reaches_the_end():
    seen: list[tuple[int, int]] = []
    sa.search_chain(CHAIN, progress=lambda d, t: seen.append((d, t)), **INFER)
    # the three statements' assignments, then the layout pairs of the two edges (the total grows by them)
    assert [d for d, _ in seen] == list(range(1, len(seen) + 1)) and seen[-1][0] == seen[-1][1]
    assert {t for _, t in seen[: 3 * 64]} == {3 * 64} and len(seen) > 3 * 64


# an MLP of two blocks: statements 3 and 4 are statements 1 and 2 with other names
REPEATED = (
    "params W1, W2, W3, W4\nIn[B, D] * W1[D, F] -> H1[B, F]\nH1[B, F] * W2[F, D] -> H2[B, D]\n"
    "H2[B, D] * W3[D, F] -> H3[B, F]\nH3[B, F] * W4[F, D] -> Out[B, D]"
)


@pytest.mark.parametrize("mode", ["infer", "train"])
def test_a_repeated_layer_is_priced_once(mode):
    """A statement of a shape priced before takes its choices renamed (said in the notes, not counted in
    the progress' total), and they are what pricing it alone gives: its own programs, layouts, seconds
    and parameter bytes."""
    from shardalg.search.chain import _choices, _links, _space, _sub_program
    from shardalg.search.numeric import prepare_search

    on = {**INFER, "mode": mode}
    totals: list[int] = []
    p = chain_problem(REPEATED, progress=lambda d, t: totals.append(t), **on)
    assert ("priced once", "H3's statement as H1's") in p.notes
    assert ("priced once", "Out's statement as H2's") in p.notes
    pairs = sum(
        len({layout_key(c.writes) for c in a}) * len({layout_key(c.reads) for c in b})
        for a, b in zip(p.choices, p.choices[1:], strict=False)
    )
    priced = p.pruned[0].visited + p.pruned[1].visited  # statements 1 and 2 only, then the edges' pairs
    assert totals == [priced] * priced + [priced + pairs] * pairs
    prog, whole, _, _ = prepare_search(
        REPEATED, on["mesh"], on["sizes"], on["hw"], None, mode, None, None, None, ""
    )

    def table(cs):
        return {c.entry.program: (c.reads, c.writes, c.param_bytes, c.seconds) for c in cs}

    for i in (2, 3):
        s, act, param = _links(prog)[i]
        sub = _sub_program(prog, s, param)
        space = _space(sub, act, s.result, whole.batch_dims, p.settings)
        own, _ = _choices(sub, space, act, s.result, p.settings, Pruned())
        assert table(p.choices[i]) == table(own) and len(own) > 1
    assert p.total(solve_dp(p)) == pytest.approx(p.total(solve_milp(p)), rel=1e-9)
