"""Plans over sub-axes exported to torch (DTensor placements and plain torch.distributed) on the device mesh
reshaped into the factors they name, run on 8 gloo processes against the dense result (issue 26 item 6)."""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.planning.planner import plans

pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it")

from shardalg.export.torch_check import check_torch  # noqa: E402
from shardalg.export.torch_export import export_torch  # noqa: E402

MESH = Mesh(X=2, Y=4)
SIZES = {"I": 16, "J": 8, "K": 8}


def _jobs() -> list[object]:
    return [
        plans("A[I_X, J] -> A[I_Y, J]", MESH, SIZES)[0],  # Slice_{Y:(2)2}, Permute_{X,Y:(1)2}
        plans("A[I, J_{Y:(2)2}] · B[J_Y, K] -> C[I, K]", MESH, SIZES)[0],
    ]


def test_dtensor_form_of_subaxis_plans_equals_dense() -> None:
    jobs = _jobs()
    src = export_torch(jobs[0], MESH, dtensor=True)
    assert "MESH_AXES = ('X', 'Y:(1)2', 'Y:(2)2')" in src and "MESH_SHAPE = (2, 2, 2)" in src
    for r in check_torch(jobs, MESH, sizes=SIZES, dtensor=True):
        assert r.ok, r.message
