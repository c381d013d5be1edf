"""The optimizer's header and default note say what is counted under the precision recipe: the moments in the
recipe's dtype, its master copy, and the bytes per parameter the optimizer part counts (``memory`` and
``search``), derived from the records the bytes come from."""

from __future__ import annotations

import re

import pytest

from shardalg.cli import main
from shardalg.models.memory import memory
from shardalg.models.optimizers import optimizer_named
from shardalg.models.precision import precision_named

# W replicated over X: the optimizer part is the state of every parameter, bytes per parameter times the count
PROGRAM = "params W\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
ON = dict(mesh="X=4", sizes={"B": 64, "D": 256, "F": 512})
# the optimizer's bytes per parameter: Adam's two moments in the recipe's dtype and its master copy
RECIPES = {"book": 8, "deepspeed": 4 + 4 + 4, "bf16": 2 + 2, "fp8": 2 + 2 + 4}


def _said(text: str) -> tuple[str, str, int]:
    """The header's words, the default note's words and the note's bytes per parameter."""
    header = re.search(r"^optimizer +adam \((.*)\)$", text, re.M)
    note = re.search(r"^note: optimizer: adam \(default: (.*), (\d+) bytes per parameter\)$", text, re.M)
    assert header and note, text
    return header[1], note[1], int(note[2])


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_the_header_and_note_say_the_bytes_the_optimizer_part_counts(recipe: str) -> None:
    r = memory(PROGRAM, **ON, precision=recipe)
    header, words, per_param = _said(str(r))
    assert r.parts["optimizer"] == RECIPES[recipe] * r.params  # the bytes counted
    assert per_param == RECIPES[recipe] and words == header
    p = precision_named(recipe)
    assert f"moments in {p.moments.value}" in header
    master = "and a master copy of the parameters in fp32"
    assert (master in header) == (p.master is not None)


def test_the_books_words_are_the_books() -> None:
    header, _, per_param = _said(str(memory(PROGRAM, **ON)))
    assert header == "Adam: first and second moments in fp32" and per_param == 8


@pytest.mark.parametrize(
    ("optimizer", "recipe", "said"),
    [
        ("momentum", "bf16", "SGD with momentum: one bf16 buffer per parameter"),
        (
            "momentum",
            "deepspeed",
            "SGD with momentum: one fp32 buffer per parameter, and a master copy of the parameters in fp32",
        ),
        ("adam-fp32", "bf16", "Adam with a master copy of the parameters in fp32 and moments in bf16"),
        ("sgd", "deepspeed", "plain SGD: no momentum buffer, and a master copy of the parameters in fp32"),
        ("12", "bf16", "as given"),
    ],
)
def test_a_chosen_optimizer_says_its_state_under_the_recipe(optimizer: str, recipe: str, said: str) -> None:
    assert optimizer_named(optimizer).describe(precision_named(recipe)) == said
    r = memory(PROGRAM, **ON, optimizer=optimizer, precision=recipe)
    assert f"\noptimizer    {r.optimizer.name} ({said})\n" in str(r)


@pytest.mark.parametrize("recipe", ["book", "deepspeed", "bf16"])
def test_the_search_says_the_same_bytes(recipe: str, capsys: pytest.CaptureFixture[str]) -> None:
    program = PROGRAM.replace("_X", "")
    sizes = ",".join(f"{k}={v}" for k, v in ON["sizes"].items())
    code = main(["search", program, "--mesh", "X=4", "--sizes", sizes, "--hw", "h100", "--precision", recipe])
    out = capsys.readouterr().out
    assert code == 0
    note = re.search(r"^note: optimizer: adam \(default: (.*), (\d+) bytes per parameter\)$", out, re.M)
    assert note and int(note[2]) == RECIPES[recipe], out
