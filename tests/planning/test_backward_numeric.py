"""The derived backward agrees with the numeric gradient of the dense program.

Each gradient einsum's plan runs on the executor's virtual mesh (per-device buffers, real collectives) on
the dense values of the forward and the cotangents so far; the gradients it assembles are compared with
central finite differences of the dense loss L = sum over outputs of <seed, output>. The programs are
multilinear of degree at most two in any input, so a central difference is exact up to rounding.
"""

from __future__ import annotations

from math import prod

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.errors import NoPlan, UnreachableUnreduced
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Arrow, Dim, Product, Program, Tensor
from shardalg.numeric.execute import run_plan
from shardalg.planning.backward import backward
from shardalg.planning.forward import analyze, grad_name
from shardalg.planning.programs import check_program
from shardalg.planning.redistribute import plan_bytes
from shardalg.planning.verify import verify


def dense_forward(fw, values):
    """Values of every global value of the program, from the dense inputs."""
    vals = dict(values)
    for e in fw.einsums:
        letters = {}
        for t in (e.left, e.right, e.out):
            for d in t.dim_names:
                letters.setdefault(d, chr(ord("a") + len(letters)))
        spec = ",".join("".join(letters[d] for d in t.dim_names) for t in (e.left, e.right))
        spec += "->" + "".join(letters[d] for d in e.out.dim_names)
        vals[e.roots[2]] = np.einsum(spec, vals[e.roots[0]], vals[e.roots[1]])
    return vals


def loss(fw, values, seeds):
    vals = dense_forward(fw, values)
    return sum(float(np.vdot(seeds[r], vals[r])) for r in fw.outputs)


def check_gradients(
    text_or_program, mesh: Mesh, sizes: dict[str, int], seed: int = 0, defer: bool = False, keep: bool = False
):
    prog = parse(text_or_program) if isinstance(text_or_program, str) else text_or_program
    bw = backward(prog, mesh, sizes, defer_reductions=defer, keep_gathered=keep)
    fw = analyze(prog, mesh, sizes)
    rng = np.random.default_rng(seed)

    def shape(t: Tensor) -> tuple[int, ...]:
        return tuple(sizes[d] for d in t.dim_names)

    inputs = {r: rng.standard_normal(shape(fw.origin[r])) for r in fw.inputs}
    seeds = {r: rng.standard_normal(shape(fw.latest[r])) for r in fw.outputs}
    vals = dense_forward(fw, inputs)
    grads = dict(seeds)
    for g in bw.grads:
        named = {r: v for r, v in vals.items()} | {grad_name(r): v for r, v in grads.items()}
        given_ = {t: named[t.name] for t in g.plan.inputs}
        res = run_plan(g.plan, mesh, sizes, rng, inputs=given_)
        assert res.ok, str(res)
        grads[g.of] = res.output  # an added contribution's plan reads the gradient so far and writes the sum
    for r in fw.inputs:
        for _ in range(2):
            delta = rng.standard_normal(inputs[r].shape)
            up = loss(fw, inputs | {r: inputs[r] + delta}, seeds)
            down = loss(fw, inputs | {r: inputs[r] - delta}, seeds)
            numeric = (up - down) / 2
            derived = float(np.vdot(grads[r], delta))
            assert abs(numeric - derived) <= 1e-8 * max(1.0, abs(numeric)), (r, numeric, derived)
    return bw


STRATEGIES = {
    "dp": ("In[B_X, D] * W[D, F] -> Out[B_X, F]", {"X": 4}),
    "fsdp": ("In[B_X, D] * W[D_X, F] -> Out[B_X, F]", {"X": 4}),
    "tp": ("In[B, D_Y] * W_in[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W_out[F_Y, D] -> Out[B, D]", {"Y": 2}),
    "megatron": ("X[B, D] * W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W2[F_Y, D] -> Out[B, D]", {"Y": 4}),
    "fsdp+tp": (
        "In[B_X, D_Y] * W_in[D_X, F_Y] -> H[B_X, F_Y]; AllGather_X: W_out[F_Y, D_X] -> W_out[F_Y, D]; "
        "H[B_X, F_Y] * W_out[F_Y, D] -> Out[B_X, D_Y]",
        {"X": 2, "Y": 2},
    ),
    "used twice": ("A[I_X, J] * W[J, K] -> H[I_X, K]; H[I_X, K] * W[J, K] -> Out[I_X, J]", {"X": 2}),
    # issue 13: a bare case-4 product (the forward gathers B), the book's TP row, the joint backward
    "case 4": ("A[I_X, J] * B[J, K_X] -> C[I_X, K]", {"X": 4}),
    "tp row": ("In[B, D_Y] * W_in[D, F_Y] -> H[B, F_Y]; H[B, F_Y] * W_out[F_Y, D] -> Out[B, D_Y]", {"Y": 4}),
    "case 4 twice": ("A[I_X, J] * B[J, K_X] -> C[I_X, K]; C[I_X, K] * B[J, K_X] -> E[I_X, J]", {"X": 2}),
    # two operands unreduced over one axis and no contracted dim, the result over two (B's partial sums
    # permuted onto Z)
    "unreduced twice": ("A[I]{U_Y} * B[J]{U_Y} -> C[I, J]{U_YZ}", {"X": 2, "Y": 2, "Z": 2}),
    # A read in its own layout after it was gathered: the gather's output is a new buffer, A[I_X, J] still
    # held (shardalg.planning.held)
    "read after a gather": (
        "AllGather_X(A[I_X, J]) -> A[I, J]; A[I_X, J] * B[J, K] -> C[I_X, K]; A[I, J] * B[J, K] -> E[I, K]",
        {"X": 4},
    ),
}


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("keep", [False, True])
def test_strategy_gradients_match_finite_differences(name, defer, keep):
    text, axes = STRATEGIES[name]
    sizes = {d: 8 for d in "BDFIJK"}
    check_gradients(text, Mesh(axes), sizes, defer=defer, keep=keep)


