"""Step time: the overlap policies, the MFU factor, the inference roofline (compute, HBM reads of weights and KV
cache, communication), tokens and days, and the policy mapping."""

from __future__ import annotations

import pytest
import sympy

from shardalg.algebra.symbols import dim_size, quantity
from shardalg.errors import NoteWarning, UsageError
from shardalg.models.inference import Roofline
from shardalg.models.step import step_time
from shardalg.planning.overlap import OverlapPolicy
from shardalg.planning.symbolic import NeedsSizes, piecewise

B, D, F, S, H = (dim_size(n) for n in "BDFSH")
C, W_ICI, W_HBM, T_MIN = (quantity(n) for n in ("C", "W_ici", "W_hbm", "T_min"))
FSDP = "params W\ntokens B\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]"


DF = {D: 4096, F: 16384}


def _gathering_w(overlap: str):
    """FSDP's step where its plans gather W: the piece B > 6144 of the step with B unknown (below it the
    planner moves the activations instead; no batch is made up to choose)."""
    with pytest.raises(NeedsSizes):
        step_time(FSDP, mesh="X=4", sizes="D=4096,F=16384", overlap=overlap)
    pieces = piecewise(lambda: step_time(FSDP, mesh="X=4", sizes="D=4096,F=16384", overlap=overlap))
    assert [w for w, _ in pieces] == ["B < 16384/9", "16384/9 < B < 6144", "B > 6144"]
    return pieces[-1][1]


def test_steady_is_the_max_per_phase_and_serial_the_sum():
    steady, serial = _gathering_w("steady"), _gathering_w("serial")
    (p,), (q,) = steady.parts, serial.parts
    want = (6 * B * D * F / (4 * C)).subs(DF)  # forward 2BDF + backward 4BDF, over 4 devices
    assert p.compute == q.compute == want
    # forward AllGather of W, backward AllGather again and ReduceScatter of dW: three collectives of 2DF bytes
    one = sympy.Max(2 * T_MIN, 2 * D * F / W_ICI).subs(DF)
    assert p.comms == 3 * one
    # steady: each pass's collectives hide behind its own compute (issue 27): the forward's gather behind the
    # forward's 2BDF/4, the backward's gather and ReduceScatter behind its 4BDF/4; the passes add
    forward = sympy.Max(2 * B * D * F / (4 * C), one).subs(DF)
    backward = sympy.Max(4 * B * D * F / (4 * C), 2 * one).subs(DF)
    assert sympy.simplify(p.total - (forward + backward)) == 0
    assert q.total == q.compute + q.comms


def test_mfu_scales_compute_only():
    full = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p")
    forty = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p", mfu=0.4)
    assert forty.seconds_of(forty.parts[0].compute) == pytest.approx(
        full.seconds_of(full.parts[0].compute) / 0.4
    )
    assert forty.seconds_of(forty.parts[0].comms) == full.seconds_of(full.parts[0].comms)
    said = dict(full.notes)["compute"]
    assert said.startswith("MFU peak (1: C at the chip's peak") and "--mfu sets one" in said
    assert "compute" not in dict(forty.notes)  # chosen, so not a default: said in the header and the JSON
    assert "MFU 0.4, HBM peak" in str(forty).splitlines()[0]
    for bad in (0, 1.5, "x"):
        with pytest.raises(UsageError, match="MFU"):
            step_time(FSDP, mesh="X=4", mfu=bad)


def test_tokens_per_second_and_days():
    s = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p", tokens=1e12)
    assert s.tokens == 65536
    assert s.tokens_per_second == pytest.approx(65536 / s.seconds)
    assert s.days == pytest.approx(1e12 / s.tokens_per_second / 86400)
    untokened = step_time(
        "params W\nIn[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh="X=4", sizes="B=65536,D=4096,F=16384"
    )
    assert untokened.tokens is None and any(k == "tokens" for k, _ in untokened.notes)


DECODE = """params W
kvcache Kc
tokens B
Q[B, H] * Kc[B, S_X, H] -> Sc[B, S_X]
P[B, S_X] * W[S, D] -> O[B, D]"""
# S < 2*D: gathering P is the projection's cheapest plan at every batch (the batch cancels: B stays unknown)
DECODE_SIZES = {S: 1024, D: 4096}
DECODE_AT = "S=1024,D=4096"


