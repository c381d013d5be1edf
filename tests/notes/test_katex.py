"""Every LaTeX string shardalg produces renders in KaTeX (throwOnError, strict): printer output over
hypothesis-generated ASTs, the planner's plans, derived backward programs, cost formulas, derivations, the
proofs, and every fragment of the generated notes. Skips, saying why, only when node or katex is missing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.shared import strategies as ast
from tests.shared.notes_corpus import katex_errors, notes_document

SEED_MATMULS = (
    "A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]",
    "A[I, J_X] * B[J, K] -> C[I, K]",
    "A[I, J_X] * B[J_X, K] -> C[I, K]",
    "A[I, J_X] * B[J_X, K] -> C[I, K_X]",
    "A[I_X, J] * B[J, K_X] -> C[I, K_X]",
    "X[B, D] * Y[D_X, F] -> Z[B, F]",
    "In[B_X, D_Y] * Win[D_X, F_Y] -> Tmp[B_X, F_Y]",
    "A[I, J_X] * B[J_Y, K] -> C[I, K]",
)


def _assert_renders(fragments):
    errors = katex_errors(fragments)
    assert not errors, "\n".join(f"{e['where']}: {e['error']}\n  {e['latex']}" for e in errors[:10])


def test_the_harness_reports_errors():
    errors = katex_errors(
        [(r"\frac{1", True, "bad"), (r"A[I_X, J]", False, "good"), (r"\notacommand", True, "bad")]
    )
    assert [e["index"] for e in errors] == [0, 2]


@given(st.lists(ast.statements(), min_size=1, max_size=8), st.lists(ast.programs(), min_size=1, max_size=3))
def test_printer_output_renders(statements, programs):
    from shardalg.notation.printing import latex

    fragments = [(latex(s), False, f"statement {i}") for i, s in enumerate(statements)]
    fragments += [(latex(p), True, f"program {i}") for i, p in enumerate(programs)]
    fragments += [(latex(s, bold_names=True), False, "bold names") for s in statements]
    _assert_renders(fragments)


@given(st.lists(ast.tensors(), min_size=1, max_size=10))
def test_tensor_printer_output_renders(tensors):
    from shardalg.notation.printing import latex

    _assert_renders(
        [(latex(t), False, "tensor") for t in tensors]
        + [(t._repr_latex_().strip("$"), False, "repr") for t in tensors]
    )


def test_plans_costs_and_backward_render():
    from shardalg.algebra.mesh import Mesh
    from shardalg.costs.plancost import plan_cost
    from shardalg.numeric.proofs import sym_latex
    from shardalg.planning.backward import backward
    from shardalg.planning.planner import plans

    mesh = Mesh(X=4, Y=2)
    fragments = []
    for source in SEED_MATMULS:
        for p in plans(source, mesh=mesh):
            fragments.append((p.latex(), True, f"plan of {source}"))
            pc = plan_cost(p, mesh, hw="tpu-v5e")
            fragments += [(pc.latex(), True, "plan cost"), (sym_latex(pc.comms), False, "comms")]
    for program in (
        "In[B_X, D] * W[D, F] -> Out[B_X, F]",
        "In[B_X, D] * W[D_X, F] -> Out[B_X, F]",
        "In[B, D_Y] * Win[D, F_Y] -> Tmp[B, F_Y]\nTmp[B, F_Y] * Wout[F_Y, D] -> Out[B, D]",
    ):
        fragments.append((backward(program, mesh=mesh).latex(), True, f"backward of {program}"))
    assert len(fragments) > 30
    _assert_renders(fragments)


def test_derivations_render():
    from shardalg.algebra.mesh import Mesh
    from shardalg.costs.derive import compare, compute_bound, critical

    gather = "AllGather_X(Y[D_X, F]) -> Y[D, F]\nX[B, D] * Y[D, F] -> Z[B, F]"
    reduce = "X[B, D_X] *_LOCAL Y[D_X, F] -> Z[B, F]{U_X}\nAllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
    ds = [compare(reduce, gather, solve_for="D", regime=r, mesh=Mesh(X=None)) for r in ("comms", "compute")]
    ds.append(compute_bound(reduce, mesh=Mesh(X=None)))
    ds += [critical(hw=h) for h in ("tpu-v5e", "tpu-v4p")]
    _assert_renders(
        [(d.latex(), True, d.title) for d in ds] + [(d._repr_latex_().strip("$"), True, "repr") for d in ds]
    )


def test_proofs_render():
    from shardalg.numeric.proofs import run_all

    fragments = [(f, True, lemma.name) for lemma in run_all() for f in lemma.fragments()]
    _assert_renders(fragments)


def test_every_fragment_of_the_notes_renders():
    fragments = notes_document().fragments()
    assert len(fragments) > 100
    _assert_renders(fragments)


@pytest.mark.parametrize("bad", [r"\begin{aligned} a & b", r"x^{", r"\textbf{AllGather"])
def test_broken_fragments_fail(bad):
    assert katex_errors([(bad, True, "bad")])