@pytest.mark.parametrize("name", sorted(STRATEGIES))
@pytest.mark.parametrize("defer", [False, True])
@pytest.mark.parametrize("keep", [False, True])
def test_a_checked_program_gets_the_backward_the_checks_give(name, defer, keep):
    """``checked=True`` (a model's program, checked when it was read) skips the rules, not the planning: the
    same backward, statement for statement, as the derivation that checks the program and each statement."""
    text, axes = STRATEGIES[name]
    prog, mesh, sizes = parse(text), Mesh(axes), {d: 8 for d in "BDFIJK"}
    assert not check(prog, mesh, sizes)
    checked = backward(prog, mesh, sizes, defer_reductions=defer, keep_gathered=keep, checked=True)
    assert checked == backward(prog, mesh, sizes, defer_reductions=defer, keep_gathered=keep)


def test_the_joint_backward_matches_finite_differences():
    """The sizes of the 720,896 -> 524,288 case: one AllGather_XY(dC) serves both gradients."""
    bw = check_gradients("A[I, J] * B[J, K] -> C[I_X, K_Y]", Mesh(X=2, Y=4), {"I": 16, "J": 16, "K": 64})
    assert bw.collectives == (("AllGather", ("X", "Y")),)
    assert bw.grads[1].plan.inputs[-1] == bw.grads[0].plan.steps[0].output  # dB reads dA's gathered dC


def test_a_wrong_backward_fails_this_check():
    """The check is not vacuous: a gradient off by a factor is caught."""
    text, axes = STRATEGIES["dp"]
    mesh, sizes = Mesh(axes), {d: 8 for d in "BDF"}
    prog = parse(text)
    fw = analyze(prog, mesh, sizes)
    bw = backward(prog, mesh, sizes)
    rng = np.random.default_rng(1)
    inputs = {r: rng.standard_normal(tuple(sizes[d] for d in fw.origin[r].dim_names)) for r in fw.inputs}
    seeds = {"Out": rng.standard_normal((8, 8))}
    vals = dense_forward(fw, inputs)
    g = bw.grads[1]  # dW
    res = run_plan(g.plan, mesh, sizes, rng, inputs={"In": vals["In"], "dOut": seeds["Out"]})
    delta = rng.standard_normal((8, 8))
    numeric = (
        loss(fw, inputs | {"W": inputs["W"] + delta}, seeds)
        - loss(fw, inputs | {"W": inputs["W"] - delta}, seeds)
    ) / 2
    assert abs(numeric - float(np.vdot(res.output, delta))) < 1e-8 * max(1.0, abs(numeric))
    assert abs(numeric - 4 * float(np.vdot(res.output, delta))) > 1e-3  # e.g. a gradient all-reduced twice


# ---- random two-statement programs ---------------------------------------------------------------------

ROLES = ("left", "right", "contracted", "batch", "absent")


