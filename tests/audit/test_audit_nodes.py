"""An audit on a GPU chip prices XLA's plan and shardalg's best on the mesh placed into the chip's nodes
(``--mesh X=16 --hw h100`` is ``X=16:node8``), as ``shardalg cost`` does, and says so in its notes. Before,
its plans were ranked on the node split but priced as one NVLink domain of 16 GPUs, the stderr note saying
"priced as X=16:node8" all the same. One jax subprocess on 16 CPU devices (~5 s)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jax", reason="jax is not installed (pip install 'shardalg[jax]'); CI installs it")

from shardalg.algebra.mesh import Mesh  # noqa: E402
from shardalg.audit.report import report_json  # noqa: E402
from shardalg.audit.run import audit_file  # noqa: E402
from shardalg.costs.costmodel import CostModel  # noqa: E402
from shardalg.costs.nodes import _HOW  # noqa: E402
from shardalg.costs.plancost import costed  # noqa: E402
from shardalg.costs.programplan import program_plan  # noqa: E402
from shardalg.notation.parse import parse  # noqa: E402

MATMUL = f"{Path(__file__).with_name('cases.py')}:matmul"
SIZES = {"I": 64, "J": 128, "K": 32}


def _seconds(plan_text: str, mesh: str) -> float:
    m = Mesh.parse(mesh)
    plan, _ = program_plan(parse(plan_text), m, SIZES)
    return float(costed(plan, m, SIZES, CostModel.of("h100", None, None)).seconds)


def test_an_audit_on_a_gpu_prices_on_the_node_split_and_says_so() -> None:
    a = audit_file(MATMUL, ["A: bf16[I, J_X]; B: bf16[J_X, K]"], "X=16", SIZES, hw="h100")
    (v,) = a.verdicts
    split, flat = _seconds(v.xla_plan, "X=16:node8"), _seconds(v.xla_plan, "X=16")
    assert split != pytest.approx(flat)  # the two pricings differ: the test tells them apart
    assert v.xla_seconds == pytest.approx(split) and v.best_seconds == pytest.approx(split)
    note = f"mesh: X=16 spans 2 h100 nodes of 8 GPUs; priced as X=16:node8 {_HOW}"
    assert note in a.notes and note in report_json(a)["notes"]
    tpu = audit_file(MATMUL, ["A: bf16[I, J_X]; B: bf16[J_X, K]"], "X=16", SIZES, hw="tpu-v5p")
    assert not any(n.startswith("mesh:") for n in tpu.notes)  # a TPU has no node: nothing placed or said
