"""How objects show themselves: one short line for ``repr`` (a list of plans reads plan by plan), IPython's
``_repr_pretty_``, HTML tables for ranked plans, legality reports and the chips, and ``\\text{}`` that
MathJax without textmacros renders (no backslash escapes inside it)."""

from __future__ import annotations

import re

import shardalg as sa
from shardalg.notation.printing.display import html_table, seconds_text, short
from shardalg.notation.printing.symbology import latex_escape_text

MESH = sa.Mesh(X=4)


class FakePretty:
    """IPython's pretty printer, as far as _repr_pretty_ uses it."""

    def __init__(self) -> None:
        self.out = ""

    def text(self, s: str) -> None:
        self.out += s

    def break_(self) -> None:
        self.out += "\n"


def pretty(obj: object) -> str:
    p = FakePretty()
    obj._repr_pretty_(p, False)  # type: ignore[attr-defined]
    return p.out


def test_repr_of_a_plan_list_is_a_line_a_plan() -> None:
    found = sa.plans("A[I_X, J] · B[J, K_X] -> C[I_X, K]", MESH)
    assert repr(found) == (
        "[<Plan AllGather_X(B); A[I_X, J] · B[J, K_X] → C[I_X, K]>,\n"
        " <Plan AllGather_X(A), AllToAll_X(C); A[I_X, J] · B[J, K_X] → C[I_X, K]>,\n"
        " <Plan AllGather_X(A), AllGather_X(B), Slice_X(C); A[I_X, J] · B[J, K_X] → C[I_X, K]>]"
    )
    assert repr(list(found)).count("<Plan ") == 3 and len(repr(list(found))) < 300
    assert repr(found[0].steps[0]) == "<Step AllGather_X(B[J, K_X]) → B[J, K]>"
    assert pretty(found[0]) == (
        "<Plan AllGather_X(B); A[I_X, J] · B[J, K_X] → C[I_X, K]>\n"
        "    AllGather_X(B[J, K_X]) → B[J, K]\n"
        "    A[I_X, J] · B[J, K] → C[I_X, K]"
    )


def test_every_public_object_has_a_short_one_line_repr() -> None:
    program = sa.parse("In[B_X, D] · W[D_X, F] -> Out[B_X, F]")
    found = sa.plans(program.statements[0], MESH)
    objects = [
        program,
        program.statements[0],
        program.statements[0].expr,
        sa.parse_tensor("A: fp32[I_X, J]{U_Y}"),
        sa.parse_tensor("A[I_X, J]").dims[0],
        found[0],
        found[0].steps[0],
        MESH,
        sa.run_plan(found[0], MESH),
        sa.shape(sa.parse_tensor("A[I_X, J]"), MESH),
        *sa.check("A[I_X, J_X]", MESH),
        sa.backward(program, MESH, {"B": 8192, "D": 4096, "F": 16384}),  # sizes that decide its plans
        sa.backward(program, MESH, {"B": 8192, "D": 4096, "F": 16384}).grads[0],
        sa.verify("In[B_X, D] · W[D, F] -> Out[B_X, F]", "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]", MESH),
        sa.hardware.get("tpu-v5p"),
        sa.run_all(["alltoall_quarter"])[0],
    ]
    for obj in objects:
        r = repr(obj)
        assert "\n" not in r and len(r) <= 200, r
        assert "=Tensor(" not in r and "Dim(name=" not in r, r  # no dataclass dumps
        if hasattr(obj, "_repr_pretty_") and not isinstance(obj, sa.Plan):
            assert pretty(obj) == r
    assert repr(sa.parse_tensor("A: fp32[I_X, J]{U_Y}")) == "<Tensor A: fp32[I_X, J]{U_Y}>"
    assert repr(sa.run_plan(found[0], MESH)).startswith("<ExecResult ok: max relative error ")
    assert (
        repr(sa.check("A[I_X, J_X]", MESH))
        == "[<Violation [axis-used-twice] mesh axis X shards both I and J>]"
    )


def test_a_long_repr_says_what_it_cut() -> None:
    r = short("Program", " ".join(["A[I_X, J] · B[J, K] -> C[I_X, K];"] * 20))
    assert r.startswith("<Program A[I_X, J]") and re.search(r" \.\.\. \(\+\d+ characters\)>$", r)
    assert len(r) < 200


