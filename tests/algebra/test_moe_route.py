"""A MoE layer's routing (issue 28 item 5): ``dispatch_{C,k,cf}`` and ``combine_{C,k,cf}`` parse and print in
the three notations, refuse bad k and cf with a caret, check the capacity C = cf·k·T/E against the sizes, plan
as a local routing plus the AllToAll of expert parallelism, whose bytes follow from T, k, cf and D (the
AllToAll record's own cost, derived symbolically and checked on numbers), and run on numbers: dispatch, the
experts' einsum and combine equal a dense MoE (hypothesis)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import shardalg
from shardalg.algebra.ops.route import capacity, top_k
from shardalg.cli import main
from shardalg.errors import NoPlan, ParseError, UsageError
from shardalg.notation.jsonread import from_json
from shardalg.notation.printing import latex, to_json, unicode
from shardalg.numeric.execute import run_plan

DISPATCH = "dispatch_{C,k=2,cf=1.25}(H[T_X, D], G[T_X, E]) -> Hd[E_X, C, D]"
COMBINE = "combine_{C,k=2,cf=1.25}(Y[E_X, C, F], G[T_X, E]) -> O[T_X, F]"
SIZES = {"T": 64, "E": 8, "D": 16, "C": 20, "F": 32}  # C = 1.25·2·64/8


@pytest.mark.parametrize("text", [DISPATCH, COMBINE])
def test_a_routing_round_trips_in_every_notation(text: str) -> None:
    stmt = shardalg.parse(text)
    assert str(stmt) == text
    for printed in (latex(stmt), unicode(stmt)):
        assert shardalg.parse(printed) == stmt
    assert from_json(to_json(stmt)) == stmt
    assert latex(stmt).startswith(r"\mathrm{" + text.split("_")[0] + "}_{")


@pytest.mark.parametrize(
    ("text", "message", "caret"),
    [
        ("dispatch_{C,k=0,cf=1.25}(H[T, D], G[T, E])", "a whole number >= 1, not 0", "k=0"),
        ("dispatch_{C,k=2,cf=-1}(H[T, D], G[T, E])", "a positive decimal", "cf=-1"),
        ("dispatch_{C,k=2,cf=0}(H[T, D], G[T, E])", "a positive decimal", "cf=0"),
        ("dispatch_{C,k=1.5,cf=1}(H[T, D], G[T, E])", "a whole number >= 1, not 1.5", "k=1.5"),
        ("dispatch_{C,k=2,top=1}(H[T, D], G[T, E])", "each once and in that order", "top=1"),
        ("gelu_{k=2}(H[T, D])", "gelu takes no keyed setting", "k=2"),
    ],
)
def test_bad_settings_are_refused_with_a_caret(text: str, message: str, caret: str) -> None:
    with pytest.raises(ParseError) as err:
        shardalg.parse(text)
    assert message in err.value.message
    start, end = err.value.span.start, err.value.span.end  # type: ignore[union-attr]
    assert text[start:end] == caret


def test_dispatch_plans_a_local_routing_then_the_alltoall_of_expert_parallelism() -> None:
    (plan, *_) = shardalg.plans(DISPATCH, mesh="X=4", sizes=SIZES)
    assert str(plan).splitlines()[:2] == [
        "dispatch_{C,k=2,cf=1.25}(H[T_X, D], G[T_X, E]) -> Hd[E, C_X, D]  # dispatch: each device sends its "
        "tokens to their top-k experts, into its share C/X of each expert's slots; no communication",
        "AllToAll_{X,E}(Hd[E, C_X, D]) -> Hd[E_X, C, D]  # AllToAll: move X of Hd from C to E",
    ]
    assert not plan.steps[0].communicates
    (back, *_) = shardalg.plans(COMBINE, mesh="X=4", sizes=SIZES)
    assert [s.op.value for s in back.steps] == ["AllToAll", "combine"]
    assert str(back).startswith("AllToAll_{X,C}(Y[E_X, C, F]) -> Y[E, C_X, F]")


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ({**SIZES, "C": 21}, "the capacity C is cf·k·T/E = 1.25·2·64/8 = 20 slots an expert, not 21"),
        ({"T": 64, "E": 8, "D": 16}, "bind it (C=20)"),
        ({"T": 60, "E": 8, "D": 16, "C": 18}, "= 18.75 is not a whole number of slots"),
        ({"T": 64, "E": 8, "D": 16, "C": 72}, "k=9: a token goes to at most the 8 experts of E"),
    ],
)
def test_the_capacity_is_derived_and_checked(sizes: dict[str, int], message: str) -> None:
    text = DISPATCH.replace("k=2", "k=9") if "k=9" in message else DISPATCH
    with pytest.raises(NoPlan) as err:
        shardalg.plans(text, mesh="X=4", sizes=sizes)
    assert message in err.value.message


def test_the_planner_reshards_the_router_or_the_tokens_to_route_them() -> None:
    (plan, *_) = shardalg.plans(
        "dispatch_{C,k=2,cf=1.25}(H[T_X, D], G[T, E_X]) -> Hd[E_X, C, D]", mesh="X=4", sizes=SIZES
    )
    assert str(plan).splitlines()[0] == (
        "AllToAll_{X,T}(G[T, E_X]) -> G[T_X, E]  # AllToAll: move X of G from E to T"
    )  # each device routes its tokens among all the experts
    (plan, *_) = shardalg.plans(
        "dispatch_{C,k=2,cf=1.25}(H[T, D_X], G[T_X, E]) -> Hd[E_X, C, D]", mesh="X=4", sizes=SIZES
    )
    assert [s.op.value for s in plan.steps] == ["AllToAll", "dispatch", "AllToAll"]
    assert run_plan(plan, "X=4", SIZES).ok


def test_a_routing_of_the_wrong_dims_is_refused() -> None:
    found = shardalg.check("dispatch_{C,k=2,cf=1.25}(H[D, T], G[T, E]) -> Hd[E, C, D]")
    assert found[0].message == (
        "dispatch routes the tokens of H[D, T]: its first dims are G's token dims (T), then its features"
    )
    found = shardalg.check("combine_{S,k=2,cf=1.25}(Y[E, C, D], G[T, E]) -> O[T, D]")
    assert found[0].message.startswith("combine_{S,..} takes the experts' slots [E, S, ..]")


def test_the_alltoall_bytes_follow_from_tokens_k_capacity_factor_and_d() -> None:
    """Derived: the AllToAll record's cost of the [E, C, D] buffer with C = cf·k·T/E put in (sympy), then
    checked against the plan priced on numbers."""
    (plan, *_) = shardalg.plans(DISPATCH, mesh="X=4", sizes=SIZES)
    symbolic = shardalg.plan_cost(plan, mesh="X=4", sizes={}, hw="tpu-v5e").comms
    own = {str(s): s for s in symbolic.free_symbols}  # the cost model's symbols (E, C, D, W_ici, T_min)
    k, cf = sympy.symbols("k cf", positive=True)
    t = sympy.Symbol("T", **own["E"].assumptions0)
    by_tokens = symbolic.subs(own["C"], capacity(t, own["E"], k, cf))
    atoms = {str(s): s for s in by_tokens.free_symbols}
    assert sorted(atoms) == ["D", "T", "T_min", "W_ici", "cf", "k"]  # E cancels: cf·k·T·D slots move
    w, d = atoms["W_ici"], atoms["D"]
    assert sympy.simplify(by_tokens - sympy.Max(3 * atoms["T_min"], cf * k * t * d / w)) == 0
    numbers = {t: 64, k: 2, cf: sympy.Rational(5, 4), d: 16}
    priced = shardalg.plan_cost(plan, mesh="X=4", sizes=SIZES, hw="tpu-v5e").comms
    assert sympy.simplify(by_tokens.subs(numbers) - priced) == 0
    # the same as the AllToAll record prices that buffer on its own
    (a2a, *_) = shardalg.plans("Hd[E, C_X, D] -> Hd[E_X, C, D]", mesh="X=4", sizes=SIZES)
    assert shardalg.plan_cost(a2a, mesh="X=4", sizes=SIZES, hw="tpu-v5e").comms == priced


def test_the_cli_prices_the_dispatch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", DISPATCH, "--mesh", "X=4", "--sizes", "T=64,E=8,D=16,C=20"]) == 0
    assert "AllToAll_{X,E}(Hd[E, C_X, D]) -> Hd[E_X, C, D]" in capsys.readouterr().out
    assert main(["plan", DISPATCH, "--mesh", "X=4", "--sizes", "T=64,E=8,D=16,C=21"]) != 0


@pytest.mark.parametrize("text", [DISPATCH, COMBINE])
def test_each_routing_plan_runs_on_numbers(text: str) -> None:
    for plan in shardalg.plans(text, mesh="X=4", sizes=SIZES)[:3]:
        assert run_plan(plan, "X=4", SIZES).ok


def _dense_moe(h: np.ndarray, g: np.ndarray, w: np.ndarray, k: int) -> np.ndarray:
    experts, gates = top_k(g, k)
    return sum(gates[:, [j]] * np.einsum("td,tdf->tf", h, w[experts[:, j]]) for j in range(k))


def _output(plan: shardalg.Plan, sizes: dict[str, int], inputs: dict[str, np.ndarray]) -> np.ndarray:
    run = run_plan(plan, "X=2,Y=2", sizes, inputs=inputs)
    assert run.ok and run.output is not None
    return run.output


@settings(max_examples=12, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([(4, 1), (4, 2), (8, 2)]),
    st.sampled_from([1, 2]),
)
def test_dispatch_experts_and_combine_equal_a_dense_moe(seed: int, ek: tuple[int, int], per: int) -> None:
    """Expert parallelism over X (tokens over X and Y): no token dropped when cf·k = E, so the layer is the
    dense MoE, sum over its top-k experts of gate · H·W_e."""
    e, k = ek
    t, d, f = 4 * per * e // k, 3, 5  # each of the 4 token groups holds a whole capacity
    cf = Fraction(e, k)
    c = int(capacity(Fraction(t), e, k, cf))
    sizes = {"T": t, "E": e, "D": d, "F": f, "C": c}
    rng = np.random.default_rng(seed)
    h, g, w = rng.normal(size=(t, d)), rng.normal(size=(t, e)), rng.normal(size=(e, d, f))
    sub = f"k={k},cf={float(cf):g}"
    mesh = "X=2,Y=2"
    (dispatch, *_) = shardalg.plans(
        f"dispatch_{{C,{sub}}}(H[T_XY, D], G[T_XY, E]) -> Hd[E_X, C_Y, D]", mesh=mesh, sizes=sizes
    )
    assert "AllToAll" in [s.op.value for s in dispatch.steps]
    hd = _output(dispatch, sizes, {"H": h, "G": g})
    (experts, *_) = shardalg.plans("Hd[E_X, C_Y, D] * W[E_X, D, F] -> Y[E_X, C_Y, F]", mesh=mesh, sizes=sizes)
    y = _output(experts, sizes, {"Hd": hd, "W": w})
    (combine, *_) = shardalg.plans(
        f"combine_{{C,{sub}}}(Y[E_X, C_Y, F], G[T_XY, E]) -> O[T_XY, F]", mesh=mesh, sizes=sizes
    )
    assert "AllToAll" in [s.op.value for s in combine.steps]
    out = _output(combine, sizes, {"Y": y, "G": g})
    np.testing.assert_allclose(out, _dense_moe(h, g, w, k), rtol=1e-9, atol=1e-9)


def test_a_choice_past_its_experts_share_is_dropped() -> None:
    """Two groups of two tokens, one expert of the two chosen by all: each group's one slot keeps its first
    token; the second token of each group gets nothing back."""
    sizes = {"T": 4, "E": 2, "D": 1, "C": 2}
    h = np.array([[1.0], [2.0], [3.0], [4.0]])
    g = np.array([[1.0, 0.0]] * 4)
    (dispatch, *_) = shardalg.plans(
        "dispatch_{C,k=1,cf=1}(H[T_X, D], G[T_X, E]) -> Hd[E, C_X, D]", mesh="X=2", sizes=sizes
    )
    run = run_plan(dispatch, "X=2", sizes, inputs={"H": h, "G": g})
    assert run.ok
    np.testing.assert_array_equal(run.output[:, :, 0], [[1.0, 3.0], [0.0, 0.0]])
    (combine, *_) = shardalg.plans(
        "combine_{C,k=1,cf=1}(Y[E, C_X, D], G[T_X, E]) -> O[T_X, D]", mesh="X=2", sizes=sizes
    )
    back = run_plan(combine, "X=2", sizes, inputs={"Y": run.output, "G": g})
    np.testing.assert_array_equal(back.output[:, 0], [1.0, 0.0, 3.0, 0.0])


def test_a_batch_of_sequences_routes_its_b_t_tokens() -> None:
    """Two token dims (H[B_X, T_Y, D], G[B_X, T_Y, E]): the capacity counts B·T tokens, the groups are the
    devices of X and Y, and the MoE layer over both axes equals the dense one."""
    b, t, e, k, d, f = 4, 6, 4, 2, 3, 2
    c = int(capacity(Fraction(b * t), e, k, Fraction(2)))
    sizes = {"B": b, "T": t, "E": e, "D": d, "F": f, "C": c}
    rng = np.random.default_rng(7)
    h, g, w = rng.normal(size=(b, t, d)), rng.normal(size=(b, t, e)), rng.normal(size=(e, d, f))
    mesh = "X=2,Y=2"
    (dispatch, *_) = shardalg.plans(
        "dispatch_{C,k=2,cf=2}(H[B_X, T_Y, D], G[B_X, T_Y, E]) -> Hd[E_XY, C, D]", mesh=mesh, sizes=sizes
    )
    assert str(dispatch).splitlines()[1].startswith("AllToAll_{XY,E}(Hd[E, C_XY, D]) -> Hd[E_XY, C, D]")
    hd = _output(dispatch, sizes, {"H": h, "G": g})
    (experts, *_) = shardalg.plans("Hd[E_XY, C, D] * W[E_XY, D, F] -> Y[E_XY, C, F]", mesh=mesh, sizes=sizes)
    y = _output(experts, sizes, {"Hd": hd, "W": w})
    (combine, *_) = shardalg.plans(
        "combine_{C,k=2,cf=2}(Y[E_XY, C, F], G[B_X, T_Y, E]) -> O[B_X, T_Y, F]", mesh=mesh, sizes=sizes
    )
    out = _output(combine, sizes, {"Y": y, "G": g})
    dense = _dense_moe(h.reshape(b * t, d), g.reshape(b * t, e), w, k).reshape(b, t, f)
    np.testing.assert_allclose(out, dense, rtol=1e-9, atol=1e-9)
    with pytest.raises(NoPlan, match=r"the capacity C is cf·k·B·T/E = 2·2·24/4 = 24 slots an expert, not 12"):
        shardalg.plans(
            "dispatch_{C,k=2,cf=2}(H[B_X, T_Y, D], G[B_X, T_Y, E]) -> Hd[E_XY, C, D]",
            mesh=mesh,
            sizes={**sizes, "C": 12},
        )


@pytest.mark.parametrize(
    ("export", "layer"),
    [
        ("shardalg.export.jax:export_jax", "the JAX exporter (shardalg.export.jax)"),
        (
            "shardalg.export.torch_export:export_torch",
            "the torch.distributed exporter (shardalg.export.torch_export)",
        ),
        (
            "shardalg.export.torch_dtensor:export_dtensor",
            "the DTensor exporter (shardalg.export.torch_dtensor)",
        ),
    ],
)
def test_each_exporter_refuses_a_routing_by_name(export: str, layer: str) -> None:
    import importlib

    module, name = export.split(":")
    (plan, *_) = shardalg.plans(DISPATCH, mesh="X=4", sizes=SIZES)
    with pytest.raises(UsageError) as err:
        getattr(importlib.import_module(module), name)(plan, shardalg.Mesh.parse("X=4"), sizes=SIZES)
    assert err.value.message.startswith(f"{layer} has no method for dispatch (dispatch_{{C,k=2,cf=1.25}}(")


def test_the_backward_of_a_routing_is_refused_by_name() -> None:
    program = "\n".join(
        [
            "params W",
            "dispatch_{C,k=2,cf=1.25}(H[T_X, D], G[T_X, E]) -> Hd[E_X, C, D]",
            "Hd[E_X, C, D] * W[E_X, D, F] -> Y[E_X, C, F]",
            "combine_{C,k=2,cf=1.25}(Y[E_X, C, F], G[T_X, E]) -> O[T_X, F]",
        ]
    )
    with pytest.raises(UsageError, match=r"the backward of combine \(a MoE routing\) is not derived"):
        shardalg.backward(program, mesh="X=4", sizes={**SIZES})
