"""Audits of jax functions on 8 CPU devices (one jax subprocess for every case of this module, ~20 s): the
four matmul cases of chapter 3, an FSDP and a Megatron MLP, a resharding through a sub-axis, a poor sharding,
jax.grad of the Megatron MLP, and the errors of bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardalg.cli import main

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.api import plans as plans_of  # noqa: E402
from shardalg.audit.report import report_json, report_text  # noqa: E402
from shardalg.audit.run import AuditJob, audit_files, run_jobs  # noqa: E402
from shardalg.costs.costmodel import CostModel  # noqa: E402
from shardalg.costs.plancost import costed  # noqa: E402
from shardalg.costs.programplan import program_plan  # noqa: E402
from shardalg.errors import ShardalgError  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402
from shardalg.notation.syntax import Op  # noqa: E402

CASES = str(Path(__file__).with_name("cases.py"))
SIZES = {"I": 64, "J": 128, "K": 32, "B": 64, "D": 128, "F": 256}
MLP = f"{CASES}:mlp"
MATMUL = f"{CASES}:matmul"

# name: (target, inputs, mesh, sizes, backward)
JOBS = {
    "case1": (MATMUL, "A: bf16[I_X, J]; B: bf16[J, K_Y]", "X=2,Y=4", SIZES, False),
    "case2": (MATMUL, "A: bf16[I, J_X]; B: bf16[J, K]", "X=8", SIZES, False),
    "case3": (MATMUL, "A: bf16[I, J_X]; B: bf16[J_X, K]", "X=8", SIZES, False),
    "case4": (MATMUL, "A: bf16[I_X, J]; B: bf16[J, K_X]", "X=8", SIZES, False),
    "fsdp": (MLP, "x: bf16[B_X, D]; w_in: bf16[D_X, F]; w_out: bf16[F_X, D]", "X=8", SIZES, False),
    "megatron": (MLP, "x: bf16[B, D]; w_in: bf16[D, F_Y]; w_out: bf16[F_Y, D]", "Y=8", SIZES, True),
    "fsdp_grad": (MLP, "x: bf16[B_X, D]; w_in: bf16[D_X, F]; w_out: bf16[F_X, D]", "X=8", SIZES, True),
    "subaxis": (MATMUL, "A: bf16[I_X, J]; B: bf16[J, K_X]", "X=2,Y=4", SIZES, False),
    "poor": (MATMUL, "A: bf16[I_XY, J]; B: bf16[J_XY, K]", "X=2,Y=4", {"I": 8, "J": 4096, "K": 4096}, False),
    "no_trace": (f"{CASES}:branches_on_data", "A: bf16[I_X, J]; B: bf16[J, K]", "X=8", SIZES, False),
    "not_callable": (f"{CASES}:NOT_A_FUNCTION", "A: bf16[I_X, J]; B: bf16[J, K]", "X=8", SIZES, False),
}


@pytest.fixture(scope="module")
def audits() -> dict[str, object]:
    jobs = [AuditJob.of(t, [i], Mesh.parse(m), s, backward=b) for t, i, m, s, b in JOBS.values()]
    return dict(zip(JOBS, audit_files(jobs), strict=True))


# name: (the program, XLA's plan of each statement)
EXPECTED = {
    "case1": (["A[I_X, J] · B[J, K_Y] -> Out[I_X, K_Y]"], ["A[I_X, J] · B[J, K_Y] -> Out[I_X, K_Y]"]),
    "case2": (
        ["A[I, J_X] · B[J, K] -> Out[I, K]"],
        [
            "Slice_{X,J}(B[J, K]) -> B[J_X, K]\n"
            "A[I, J_X] *_LOCAL B[J_X, K] -> Out[I, K]{U_X}\n"
            "AllReduce_X(Out[I, K]{U_X}) -> Out[I, K]"
        ],
    ),
    "case3": (
        ["A[I, J_X] · B[J_X, K] -> Out[I, K]"],
        ["A[I, J_X] *_LOCAL B[J_X, K] -> Out[I, K]{U_X}\nAllReduce_X(Out[I, K]{U_X}) -> Out[I, K]"],
    ),
    "case4": (
        ["A[I_X, J] · B[J, K_X] -> Out[I_X, K]"],
        ["AllGather_X(B[J, K_X]) -> B[J, K]\nA[I_X, J] · B[J, K] -> Out[I_X, K]"],
    ),
    "fsdp": (
        [
            "x[B_X, D] · w_in[D_X, F] -> H1[B_X, F]",
            "gelu(H1[B_X, F]) -> H2[B_X, F]",
            "H2[B_X, F] · w_out[F_X, D] -> Out[B_X, D]",
        ],
        [
            "AllGather_X(w_in[D_X, F]) -> w_in[D, F]\nx[B_X, D] · w_in[D, F] -> H1[B_X, F]",
            "gelu(H1[B_X, F]) -> H2[B_X, F]",
            "AllGather_X(w_out[F_X, D]) -> w_out[F, D]\nH2[B_X, F] · w_out[F, D] -> Out[B_X, D]",
        ],
    ),
    "megatron": (
        [
            "x[B, D] · w_in[D, F_Y] -> H1[B, F_Y]",
            "gelu(H1[B, F_Y]) -> H2[B, F_Y]",
            "H2[B, F_Y] · w_out[F_Y, D] -> Out[B, D]",
        ],
        [
            "x[B, D] · w_in[D, F_Y] -> H1[B, F_Y]",
            "gelu(H1[B, F_Y]) -> H2[B, F_Y]",
            "H2[B, F_Y] *_LOCAL w_out[F_Y, D] -> Out[B, D]{U_Y}\nAllReduce_Y(Out[B, D]{U_Y}) -> Out[B, D]",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_audit_writes_the_program_and_xlas_plan(audits, name):
    a = audits[name]
    program, plans = EXPECTED[name]
    assert [st.text for st in a.program.statements] == program
    assert [v.xla_plan for v in a.verdicts] == plans
    assert a.program.outside == []


def _communicating(steps) -> list[tuple[str, tuple[str, ...], str]]:
    """The collectives of a plan's steps (a local product, a function on each block and a free slice aside)."""
    return sorted((s["op"], tuple(s["axes"]), s["tensor"]) for s in steps if Op(s["op"]).communicates)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_xlas_plan_is_among_shardalg_plan_all(audits, name, capsys):
    """Independently of the audit's own ranking: ``shardalg plan --all --format json`` of each statement lists
    a plan with exactly XLA's collectives (op, axes, tensor), free slices aside."""
    a = audits[name]
    mesh = ",".join(f"{k}={n}" for k, n in a.program.mesh.items())
    sizes = ",".join(f"{k}={n}" for k, n in sorted(a.program.sizes.items()))
    for st, v in zip(a.program.statements, a.verdicts, strict=True):
        assert main(["plan", "--all", st.text, "--mesh", mesh, "--sizes", sizes, "--format", "json"]) == 0
        found = json.loads(capsys.readouterr().out)
        xla = _communicating([{"op": s.op, "axes": s.axes, "tensor": s.before.name} for s in st.steps])
        theirs = [
            _communicating([{**s, "tensor": s["before"].split("[")[0]} for s in p["steps"]])
            for p in found["plans"]
        ]
        assert xla in theirs, (st.text, xla, theirs)
        assert v.rank is not None and v.xla_seconds is not None