def test_ranked_plans_as_an_html_table() -> None:
    found = sa.plans("X[B, D] · Y[D_X, F] -> Z[B, F]", MESH, {"B": 512, "D": 8192, "F": 16384}, hw="tpu-v5p")
    html = found._repr_html_()
    assert html.startswith(
        "<table><caption>2 plans for X[B, D] · Y[D_X, F] → Z[B, F], cheapest first</caption>"
    )
    assert (
        "<th>#</th><th>collectives</th><th>bytes communicated</th><th>time on tpu-v5p (schedule)</th><th>steps</th>"
        in html
    )
    rows = re.findall(
        r"<tr><td>(\d)</td><td><code>([^<]*)</code></td><td>([\d,]+)</td><td>([^<]*)</td>", html
    )
    assert rows[0] == ("1", "Slice_X(X), AllReduce_X(Z)", "33,554,432", "261 µs")
    assert rows[-1][1:3] == ("AllGather_X(Y)", "268,435,456")
    # the column is the ranking's own time: each plan's cost on the chip under the same policy
    sizes = {"B": 512, "D": 8192, "F": 16384}
    times = [sa.cost(p, MESH, sizes=sizes, hw="tpu-v5p").seconds for p in found]
    assert [r[3] for r in rows] == [seconds_text(t) for t in times] and times == sorted(times)
    symbolic = sa.plans("A[I_X, J] · B[J, K_X] -> C[I_X, K]", MESH)._repr_html_()
    assert "<td>2*J*K</td>" in symbolic and "time on" not in symbolic


def test_legality_report_and_chips_as_html() -> None:
    html = sa.check("A[I_X, J] ·_LOCAL B[J, K_X] -> C[I, K]", sa.Mesh(X=4, Y=2))._repr_html_()
    assert "<caption>1 broken rule(s)</caption>" in html and "<td>case-4</td>" in html
    assert "fix: " not in html and "gather one operand first" in html
    assert "<caption>legal: no rule is broken</caption>" in sa.check("A[I_X, J]", MESH)._repr_html_()
    chips = sa.hardware.table()
    assert chips.count("<tr>") == 1 + len(sa.hardware.names())
    assert "<td>tpu-v5p</td>" in chips
    assert sa.hardware.get("tpu-v5e")._repr_html_().count("<tr>") == 2


def test_html_cells_are_escaped() -> None:
    assert html_table(["a<b"], [["x & y"]]) == (
        "<table><thead><tr><th>a&lt;b</th></tr></thead><tbody><tr><td>x &amp; y</td></tr></tbody></table>"
    )


def test_text_in_latex_has_no_backslash_escapes_that_mathjax_shows_literally() -> None:
    """MathJax without textmacros renders math inside \\text{} but shows \\_ or \\% there as typed (checked with
    mathjax-full 3.2.2, base and ams packages): every special character becomes a little $...$ instead."""
    escaped = latex_escape_text("AllReduce_X sums 50% & {U} ~ x^2 #1 $5 a\\b")
    outside_math = re.sub(r"\$[^$]*\$", "", escaped.replace(r"\$", ""))
    assert "\\" not in outside_math
    found = sa.plans("A[I, J_X] · B[J_X, K] -> C[I, K_X]", MESH)
    for match in re.finditer(r"\\text\{\((.*?)\)\}", found[0].latex()):
        assert "\\" not in re.sub(r"\$[^$]*\$", "", match[1]), match[1]


def test_cost_breakdown_and_derivation_show_themselves() -> None:
    found = sa.plans("A[I, J_X] · B[J_X, K] -> C[I, K_X]", MESH)
    c = sa.cost(found[0], MESH, sizes={"I": 1024, "J": 8192, "K": 4096}, hw="tpu-v5p")
    assert (
        repr(c)
        == "<PlanCost Max(2*T_min, 8388608/W_ici) + 17179869184/C = 84 µs; 2 steps, schedule, model ici>"
    )
    steady = sa.cost(found[0], MESH, sizes={"I": 1024, "J": 8192, "K": 4096}, hw="tpu-v5p", overlap="steady")
    assert (
        repr(steady)
        == "<PlanCost Max(17179869184/C, 2*T_min, 8388608/W_ici) = 46.6 µs; 2 steps, steady, model ici>"
    )
    html = c._repr_html_()
    assert "<th>step</th><th>bytes</th><th>communication (s)</th><th>compute (s)</th>" in html
    assert "<td><code>ReduceScatter_{X,K}(C[I, K]{U_X}) → C[I, K_X]</code></td><td>8388608</td>" in html
    assert html.count("<tr>") == 1 + len(c.steps) + 1  # header, a row a step, the totals
    a = sa.parse("X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]")
    b = sa.parse("X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]")
    d = sa.compare(a, b, "D", mesh=sa.Mesh(X=None))
    assert repr(d).endswith(": D > 2*B (6 steps)>") and "\n" not in repr(d)
    assert pretty(d) == repr(d) and pretty(c) == repr(c)


def test_seconds_and_bytes_read_as_a_person_writes_them() -> None:
    assert [seconds_text(t) for t in (45.0, 1.26e-3, 2.8e-4, 999.9e-6, 5e-10, 0.0, 3600 * 30)] == [
        "45 s",
        "1.26 ms",
        "280 µs",
        "1 ms",
        "0.5 ns",
        "0 s",
        "108,000 s",
    ]
    from shardalg.notation.printing.display import bytes_text

    assert bytes_text("16777216") == "16,777,216" and bytes_text("2*J*K") == "2*J*K"