@st.composite
def programs(draw):
    names = draw(st.sampled_from(["X", "XY"]))
    mesh = Mesh({a: draw(st.integers(1, 3)) for a in names})

    def shard(dims: list[str]) -> tuple[Dim, ...]:
        where = {a: draw(st.sampled_from([*dims, None])) for a in names}
        return tuple(Dim(d, tuple(a for a in names if where[a] == d)) for d in dims)

    def einsum(left_dims: list[str], pool: str, reuse: Tensor | None):
        roles = {d: draw(st.sampled_from(ROLES)) for d in pool}
        if reuse is None:
            right_dims = [d for d in pool if roles[d] in ("right", "contracted", "batch")]
        else:
            right_dims = list(reuse.dim_names)
        shared = [d for d in left_dims if d in right_dims]
        out_dims = [d for d in left_dims if d not in shared]
        out_dims += [d for d in right_dims if d not in shared]
        out_dims += [
            d for d in shared if roles.get(d) == "batch" or draw(st.booleans()) and reuse is not None
        ]
        return right_dims, out_dims

    a_dims = draw(st.lists(st.sampled_from("IJK"), min_size=1, max_size=2, unique=True))
    b_dims, c_dims = einsum(a_dims, "IJK", None)
    assume(b_dims and c_dims)
    A, B = Tensor("A", shard(a_dims)), Tensor("B", shard(b_dims))
    C = Tensor("C", shard(c_dims))
    reuse = draw(st.sampled_from([None, A, B]))
    d_dims, e_dims = einsum(c_dims, "IJKL", reuse)
    assume(d_dims and e_dims)
    D = reuse if reuse is not None else Tensor("D", shard(d_dims))
    E = Tensor("E", shard(e_dims))
    prog = Program((Arrow(Product(A, B), C), Arrow(Product(C, D), E)))
    n = prod(mesh.shape)
    sizes = {d: 2 * n for d in "IJKL"}
    # case 4 is in: backward plans such a product as `plan` does (an operand gathered first)
    assume(not [v for v in check(prog, mesh, sizes) if v.rule != "case-4"])
    return prog, mesh, sizes


@given(programs(), st.integers(0, 2**16), st.booleans(), st.booleans())
def test_random_two_statement_programs_match_the_numeric_gradient(case, seed, defer, keep):
    prog, mesh, sizes = case
    try:
        bw = backward(prog, mesh, sizes, defer_reductions=defer, keep_gathered=keep)
    except (NoPlan, UnreachableUnreduced):
        assume(False)
    check_gradients(prog, mesh, sizes, seed=seed, defer=defer, keep=keep)
    assert bw.grads
    # the backward as a program reads each cotangent in a layout it holds: its own checks take it. check_program
    # reads it alone, so not where it reads the forward's gathered copies (kept: a forward value in a second
    # layout, which verify knows). A gradient's parts are added in one layout (shardalg.planning.accumulate)
    if not keep:
        check_program(bw.program(), mesh, sizes)
    assert verify(prog, bw.program(), mesh, sizes, defer_reductions=defer).ok


def test_a_backward_that_reads_a_cotangent_in_two_layouts_is_a_program_its_checks_take():
    """dH is sliced for dIn's product and read whole by dW's: the slice's buffer is new, dH[B, F] still held
    (shardalg.planning.held)."""
    prog, mesh, sizes = "In[B, D] * W[D, F_X] -> H[B, F]", Mesh(X=4), {"B": 64, "D": 256, "F": 1024}
    bw = check_gradients(prog, mesh, sizes)
    reads = [t for s in bw.steps for t in s.inputs if t.name == "dH"]
    assert {str(t) for t in reads} == {"dH[B, F]", "dH[B, F_X]"}
    assert verify(prog, bw.program(), mesh, sizes).ok
    assert len(check_program(bw.program(), mesh, sizes)) == len(bw.steps)


@pytest.mark.parametrize(
    "text, axes, sizes",
    [
        (
            "params W\nX[B_X, D] * W[D_X, F] -> H[B_X, F]\nY[B_X, D] * W[D_X, F] -> G[B_X, F]",
            {"X": 4},
            {"B": 16, "D": 8, "F": 8},
        ),
        (
            "X[B, D] * Wq[D, H_Y] -> Q[B, H_Y]; X[B, D] * Wk[D, H_Y] -> K[B, H_Y]; X[B, D] * Wv[D, H_Y] -> V[B, H_Y]",
            {"Y": 4},
            {"B": 4, "D": 16, "H": 16},
        ),
    ],
)
def test_the_backward_as_one_flow_returns_every_contribution(text, axes, sizes):
    """What export runs (the backward's plans chained into one flow) returns the whole gradient of a value read
    twice: as a second product into dW it returned the last contribution alone, and `export --check` agreed
    with it (the flow's own dense meaning)."""
    from shardalg.export.flow import as_flow
    from shardalg.export.harness import dense_outputs

    prog, mesh = parse(text), Mesh(axes)
    bw = backward(prog, mesh, sizes)
    fw = analyze(prog, mesh, sizes)
    rng = np.random.default_rng(0)
    values = {r: rng.standard_normal(tuple(sizes[d] for d in fw.origin[r].dim_names)) for r in fw.inputs}
    seeds = {r: rng.standard_normal(tuple(sizes[d] for d in fw.latest[r].dim_names)) for r in fw.outputs}
    vals = dense_forward(fw, values)
    named = {r: v for r, v in vals.items()} | {grad_name(r): s for r, s in seeds.items()}
    flow = as_flow(bw, mesh, sizes)
    got = dict(
        zip(
            (t.name for t in flow.outputs),
            dense_outputs(flow, [named[t.name] for t in flow.inputs], mesh),
            strict=True,
        )
    )
    wanted = dict(zip(fw.inputs, _gradients(fw, values, seeds), strict=True))
    assert set(got) == {grad_name(r) for r in wanted}
    for r, g in wanted.items():
        assert np.allclose(got[grad_name(r)], g), r


