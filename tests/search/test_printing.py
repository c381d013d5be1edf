"""The map's printers: text, LaTeX ``cases`` (rendered by KaTeX), JSON; the same output every time, in this
process and in others with another hash seed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from shardalg.errors import UsageError
from shardalg.search import strategy_map
from tests.shared import ROOT

from .mlp import DOMAIN, OVER, candidate
from .test_map_oracle import strategy

SCRIPT = """
import json
from tests.search.mlp import DOMAIN, OVER, candidate
from shardalg.search import strategy_map
m = strategy_map([candidate(n, "step", "serial") for n in ("DP", "TP", "FSDP+TP")], over=OVER, domain=DOMAIN)
print(m)
print(m.latex())
print(json.dumps(m.to_json(), sort_keys=False))
"""


def _small():
    return strategy_map(
        [candidate(n, "step", "serial") for n in ("DP", "TP", "FSDP+TP")], over=OVER, domain=DOMAIN
    )


def test_the_same_output_across_hash_seeds():
    """Another process with a fixed hash seed prints exactly what this one (random seed) prints."""
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    m = _small()
    assert done.stdout == f"{m}\n{m.latex()}\n{json.dumps(m.to_json())}\n"
    assert str(_small()) == str(m)


def test_text_names_regions_cells_and_notes():
    text = str(strategy("steady", True))
    assert text.splitlines()[0] == "strategy map over B/N, N, F, C/W_ici, M_X, M_Y, D*F/H"
    assert "  DP, compute binds: cost 12*B*D*F/(C*N); tied with FSDP, TP where its compute binds too" in text
    assert "      and one of:" in text and "cells (where each term of a candidate's cost binds):" in text
    assert "notes:\n  - " in text


def test_json_is_the_map():
    m = strategy("steady", True)
    j = json.loads(json.dumps(m.to_json()))
    assert [c["name"] for c in j["candidates"]] == ["DP", "FSDP", "TP", "FSDP+TP"]
    assert j["candidates"][1]["constraints"] == ["4*D*F/N <= H"]  # after X -> N
    assert j["candidates"][0]["minimum"] is None
    # a steady step is a sum of its passes; gathering again, FSDP+TP's passes balance at different splits,
    # so its minimum is bracketed (each sum by its largest term) and says so
    minimum = j["candidates"][3]["minimum"]
    assert (minimum["over"], minimum["kind"], minimum["bracket"]) == ("X", "bracket", 2)
    assert (minimum["lower"], minimum["upper"]) == ("1", "N") and len(minimum["optima"]) > 1
    assert j["exact"] is False and len(j["regions"]) == len(m.regions) and len(j["cells"]) == len(m.cells)
    first = j["regions"][0]
    assert set(first) == {
        "candidate",
        "parent",
        "term",
        "binding",
        "cost",
        "setting",
        "conditions",
        "bracket",
        "cost_bracket",
        "ties",
    }
    assert first["conditions"][0][0] == {
        "relation": "B/N < C/(M_X*W_ici)",  # the backward's compute against its AllReduce (issue 27)
        "latex": r"\frac{B}{N} < \frac{C}{M_{X} W_{\text{ici}}}",
    }


def test_latex_is_a_cases_block():
    m = strategy("steady", True)
    tex = m.latex()
    assert tex.startswith("\\begin{cases}\n") and tex.endswith("\n\\end{cases}")
    assert tex.count(" \\\\\n") == len(m.regions) - 1
    assert m._repr_latex_() == f"$${tex}$$"
    assert m.latex("cells").count(" \\\\\n") == len(m.cells) - 1
    with pytest.raises(UsageError, match="latex\\(which=...\\) is 'regions' or 'cells'"):
        m.latex("maps")


def test_every_latex_renders_in_katex():
    from tests.shared.notes_corpus import katex_errors

    fragments = []
    for policy in ("steady", "serial"):
        for memory in (False, True):
            m = strategy(policy, memory)
            fragments += [(m.latex(), True, f"{policy} {memory} regions"), (m.latex("cells"), True, "cells")]
            fragments += [
                (r.derivation.latex(), True, f"derivation of {r.winner}") for r in m.regions + m.cells
            ]
            fragments += [(e.minimum.derivation.latex(), True, "minimum") for e in m.entries if e.minimum]
    errors = katex_errors(fragments)
    assert not errors, "\n".join(f"{e['where']}: {e['error']}\n  {e['latex']}" for e in errors[:5])
