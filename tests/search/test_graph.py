"""The per-statement search over a dataflow graph (shardalg.search.graph): an attention block's Q, K and V
read one input (the chain search refuses it); the tree DP and the integer program equal a brute force over
every assignment on 2x2, with and without a binding memory cap."""

from __future__ import annotations

import numpy as np
import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.search.chain import chain_problem
from shardalg.search.chainsolve import search_chain
from shardalg.search.graph import (
    GraphProblem,
    graph_problem,
    search_graph,
    solve_graph,
    solve_milp,
    solve_tree,
)

ATTENTION = (
    "params W_q, W_k, W_v\ntokens B, T\nIn[B, T, D] * W_q[D, N] -> Q[B, T, N]\n"
    "In[B, T, D] * W_k[D, N] -> Kp[B, T, N]\nIn[B, T, D] * W_v[D, N] -> Vp[B, T, N]"
)
ON = {"mesh": Mesh.parse("X=2,Y=2"), "sizes": "B=32,T=256,D=16,N=16", "hw": "tpu-v5e"}


def brute(p: GraphProblem) -> tuple[float, np.ndarray, np.ndarray]:
    """Every assignment's seconds and parameter bytes, as arrays with one axis per node."""
    n = len(p.choices)

    def along(i: int, values: list[float]) -> np.ndarray:
        shape = [1] * n
        shape[i] = len(values)
        return np.array(values, dtype=float).reshape(shape)

    seconds = sum(along(i, [c.seconds for c in cs]) for i, cs in enumerate(p.choices))
    bytes_ = sum(along(i, [c.param_bytes for c in cs]) for i, cs in enumerate(p.choices))
    for e, (u, v, _) in enumerate(p.edges):
        m = np.array([[p.edge(e, a, b) for b in p.choices[v]] for a in p.choices[u]])
        shape = [1] * n
        shape[u], shape[v] = m.shape
        seconds = seconds + (m if u < v else m.T).reshape(shape)
    return float(seconds.min()), seconds, bytes_


@pytest.fixture(scope="module", params=["infer", "train"])
def attention(request) -> GraphProblem:
    return graph_problem(ATTENTION, memory="1GB", mode=request.param, **ON)


def test_the_chain_search_refuses_it():
    with pytest.raises(UsageError, match="not a chain"):
        chain_problem(ATTENTION, mode="infer", **ON)


def test_an_input_node_for_the_shared_input(attention):
    assert attention.names == ["Q", "Kp", "Vp", "input In"]
    assert [(u, v) for u, v, _ in attention.edges] == [(3, 0), (3, 1), (3, 2)]
    assert attention.is_forest


def test_dp_and_milp_equal_the_brute_force(attention):
    best, seconds, _ = brute(attention)
    dp = solve_tree(attention)
    milp, optimal = solve_milp(attention)
    assert optimal
    assert attention.total(dp) == pytest.approx(best, rel=1e-9)
    assert attention.total(milp) == pytest.approx(best, rel=1e-9)
    picks, solver, optimal = solve_graph(attention)
    assert (solver, optimal) == ("dp", True)


def test_a_binding_cap_goes_to_the_integer_program(attention):
    _, seconds, bytes_ = brute(attention)
    dp = solve_tree(attention)
    over = attention.param_bytes(dp)
    cap = (float(bytes_.min()) + over) / 2
    assert cap < over  # the unconstrained optimum does not fit
    from dataclasses import replace

    capped = replace(attention, settings=replace(attention.settings, cap=cap), notes=[])
    picks, solver, optimal = solve_graph(capped)
    assert (solver, optimal) == ("milp", True)
    assert capped.param_bytes(picks) <= cap
    best = float(np.where(bytes_ <= cap, seconds, np.inf).min())
    assert capped.total(picks) == pytest.approx(best, rel=1e-9)
    assert capped.total(picks) >= attention.total(dp)


def test_a_chain_agrees_with_the_chain_search():
    mlp = "params W1, W2\nIn[B, D] * W1[D, F] -> H[B, F]\nH[B, F] * W2[F, D] -> Out[B, D]"
    on = {"mesh": Mesh.parse("X=2,Y=2"), "sizes": "B=64,D=256,F=1024", "hw": "tpu-v5e", "mode": "infer"}
    g = search_graph(mlp, **on)
    c = search_chain(mlp, **on)
    assert (g.solver, g.optimal) == ("dp", True)
    assert g.seconds == pytest.approx(c.seconds, rel=1e-12)
    assert "solver      dp (optimal" in str(g) and g.to_json()["solver"] == "dp"


def test_statements_alike_are_priced_once(attention):
    """K's and V's statements are Q's with other names: their choices are Q's renamed, and equal to pricing
    K's statement alone (its own programs, layouts and seconds)."""
    from shardalg.search.chain import _choices, _space, _sub_program
    from shardalg.search.graph import _statements
    from shardalg.search.numeric import prepare_search
    from shardalg.search.space import Pruned

    assert ("priced once", "Kp's statement as Q's") in attention.notes
    st = attention.settings
    prog, whole, _, _ = prepare_search(
        ATTENTION, ON["mesh"], ON["sizes"], "tpu-v5e", None, st.mode, None, None, None, ""
    )
    s, act, param = _statements(prog)[1]
    sub = _sub_program(prog, s, param)
    own, _ = _choices(sub, _space(sub, act, s.result, whole.batch_dims, st), act, s.result, st, Pruned())

    def table(cs):
        return {c.entry.program: (c.reads, c.writes, c.param_bytes, c.seconds) for c in cs}

    assert table(attention.choices[1]) == table(own)
    assert all(c.writes.name == "Kp" and "W_k" in str(c.entry.program) for c in attention.choices[1])


