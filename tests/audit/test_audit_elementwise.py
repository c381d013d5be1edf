"""Audits of jax functions whose elementwise ops combine two tensors (one jax subprocess for every case of this
module, 4 CPU devices): the add, sub and mul of two distinct tensors are statements of the program (``+``,
``-``, ``.*``, a rank-1 gain broadcast), each in XLA's layouts, with the collective XLA inserted for it as
its plan, ranked among shardalg's; silu's and gelu's chains are functions of the program, other unary ops
(gelu's erf form among them) keep the primed name, and a note says so. The program parses, is legal, and XLA's plans of it run on the virtual mesh to jax's own output."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.legality import check  # noqa: E402
from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.audit.report import report_json, report_text  # noqa: E402
from shardalg.audit.run import AuditJob, audit_files  # noqa: E402
from shardalg.costs.programplan import program_plan  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402
from shardalg.numeric.devices import unshard  # noqa: E402
from shardalg.numeric.execute import execute_plan, place_inputs, run_plan  # noqa: E402
from tests.shared import ROOT  # noqa: E402

CASES = str(ROOT / "docs" / "examples" / "elementwise.py")
SIZES = {"B": 64, "D": 128, "F": 256}

MLP = "x: bf16[B, D]; w_in: bf16[D, F_X]; w_out: bf16[F_X, D]"  # an MLP's inputs, its F over X

# name: (function, inputs, mesh, backward)
JOBS = {
    "residual": ("residual_mlp", MLP, "X=4", True),
    "gated": (
        "gated_mlp",
        "x: bf16[B, D]; w1: bf16[D, F_X]; w3: bf16[D, F_X]; w2: bf16[F_X, D]",
        "X=4",
        True,
    ),
    "gain": ("gain", "x: bf16[B_X, D]; w: bf16[D, F]; g: bf16[F_X]", "X=4", True),
    "reshard": ("add", "a: bf16[B_X, D]; b: bf16[B, D_X]", "X=4", True),
    "affine": ("affine", "x: fp32[B_X, D]; w: fp32[D, F]; g: fp32[F]; c: fp32[B, F]", "X=4", False),
    "gates": ("sigmoid_gates", "x: bf16[B, D]; w: bf16[D, F_X]; y: bf16[B, F_X]", "X=4", False),
    "squashed": ("squashed", "x: bf16[B_X, D]; w: bf16[D, F]", "X=4", False),
    "quotient": ("quotient", "x: bf16[B, D]; y: bf16[B, D]; w: bf16[D, F]", "X=4", True),
    "gpt2_gelu": ("gpt2_mlp", MLP, "X=4", False),
    "doubled_gelu": ("doubled_gelu_mlp", MLP, "X=4", False),
    "relu": ("relu_mlp", MLP, "X=4", True),
    "exact_gelu": ("exact_gelu_mlp", MLP, "X=4", False),
    "one_line": (
        "gated_one_line",
        "x: bf16[B_X, D]; w1: bf16[D, F_X]; w3: bf16[D, F_X]; w2: bf16[F_X, D]",
        "X=4",
        False,
    ),
}


@pytest.fixture(scope="module")
def audits() -> dict[str, object]:
    jobs = [
        AuditJob.of(f"{CASES}:{f}", [i], Mesh.parse(m), SIZES, backward=b) for f, i, m, b in JOBS.values()
    ]
    return dict(zip(JOBS, audit_files(jobs), strict=True))


# name: (the program, XLA's plan of each statement, the rank of XLA's plan among shardalg's and their number)
EXPECTED = {
    "residual": (
        [
            "x[B, D] · w_in[D, F_X] -> H1[B, F_X]",
            "gelu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] · w_out[F_X, D] -> H3[B, D]",
            "x[B, D] + H3[B, D] -> Out[B, D]",
        ],
        [
            "x[B, D] · w_in[D, F_X] -> H1[B, F_X]",
            "gelu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] *_LOCAL w_out[F_X, D] -> H3[B, D]{U_X}\nAllReduce_X(H3[B, D]{U_X}) -> H3[B, D]",
            "x[B, D] + H3[B, D] -> Out[B, D]",
        ],
        [(1, 1), (1, 1), (1, 2), (1, 1)],
    ),
    "gated": (
        [
            "x[B, D] · w1[D, F_X] -> H1[B, F_X]",
            "silu(H1[B, F_X]) -> H2[B, F_X]",
            "x[B, D] · w3[D, F_X] -> H3[B, F_X]",
            "H2[B, F_X] .* H3[B, F_X] -> H4[B, F_X]",
            "H4[B, F_X] · w2[F_X, D] -> Out[B, D]",
        ],
        [
            "x[B, D] · w1[D, F_X] -> H1[B, F_X]",
            "silu(H1[B, F_X]) -> H2[B, F_X]",
            "x[B, D] · w3[D, F_X] -> H3[B, F_X]",
            "H2[B, F_X] .* H3[B, F_X] -> H4[B, F_X]",
            "H4[B, F_X] *_LOCAL w2[F_X, D] -> Out[B, D]{U_X}\nAllReduce_X(Out[B, D]{U_X}) -> Out[B, D]",
        ],
        [(1, 1), (1, 1), (1, 1), (1, 1), (1, 2)],
    ),
    "relu": (
        [
            "x[B, D] · w_in[D, F_X] -> H1[B, F_X]",
            "relu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] · w_out[F_X, D] -> Out[B, D]",
        ],
        [
            "x[B, D] · w_in[D, F_X] -> H1[B, F_X]",
            "relu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] *_LOCAL w_out[F_X, D] -> Out[B, D]{U_X}\nAllReduce_X(Out[B, D]{U_X}) -> Out[B, D]",
        ],
        [(1, 1), (1, 1), (1, 2)],
    ),
    "gates": (
        [
            "x[B, D] · w[D, F_X] -> H1[B, F_X]",
            "silu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] .* y'[B, F_X] -> Out[B, F_X]",
        ],
        [
            "x[B, D] · w[D, F_X] -> H1[B, F_X]",
            "silu(H1[B, F_X]) -> H2[B, F_X]",
            "H2[B, F_X] .* y'[B, F_X] -> Out[B, F_X]",
        ],
        [(1, 1), (1, 1), (1, 1)],
    ),
    "gain": (
        ["x[B_X, D] · w[D, F] -> H1[B_X, F]", "H1[B_X, F] .* g[F_X] -> Out[B_X, F]"],
        [
            "x[B_X, D] · w[D, F] -> H1[B_X, F]",
            "AllGather_X(g[F_X]) -> g[F]\nH1[B_X, F] .* g[F] -> Out[B_X, F]",
        ],
        [(1, 1), (1, 2)],
    ),
    "reshard": (
        ["a[B_X, D] + b[B, D_X] -> Out[B_X, D]"],
        ["AllToAll_{X,B}(b[B, D_X]) -> b[B_X, D]\na[B_X, D] + b[B_X, D] -> Out[B_X, D]"],
        [(1, 2)],
    ),
    "affine": (
        [
            "x: fp32[B_X, D] · w: fp32[D, F] -> H1: fp32[B_X, F]",
            "H1: fp32[B_X, F] .* g: fp32[F] -> H2: fp32[B_X, F]",
            "H2: fp32[B_X, F] - c: fp32[B, F] -> Out: fp32[B_X, F]",
        ],
        [
            "x: fp32[B_X, D] · w: fp32[D, F] -> H1: fp32[B_X, F]",
            "H1: fp32[B_X, F] .* g: fp32[F] -> H2: fp32[B_X, F]",
            "Slice_{X,B}(c: fp32[B, F]) -> c: fp32[B_X, F]\nH2: fp32[B_X, F] - c: fp32[B_X, F] -> Out: fp32[B_X, F]",
        ],
        [(1, 1), (1, 1), (1, 2)],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_elementwise_ops_of_two_tensors_are_statements_with_xlas_plan(audits, name):
    a = audits[name]
    program, plans, ranks = EXPECTED[name]
    assert [st.text for st in a.program.statements] == program
    assert [v.xla_plan for v in a.verdicts] == plans
    assert [(v.rank, v.plans) for v in a.verdicts] == ranks
    assert not any(v.flagged or v.problem for v in a.verdicts)
    assert a.program.outside == []
    text = report_text(a)
    assert "not in the notation yet" not in text  # the stale note is gone


def test_an_add_xla_reshards_for_carries_the_all_to_all_as_its_step(audits):
    """``a[B_X, D] + b[B, D_X]``: XLA moves b's X from D to B (an all-to-all in the HLO's tuple form, its
    metadata the add's) and adds locally; that is shardalg's cheaper plan of the two (the other moves a and
    the result)."""
    a = audits["reshard"]
    (st,) = a.program.statements
    (v,) = a.verdicts
    (step,) = st.steps
    assert st.op == "+" and st.primitive == "add"
    assert (step.op, step.axes, step.dim, step.before.text(), step.after.text()) == (
        "AllToAll",
        ("X",),
        "B",
        "b[B, D_X]",
        "b[B_X, D]",
    )
    assert step.hlo is not None and step.hlo.primitive == "add" and step.hlo.kind == "AllToAll"
    assert v.rank == 1 and v.plans == 2 and v.xla_seconds == pytest.approx(v.best_seconds)
    assert v.xla_bytes == v.best_bytes == 64 * 128 // 4 * 2  # b's bf16 shard, as shardalg plan counts it
    data = report_json(a)["statements"][0]["xla_steps"][0]
    assert data["op"] == "AllToAll" and data["tensor"] == "b" and data["hlo"]["line"] is not None


def test_a_gain_broadcast_is_written_at_its_own_rank_and_its_gather_is_the_muls(audits):
    """``(x @ w) * g`` with ``g`` of rank 1 sharded over X: jax broadcasts g (broadcast_in_dim), the program
    writes ``g[F_X]`` (the notation broadcasts it), and XLA's all-gather of g, inserted for the mul, is the
    mul's step."""
    a = audits["gain"]
    st = a.program.statements[1]
    (step,) = st.steps
    assert st.op == ".*" and st.rhs.text() == "g[F_X]"
    assert (step.op, step.axes, step.hlo.primitive, step.hlo.operand) == ("AllGather", ("X",), "mul", (64,))
    assert a.program.statements[0].steps == []


