"""What the stage fuzzer feeds shardalg: strings from the grammar on every start rule (hypothesis.extra.lark),
random edits of a corpus (the README's expressions, every expression quoted from the seeds, the fuzz seeds),
the corpus itself, printed random ASTs, random layers of products and functions (each value written once and
read in the layout it was written in, so they reach the planner, the executor and the backward), and random
text; and, for each parsed program, a mesh and sizes; and a chip file (``--hw FILE.toml``) for each input.

    (kind, source) = data.draw(sources())       # kind: the start rule, "program" for the other inputs
    mesh, sizes = data.draw(settings(program))
    chip = data.draw(chip_files())              # the bytes of a chip file
"""

from __future__ import annotations

import re
from functools import cache

from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.notation.printing import latex, text, unicode
from shardalg.notation.syntax import Apply, Arrow, Collective, Product, Program, Tensor
from tests.shared import ROOT
from tests.shared.fuzzing import NOTATION_CHARS, SEEDS, grammar_strings
from tests.shared.seed_expressions import SEED
from tests.shared.strategies import programs

_AXES = ("X", "Y", "Z")
_DIMS = ("I", "J", "K", "B", "D", "F")


@cache
def corpus() -> tuple[str, ...]:
    """The notation of the README and the docs pages (quoted arguments of their ``shardalg`` commands and of
    ``parse`` in their Python), the seeds' expressions as written, and the fuzz seeds."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    readme = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    found: list[str] = []
    for line in readme.splitlines():
        if line.startswith("$ ") and "shardalg " in line:
            found += re.findall(r'"([^"]*\[[^"]*)"', line)
    found += re.findall(r'sa\.parse\("([^"]+)"\)', readme)
    found += [source for _, source, _ in SEED]
    found += SEEDS
    return tuple(dict.fromkeys(found))


@st.composite
def edits(draw: st.DrawFn) -> str:
    """A corpus string with a few characters deleted, inserted, replaced or swapped, or two spliced."""
    pool = corpus()
    s = list(draw(st.sampled_from(pool)))
    if draw(st.integers(0, 9)) == 0:  # splice: the head of one, the tail of another
        other = draw(st.sampled_from(pool))
        cut_a, cut_b = draw(st.integers(0, len(s))), draw(st.integers(0, len(other)))
        s = s[:cut_a] + list(other[cut_b:])
    for _ in range(draw(st.integers(1, 4))):
        if not s:
            break
        i = draw(st.integers(0, len(s) - 1))
        edit = draw(st.sampled_from(["delete", "insert", "replace", "swap"]))
        ch = draw(st.sampled_from(NOTATION_CHARS) | st.characters())
        if edit == "delete":
            del s[i]
        elif edit == "insert":
            s.insert(i, ch)
        elif edit == "replace":
            s[i] = ch
        else:
            j = draw(st.integers(0, len(s) - 1))
            s[i], s[j] = s[j], s[i]
    return "".join(s)


def _printed_programs(legal: bool) -> st.SearchStrategy[str]:
    """Random programs on a few axes and dims, printed in a random format (``legal``: each tensor uses an
    axis and a dim name once, so more of them reach the planner and the executor)."""
    printer = st.sampled_from([text, unicode, latex])
    made = programs(
        axes=_AXES, dims=_DIMS, names=("A", "B", "C", "W"), max_statements=2, max_leaves=3, legal=legal
    )
    return st.tuples(printer, made).map(lambda pm: pm[0](pm[1]))


_LAYER_DIMS = ("B", "T", "D", "F")
_UNARY = ("gelu", "silu", "exp", "relu")
_ALONG = ("softmax", "rmsnorm", "layernorm")  # a function along one dim, keeping it
_REDUCE = ("sum", "mean", "max")  # a reduction over one dim, dropping it
_BINARY = ("+", "-", ".*")


@st.composite
def _layout(draw: st.DrawFn, dims: tuple[str, ...]) -> str:
    """A tensor's dims, each axis of X, Y, Z sharding at most one of them (in a random order)."""
    axes: dict[str, list[str]] = {d: [] for d in dims}
    for a in _AXES:
        d = draw(st.sampled_from((None, *dims)))
        if d is not None:
            axes[d].append(a)
    return ", ".join(f"{d}_{''.join(axes[d])}" if axes[d] else d for d in dims)