def _gradients(fw, values, seeds):
    """Each input's gradient of the loss, by the product rule on the dense einsums (the programs are linear in
    each operand)."""
    grads = {r: np.zeros_like(v) for r, v in values.items()}
    vals = dense_forward(fw, values)
    cot = dict(seeds)
    for e in reversed(fw.einsums):
        letters: dict[str, str] = {}
        for t in (e.left, e.right, e.out):
            for d in t.dim_names:
                letters.setdefault(d, chr(ord("a") + len(letters)))
        a, b, c = ("".join(letters[d] for d in t.dim_names) for t in (e.left, e.right, e.out))
        dc = cot.get(e.roots[2])
        if dc is None:
            continue
        for root, spec, other in (
            (e.roots[0], f"{c},{b}->{a}", e.roots[1]),
            (e.roots[1], f"{a},{c}->{b}", e.roots[0]),
        ):
            g = np.einsum(spec, dc, vals[other]) if root == e.roots[0] else np.einsum(spec, vals[other], dc)
            if root in grads:
                grads[root] = grads[root] + g
            else:
                cot[root] = cot.get(root, 0) + g
    return [grads[r] for r in fw.inputs]


@pytest.mark.parametrize(
    "text, keep",
    [
        ("A[I_XY, J] * B[I, J, K] -> C[K]; C[K] * D[J_Y, L] -> E[K_XY, J, L]", False),
        ("A[I_XY, J] * B[I, J, K] -> C[K]; C[K] * D[L_XY] -> E[K_X, L]", True),
    ],
)
def test_a_gradient_that_reads_the_cotangents_partial_sums_runs_before_they_are_reduced(text, keep):
    """With reductions deferred, dB reads dC{U_Y} and dA all-reduces dC first: dB's plan runs first (the random
    profile found dB reading the partial sums after the AllReduce had summed them: check_program and verify
    refused the derived backward)."""
    mesh, sizes = Mesh(X=2, Y=2), {"I": 4, "J": 4, "K": 4, "L": 4}
    bw = check_gradients(text, mesh, sizes, defer=True, keep=keep)
    assert verify(text, bw.program(), mesh, sizes, defer_reductions=True).ok
    if not keep:
        check_program(bw.program(), mesh, sizes)


def test_a_gradient_is_not_left_partial_over_an_axis_of_size_one() -> None:
    """Partial sums over one device are the sum: with reductions deferred, no gradient is left unreduced over
    an axis of size 1 (each such axis doubled the targets planned: this layer took 26 s of CPU on
    ``X=1,Y=2,Z=1,S0=1``), and the backward is still the gradient. A collective over one device moves no byte,
    and the planner ranks it so: the backward moves 16 bytes (160 bytes when a group of one device was ranked
    as if its data moved, and dW0 was left partial over Y) in 15 steps. Three of them move nothing: dIn's plan
    reaches ``D_XY`` from ``D_Y`` by a Slice over X and ``Permute_XY``, free on ``|X| = 1`` (when the Permute was
    charged, the optimum's ``AllToAll_{XY,D}`` of W0, the same bytes in 3 steps fewer, was strictly cheaper than
    every plan listed, and joined them; now it ties, and the listed plan stays)."""
    text = "In[B_Z, T, D_XY] * W0[D, F_XY] -> V0[B, T, F]\nV0[B, T, F] * W1[F, D] -> V1[B_X, T, D_Z]"
    mesh, sizes = Mesh(X=1, Y=2, Z=1, S0=1), {"B": 4, "T": 2, "D": 4, "F": 4}
    bw = check_gradients(text, mesh, sizes, defer=True)
    partial = {a for g in bw.grads for s in g.plan.steps for a in s.output.unreduced}
    assert not partial & {"X", "Z", "S0"}, str(bw.program())
    moved = sum(plan_bytes(g.plan, mesh, Sizes(sizes)).number for g in bw.grads)
    assert (moved, sum(len(g.plan.steps) for g in bw.grads)) == (16, 15), str(bw.program())