def test_a_resharding_through_a_sub_axis_is_written_with_it(audits):
    """Case 4 on X=2, Y=4: XLA slices B's K block over the major half of Y (a dynamic-slice), permutes the
    blocks to K_Y and gathers over Y. The sub-axis is found from the permute's source-target pairs; the
    permute renames X to Y:(1)2 to Y:(2)2 (one collective-permute, a cycle of three names)."""
    a = audits["subaxis"]
    (v,) = a.verdicts
    assert v.xla_plan.splitlines()[:3] == [
        "Slice_{Y:(1)2,K}(B[J, K_X]) -> B[J, K_{X,Y:(1)2}]",
        "Permute_{X,Y:(1)2,Y:(2)2}(B[J, K_{X,Y:(1)2}]) -> B[J, K_Y]",
        "AllGather_Y(B[J, K_Y]) -> B[J, K]",
    ]
    assert a.program.sub_axes == ("Y:(1)2", "Y:(2)2")
    data = report_json(a)
    assert data["statements"][0]["xla_steps"][0]["sub_axes"] == ["Y:(1)2"]


def test_a_sub_axis_plan_is_priced_against_the_best_plan_on_the_factored_mesh(audits):
    """XLA's sub-axis plan is priced like any other (no "cannot be priced"), and shardalg's plans are searched
    on X=2, Y=2x2, the sub-axes XLA used. The prices are the cost model's of each plan as written: XLA's
    (a permute over three names, then a gather over Y=4) costs more than gathering B over X alone."""
    a = audits["subaxis"]
    (v,) = a.verdicts
    assert v.problem == "" and v.xla_seconds is not None and v.xla_bytes is not None
    assert "--mesh X=2,Y=2x2" in " ".join(v.notes)
    mesh = Mesh("X=2,Y=4")
    sizes = {"I": 64, "J": 128, "K": 32}
    costs = CostModel.of("tpu-v5p")
    xla = costed(program_plan(parse(v.xla_plan), mesh, sizes)[0], mesh, sizes, costs).seconds
    assert v.xla_seconds == pytest.approx(xla)
    ours = plans_of(v.statement.text, Mesh("X=2,Y=2x2"), sizes, hw="tpu-v5p")
    assert v.best_seconds == pytest.approx(costed(ours[0], mesh, sizes, costs).seconds)
    assert v.flagged and v.ratio == pytest.approx(xla / v.best_seconds)
    assert "FLAG" in report_text(a) and "cannot be priced" not in report_text(a)


