"""Plans exported as jax.shard_map modules, run on 8 fake CPU devices against the dense einsum.

Every check runs in one subprocess per batch (``XLA_FLAGS=--xla_force_host_platform_device_count=8`` is set
there, not here), so this process's jax, if any, is untouched.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from shardalg.algebra.mesh import Mesh

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.export.jax import check_jax, export_jax, jax_backward_collectives  # noqa: E402
from tests.shared.plans import HAND_PLANS, MESH, PROGRAMS, WRONG, chain, col  # noqa: E402


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """Every plan and program of this module in one subprocess (about 30 s on 2 cores), vjp included."""
    hand, progs = sorted(HAND_PLANS), sorted(PROGRAMS)
    jobs = [HAND_PLANS[n] for n in hand] + [WRONG] + [PROGRAMS[n] for n in progs]
    got = check_jax(jobs, MESH, vjp=True)
    names = [f"hand:{n}" for n in hand] + ["wrong"] + [f"program:{n}" for n in progs]
    return dict(zip(names, got, strict=True))


@pytest.mark.parametrize("name", sorted(HAND_PLANS))
def test_hand_plan_runs_and_equals_dense(results: dict, name: str) -> None:
    r = results[f"hand:{name}"]
    assert r.ok, r.message
    assert r.max_error < 1e-5


def test_a_wrong_plan_fails_the_check(results: dict) -> None:
    r = results["wrong"]
    assert not r.ok
    assert r.max_error > 0.5
    assert "differs from the dense result" in r.message


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_planned_program_runs_and_equals_dense(results: dict, name: str) -> None:
    r = results[f"program:{name}"]
    assert r.ok, r.message


# On one axis (X=8) no mesh axis is idle, so a gradient's cheapest plan is the transpose XLA takes: jax.vjp of
# the generated forward has exactly the collectives shardalg's derived backward plans. On the 2-axis MESH the
# derived backward may do better than the transpose: it slices a gradient over an idle axis before reducing it
# (Slice_Y, ReduceScatter_X on half the bytes, AllGather_Y), which moves fewer bytes per device; those programs
# are checked on numbers instead (test_derived_backward_runs_in_jax_and_equals_dense).
MESH1 = Mesh({"X": 8})
ONE_AXIS = ("case2", "case3", "case4_bare", "dp", "fsdp")


@pytest.fixture(scope="module")
def results_1d() -> dict[str, object]:
    """The one-axis programs on X=8, vjp included (one subprocess)."""
    got = check_jax([PROGRAMS[n] for n in ONE_AXIS], MESH1, vjp=True)
    return dict(zip(ONE_AXIS, got, strict=True))


@pytest.mark.parametrize("name", ONE_AXIS)
def test_vjp_uses_the_collectives_shardalg_backward_derives(results_1d: dict, name: str) -> None:
    """jax.vjp of the generated forward (gathered copies rematerialized, as shardalg's backward assumes)
    has exactly the backward collectives that shardalg.planning.backward plans: the cases, DP and FSDP."""
    from shardalg.planning.backward import backward

    assert results_1d[name].ok, results_1d[name].message
    ours = sorted((op, tuple(sorted(axes))) for op, axes in backward(PROGRAMS[name], MESH1).collectives)
    assert sorted(results_1d[name].backward) == ours


def test_vjp_collectives_by_name(results_1d: dict) -> None:
    expected = {
        "dp": [("AllReduce", ("X",))],
        "fsdp": [("AllGather", ("X",)), ("ReduceScatter", ("X",))],
        "case3": [],
    }
    for name, want in expected.items():
        assert sorted(results_1d[name].backward) == want, name


def test_bare_case_4_backward_is_what_jax_vjp_runs(results_1d: dict) -> None:
    """The forward's plan gathers B; jax.vjp of it (the gathered copy rematerialized) re-gathers B and
    reduce-scatters dB, exactly the collectives the derived backward plans (issue 13, on X=8)."""
    assert sorted(results_1d["case4_bare"].backward) == [("AllGather", ("X",)), ("ReduceScatter", ("X",))]


@pytest.fixture(scope="module")
def backward_runs() -> dict[str, object]:
    """Derived backward programs exported and run against the dense gradient einsums (one subprocess)."""
    from shardalg.planning.backward import backward

    sizes = {"I": 16, "J": 16, "K": 16}  # equal sizes: the forward gathers B (with K larger it gathers A)
    one = {
        "case4": backward(PROGRAMS["case4_bare"], MESH1, sizes),
        "case4_kept": backward(PROGRAMS["case4_bare"], MESH1, sizes, keep_gathered=True),
    }
    two = {
        "joint": backward("A[I, J] * B[J, K] -> C[I_Y, K_X]", MESH, sizes),
        "case4_idle_axis": backward(PROGRAMS["case4_bare"], MESH, sizes),
        **{f"program:{n}": backward(PROGRAMS[n], MESH, sizes) for n in sorted(PROGRAMS)},
    }
    got = check_jax(list(one.values()), MESH1, sizes=sizes) + check_jax(list(two.values()), MESH, sizes=sizes)
    jobs = {**one, **two}
    return {name: (jobs[name], r) for name, r in zip(jobs, got, strict=True)}


@pytest.mark.parametrize("name", ["case4", "case4_kept", "joint"])
def test_derived_backward_runs_in_jax_and_equals_dense(backward_runs: dict, name: str) -> None:
    bw, r = backward_runs[name]
    assert r.ok, r.message
    expected = {
        "case4": (("AllGather", ("X",)), ("ReduceScatter", ("X",))),  # on X=8
        "case4_kept": (("ReduceScatter", ("X",)),),  # on X=8
        "joint": (("AllGather", ("Y", "X")),),  # one gather of dC serves both gradients
    }[name]
    assert bw.collectives == expected


@pytest.mark.parametrize("name", ["case4_idle_axis", *(f"program:{n}" for n in sorted(PROGRAMS))])
def test_every_derived_backward_on_two_axes_equals_dense_in_jax(backward_runs: dict, name: str) -> None:
    """On X=4, Y=2 the derived backward may use the idle axis (case 4: Slice_Y, then ReduceScatter_X of half of
    dB, AllGather_Y): whatever it plans, exported to JAX it computes the dense gradients."""
    bw, r = backward_runs[name]
    assert r.ok, r.message


def test_shift_exports_as_a_cyclic_ppermute() -> None:
    src = export_jax(HAND_PLANS["shift"], MESH)
    assert "A2 = jax.lax.ppermute(A, 'X', perm=[(0, 1), (1, 2), (2, 3), (3, 0)])  # Shift_{X,+1}" in src


def test_backward_collectives_helper() -> None:
    (found,) = jax_backward_collectives(PROGRAMS["case1"], MESH)
    assert sorted(found) == [("AllReduce", ("X",)), ("AllReduce", ("Y",))]


def test_permute_on_three_axes() -> None:
    """A[I_X, J] -> A[I_Z, J] is one ppermute over (X, Z): each device swaps its X and Z coordinates."""
    plan = chain(col("Permute", "XZ", "A[I_X, J]", "A[I_Z, J]"))
    mesh = Mesh(X=2, Y=2, Z=2)
    src = export_jax(plan, mesh)
    assert "jax.lax.ppermute(A, ('X', 'Z'), perm=[(0, 0), (1, 2), (2, 1), (3, 3)])" in src
    (r,) = check_jax(plan, mesh)
    assert r.ok, r.message


def test_generated_fsdp_module_reads_like_the_plan() -> None:
    src = export_jax(HAND_PLANS["fsdp"], MESH)
    assert "IN_SPECS = (P('X', None), P('X', None))" in src
    assert "W_1 = jax.lax.all_gather(W, 'X', axis=0, tiled=True, to='varying')" in src
    assert "Out = jnp.einsum('ab,bc->ac', In, W_1)" in src
    assert "CHECK_VMA = True" in src
    compile(src, "fsdp.py", "exec")


def test_generated_unreduced_boundary_is_stacked() -> None:
    src = export_jax(chain(col("ReduceScatter", "Y", "C[I_X, K]{U_Y}", "C[I_XY, K]", "I")), MESH)
    assert "IN_SPECS = (P('Y', 'X', None),)" in src
    assert "C = C[0]  # this device's partial sum" in src
    assert "jax.lax.psum_scatter(C, 'Y', scatter_dimension=0, tiled=True)" in src


def test_exporting_does_not_import_jax() -> None:
    code = (
        "import sys; from shardalg.export.jax import export_jax; from shardalg.notation.parse import parse; "
        "export_jax(parse('A[I, J_X] * B[J, K] -> C[I, K]'), 'X=4'); print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_export_jax_backward_check_on_a_bare_case_4(capsys: pytest.CaptureFixture[str]) -> None:
    """`export jax --backward --check` on the case-4 product the backward used to refuse (issue 13)."""
    from shardalg.cli import main

    argv = ["export", "jax", "A[I_X, J] · B[J, K_X] -> C[I_X, K]", "--mesh", "X=8", "--backward", "--check"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "jax.lax.psum_scatter" in out and "check: ok on 8 CPU devices" in err
