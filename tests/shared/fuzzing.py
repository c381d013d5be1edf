"""Inputs for fuzzing the parser and the stages after it: strings drawn from the grammar itself
(``grammar_strings``, hypothesis.extra.lark with explicit strategies for terminals with lookaheads), seed
inputs, and random edits of them (``mutations``)."""

from __future__ import annotations

from functools import cache

from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from shardalg.notation.grammar import START, grammar_text
from shardalg.notation.syntax import DTYPE_ALIASES, Op

# Terminals whose regexes carry lookaheads get explicit strategies; keywords get a blank after them so
# that they do not run into the next name.
EXPLICIT = {
    "OP_WORD": st.sampled_from([op.value for op in Op if op is not Op.EINSUM and not op.function]),
    "FN_WORD": st.sampled_from([op.value for op in Op if op.function and op.value.isalpha()]),
    "_MINUS": st.sampled_from(["-", "−"]),
    "_ODOT": st.sampled_from([".*", "⊙", r"\odot "]),
    "DTYPE_WORD": st.sampled_from(sorted(DTYPE_ALIASES)),
    "_MESH": st.just("mesh "),
    "_WHERE": st.just(" where "),
    "_FONT": st.sampled_from([r"\text", r"\mathbf", r"\textbf", r"\mathrm", r"\operatorname"]),
    "_ARROW": st.sampled_from(["->", "→", "⟶", r"\rightarrow ", r"\to ", r"\longrightarrow "]),
    "_DOT": st.sampled_from(["·", "*", "@", "•", "⋅", r"\cdot "]),
    "_STACKREL": st.just(r"\stackrel"),
    "_SEP": st.sampled_from(
        ["\n", ";", r"\\", "$", "$$", r"\[", r"\]", r"\begin{aligned}", r"\end{aligned}"]
    ),
}

SEEDS = [
    r"\mathbf{A}[I_X, J] \cdot \mathbf{B}[J, K_Y] \rightarrow \mathbf{C}[I_X, K_Y]",
    r"$$\textbf{AllGather}_{XY}(A[I_{XY}, J]) \rightarrow A[I, J]$$",
    r"\textbf{ReduceScatter}_{Y,J} : A[I_X,J] \{U_Y\} \rightarrow A[I_X, J_Y]",
    r"A[I, J_X] \cdot_\text{LOCAL} B[J_X, K] \rightarrow C[I, K] \{\ U_X \}",
    "mesh X=4, Y=2\nA: bf16[I_XY, J]{U_Z} · W_in[J, K_{data,model}] -> C[I, K]\nwhere I=1024, J=4096",
    "AllGather_X [B_X, D_Y]; Slice_{Z,B}([B_X, D_Y]) -> [B_XZ, D_Y]; Permute_{X,Y}(A[I_X, J])",
]
NOTATION_CHARS = "AIJKUXYZ_[]{}(),;:·*@→-> \n\\$&'#=0123456789"


def build_parser() -> Lark:
    """lark's own parser of the grammar, with the generated parser's options (shardalg.notation.grammar): the
    reference the generated one is checked against, and the grammar objects from_lark reads."""
    return Lark(
        grammar_text(),
        parser="lalr",
        start=list(START.values()),
        propagate_positions=True,
        maybe_placeholders=True,
    )


@cache
def _fresh_parser() -> Lark:
    return build_parser()


def grammar_strings(start: str):
    """Strings from the grammar rooted at ``start``, with explicit strategies for its terminals."""
    rules: dict[str, list] = {}
    for rule in _fresh_parser().rules:
        rules.setdefault(rule.origin.name, []).append(rule.expansion)
    seen, todo, terminals = set(), [start], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for expansion in rules.get(name, []):
            for sym in expansion:
                (terminals.add(sym.name) if sym.is_term else todo.append(sym.name))
    explicit = {name: strategy for name, strategy in EXPLICIT.items() if name in terminals}
    strategy = from_lark(_fresh_parser(), start=start, explicit=explicit)
    return st.deferred(lambda: _tamed(strategy.wrapped_strategy))


SHALLOW_WEIGHT = 6  # how much likelier an expansion of least height is than one that nests deeper


def _tamed(strategy):  # a hypothesis LarkStrategy
    """The grammar's strategy with each rule's least-nesting expansions drawn ``SHALLOW_WEIGHT`` times as often:
    drawn uniformly, the expression rules (products, sums, functions of several operands, collectives) nest
    without bound on average, and almost every draw overruns hypothesis's buffer."""
    expansions = {name: s.elements for name, s in strategy.nonterminal_strategies.items()}
    height: dict[str, int] = {}
    changed = True
    while changed:  # least height of each rule: 1 + the highest child of its lowest expansion
        changed = False
        for name, options in expansions.items():
            best = min((_height(e, height) for e in options if _height(e, height) is not None), default=None)
            if best is not None and height.get(name) != best:
                height[name], changed = best, True
    for name, options in expansions.items():
        weighted = [
            e for e in options for _ in range(SHALLOW_WEIGHT if _height(e, height) == height.get(name) else 1)
        ]
        strategy.nonterminal_strategies[name] = st.sampled_from(weighted)
    return strategy


def _height(expansion, height: dict[str, int]) -> int | None:
    kids = [0 if sym.is_term else height.get(sym.name) for sym in expansion]
    return None if None in kids else 1 + max(kids, default=0)


@st.composite
def mutations(draw: st.DrawFn) -> str:
    """A seed input with a few characters deleted, inserted, replaced or swapped."""
    s = list(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        if not s:
            break
        i = draw(st.integers(0, len(s) - 1))
        kind = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
        ch = draw(st.sampled_from(NOTATION_CHARS) | st.characters())
        if kind == "delete":
            del s[i]
        elif kind == "insert":
            s.insert(i, ch)
        elif kind == "replace":
            s[i] = ch
        else:
            j = draw(st.integers(0, len(s) - 1))
            s[i], s[j] = s[j], s[i]
    return "".join(s)