def test_unary_ops_keep_the_primed_name_and_a_note_names_them(audits):
    residual, gated = audits["residual"], audits["gated"]
    assert not any("elementwise ops of one tensor" in n for n in residual.notes)  # gelu is written
    assert not any("elementwise ops of one tensor" in n for n in gated.notes)  # silu is written
    exact = audits["exact_gelu"]  # gelu's erf form is not the notation's gelu (its tanh form): primed
    assert (
        exact.program.text == "x[B, D] · w_in[D, F_X] -> H1[B, F_X]\nH1'[B, F_X] · w_out[F_X, D] -> Out[B, D]"
    )
    assert [n for n in exact.notes if n.startswith("elementwise ops of one tensor")] == [
        "elementwise ops of one tensor (copy, erfc, mul, neg) are not written: a value they make from one "
        "tensor (and constants) is that tensor primed (H1'), in the layout XLA gave it"
    ]
    gpt2 = audits["gpt2_gelu"]  # 0.5 * h * (1 + tanh(...)), written out: gelu too
    assert [st.text for st in gpt2.program.statements][1] == "gelu(H1[B, F_X]) -> H2[B, F_X]"
    assert not any("elementwise ops of one tensor" in n for n in gpt2.notes)
    doubled = audits["doubled_gelu"]  # h * (1 + tanh(...)): the chain's constants are not gelu's
    assert not any(st.op == "gelu" for st in doubled.program.statements)
    assert doubled.program.statements[1].lhs.name == "H1'"
    assert any(
        n.startswith("elementwise ops of one tensor (logistic) are not written")
        for n in audits["gates"].notes
    )
    assert not any("elementwise ops of one tensor" in n for n in audits["affine"].notes)  # none unary


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_program_and_xlas_plans_parse_and_are_legal(audits, name):
    a = audits[name]
    mesh = Mesh(a.program.mesh)
    assert list(check(a.program.text, mesh, a.program.sizes)) == []
    for v in a.verdicts:
        assert list(check(v.xla_plan, mesh, a.program.sizes)) == []
        plan, notes = program_plan(parse(v.xla_plan), mesh, a.program.sizes)
        assert not any("priced by its cheapest plan" in n for n in notes), notes  # XLA's steps as read
        run = run_plan(plan, mesh, {d: 16 for d in a.program.sizes}, np.random.default_rng(0))
        assert run.ok, (v.xla_plan, run.problem, run.max_error)


