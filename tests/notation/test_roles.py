"""Role declarations in the notation: pinned in each format, read from each format, merged and checked
(a tensor has one role), their keywords only keywords at the start of a line, and their JSON form."""

from __future__ import annotations

import json

import pytest

from shardalg.errors import ParseError
from shardalg.notation.jsonread import from_json
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex, text, to_json, unicode
from shardalg.notation.syntax import Role, Roles

SOURCE = "layers L; params W_in, W_out\ntokens B, T; saved H\nkvcache Kc\nembeddings W_emb\nIn[B, D] · W_in[D, F] -> H[B, F]"
TEXT = """params W_in, W_out
embeddings W_emb
saved H
kvcache Kc
tokens B, T
layers L
In[B, D] * W_in[D, F] -> H[B, F]"""
LATEX = r"""\begin{aligned}
\text{params}\; W_{\text{in}}, W_{\text{out}} \\
\text{embeddings}\; W_{\text{emb}} \\
\text{saved}\; H \\
\text{kvcache}\; \text{Kc} \\
\text{tokens}\; B, T \\
\text{layers}\; L \\
\text{In}[B, D] \cdot W_{\text{in}}[D, F] &\rightarrow H[B, F]
\end{aligned}"""


def test_pinned_in_each_format_and_read_back():
    p = parse(SOURCE)
    assert p.roles == Roles(("W_in", "W_out"), ("W_emb",), ("H",), ("Kc",), ("B", "T"), "L")
    assert (
        text(p) == TEXT
        and latex(p) == LATEX
        and unicode(p) == TEXT.replace(" * ", " · ").replace(" -> ", " → ")
    )
    for printed in (text(p), unicode(p), latex(p), latex(p, mode="display")):
        assert parse(printed) == p


def test_roles_merge_and_answer_which_role():
    r = parse("params A\nparams B; layers 80").roles
    assert r.params == ("A", "B") and r.layers == 80
    assert r.role_of("B") is Role.PARAMS and r.role_of("Z") is None
    assert parse("A[I]").roles is None


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("params A, A", "A is declared twice: a tensor has one role"),
        ("params A; saved A", "A is declared as params and as saved: a tensor has one role"),
        ("layers 0", "the layer count must be a positive integer, not 0"),
        ("layers L; layers M", "layers is declared twice (L and M)"),
        ("tokens 4", "tokens takes dim names (tokens B, T), not the number 4"),
        ("tokens B, B", "the token dim B is listed twice"),
        ("params", "expected a name"),
    ],
)
def test_mistakes_are_parse_errors(source, message):
    with pytest.raises(ParseError) as err:
        parse(source)
    assert message in str(err.value)


def test_keywords_are_names_where_a_keyword_cannot_stand():
    p = parse("A[I] * params[I] -> layers[I]")
    assert [t.name for t in (p.statements[0].expr.right, p.statements[0].result)] == ["params", "layers"]
    assert parse("A[saved, tokens]").statements[0].dim_names == ("saved", "tokens")


def test_json_round_trip():
    p = parse(SOURCE)
    j = to_json(p)
    assert j["roles"] == {
        "kind": "roles",
        "params": ["W_in", "W_out"],
        "embeddings": ["W_emb"],
        "saved": ["H"],
        "kvcache": ["Kc"],
        "tokens": ["B", "T"],
        "layers": "L",
    }
    assert from_json(json.loads(json.dumps(j))) == p
    assert to_json(parse("A[I]"))["roles"] is None
    with pytest.raises(Exception, match="layers is a dim name"):
        from_json({**to_json(p, spans=False), "roles": {"kind": "roles", "layers": 0}})
