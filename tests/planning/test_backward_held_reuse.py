"""A statement's gradients never remake a layout they hold: a collective whose output the backward holds
already, made by a gradient of the same forward statement, is dropped, with the steps that only led to it.

The fuzzer's random layers found it: ``In - In -> V0`` resharded ``dV0`` into ``In``'s layout twice, by two
routes of three steps each, once for each operand. On 200 random layers (seed 5) 9 of 1,699 collectives
remade a layout held; now 6 of 1,688. Three of those six are functions whose statistics reduction writes a
new value (no remake), and three read a layout another statement's gradient made: those stay, since the
search prices each statement's backward alone (:mod:`shardalg.search.pieces`) and a candidate's step must equal
the sum of its statements' prices (``tests/search/test_pieces.py``).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.traffic import Sizes
from shardalg.notation.parse import parse, parse_tensor
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Op
from shardalg.numeric.gradcheck import gradcheck
from shardalg.planning.backward import backward
from shardalg.planning.held import Held
from shardalg.planning.redistribute import plan_bytes
from shardalg.planning.reuse import reuse
from shardalg.planning.verify import verify
from tests.fuzz.inputs import _layers

READ_TWICE = "In[B_YZ, T, D_X] - In[B_YZ, T, D_X] -> V0[B_XYZ, T, D]"
MESH = "X=2,Y=2,Z=3"
SIZES = {"B": 12, "T": 12, "D": 12, "F": 12}


def remade(bw) -> list[Step]:
    """The collectives (not functions: a statistics reduction writes a new value) whose output, with no partial
    sums, the gradients of their own forward statement had made and the backward still held when they ran."""
    held, out, made = Held(), [], set()
    for g in bw.grads:
        for s in g.plan.steps:
            found = s.output in held.layouts(s.output.name or "")
            if not s.op.computes and not s.output.unreduced and (g.einsum, s.output) in made and found:
                out.append(s)
            held.ran(s)
            made.add((g.einsum, s.output))
    return out


@pytest.mark.parametrize("defer", [False, True])
def test_a_value_read_twice_reshards_its_cotangent_once(defer: bool) -> None:
    bw = backward(READ_TWICE, MESH, SIZES, defer_reductions=defer)
    wanted = parse_tensor("dV0[B_YZ, T, D_X]")
    makers = [s for g in bw.grads for s in g.plan.steps if s.output == wanted]
    assert len(makers) == 1, str(bw.program())  # one route (three steps), read by both operands' gradients
    assert sum(len(g.plan.collectives) for g in bw.grads) == 3, str(bw.program())
    assert remade(bw) == []
    assert gradcheck(bw).ok, str(bw.program())
    report = verify(READ_TWICE, bw.program(), MESH, SIZES, defer_reductions=defer)
    assert report.ok and report.findings == (), str(report)


def test_the_steps_to_a_held_layout_are_dropped_but_a_version_the_other_gradient_reads() -> None:
    """A plan gathers ``dC`` over Y, then X, into ``dC[I, K]``, which is held: both gathers go, unless the
    other gradient of the product reads the first one's output (``keep``)."""
    mesh, sizes = Mesh(X=2, Y=2), Sizes({"I": 8, "K": 8})
    dc, half, whole = (parse_tensor(t) for t in ("dC[I_X, K_Y]", "dC[I_X, K]", "dC[I, K]"))
    steps = (Step(Op.ALL_GATHER, (dc,), half, ("Y",), "K"), Step(Op.ALL_GATHER, (half,), whole, ("X",), "I"))
    p = Plan((dc,), steps, whole)
    held = Held()
    held.computed("dC", dc)
    held.moved("dC", "dC", whole)  # made by another route before this plan
    dropped = reuse(p, set(), held, {whole})
    assert dropped.steps == () and dropped.inputs == (whole,)
    assert (
        plan_bytes(p, mesh, sizes)
        != plan_bytes(dropped, mesh, sizes)
        == plan_bytes(Plan((whole,), (), whole), mesh, sizes)
    )
    kept = reuse(p, set(), held, {whole}, frozenset({half}))
    assert kept.steps == steps[:1] and set(kept.inputs) == {dc, whole}
    unheld = Held()
    unheld.computed("dC", dc)
    assert reuse(p, set(), unheld, set()) is p  # nothing held: the plan as it was
    assert reuse(p, set(), held, set()) is p  # held, but another statement's gradient made it


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_layers(), st.sampled_from(["X=2,Y=2,Z=3", "X=2,Y=3,Z=2", "X=3,Y=2,Z=2"]), st.booleans())
def test_no_random_layer_remakes_a_held_layout(source: str, mesh: str, defer: bool) -> None:
    program = parse(source)
    bw = backward(program, mesh, SIZES, defer_reductions=defer)
    assert remade(bw) == [], str(bw.program())
    report = verify(program, bw.program(), mesh, SIZES, defer_reductions=defer)
    assert report.ok, f"{bw.program()}\n{report}"
