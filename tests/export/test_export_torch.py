"""Plans exported as torch.distributed code, run by 8 gloo processes on CPU against the dense einsum; and
DTensor's own placement arithmetic checked against shardalg's blocks."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.notation.parse import parse_tensor as T

pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it")

from shardalg.export.torch_check import check_torch  # noqa: E402
from shardalg.export.torch_export import export_torch  # noqa: E402
from tests.shared.plans import HAND_PLANS, MESH, PROGRAMS, WRONG, chain, col  # noqa: E402


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    """Every plan and program in one launch of 8 forked gloo ranks (about 20 s on 2 cores)."""
    hand, progs = sorted(HAND_PLANS), sorted(PROGRAMS)
    jobs = [HAND_PLANS[n] for n in hand] + [WRONG] + [PROGRAMS[n] for n in progs]
    got = check_torch(jobs, MESH)
    names = [f"hand:{n}" for n in hand] + ["wrong"] + [f"program:{n}" for n in progs]
    return dict(zip(names, got, strict=True))


@pytest.mark.parametrize("name", sorted(HAND_PLANS))
def test_hand_plan_runs_on_gloo_and_equals_dense(results: dict, name: str) -> None:
    r = results[f"hand:{name}"]
    assert r.ok, r.message
    assert r.max_error < 1e-5


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_planned_program_runs_on_gloo_and_equals_dense(results: dict, name: str) -> None:
    r = results[f"program:{name}"]
    assert r.ok, r.message


def test_a_wrong_plan_fails_the_check(results: dict) -> None:
    r = results["wrong"]
    assert not r.ok and r.max_error > 0.5


def test_four_ranks_and_a_permute_on_three_axes() -> None:
    plan = chain(col("Permute", "XZ", "A[I_X, J]", "A[I_Z, J]"))
    (r,) = check_torch(plan, Mesh(X=2, Y=1, Z=2))
    assert r.ok, r.message


def test_shift_exports_as_send_and_receive() -> None:
    src = export_torch(HAND_PLANS["shift"], MESH)
    # rank (x, y) receives from ((x - 1) mod 4, y): ranks are row-major, y fastest
    assert "A2 = _permute(A, [6, 7, 0, 1, 2, 3, 4, 5])  # Shift_{X,+1}" in src


def test_generated_module_reads_like_the_plan() -> None:
    src = export_torch(HAND_PLANS["fsdp_tp"], MESH)
    assert "    return init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_AXES)\n" in src
    assert "MESH_AXES = ('X', 'Y')\nMESH_SHAPE = (4, 2)\n" in src
    assert "In_1 = _all_gather(In, mesh.get_group('Y'), dim=1)" in src
    assert "Out_1 = _reduce_scatter(Out, mesh.get_group('Y'), dim=1)" in src
    assert "Out_1: Out[B_X, D_Y], DTensor placements [Shard(0), Shard(1)]" in src
    assert "def forward(In, Win, Wout, mesh):" in src
    # only the helpers it calls: no all-to-all, permute, slice or reduce, no hand-made groups
    defined = sorted(line[4 : line.index("(")] for line in src.splitlines() if line.startswith("def "))
    assert defined == ["_all_gather", "_by_rank", "_reduce_scatter", "forward", "make_mesh"]
    assert "new_group" not in src and "mesh_coords" not in src
    compile(src, "fsdp_tp.py", "exec")


def test_each_module_defines_only_what_it_calls() -> None:
    """Every helper a generated module defines is called in it (by another helper or by forward)."""
    for name, plan in sorted(HAND_PLANS.items()):
        src = export_torch(plan, MESH)
        helpers = [line[4 : line.index("(")] for line in src.splitlines() if line.startswith("def _")]
        for h in helpers:
            assert src.count(f"{h}(") >= 2, (name, h)
        assert "import itertools" not in src


def test_axes_out_of_mesh_order_pass_the_block_order() -> None:
    src = export_torch(HAND_PLANS["gather_yx"], MESH)
    # position p = c_Y * 4 + c_X lives on group rank c_X * 2 + c_Y
    assert "_all_gather(A, _group(mesh, ('X', 'Y')), dim=0, order=[0, 2, 4, 6, 1, 3, 5, 7])" in src
    assert 'return mesh[axes]._flatten("_".join(axes)).get_group()' in src
    assert "no DTensor spelling" in src


_DTENSOR = r"""
import json, sys
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Partial, Replicate, Shard
from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
cases = json.loads(sys.argv[1])
out = []
for rank in range(8):
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=8)
    mesh = init_device_mesh("cpu", (4, 2), mesh_dim_names=("X", "Y"))
    out.append([list(map(list, compute_local_shape_and_global_offset(shape, mesh, eval(pl))))
                for shape, pl in cases])
    dist.destroy_process_group()
print(json.dumps(out))
"""


def test_dtensor_cuts_like_shardalg() -> None:
    """For each rank, DTensor's local shape and offset under to_placements(t) are shardalg's block
    (device coordinates row-major, a dim's axes major first): the X-major claim of specs.py, measured."""
    from shardalg.export.specs import placements_source

    tensors = [T(s) for s in ("A[I_XY, J]", "A[I_X, J_Y]", "A[I, J_XY]", "A[I_Y, J_X]", "A[I, J]{U_X}")]
    shape = (16, 8)
    cases = [(shape, placements_source(t, MESH)) for t in tensors]
    run = subprocess.run([sys.executable, "-c", _DTENSOR, json.dumps(cases)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    for rank, coords in enumerate(itertools.product(range(4), range(2))):
        at = dict(zip(("X", "Y"), coords, strict=True))
        for t, (local, offset) in zip(tensors, got[rank], strict=True):
            want_local, want_offset = [], []
            for d, n in zip(t.dims, shape, strict=True):
                parts, index = 1, 0
                for a in d.axes:
                    size = MESH.size(a)
                    parts, index = parts * size, index * size + at[a]
                want_local.append(n // parts)
                want_offset.append(index * (n // parts))
            assert (local, offset) == (want_local, want_offset), (rank, t)
