"""The "What it must show" bullets of issues 26, 27 and 32 that no other test pins in the form the issue writes
them: the CLI forms of the sub-axis round trip and of the sub-axis reshardings (issue 26), the precision recipes
other than DeepSpeed's on ``memory --zero`` (issue 32), and the README sections two issues ask for."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sympy

from shardalg.cli import main
from shardalg.models.expand import expand, shard
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse
from shardalg.notation.syntax import DType

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


# ---- issue 26: sub-axes on the command line ----------------------------------------------------------------


def test_shardalg_parse_round_trips_a_subaxis_in_every_format(capsys) -> None:
    source = "A[I_{Y:(1)2}, J]"
    for fmt in ("text", "unicode", "latex"):
        printed = _run(capsys, "parse", source, "--format", fmt).strip()
        assert _run(capsys, "parse", printed).strip() == source, (fmt, printed)
    data = json.loads(_run(capsys, "parse", source, "--format", "json"))
    assert from_json(data) == parse(source)
    (tensor,) = data["statements"]
    assert [d["axes"] for d in tensor["dims"]] == [["Y:(1)2"], []]  # spelled as Shardy spells it


def _plans(capsys, query: str) -> list[tuple[sympy.Expr, list[str]]]:
    """``shardalg plan QUERY --mesh X=2,Y=4 --all --json`` (the issue's command, no sizes): each plan's bytes
    as an expression in I and J, and the axes its steps use."""
    data = json.loads(_run(capsys, "plan", query, "--mesh", "X=2,Y=4", "--all", "--json"))
    i, j = sympy.symbols("I J", positive=True)
    return [
        (
            sympy.sympify(p["bytes_communicated"], locals={"I": i, "J": j}),
            [a for s in p["steps"] for a in s["axes"]],
        )
        for p in data["plans"]
    ]


def _subaxis(axes: list[str]) -> bool:
    return any(":" in a for a in axes)


def test_the_issues_resharding_lists_a_subaxis_plan_tied_with_the_cheapest(capsys) -> None:
    """[I_Y] -> [I_X] on X=2, Y=4: a plan over Y:(1)2 is listed, and it costs what the cheapest whole-axis plan
    costs: a shard of V/8 sliced and permuted, then V/2 gathered over a group of 4 (V = 2·I·J, bf16)."""
    found = _plans(capsys, "A[I_Y, J] -> A[I_X, J]")
    i, j = sympy.symbols("I J", positive=True)
    v = 2 * i * j
    assert any(a in ("Y:(1)2", "Y:(2)2") for _, axes in found for a in axes)
    # every plan moves a multiple of I·J, so the cheapest is the least coefficient
    sub = min(sympy.simplify(b / (i * j)) for b, axes in found if _subaxis(axes))
    whole = min(sympy.simplify(b / (i * j)) for b, axes in found if not _subaxis(axes))
    assert sub == whole == sympy.simplify((v / 8 + v / 2) / (i * j))
    assert sympy.simplify(found[0][0] / (i * j)) == whole


def test_where_xlas_plan_uses_a_subaxis_the_first_plan_does_and_is_cheapest(capsys) -> None:
    """[I_X] -> [I_Y] on X=2, Y=4 (XLA: a slice over Y's minor factor, then one permute): the first plan
    permutes a quarter of A, V/4; every whole-axis plan moves more (its best, 3V/8)."""
    found = _plans(capsys, "A[I_X, J] -> A[I_Y, J]")
    i, j = sympy.symbols("I J", positive=True)
    v = 2 * i * j
    first_bytes, first_axes = found[0]
    assert _subaxis(first_axes) and first_axes == ["Y:(2)2", "X", "Y:(1)2"]
    assert first_bytes == v / 4
    whole = [sympy.simplify(b / (i * j)) for b, axes in found if not _subaxis(axes)]
    assert whole and min(whole) == sympy.simplify(3 * v / 8 / (i * j)) > sympy.simplify(first_bytes / (i * j))


# ---- issue 32: every precision recipe on memory --zero -------------------------------------------------------

LLAMA = shard(expand("llama-2-13b", functions=False), activations="B=X")  # data parallelism, products only
N = 64


@pytest.fixture(scope="module")
def program() -> str:
    from shardalg.notation.printing import render

    return render(LLAMA, "text")


def _dtype_bytes(name: str | None, default: int) -> int:
    return default if name is None else int(DType(name).bytes)


@pytest.mark.parametrize(
    ("stage", "precision"), [("1", "book"), ("2", "book"), ("3", "book"), ("2", "bf16"), ("2", "fp8")]
)
def test_memory_zero_under_each_recipe_shards_the_recipes_bytes(capsys, program, stage, precision) -> None:
    """``memory --zero S --precision R --json`` on LLaMA-2 13B over 64 H100s: params, grads and optimizer are the
    recipe's bytes per parameter (read from the recipe the JSON states; the book's 2 + 2 + 8 for ``book``),
    each divided by 64 where stage S shards it (1: optimizer, 2: and grads, 3: and params)."""
    data = json.loads(
        _run(
            capsys,
            "memory",
            program,
            "--mesh",
            f"X={N}",
            "--sizes",
            "B=64,T=4096",
            "--hw",
            "h100",
            "--remat",
            "block",
            "--zero",
            stage,
            "--precision",
            precision,
            "--json",
        )  # fmt: skip
    )
    psi = data["params"]  # counted from the preset's einsums
    r = data["precision"]
    assert r["name"] == precision
    per = {
        "params": _dtype_bytes(r["params"], 2),  # None: as declared, bf16
        "grads": _dtype_bytes(r["grads"], _dtype_bytes(r["params"], 2)),  # None: as the params
        "optimizer": (0 if r["master"] is None else _dtype_bytes(r["master"], 0))
        + 2 * _dtype_bytes(r["moments"], 0),
    }
    if precision == "book":
        assert per == {"params": 2, "grads": 2, "optimizer": 8}  # the book: 2 + 8 bytes, gradients in bf16
    sharded = {"optimizer": int(stage) >= 1, "grads": int(stage) >= 2, "params": int(stage) >= 3}
    got = data["bytes_per_device"]
    for part, b in per.items():
        assert got[part] == b * psi // (N if sharded[part] else 1), part


# ---- the README sections issues 26 and 27 ask for --------------------------------------------------------------


def _section(title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## )", README, flags=re.S | re.M)
    assert m, title
    return m.group(1)


def test_the_readme_writes_a_transformer_layer_out() -> None:
    """Issue 26: a layer with its norms, its attention core (scores, softmax, the product with V), its residual
    adds and its MLP, in the notation (the console block itself is run by tests/test_readme.py)."""
    layer = _section("A transformer layer")
    for pattern in (
        r"rmsnorm_D\(",
        r"\* K\[[^\]]*\] -> Sc\[",
        r"softmax_\{S,causal\}\(Sc\[",
        r"P\[[^\]]*\] \* V\[",
        r"\] \+ Att\[",
        r"gelu\(",
    ):
        assert re.search(pattern, layer), pattern


def test_the_readme_has_a_section_on_subaxes_with_a_plan_over_one() -> None:
    sub = _section("Sub-axes")
    assert "Y:(1)2" in sub and re.search(r"^Permute_\{X,Y:\(1\)2\}", sub, flags=re.M)


def test_the_readme_says_what_overlaps_what_in_a_table_and_shows_slice() -> None:
    """Issue 27: the overlap policies in a short table, and ``--slice`` in a command."""
    table = _section("What overlaps what")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    assert [re.match(r"\| `(\w+)`", r).group(1) for r in rows] == ["steady", "schedule", "serial"]
    assert re.search(r"^\$ shardalg \w+ .*--slice \S+", README, flags=re.M)