@pytest.mark.parametrize(
    ("name", "function"),
    [("affine", "affine"), ("gated", "gated_mlp"), ("residual", "residual_mlp"), ("relu", "relu_mlp")],
)
def test_xlas_plans_of_the_program_compute_jaxs_output(audits, name, function):
    """``(x @ w) * g - c``, the gated MLP (its silu recognised) and the residual MLP (its gelu recognised:
    the executor's gelu is jax.nn.gelu's tanh form) leave no op out, so the program is the
    whole function: XLA's plans of its statements, run one after the other on the virtual mesh (every
    collective as data movement, inputs cut by their shardings), give what jax computes on the same inputs."""
    import jax.numpy as jnp

    spec = importlib.util.spec_from_file_location("elementwise", CASES)
    assert spec is not None and spec.loader is not None
    elementwise_cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(elementwise_cases)

    a = audits[name]
    assert not any("'" in t for st in a.program.statements for t in (st.lhs.name, st.rhs.name))
    rng = np.random.default_rng(0)
    dense = {t.name: rng.standard_normal([a.program.sizes[d] for d, _ in t.dims]) for t in a.program.inputs}
    mesh = Mesh(a.program.mesh)
    plan, notes = program_plan(parse("\n".join(v.xla_plan for v in a.verdicts)), mesh, a.program.sizes)
    assert notes == ()
    placed = place_inputs(plan, mesh, a.program.sizes, rng, dense)
    out = unshard(
        execute_plan(plan, mesh, placed.buffers, placed.sizes).buffers[plan.output], plan.output, mesh
    )
    fn = getattr(elementwise_cases, function)
    want = np.asarray(fn(*(jnp.asarray(dense[t.name], jnp.float32) for t in a.program.inputs)), dtype=float)
    assert out.shape == want.shape
    assert np.max(np.abs(out - want)) <= 1e-5 * np.max(np.abs(want))  # jax's float32 against float64