@st.composite
def _layers(draw: st.DrawFn) -> str:
    """A layer of products and functions on dims B, T, D, F and axes X, Y, Z: up to five statements, each
    reading values written before it (or the input, or a parameter) in the layout they were written in, its
    result in a layout of its own. Legal more often than printed random ASTs, so the functions' plans, their
    execution and the backward of programs mixing them with products are reached."""
    values: dict[str, tuple[str, ...]] = {"In": ("B", "T", "D")}
    written = {"In": draw(_layout(("B", "T", "D")))}
    lines: list[str] = []

    def read(name: str) -> str:
        return f"{name}[{written[name]}]"

    for k in range(draw(st.integers(1, 5))):
        name = f"V{k}"
        src = draw(st.sampled_from(sorted(values)))
        dims = values[src]
        kind = draw(st.sampled_from(("unary", "along", "reduce", "binary", "gain", "product")))
        if kind == "unary":
            expr = f"{draw(st.sampled_from(_UNARY))}({read(src)})"
        elif kind == "along":
            expr = f"{draw(st.sampled_from(_ALONG))}_{draw(st.sampled_from(dims))}({read(src)})"
        elif kind == "reduce" and len(dims) > 1:
            d = draw(st.sampled_from(dims))
            expr = f"{draw(st.sampled_from(_REDUCE))}_{d}({read(src)})"
            dims = tuple(x for x in dims if x != d)
        elif kind == "binary":
            same = sorted(n for n, ds in values.items() if ds == dims)
            other = draw(st.sampled_from(same))
            expr = f"{read(src)} {draw(st.sampled_from(_BINARY))} {read(other)}"
        elif kind == "gain":
            d = dims[-1]
            expr = f"{read(src)} .* g{k}[{draw(_layout((d,)))}]"
        else:  # a product contracting the last dim with a parameter's first
            d = dims[-1]
            new = draw(st.sampled_from([x for x in _LAYER_DIMS if x not in dims]))
            expr = f"{read(src)} * W{k}[{draw(_layout((d, new)))}]"
            dims = (*dims[:-1], new)
        values[name] = dims
        written[name] = draw(_layout(dims))
        lines.append(f"{expr} -> {read(name)}")
    return "\n".join(lines)


@cache
def sources() -> st.SearchStrategy[tuple[str, str]]:
    """(start rule or "program", text), one strategy per process (from_lark compiles the grammar). Grammar
    strings are 3 draws in 15 (they are slow to make); edits of the corpus, the corpus, printed random ASTs,
    random layers and random text the rest."""
    grammar = [
        grammar_strings("start").map(lambda s: ("program", s)),
        grammar_strings("statement_start").map(lambda s: ("statement", s)),
        grammar_strings("tensor_start").map(lambda s: ("tensor", s)),
    ]
    others = [
        *[edits().map(lambda s: ("program", s))] * 3,
        *[st.sampled_from(corpus()).map(lambda s: ("program", s))] * 2,
        *[_printed_programs(legal=True).map(lambda s: ("program", s))] * 3,
        *[_layers().map(lambda s: ("program", s))] * 2,
        _printed_programs(legal=False).map(lambda s: ("program", s)),
        st.text(alphabet=NOTATION_CHARS, max_size=60).map(lambda s: ("program", s)),
    ]
    return st.sampled_from(grammar + others).flatmap(lambda strategy: strategy)


def _axes_and_dims(program: Program) -> tuple[list[str], list[str]]:
    axes: dict[str, None] = {}
    dims: dict[str, None] = {}
    todo: list[object] = list(program.statements)
    while todo:
        node = todo.pop()
        if isinstance(node, Arrow):
            todo += [node.expr, node.result]
        elif isinstance(node, Product):
            todo += [node.left, node.right]
        elif isinstance(node, Collective):
            axes.update(dict.fromkeys(node.axes))
            todo.append(node.arg)
        elif isinstance(node, Apply):
            todo += list(node.operands)
        elif isinstance(node, Tensor):
            axes.update(dict.fromkeys(node.used_axes))
            dims.update(dict.fromkeys(d.name for d in node.dims if d.name is not None))
    return sorted(axes), sorted(dims)