def test_a_poor_sharding_is_flagged_with_the_cheaper_plan_and_the_ratio(audits):
    """A small activation and a 32 MB weight (bf16) both sharded over all 8 devices: XLA gathers the weight;
    moving the activation (AllToAll) and scattering the partial result costs a fraction of it."""
    a = audits["poor"]
    (v,) = a.verdicts
    assert v.xla_plan.startswith("AllGather_XY(B[J_XY, K]) -> B[J, K]")
    assert v.flagged and v.ratio > 10
    assert a.flagged == [v]
    assert "AllToAll_{XY,J}(A[I_XY, J]) -> A[I, J_XY]" in v.best_plan
    assert "ReduceScatter_{XY,I}(Out[I, K]{U_XY}) -> Out[I_XY, K]" in v.best_plan
    assert v.xla_bytes == 7 * 4096 * 4096 * 4 // 8 * 1 or v.xla_bytes > 100 * v.best_bytes
    hlo = report_json(a)["statements"][0]["xla_steps"][0]["hlo"]
    assert hlo["operand"] == [512, 4096] and hlo["replica_groups"] == [list(range(8))]
    assert hlo["operand_bytes"] == 512 * 4096 * {"f32": 4, "bf16": 2}[hlo["dtype"]]
    text = report_text(a)
    assert f"# FLAG: XLA's plan costs {v.ratio:.3g}x shardalg's best" in text
    assert "# verdict: 1 of 1 statements flagged" in text


def test_grad_of_megatron_pairs_each_backward_collective_with_its_forward_transpose(audits):
    a = audits["megatron"]
    b = a.backward
    assert b is not None and b.pairs
    assert b.all_paired
    assert [(p.op, p.axes, p.forward.op, p.forward.axes) for p in b.pairs] == [
        ("AllReduce", ("Y",), "AllReduce", ("Y",))
    ]
    assert b.matches_derived  # and shardalg's derived backward communicates the same
    text = report_text(a)
    assert "is the transpose of the forward AllReduce_Y(Out[B, D]{U_Y}) -> Out[B, D]" in text
    assert "# 1 of 1 backward collectives are transposes of forward ones" in text


def test_a_function_that_does_not_trace_is_one_error(audits):
    err = audits["no_trace"]
    assert isinstance(err, ShardalgError)
    assert "branches_on_data" in str(err) and "does not trace" in str(err)
    assert "Traceback" not in str(err)


def test_a_name_that_is_no_function_is_one_error(audits):
    err = audits["not_callable"]
    assert isinstance(
        err, ShardalgError
    ) and "cases.py:NOT_A_FUNCTION: NOT_A_FUNCTION is an int, not a function" in str(err)