def test_backward_reads_the_elementwise_statements_without_misattributing(audits):
    """With ``--backward``: shardalg's derived backward is of the whole program, its elementwise statements
    too; each backward collective is paired only with a forward collective it is the transpose of (same op
    pair, axes and shard bytes). The residual's AllReduce pairs with the product's; the add's reshard has no
    backward collective (XLA's gradient of a sum is replicated), and no pair is claimed."""
    res = audits["residual"].backward
    assert res is not None and not res.problem
    assert [(p.op, p.forward.op, p.forward.before.name) for p in res.pairs] == [
        ("AllReduce", "AllReduce", "H3")
    ]
    assert res.matches_derived
    re_ = audits["reshard"].backward
    assert re_.pairs == [] and ("AllToAll", ("X",)) in re_.derived
    for name in ("gain", "gated"):
        b = audits[name].backward
        assert b is not None and not b.problem and b.derived
        for p in b.pairs:
            assert p.forward is None or (p.forward.op, p.op) in {
                ("AllGather", "ReduceScatter"),
                ("ReduceScatter", "AllGather"),
                ("AllReduce", "AllReduce"),
                ("AllToAll", "AllToAll"),
            }


def test_a_div_of_two_tensors_is_a_tensor_of_its_own_and_a_note_says_so(audits):
    a = audits["quotient"]
    assert a.program.text == "E1'[B, D] · w[D, F] -> Out[B, F]"
    assert (
        "E1' is made by div of x, y, an elementwise op the audit does not write: it is written as a tensor "
        "of its own, in the layout XLA gave it" in a.notes
    )
    assert any(n.startswith("elementwise ops of one tensor (mul) are not written") for n in a.notes)
    assert a.backward is not None and not a.backward.problem


def test_a_line_with_several_products_attaches_only_what_one_of_them_alone_needs(audits):
    """Three products on one source line, x sharded over X like the weights' F: XLA gathers x once for the
    first two products and all-reduces the last one's partial sums, both collectives' metadata naming a
    dot_general on that line. The AllReduce is what the last product alone needs to meet (the others meet
    or need a gather), so it is its step, and its plan is ranked; the shared gather completes two products,
    so it is listed apart with a note, and those two are not priced as if XLA had planned them as shardalg's
    best (their local products do not meet without it)."""
    a = audits["one_line"]
    assert [st.op for st in a.program.statements] == ["·", "silu", "·", ".*", "·"]
    assert [(s.op, s.hlo.primitive) for s in a.program.outside] == [("AllGather", "dot_general")]
    assert [s.op for s in a.program.statements[4].steps] == ["AllReduce"]
    assert a.verdicts[4].rank == 1 and a.verdicts[4].problem == ""
    assert any("3 products on line" in n and n.endswith("it is listed apart") for n in a.notes)
    assert any(
        "attached to the one whose local product it alone makes meet, H4[B, F_X] · w2" in n for n in a.notes
    )
    for v in (a.verdicts[0], a.verdicts[2]):
        assert v.problem.startswith("XLA's plan as read is incomplete") and v.xla_seconds is None
        assert v.rank is None and not v.flagged
    assert all(v.problem == "" and v.rank == 1 for v in (a.verdicts[1], a.verdicts[3]))


def test_an_output_made_by_unwritten_ops_is_named_in_a_note(audits):
    a = audits["squashed"]
    assert a.program.text == "x[B_X, D] · w[D, F] -> H1[B_X, F]"
    assert "the function's output is H1', made by ops the program does not write" in a.notes
    assert any(n.startswith("elementwise ops of one tensor (tanh) are not written") for n in a.notes)