def test_decode_is_a_sum_of_per_op_rooflines_with_the_kv_read_its_own_op():
    s = step_time(DECODE, mesh="X=4", sizes=DECODE_AT)
    (p,) = s.parts
    assert s.analysis.mode == "infer" and s.roofline is Roofline.PER_OP
    attention, projection = p.ops
    # the attention reads the KV cache: its local bytes (sharded over X, bf16) at W_hbm, its product's compute
    assert attention.kv_read and attention.name == "attention (KV-cache read: Kc)"
    assert sympy.simplify(attention.memory - (2 * B * S * H / 4 / W_HBM).subs(DECODE_SIZES)) == 0
    assert sympy.simplify(attention.compute - (2 * B * S * H / 4 / C).subs(DECODE_SIZES)) == 0
    assert attention.comms == 0 and attention.total == sympy.Max(attention.compute, attention.memory)
    # the projection reads W whole (the gathered P is an activation, not an HBM read counted), and under
    # steady its AllGather of P hides behind it
    assert not projection.kv_read
    assert sympy.simplify(projection.memory - (2 * S * D / W_HBM).subs(DECODE_SIZES)) == 0
    assert sympy.simplify(projection.compute - (2 * B * S * D / C).subs(DECODE_SIZES)) == 0
    assert projection.comms == sympy.Max(2 * T_MIN, 2 * B * S / W_ICI).subs(DECODE_SIZES)
    assert projection.total == sympy.Max(projection.compute, projection.memory, projection.comms)
    # the step is the sum of the ops' rooflines, not one max over the step
    assert p.total == attention.total + projection.total
    assert sympy.expand(p.memory - attention.memory - projection.memory) == 0
    # serial: the communication adds to the op it belongs to
    (q,) = step_time(DECODE, mesh="X=4", sizes=DECODE_AT, overlap="serial").parts
    sa, sp = q.ops
    assert sp.total == sympy.Max(sp.compute, sp.memory) + sp.comms and q.total == sa.total + sp.total


def test_the_whole_step_roofline_stays_a_named_policy():
    """The older accounting: one max over the part (steady) or the sum of the three (serial)."""
    s = step_time(DECODE, mesh="X=4", sizes=DECODE_AT, roofline="whole-step")
    (p,) = s.parts
    assert s.roofline is Roofline.WHOLE_STEP and p.ops == ()
    assert p.total == sympy.Max(p.compute, p.memory, p.comms)
    # HBM reads: the KV cache's local bytes (sharded over X) and the weight's (gathered P, whole W), not the
    # activations; compute: both local products
    assert sympy.expand(p.memory - ((2 * B * S * H / 4 + 2 * S * D) / W_HBM).subs(DECODE_SIZES)) == 0
    assert sympy.expand(p.compute - ((2 * B * S * H / 4 + 2 * B * S * D) / C).subs(DECODE_SIZES)) == 0
    serial = step_time(DECODE, mesh="X=4", sizes=DECODE_AT, overlap="serial", roofline="whole-step").parts[0]
    assert serial.total == p.compute + p.memory + p.comms
    assert s.to_json()["roofline"] == "whole-step" and "whole-step" in str(s).splitlines()[0]
    with pytest.raises(UsageError, match="per-op, whole-step"):
        step_time(DECODE, mesh="X=4", sizes=DECODE_AT, roofline="max")
    with pytest.raises(UsageError, match="prices an inference step"):
        step_time(FSDP, mesh="X=4", roofline="per-op")


def test_a_kv_cache_no_product_reads_is_read_by_the_attention_from_its_role():
    """A program that declares its cache but leaves the attention core out: the read is priced from the
    role (the cache's local bytes), as its own op."""
    program = "params W\nkvcache Kc\nKc[B, S_X, H]\nIn[B, D] * W[D, F] -> Out[B, F]"
    s = step_time(program, mesh="X=4")
    (p,) = s.parts
    names = [o.name for o in p.ops]
    assert names == ["In[B, D] * W[D, F] -> Out[B, F]", "attention (KV-cache read: Kc)"]
    attention = p.ops[1]
    assert sympy.simplify(attention.memory - 2 * B * S * H / 4 / W_HBM) == 0 and attention.compute == 0
    assert p.total == p.ops[0].total + attention.memory


def test_the_overlap_policies_meet_plan_cost_in_one_place():
    assert [OverlapPolicy.of(p) for p in ("schedule", "steady", "serial")] == list(OverlapPolicy)
    at = "B=65536,D=4096,F=16384"
    assert step_time(FSDP, mesh="X=4", sizes=at, overlap=OverlapPolicy.SERIAL).policy is OverlapPolicy.SERIAL
    assert step_time(FSDP, mesh="X=4", sizes=at, overlap="serial").to_json()["overlap"] == "serial"
    with pytest.raises(UsageError, match="schedule, steady, serial"):
        step_time(FSDP, mesh="X=4", overlap="overlapped")