def test_a_mesh_larger_than_the_devices_is_one_error():
    job = AuditJob.of(MATMUL, ["A[I_X, J]; B[J, K]"], Mesh.parse("X=8"), SIZES)
    from shardalg.audit.run import _job_json

    (run,) = run_jobs([_job_json(job)], devices=4)
    assert not run["ok"]
    assert run["error"] == "the mesh has 8 devices, jax here has 4"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [f"{CASES}:matmul", "--inputs", "A[I_X, J]; B[J, K]", "--mesh", "X=4", "--sizes", "I=6,J=8,K=8"],
            "input A: dim I of 6 does not divide over the 4 devices of X",
        ),
        (
            ["no/such/file.py:f", "--inputs", "A[I, J]", "--mesh", "X=4", "--sizes", "I=8,J=8"],
            "no such file: no/such/file.py",
        ),
        (
            [f"{CASES}:nope", "--inputs", "A[I, J]", "--mesh", "X=4", "--sizes", "I=8,J=8"],
            "has no function 'nope'",
        ),
        (
            [f"{CASES}", "--inputs", "A[I, J]", "--mesh", "X=4", "--sizes", "I=8,J=8"],
            "an audit target is FILE.py:FUNCTION",
        ),
        (
            [f"{CASES}:matmul", "--inputs", "A[I, J]; B[J, K]", "--mesh", "X=4", "--sizes", "I=8"],
            "the size of dim J is not given",
        ),
        (
            [f"{CASES}:matmul", "--inputs", "A[I, J]; B[J, K]", "--mesh", "X=512", "--sizes", "I=8,J=8,K=8"],
            "the mesh X=512 (one CPU device each)",
        ),
        (
            [f"{CASES}:matmul", "--inputs", "A[I_Z, J]; B[J, K]", "--mesh", "X=4", "--sizes", "I=8,J=8,K=8"],
            "the mesh has no axis Z",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(["audit", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err, err
    assert "Traceback" not in err


def test_grad_of_fsdp_lists_xlas_backward_beside_shardalgs_derived(audits):
    """On CPU, XLA's backward of the FSDP MLP has every collective of shardalg's derived backward (the weights
    gathered again, the activations' gradients moved by AllToAll) and one more: an AllReduce of a whole
    weight gradient where the derived backward leaves it in the weight's sharding. None is the transpose of a
    forward AllGather (no ReduceScatter), and the report lists each."""
    from collections import Counter

    b = audits["fsdp_grad"].backward
    xla = Counter((p.op, p.axes) for p in b.pairs)
    ours = Counter((op, tuple(ax)) for op, ax in b.derived)
    assert xla - ours == Counter({("AllReduce", ("X",)): 1})
    assert not ours - xla
    assert not b.matches_derived and not any(p.forward for p in b.pairs)
    text = report_text(audits["fsdp_grad"])
    assert "AllReduce_X (131072 bytes a shard, line 14): no forward collective transposes to it" in text
    assert "(not the same as XLA's)" in text


def test_latex_report_parses_back_and_html_flags(audits):
    """The LaTeX fragment writes each plan with the notation's LaTeX printer: every block parses back to
    the plan the text report shows, a plan with a sub-axis too (the notation writes sub-axes)."""
    import re

    from shardalg.audit.report import report_html, report_latex
    from shardalg.notation.parse import parse

    a = audits["poor"]
    tex = report_latex(a)
    blocks = re.findall(r"\\\[\n(.*?)\n\\\]", tex, flags=re.S)
    assert parse(blocks[0]) == parse(a.program.text)
    assert parse(blocks[1]) == parse(a.verdicts[0].xla_plan)
    assert "\\textbf{FLAG}" in tex and f"${a.verdicts[0].ratio:.3g}\\times$" in tex
    assert "<b>FLAG" in report_html(a)
    sub = report_latex(audits["subaxis"])
    assert "verbatim" not in sub and "Y{:}(1)2" in sub


@pytest.mark.parametrize("name", [*sorted(EXPECTED), "poor"])
def test_xlas_plan_as_read_runs_on_the_virtual_mesh_and_equals_the_dense_product(audits, name):
    """XLA's plan of each statement, as the audit writes it, is executed by the numeric executor (random
    data cut by the shardings, every collective as data movement) and equals the dense product."""
    import numpy as np

    from shardalg.algebra.mesh import Mesh
    from shardalg.costs.programplan import program_plan
    from shardalg.notation.parse import parse
    from shardalg.numeric.execute import run_plan

    a = audits[name]
    mesh = Mesh(a.program.mesh)
    sizes = {d: 16 for d in a.program.sizes}  # small, divisible by every axis
    for v in a.verdicts:
        plan, _ = program_plan(parse(v.xla_plan), mesh, sizes)
        result = run_plan(plan, mesh, sizes, np.random.default_rng(0))
        assert result.ok, (v.xla_plan, result.problem, result.max_error)