@st.composite
def settings(draw: st.DrawFn, program: Program) -> tuple[Mesh | None, dict[str, int]]:
    """A mesh for the program (its own, one on the axes it uses with or without a spare axis, a fixed one,
    or none) and sizes for some of its dims."""
    axes, dims = _axes_and_dims(program)
    how = draw(st.sampled_from(["used", "used", "used+spare", "fixed", "declared", "none"]))
    mesh: Mesh | None
    if how == "declared" and program.mesh is not None:
        mesh = Mesh(dict(program.mesh.axes))
    elif how == "none":
        mesh = None
    elif how == "fixed" or not axes:
        mesh = Mesh(X=4, Y=2)
    else:
        names = axes[:6] if draw(st.integers(0, 3)) else axes[: draw(st.integers(1, 6))]
        if how == "used+spare":
            names.append(next(f"S{k}" for k in range(10) if f"S{k}" not in axes))
        mesh = Mesh({a: draw(st.sampled_from([1, 2, 2, 3, 4])) for a in names})
    sizes = {d: draw(st.sampled_from([1, 2, 3, 4, 6, 8, 12, 16])) for d in dims if draw(st.booleans())}
    return mesh, sizes


# ---- chip files (every --hw FILE.toml) ----------------------------------------------------------------------

_CHIP_KEYS = (
    "C",
    "W_hbm",
    "hbm",
    "W_ici",
    "T_min",
    "alpha",
    "beta",
    "W_dcn",
    "flops",
    "hbm_capacity",
    "name",
    "description",
    "model",
    "wrap",
    "base",
    "unknown",
)
_VALID_CHIP = (
    'base = "tpu-v5p"\nC = 4.6e14\nhbm = {value = 96e9, source = "a sheet"}\nwrap = {lengths = [16]}\n'
)


@st.composite
def _toml_value(draw: st.DrawFn) -> str:
    how = draw(st.sampled_from(["float", "int", "huge", "text", "table", "list", "deep", "bool"]))
    if how == "float":
        return repr(draw(st.floats(allow_nan=True, allow_infinity=True)))
    if how == "int":
        return str(draw(st.integers(-(2**70), 2**70)))
    if how == "huge":  # past the largest float, or past Python's 4,300 digits for int(str)
        return "9" * draw(st.sampled_from([309, 400, 4300, 4301, 5000]))
    if how == "text":
        return (
            '"' + draw(st.sampled_from(["tpu-v5e", "alpha-beta", "always", "length16", "cubes4", "x"])) + '"'
        )
    if how == "table":
        return "{value = " + draw(_toml_value()) + ', source = "s"}'
    if how == "list":
        return "[" + ", ".join(str(n) for n in draw(st.lists(st.integers(-3, 2**64), max_size=3))) + "]"
    if how == "deep":
        n = draw(st.sampled_from([1, 10, 100, 500, 1000, 5000]))
        return "[" * n + "]" * n
    return draw(st.sampled_from(["true", "false"]))


@st.composite
def chip_files(draw: st.DrawFn) -> bytes:
    """The bytes of a chip file: KEY = VALUE lines (floats, huge ints, tables, nested arrays), an edit of a
    valid file, text that is not UTF-8, or random bytes."""
    how = draw(st.sampled_from(["lines", "lines", "edit", "not-utf8", "bytes"]))
    if how == "lines":
        keys = draw(st.lists(st.sampled_from(_CHIP_KEYS), min_size=1, max_size=6))
        return "".join(f"{k} = {draw(_toml_value())}\n" for k in keys).encode()
    if how == "edit":
        s = list(_VALID_CHIP)
        for _ in range(draw(st.integers(1, 4))):
            s[draw(st.integers(0, len(s) - 1))] = draw(st.characters())
        return "".join(s).encode("utf-8", "surrogatepass")
    if how == "not-utf8":
        return _VALID_CHIP.encode() + draw(st.binary(min_size=1, max_size=8)) + b"\xff"
    return draw(st.binary(max_size=3000))
