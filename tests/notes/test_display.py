"""What a notebook shows of each public result: a ``repr`` within a screen (at most 2,000 characters), HTML
tables for plans, costs, memory, step, fit and search, and a ``_repr_latex_`` that KaTeX renders; the package's
symbols (``sa.symbols``) substitute into its costs, and ``sa.latex`` prints every expression it returns."""

from __future__ import annotations

import re

import pytest
import sympy

import shardalg as sa
from tests.shared.notes_corpus import katex_errors

MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"
CHAIN = (
    "params W1, W2, W3\nIn[B, D] * W1[D, F] -> H1[B, F]\nH1[B, F] * W2[F, G] -> H2[B, G]\n"
    "H2[B, G] * W3[G, D] -> Out[B, D]"
)

# Every public result type: each must appear in the corpus below.
RESULT_TYPES = (
    "Plans",
    "Plan",
    "PlanCost",
    "Derivation",
    "BackwardProgram",
    "Program",
    "Violations",
    "ShapeInfo",
    "MemoryReport",
    "StepReport",
    "SearchResult",
    "Entry",
    "ChainResult",
    "ProgramMap",
    "StrategyMap",
    "Chip",
)
# The results a notebook shows as a table (the list: plans, costs, memory, step, fit, search).
HTML_TYPES = (
    "Plans",
    "PlanCost",
    "MemoryReport",
    "StepReport",
    "Derivation (fit)",
    "SearchResult",
    "ChainResult",
    "ProgramMap",
)


@pytest.fixture(scope="module")
def results() -> dict[str, object]:
    mesh = sa.Mesh(X=4, Y=2)
    sizes = {"I": 1024, "J": 1024, "K": 1024}
    # the long list: every plan of an einsum on three axes (20)
    many = sa.plans("A[I_X, J_Y] * B[J_Y, K_Z] -> C[I, K]", sa.Mesh(X=2, Y=2, Z=2))
    plans = sa.plans("A[I, J_X] * B[J_X, K] -> C[I, K]", mesh, sizes, hw="tpu-v5e")
    llama = sa.expand("llama-3-70b")
    fsdp_tp = sa.shard(llama, params="D=X,F=Y,K=Y", activations="B=X,F=Y,K=Y")
    v5p = sa.chip_from_text("base=tpu-v5p,hbm=96e9")
    memory = sa.memory(fsdp_tp, mesh="X=16,Y=4", sizes={"B": 64, "T": 4096}, hw=v5p, remat="block")
    # sizes unbound where they decide no plan (nothing sharded): the report's figures are formulas
    unbound = sa.memory("params W\nIn[B, D] * W[D, F] -> Out[B, F]", mesh="X=1", hw=v5p, remat="block")
    search = sa.search(
        MLP, mesh="X=2,Y=2", sizes="B=128,D=8192,F=32768", hw="tpu-v5e", memory="300MB", mode="infer"
    )
    pmap = sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes={"B": 48000, "D": 8192, "F": 32768})
    return {
        "Plans (many)": many,
        "Plans": plans,
        "Plan": plans[0],
        "PlanCost": sa.plan_cost(plans[0], mesh, hw="tpu-v5e"),
        "Derivation (compare)": sa.compare(plans[0], plans[-1], mesh=mesh),
        "Derivation (fit)": sa.largest(memory, "B"),
        "BackwardProgram": sa.backward(
            "In[B_X, D] * W[D_X, F] -> Out[B_X, F]", mesh, {"B": 8192, "D": 4096, "F": 16384}
        ),  # the sizes that decide its plans
        "Program": llama,
        "Violations": sa.check("A[I_X, J_X]", mesh),
        "ShapeInfo": sa.shape("A: fp32[I_X, J] where I=1024, J=4096", mesh),
        "MemoryReport": memory,
        "MemoryReport (a size unbound)": unbound,
        "StepReport": sa.step_time(
            sa.shard(llama, activations="B=X"),
            mesh="X=8960",
            sizes={"B": 8960, "T": 4096},
            hw="tpu-v5p",
            mfu=0.4,
            tokens=15e12,
        ),
        "SearchResult": search,
        "Entry": search.winner,
        "ChainResult": sa.search_chain(
            CHAIN, mesh="X=2,Y=2", sizes="B=64,D=256,F=4096,G=512", hw="tpu-v5e", mode="infer", memory="3MB"
        ),
        "ProgramMap": pmap,
        "StrategyMap": pmap.map,
        "Chip": sa.hardware.get("tpu-v5p"),
    }


