"""The search prices a MoE layer's routing (issue 28 item 5): every assignment of a program with
``dispatch``/``combine`` is planned (the planner reshards to route) and priced, and the winner's program keeps
the routing."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main

MOE = """params W_r, W_gate, W_in, W_out
tokens B, T
Hn[B, T, D] * W_r[D, E] -> R[B, T, E]
dispatch_{C,k=2,cf=1.25}(Hn[B, T, D], R[B, T, E]) -> Xd[E, C, D]
Xd[E, C, D] * W_gate[E, D, F] -> Gt[E, C, F]
Xd[E, C, D] * W_in[E, D, F] -> U[E, C, F]
silu(Gt[E, C, F]) .* U[E, C, F] -> M[E, C, F]
M[E, C, F] * W_out[E, F, D] -> Out[E, C, D]
combine_{C,k=2,cf=1.25}(Out[E, C, D], R[B, T, E]) -> Mo[B, T, D]
"""


def test_the_search_prices_every_assignment_of_a_routed_layer(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "moe.sa"
    path.write_text(MOE)
    sizes = "B=16,T=4096,D=4096,F=14336,E=8,C=20480"
    args = ["search", str(path), "--mesh", "X=8", "--sizes", sizes, "--hw", "tpu-v5p", "--mode", "infer"]
    assert main([*args, "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    # 16 choices an axis: none, B, T; D and F each none, followed, B, T; E those and B with E (EP)
    assert found["pruned"]["illegal"] == 0 and found["priced"] == 18
    assert found["winner"]["strategy"] == "EP" and found["winner"]["comms"] > 0
    assert found["winner"]["activations"] == "B=X,E=X"  # the tokens over the axis: the AllToAlls route them
    assert "dispatch_{C,k=2,cf=1.25}(" in found["winner_program"]
    assert main([*args[:5], "B=16,T=4096,D=4096,F=14336,E=8,C=4096", *args[6:]]) != 0  # C is 20480
