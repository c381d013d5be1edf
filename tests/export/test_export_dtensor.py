"""The DTensor form of the torch export (``export_torch(..., dtensor=True)``): distribute_tensor with the
plan's placements, each collective a redistribute, run on 4 gloo processes against the dense einsum, for the
book's four cases and the Megatron MLP forward and backward."""

from __future__ import annotations

import pytest

from shardalg.algebra.mesh import Mesh
from shardalg.errors import UsageError
from shardalg.notation.parse import parse

pytest.importorskip("torch", reason="torch is not installed (pip install 'shardalg[torch]'); CI installs it")

from shardalg import plan  # noqa: E402
from shardalg.export.torch_check import check_torch  # noqa: E402
from shardalg.export.torch_export import export_torch  # noqa: E402
from shardalg.planning.backward import backward  # noqa: E402

MESH = Mesh(X=2, Y=2)
BOOK_CASES = {
    "case 1": "A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",
    "case 2": "A[I, J_X] · B[J, K] -> C[I, K]",
    "case 3": "A[I, J_X] · B[J_X, K] -> C[I, K_X]",
    "case 4": "A[I_X, J] · B[J, K_X] -> C[I_X, K]",
}
MEGATRON = "X[B, D] · W1[D, F_Y] -> H[B, F_Y]; H[B, F_Y] · W2[F_Y, D] -> Out[B, D]"
SIZES = {"I": 1024, "J": 1024, "K": 1024}  # which plan is the cheapest depends on them: plan makes none up


def _jobs() -> dict[str, object]:
    jobs: dict[str, object] = {n: plan(parse(e).statements[0], MESH, SIZES) for n, e in BOOK_CASES.items()}
    jobs["megatron forward"] = parse(MEGATRON)
    jobs["megatron backward"] = backward(parse(MEGATRON), MESH)
    jobs["partial input"] = plan(parse("C[I, K]{U_X} -> C[I, K_X]").statements[0], MESH, SIZES)
    # a rename moves nothing; its result then gathered over X (the keys of sequence parallelism)
    jobs["rename"] = plan(parse("rename_{I,J}(A[I_X, K_Y]) -> Ar[J, K_Y]").statements[0], MESH, SIZES)
    return jobs


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    jobs = _jobs()
    return dict(zip(jobs, check_torch(list(jobs.values()), MESH, dtensor=True), strict=True))


@pytest.mark.parametrize(
    "name", [*BOOK_CASES, "megatron forward", "megatron backward", "partial input", "rename"]
)
def test_dtensor_form_equals_dense(results: dict, name: str) -> None:
    r = results[name]
    assert r.ok, r.message
    assert r.max_error < 1e-5


def test_dtensor_module_reads_like_pytorch() -> None:
    src = export_torch(_jobs()["case 3"], MESH, dtensor=True)
    assert "from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor" in src
    assert "return init_device_mesh(device_type, MESH_SHAPE, mesh_dim_names=MESH_AXES)" in src
    assert "IN_PLACEMENTS = ([Shard(1), Replicate()], [Shard(0), Replicate()])" in src
    assert "return tuple(distribute_tensor(x, mesh, p) for x, p in zip((A, B), IN_PLACEMENTS))" in src
    assert (
        "C = DTensor.from_local(torch.einsum('ab,bc->ac', A.to_local(), B.to_local()), mesh, "
        "[Partial(), Replicate()], run_check=False)"
    ) in src
    assert "C_1 = C.redistribute(mesh, [Shard(1), Replicate()])" in src
    assert "def _distribute" not in src and "import torch.distributed as dist" not in src
    compile(src, "case3.py", "exec")


def test_no_dtensor_form_for_axes_out_of_mesh_order() -> None:
    p = plan(parse("A[I_YX, J] -> A[I, J]").statements[0], MESH, SIZES)
    with pytest.raises(UsageError, match=r"no DTensor form for A\[I_YX, J\]"):
        export_torch(p, MESH, dtensor=True)
