"""Bounded work: every limit of ``shardalg.limits`` is enforced up front with a LimitExceeded that names it and
says how to lift it, lifting it (``lifted`` or ``--max-<name>``) lets the input through, and the docs'
table is the module's."""

from __future__ import annotations

import re

import pytest

from shardalg import limits
from shardalg.algebra.legality import check
from shardalg.algebra.mesh import Mesh
from shardalg.api import plan, plans
from shardalg.cli import build_parser
from shardalg.errors import LimitExceeded, UsageError
from shardalg.notation.parse import parse
from shardalg.numeric.devices import VirtualMesh
from shardalg.numeric.execute import run_plan
from shardalg.pictures.show import show
from shardalg.planning.backward import backward
from tests.shared import ROOT

EIGHT_AXES = ",".join(f"A{i}=2" for i in range(8))
DIMS_33 = "A[" + ", ".join(f"D{i}" for i in range(33)) + "]"


def _refused(name: str, fn, *args, **kwargs) -> LimitExceeded:
    with pytest.raises(LimitExceeded) as info:
        fn(*args, **kwargs)
    err = info.value
    assert isinstance(err, UsageError) and err.rule == f"limit-{name}"
    assert f"over the {name} limit of {limits.value(name):,}" in err.message
    if limits.LIMITS[name].liftable:
        assert err.fix is not None and err.fix.startswith(f"lift it with --max-{name} ")
        assert f"shardalg.limits.lifted({name}=" in err.fix
    return err


# (limit, a call over it, the same call lifted)
CASES = [
    ("text", lambda: parse("A[I]  # " + "x" * 50_000)),
    ("statements", lambda: parse("A[I]\n" * 1001)),
    ("dims", lambda: check(DIMS_33)),
    ("axes", lambda: check("A[I_A0]", EIGHT_AXES)),
    ("devices", lambda: VirtualMesh(Mesh.parse("X=16,Y=32"))),
    ("devices", lambda: show("A[I_X, J]", "X=16,Y=32")),
    ("elements", lambda: run_plan(plan("A[I_X, J] -> A[I, J]", "X=2"), "X=2", {"I": 2048, "J": 2048})),
]


@pytest.mark.parametrize(("name", "call"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_over_a_limit_is_refused_up_front_and_lifting_it_lets_it_through(name, call):
    _refused(name, call)
    with limits.lifted(**{name: limits.value(name) * 4096}):
        call()


def test_the_planner_refuses_too_many_axes_before_it_starts():
    # issue 13: plan --all of this statement on 8 axes of size 2 took 27 s and 680 MB
    err = _refused("axes", plans, "X[B_A0, D] · W[D_A1, F] -> Z[B, F_A2]", EIGHT_AXES)
    assert err.message.startswith(
        "the mesh A0, A1, A2, A3, A4, A5, A6, A7 has 8 axes, over the axes limit of 4"
    )


def test_sizes_over_64_bits_are_refused_without_being_converted():
    _refused("size", Mesh, X=10**5000)
    _refused("size", Mesh.parse, "X=" + "9" * 5000)
    _refused("size", parse, "A[" + "9" * 30 + "]")
    _refused("size", check, "A[I_X]", "X=2", {"I": 2**63})
    assert Mesh(X=2**63 - 1).devices == 2**63 - 1


def test_depth_and_size_cannot_be_lifted_and_unknown_limits_are_named():
    for name in ("depth", "size"):
        with pytest.raises(LimitExceeded, match="cannot be changed"), limits.lifted(**{name: 10}):
            pass
    with pytest.raises(LimitExceeded, match="no limit is called 'axis'"), limits.lifted(axis=8):
        pass


def test_lifting_is_scoped_to_the_with_block():
    with limits.lifted(axes=7):
        with limits.lifted(devices=512):
            assert (limits.value("axes"), limits.value("devices")) == (7, 512)
        assert limits.value("devices") == limits.LIMITS["devices"].value
    assert limits.value("axes") == limits.LIMITS["axes"].value


def test_every_liftable_limit_is_an_option_of_the_commands_that_read_notation():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for command in ("parse", "check", "shape", "plan", "simulate", "backward", "cost", "export", "show"):
        options = {o for a in sub.choices[command]._actions for o in a.option_strings}
        for limit in limits.LIMITS.values():
            assert (f"--max-{limit.name}" in options) is limit.liftable, (command, limit.name)


def test_the_docs_list_every_limit_with_its_value():
    section = (ROOT / "docs" / "limits.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([\d,]+) ?(\w*) \| (.+?) \| (.+?) \| (.+?) \|$", section, flags=re.M)
    assert [r[0] for r in rows] == list(limits.LIMITS)
    for name, value, unit, bounds, why, lift in rows:
        limit = limits.LIMITS[name]
        assert (int(value.replace(",", "")), unit, bounds, why) == (
            limit.value,
            limit.unit,
            limit.bounds,
            limit.why,
        )
        assert lift == (f"`--max-{name} N`" if limit.liftable else "fixed")


def test_the_fuzz_finding_on_five_axes_is_refused_and_plans_on_four():
    # issue 13 fuzzing: this statement took up to 7.6 s to plan and 21 s to differentiate on 5-axis meshes
    # (size-1 axes included: an axis of size 1 is searched like any other); 4 axes is the default limit
    stmt = "A: bf16[I_XY, J]{U_Z} · W_in[J, K_{data,model}] -> C[I, K]"
    for mesh in (Mesh(X=4, Y=4, Z=4, data=4, model=4), Mesh(X=2, Y=1, Z=1, data=1, model=1)):
        for call in (plans, backward, check):
            err = _refused("axes", call, stmt, mesh)
            assert "has 5 axes, over the axes limit of 4" in err.message
    assert plans("A: bf16[I_XY, J]{U_Z} · W_in[J, K_{data}] -> C[I, K]", Mesh(X=2, Y=2, Z=2, data=2))