def test_the_corpus_holds_every_public_result_type(results):
    assert {type(r).__name__ for r in results.values()} >= set(RESULT_TYPES)


def test_every_repr_fits_a_screen(results):
    long = {k: len(repr(r)) for k, r in results.items() if len(repr(r)) > 2000}
    assert not long, long
    assert len(results["Plans (many)"]) > 10, "the long list is longer than repr shows"
    assert f"and {len(results['Plans (many)']) - 10} more" in repr(results["Plans (many)"])


def test_reports_repr_as_one_line_saying_what_they_are(results):
    assert repr(results["MemoryReport"]) == (
        "<MemoryReport 70,553,706,496 parameters on X=16, Y=4 (train): 43 GB (40 GiB) per device, fits "
        "in HBM 96 GB (89.4 GiB) on tpu-v5p*>"
    )
    assert repr(results["StepReport"]).startswith("<StepReport step 9.83 s (training on tpu-v5p")
    assert "46.5 days" in repr(results["StepReport"])
    assert repr(results["Entry"]) == (
        "<Entry TP: params F=XY; activations F=XY -- 327 us, 268 MB per device, fits>"
    )
    assert repr(results["SearchResult"]).startswith("<SearchResult winner TP: params F=XY; activations F=XY")


@pytest.mark.parametrize("name", HTML_TYPES)
def test_tables_in_html(results, name):
    shown = results[name]._repr_html_()
    assert shown.startswith("<table>") and "<caption>" in shown and shown.count("<tr>") >= 2


def test_html_tables_hold_the_numbers(results):
    memory = results["MemoryReport"]._repr_html_()
    assert "<td>42,995,767,296</td><td>43 GB (40 GiB)</td>" in memory
    assert "<td>9.83 s</td>" in results["StepReport"]._repr_html_()
    assert "<td>result</td><td><code>192</code></td>" in results["Derivation (fit)"]._repr_html_()
    search = results["SearchResult"]._repr_html_()
    assert search.count("<tr>") == 1 + len(results["SearchResult"].rows())


def test_every_latex_repr_renders_in_katex(results):
    fragments = []
    for name, r in results.items():
        shown = getattr(r, "_repr_latex_", lambda: None)()
        if shown is None:
            continue
        m = re.fullmatch(r"\$\$(.*)\$\$|\$(.*)\$", shown, flags=re.S)
        assert m, f"{name}: _repr_latex_ is math between $ or $$ (Jupyter's convention): {shown[:80]}"
        fragments.append((m[1] if m[1] is not None else m[2], m[1] is not None, name))
    assert len(fragments) >= 12
    errors = katex_errors(fragments)
    assert not errors, "\n".join(f"{e['where']}: {e['error']}" for e in errors)


def test_search_repr_latex_is_math_not_a_tabular(results):
    assert "tabular" not in results["SearchResult"]._repr_latex_()
    assert (
        r"\begin{tabular}" in results["SearchResult"].latex()
    )  # the document's table stays for --format latex


def test_symbols_are_the_package_s():
    mesh = sa.Mesh(X=4, Y=2)
    chosen = sa.plan(
        "A[I, J_X] * B[J_X, K] -> C[I, K]", mesh, {"I": 1024, "J": 8192, "K": 4096}
    )  # sizes decide
    cost = sa.plan_cost(chosen, mesh, hw="tpu-v5e")
    t_min = sa.symbols.T_min
    assert t_min in cost.total.free_symbols
    assert t_min not in cost.total.subs(t_min, 0).free_symbols
    assert cost.total.subs(sympy.Symbol("T_min"), 0) == cost.total  # why sa.symbols is needed
    assert sa.symbols.B.is_integer and sa.symbols.B.is_positive and sa.symbols.W_ici.is_integer is None
    assert sa.symbols.M_X is sa.symbols("M_X")[0] and sa.symbols.M_X.name == "M_X"
    with pytest.raises(sa.UsageError, match="identifier"):
        sa.symbols("T min")


def test_latex_prints_every_expression_the_package_returns(results):
    cost = results["PlanCost"]
    assert cost.total.atoms(sympy.Max), "the cost has a Max (what sa.latex could not print)"
    printed = [
        sa.latex(cost.total),
        sa.latex(results["Derivation (compare)"].result),
        sa.latex(results["Plan"]),
        sa.latex(cost),
        sa.latex(results["Program"]),
    ]
    assert r"T_{\min}" in printed[0] and r"\max" in printed[0]
    errors = katex_errors([(p, True, f"sa.latex {i}") for i, p in enumerate(printed)])
    assert not errors, errors