@pytest.mark.parametrize("sizes", ["B=64,D=8192,F=32768", "B=65536,D=4096,F=16384", "B=4096,D=1024,F=4096"])
def test_a_schedule_lies_between_steady_and_serial(sizes):
    """The step's dependencies give back some of the overlap that steady assumes across layers, never more
    than serial's sum (numbers on a v5p, communication- and compute-bound sizes)."""
    reports = {
        p: step_time(FSDP, mesh="X=4", sizes=sizes, hw="tpu-v5p", overlap=p)
        for p in ("steady", "schedule", "serial")
    }
    t = {p: r.seconds_of(r.total) for p, r in reports.items()}
    assert t["steady"] <= t["schedule"] * (1 + 1e-12) and t["schedule"] <= t["serial"] * (1 + 1e-12)


def test_json_shape():
    data = step_time(FSDP, mesh="X=4", sizes="B=4096,D=1024,F=4096", hw="tpu-v5e", tokens=1e9).to_json()
    assert set(data) == {
        "mode",
        "overlap",
        "roofline",
        "mfu",
        "efficiency",
        "chip",
        "layers",
        "parts",
        "step",
        "flops",
        "tokens_per_step",
        "tokens_per_second",
        "train_tokens",
        "days",
        "defaults",
        "zero",
        "microbatches",
        "conventions",
    }
    assert data["parts"][0]["bound"] in ("compute", "comms", "hbm")
    assert isinstance(data["step"]["seconds"], float) and data["flops"]["total"] == 6 * 4096 * 1024 * 4096
    assert data["roofline"] is None and data["parts"][0]["ops"] == []  # training: no per-op roofline
    assert data["efficiency"]["compute"] == {"value": 1.0, "peak": True, "source": "no measured figure given"}


@pytest.mark.parametrize("mode", ["infer", "train"])
@pytest.mark.parametrize("policy", ["schedule", "steady", "serial"])
def test_step_seconds_is_model_steps_total_in_numbers(mode, policy):
    """The search's fast path (step_seconds, no formula) prices a part as model_step does, under every policy
    (it once took the maximum for an inference step under serial, where model_step adds)."""
    from shardalg.models.analysis import analyze
    from shardalg.models.program import model_program
    from shardalg.models.step import model_step, step_seconds

    model = model_program(FSDP, "X=4", "B=4096,D=1024,F=4096")
    a = analyze(model, mode, None)
    report = model_step(a, "tpu-v5p", policy)
    fast = {p.name: p.total for p in step_seconds(a, "tpu-v5p", policy)}
    for part in report.parts:
        assert fast[part.name] == pytest.approx(report.seconds_of(part.total), rel=1e-9), part.name


def test_seconds_of_refuses_text():
    """User text never reaches sympy's parser: seconds_of takes the report's expressions (or numbers) only."""
    s = step_time(FSDP, mesh="X=4", sizes="B=65536,D=4096,F=16384", hw="tpu-v5p")
    assert s.seconds_of(2.5) == 2.5
    with pytest.raises(UsageError, match="seconds_of takes an expression"):
        s.seconds_of("__import__('os').getcwd()")


def test_a_step_plans_each_statement_by_bytes_as_its_plans_convention_says():
    """The ``plans`` convention is what the step does: its statement runs the planner's first plan by bytes,
    here not the one ``plan --hw`` ranks first by seconds (a ReduceScatter over both axes of an h100 mesh
    across nodes against a gather over the node's axis), and the output says so."""
    import shardalg as sa

    stmt = "A[I, J_XY] · B[J_XY, K] -> C[I_X, K_Y]"
    mesh, sizes = "X=16,Y=8", "I=4096,J=8192,K=8192"
    by_bytes = sa.plan(stmt, mesh=mesh, sizes=sizes)
    with pytest.warns(NoteWarning, match="spans 16 h100 nodes"):  # placed in nodes, as the step is
        by_seconds = sa.plan(stmt, mesh=mesh, sizes=sizes, hw="h100")
    assert str(by_bytes) != str(by_seconds)  # the two rankings disagree on this statement
    report = step_time(f"params B\ntokens I\n{stmt}", mesh=mesh, sizes=sizes, hw="h100")
    (planned,) = report.analysis.forward_plans.values()
    assert str(planned) == str(by_bytes)
    said = {c["key"]: c["value"] for c in report.to_json()["conventions"]}
    assert "fewest bytes communicated" in said["plans"] and "plan --hw" in said["plans"]
