"""Math inside running text, set as math: the engine's sentences (reasons, lemma titles, step notes) write
notation and formulas in ASCII (``C{U_X}``, ``AllGather_X(A)``, ``(C/W_ici)^2/(M_X M_Y F)``, ``N^2/4``); the
notes set each such run as math, and the rest as text.

    >>> split_math("sums the partials of C{U_X} over X")
    ['sums the partials of ', Math('C \\\\{U_X\\\\}'), ' over X']

A run is found by reading the sentence word by word: a word is math when it holds notation (a subscript
``_``, a power ``^``, a division ``/`` between terms, brackets ``[...]``, a set ``{U_X}``, bars ``|X|``, an
arrow) or is a single capital letter, a number or an operator next to such a word; parentheses keep their
words together. Tensors, statements and collectives are read by the parser and printed by the LaTeX printer;
formulas are set by :func:`formula_latex` (identifiers with subscripts, powers, products), never by sympy.

Imports: :mod:`shardalg.notation` (the parser and printers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardalg.errors import ShardalgError
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex

__all__ = ["MathPart", "split_math", "formula_latex", "number_latex", "ASCII_MATH"]


@dataclass(frozen=True)
class MathPart:
    """A run of math in a sentence, as LaTeX (without ``$``)."""

    latex: str


_COLLECTIVES = ("AllGather", "ReduceScatter", "AllReduce", "AllToAll", "Slice", "Permute")
_OPERATORS = {
    "<": "<",
    ">": ">",
    "=": "=",
    "<=": r"\le",
    ">=": r"\ge",
    "->": r"\rightarrow",
    "<-": r"\leftarrow",
    "/": "/",
    "*": r"\cdot",
    "x": r"\times",
    "·": r"\cdot",
    "+": "+",
    "-": "-",
    "≤": r"\le",
    "≥": r"\ge",
    "→": r"\rightarrow",
    "<=>": r"\iff",
}
_UPRIGHT_SUBSCRIPTS = {"min": r"\min", "max": r"\max"}
# a word with notation in it: a subscript, a power, brackets, braces, bars, an arrow, a division between terms
_NOTATION = re.compile(r"[A-Za-z0-9)|\]]_[A-Za-z0-9{]|\^|\[|\{[UI]_|\||->|<-|[A-Za-z0-9)|]/[A-Za-z0-9(|]")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)?\Z")
# 2DF, 4BD: a number times dims (3D alone is a word; 16GB, 8TB, 2FLOPS are amounts in units, not products)
_PRODUCT = re.compile(r"\d+(?![KMGTPE]i?B\Z|T?FLOPS?\Z)[A-Z]{2,}")
_PROSE_SLASH = re.compile(r"[a-z]{2,}/[a-z]{2,}\Z")  # and/or, compute/comms: words, not a division
_UNIT_SLASH = re.compile(r"(?:[KMGTP]?i?B|bytes|FLOPs?)/s\Z")  # TB/s, bytes/s: a unit, not a division


def _is_math_word(word: str) -> bool:
    if _PROSE_SLASH.match(word) or _UNIT_SLASH.match(word) or word.startswith(("http", "proofs/")):
        return False
    return bool(_NOTATION.search(word)) or bool(_PRODUCT.fullmatch(word))


def _is_joiner(word: str) -> bool:
    """Words that are math only next to math: one capital letter, a number, an operator."""
    return (
        word in _OPERATORS
        or bool(re.fullmatch(r"[A-Z]|\d+[A-Z]*|\d+[a-z]|\(?[A-Z]\)?", word))
        or bool(_NUMBER.match(word))
    )


def _words(text: str) -> list[str]:
    """Split at spaces, keeping a parenthesised or bracketed group (and the spaces inside it) together."""
    out: list[str] = []
    depth = 0
    for piece in re.split(r"( +)", text):
        if not piece:
            continue
        if depth > 0 and out:
            out[-1] += piece
        else:
            out.append(piece)
        depth += piece.count("(") + piece.count("[") + piece.count("{")
        depth -= piece.count(")") + piece.count("]") + piece.count("}")
        depth = max(depth, 0)
    return [part for word in out for part in _unless_prose(word)]


_PROSE_WORD = re.compile(r"(?<![_\\A-Za-z])(?!max\b|min\b)[a-z]{3,}\b")


def _unless_prose(group: str) -> list[str]:
    """A parenthesised group that holds words of prose ("(AllGather in, 4BD bytes)") is words again."""
    if " " not in group or not group.startswith("(") or not _PROSE_WORD.search(group):
        return [group]
    return [p for p in re.split(r"( +)", group) if p]


def _strip(word: str) -> tuple[str, str, str]:
    """(leading text, the word, trailing punctuation): ``(X`` stays whole but ``A's``, ``X,`` and ``X.`` split."""
    lead = ""
    if word.startswith("(") and word.count("(") > word.count(")"):
        lead, word = "(", word[1:]
    m = re.match(r"(.*?)([.,;:!?]*|'s[.,;:]?|\)[.,;:]?)\Z", word)
    assert m is not None
    core, tail = m[1], m[2]
    if tail.startswith(")") and core.count("(") > core.count(")"):
        core, tail = core + ")", tail[1:]
    return lead, core, tail


def split_math(text: str) -> list[str | MathPart]:
    """The sentence as text pieces and math runs, in order."""
    words = _words(text)
    kinds: list[tuple[str, str, str, bool]] = []
    for w in words:
        if w.isspace():
            kinds.append(("", w, "", False))
            continue
        lead, core, tail = _strip(w)
        kinds.append((lead, core, tail, bool(core) and _is_math_word(core)))
    # operators next to math, and capitals or numbers next to such an operator, become math (across one space)
    changed = True
    while changed:
        changed = False
        for i, (lead, core, tail, is_math) in enumerate(kinds):
            if is_math or not core or core.isspace() or not _is_joiner(core):
                continue
            left = kinds[i - 2] if i >= 2 and not kinds[i - 2][2] and not lead else None
            right = kinds[i + 2] if i + 2 < len(kinds) and not tail and not kinds[i + 2][0] else None
            near = [k for k in (left, right) if k is not None and k[3]]
            if core in _OPERATORS:
                sides = [k for k in (left, right) if k is not None and (k[3] or _is_joiner(k[1]))]
                ok = bool(near) or (core in "<>=" and len(sides) == 2 and core != "x")
            else:
                ok = any(k[1] in _OPERATORS or k[1][:1] in "/<>=" or k[1][-1:] in "/<>=" for k in near)
            if ok:
                kinds[i] = (lead, core, tail, True)
                changed = True
    out: list[str | MathPart] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            out.append(MathPart(formula_latex(" ".join(run))))
            run.clear()

    for i, (lead, core, tail, is_math) in enumerate(kinds):
        if is_math:
            if lead:
                flush()
                out.append(lead)
            run.append(core)
            if tail:
                flush()
                out.append(tail)
            continue
        if core.isspace() and run and i + 1 < len(kinds) and kinds[i + 1][3] and not kinds[i + 1][0]:
            continue  # a space inside a math run
        flush()
        out.append(lead + core + tail)
    flush()
    merged: list[str | MathPart] = []
    for piece in out:
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        elif piece != "":
            merged.append(piece)
    return merged


def number_latex(value: float) -> str:
    """A number as a reader writes it: ``45{,}000``, ``0.125``, ``3.35 \\times 10^{12}`` (three significant
    digits past a million or below a thousandth), never ``4.5e+04`` or ``45000.0``."""
    if value == 0:
        return "0"
    if 1e-3 <= abs(value) < 1e6:
        if float(value).is_integer():
            return f"{int(value):,}".replace(",", "{,}")
        return f"{value:.4g}"
    mantissa, exponent = f"{value:.3g}".split("e") if "e" in f"{value:.3g}" else (f"{value:.3g}", "0")
    return rf"{mantissa} \times 10^{{{int(exponent)}}}"


# ---------------------------------------------------------------------------------------------- formulas
_TOKEN = re.compile(
    r"(?P<notation>[A-Za-z][A-Za-z0-9]*(?::\s*[a-z0-9]+)?\[[^\[\]]*\](?:\{[^{}]*\})?)"
    r"|(?P<collective>(?:" + "|".join(_COLLECTIVES) + r")(?:_(?:\{[^{}]*\}|[A-Za-z]+))?)"
    r"|(?P<set>\{[UI]_[A-Za-z0-9]+(?:,\s*[UI]_[A-Za-z0-9]+)*\})"
    r"|(?P<ident>[A-Za-z]+(?:_[A-Za-z0-9]+)?)"
    r"|(?P<subscript>_[A-Za-z0-9]+)"
    r"|(?P<number>\d+(?:\.\d+)?)"
    r"|(?P<power>\^\s*(?:\d+|[A-Za-z]|\([^()]*\)))"
    r"|(?P<op><=>|<=|>=|->|<-|[<>=/*+\-·≤≥→,|()])"
    r"|(?P<space>\s+)"
    r"|(?P<other>.)"
)


def _ident(name: str) -> str:
    """``W_ici`` -> ``W_{\\text{ici}}``, ``M_XY`` -> ``M_{XY}``, ``T_min`` -> ``T_{\\min}``, ``Win`` -> ``\\text{Win}``."""
    base, _, sub = name.partition("_")
    head = base if len(base) == 1 else rf"\text{{{base}}}"
    if not sub:
        return head
    if sub in _UPRIGHT_SUBSCRIPTS:
        return f"{head}_{{{_UPRIGHT_SUBSCRIPTS[sub]}}}"
    if sub.islower() and len(sub) > 1:
        return rf"{head}_{{\text{{{sub}}}}}"
    return f"{head}_{sub}" if len(sub) == 1 else f"{head}_{{{sub}}}"


def _notation(text: str) -> str | None:
    """A tensor or statement in the notation, printed in LaTeX; None when it does not parse."""
    try:
        program = parse(text)
    except ShardalgError:
        return None
    return latex(program.statements[0]) if len(program.statements) == 1 else None


def _sub(sub: str) -> str:
    body = sub[1:-1] if sub.startswith("{") else sub
    return body if len(body) == 1 else "{" + body + "}"


def formula_latex(text: str) -> str:
    """An ASCII formula or notation fragment as LaTeX."""
    whole = _notation(text) if "[" in text else None
    if whole is not None:
        return whole
    out: list[str] = []
    for m in _TOKEN.finditer(text):
        kind, tok = m.lastgroup, m.group()
        if kind == "notation":
            out.append(_notation(tok) or tok)
        elif kind == "collective":
            name, _, sub = tok.partition("_")
            out.append(rf"\textbf{{{name}}}" + (f"_{_sub(sub)}" if sub else ""))
        elif kind == "set":
            out.append(r"\{" + tok[1:-1].replace(" ", "").replace(",", ", ") + r"\}")
        elif kind == "ident":
            if tok == "x" and out:
                out.append(_OPERATORS["x"])
            elif tok.isupper() and "_" not in tok and out and out[-1][-1:].isdigit():
                out.append(" ".join(tok))  # 2BF: the product 2 B F
            else:
                out.append(_ident(tok))
        elif kind == "subscript":
            out.append(_ident("x" + tok)[1:])
        elif kind == "power":
            exp = tok[1:].strip()
            exp = exp[1:-1] if exp.startswith("(") else exp
            out.append("^{" + formula_latex(exp) + "}")
        elif kind == "op":
            out.append(_OPERATORS.get(tok, tok))
        elif kind == "space":
            out.append(" ")
        else:
            out.append({"%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$", "~": r"\sim"}.get(tok, tok))
    return "".join(out).strip()


# ASCII math a reader must not see in running text: a subscript or power typed out, a division between
# terms, an arrow, a set of unreduced axes; checked on the text of the generated .tex outside math.
ASCII_MATH = re.compile(
    r"\w\\_\w|\\textasciicircum|\^|->|<-|\\\{U"
    r"|(?<!\w)(?![a-z]{2,}/[a-z]{2,}\b|(?:[KMGTP]?i?B|bytes|FLOPs?)/s\b)\w+/\w|\w/\(|\)/\w"
    r"|\|\w+\||\b\d+(?![KMGTPE]i?B\b|T?FLOPS?\b)[A-Z]{2,}\b"
)