def test_the_cli_searches_a_graph_per_statement(capsys):
    """``search --per-statement`` takes the attention block the chain search refuses: the graph search, its
    solver and whether it is optimal in the text and the JSON; the integer program when the cap binds."""
    from shardalg.cli import main
    from shardalg.search.graph import is_graph

    argv = ["search", ATTENTION, "--per-statement", "--mesh", "X=2,Y=2", "--sizes", ON["sizes"]]
    argv += ["--hw", "tpu-v5e", "--mode", "infer", "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "solver      dp (optimal; the graph is a forest: 4 nodes, 3 edges)" in out
    assert "input In" in out
    free = search_graph(ATTENTION, mode="infer", **ON)
    assert main([*argv, "--memory", f"{free.bytes / 2:.0f}", "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert data["solver"] == "milp" and data["optimal"] is True
    assert data["param_bytes_per_device"] <= free.bytes / 2 and data["seconds"] >= free.seconds
    chain = "params W1, W2\nIn[B, D] * W1[D, F] -> H[B, F]\nH[B, F] * W2[F, D] -> O[B, D]"
    assert is_graph(parse_program(ATTENTION)) and not is_graph(parse_program(chain))


def parse_program(text: str):
    from shardalg.notation.parse import parse

    return parse(text)


def test_an_answer_over_the_cap_within_highs_tolerance_is_solved_again():
    """HiGHS lets a row exceed its bound by its feasibility tolerance: a choice over the cap by 5e-8 (relative)
    is its answer; ``milp_picks`` (the chain's and the graph's integer program) sees it over the cap, solves
    again with the cap tightened by 2e-6 and says so."""
    from types import SimpleNamespace

    from shardalg.search.chainsolve import _milp, milp_picks

    def choice(seconds: float, param_bytes: float) -> SimpleNamespace:
        return SimpleNamespace(seconds=seconds, param_bytes=param_bytes, writes=None, reads=None)

    choices = [[choice(1.0, 1 + 5e-8), choice(2.0, 0.5)]]
    assert _milp(choices, [], 1.0, 1.0) == ([0], True)  # HiGHS's own answer: over the cap
    notes: list[tuple[str, str]] = []
    assert milp_picks(choices, [], 1.0, notes) == ([1], True)
    assert notes and notes[0][0] == "milp" and "tightened by 2e-6" in notes[0][1]


def test_progress_counts_the_statements_priced_then_the_edges():
    """``progress(done, total)`` as assignments are priced: Q's space once (K's and V's statements are Q's
    renamed, not priced), counted to its end; then the total grows by the edges' layout pairs, each counted
    as it is priced (a search on 2x2x2 in training spent seconds on them after the bar was full)."""
    from shardalg.search.chain import _space, _sub_program, layout_key
    from shardalg.search.graph import _statements
    from shardalg.search.numeric import prepare_search

    seen: list[tuple[int, int]] = []
    p = graph_problem(ATTENTION, mode="infer", progress=lambda d, t: seen.append((d, t)), **ON)
    prog, whole, st, _ = prepare_search(
        ATTENTION, ON["mesh"], ON["sizes"], "tpu-v5e", None, "infer", None, None, None, ""
    )
    s, act, param = _statements(prog)[0]
    q = _space(_sub_program(prog, s, param), act, s.result, whole.batch_dims, st).size
    pairs = sum(
        len({layout_key(c.writes) for c in p.choices[u]}) * len({layout_key(c.reads) for c in p.choices[v]})
        for u, v, _ in p.edges
    )
    assert seen[:q] == [(d, q) for d in range(1, q + 1)] and q > 1
    assert seen[q:] == [(d, q + pairs) for d in range(q + 1, q + pairs + 1)] and pairs > 1


def test_the_mesh_may_be_text_as_the_other_searches_take_it():
    """``sa.search_graph`` takes ``mesh="X=2,Y=2"`` as ``sa.search`` and ``sa.search_chain`` do (it refused
    it, and ``python -m bench strategy --train-mesh`` with it)."""
    import shardalg as sa

    on = {"sizes": "B=32,T=256,D=16,N=16", "hw": "tpu-v5e", "mode": "infer"}
    text = sa.search_graph(ATTENTION, mesh="X=2,Y=2", **on)
    assert (text.solver, text.optimal, text.seconds) == (
        "dp",
        True,
        search_graph(ATTENTION, **ON | on).seconds,
    )


CHAIN_OF_TWO = "params W1, W2\nIn[B, D] * W1[D, F] -> H[B, F]\nH[B, F] * W2[F, D] -> Out[B, D]"


@pytest.mark.parametrize("what", ["graph", "chain"])
def test_too_many_layout_pairs_are_refused_before_any_is_priced(monkeypatch, what):
    """Over ``MAX_EDGE_PAIRS`` layout pairs on its edges, a per-statement search refuses up front, naming the
    count and the limit, and prices no pair (the progress never passes the statements' assignments)."""
    import shardalg.search.chain as chain

    monkeypatch.setattr(chain, "MAX_EDGE_PAIRS", 10)
    seen: list[tuple[int, int]] = []
    program, on = (ATTENTION, ON) if what == "graph" else (CHAIN_OF_TWO, {**ON, "sizes": "B=32,D=16,F=64"})
    build = graph_problem if what == "graph" else chain_problem
    with pytest.raises(
        UsageError, match=rf"the {what} has [\d,]+ layout pairs on its edges, over the limit of 10 "
    ):
        build(program, mode="infer", progress=lambda d, t: seen.append((d, t)), **on)
    assert seen and all(t == seen[0][1] for _, t in seen)  # the total never grew by the pairs
