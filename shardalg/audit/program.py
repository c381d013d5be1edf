"""A traced JAX function as a shardalg program, and XLA's collectives as each statement's plan.

From the record of :func:`shardalg.audit.trace.trace` (plain data):

- **dims** get names: the inputs' from the user's tensors (``x[B_X, D]``) or letters in order of first use;
  a dot_general's contracted and batch dims are the same dims on both sides, its result's dims are its
  operands' free dims; an elementwise op's operands and result share dims (a size-1 dim against a larger one
  broadcasts), and a broadcast_in_dim's operand dims are the result dims it maps them to;
- **tensors** get names: an input its parameter's (or the user's) name, a statement's result ``H1``,
  ``H2``, ... (``Out`` for the function's output), a value made by elementwise ops (gelu, tanh, a scale by a
  constant, ``x * x``) from one tensor that tensor's name with a prime: ``H1'`` (those ops are not written;
  a note names them);
- each dot_general is a **statement** ``lhs · rhs -> out`` with XLA's shardings (read by inspection), and so
  is each add, sub and mul of two distinct tensors (``H1 + x -> H2``, ``-``, ``.*``): an operand that is a
  broadcast (a gain ``g[D]`` against ``H[B, D]``) is written as the lower-rank tensor it was made from, which
  the notation broadcasts; an elementwise op of two tensors the notation has no statement for (a div) makes
  a tensor ``E3'`` of its own, with a note; ``h * logistic(h)`` of a tensor ``h`` (jax.nn.silu's chain, or
  written out) is the statement ``silu(H1) -> H2`` (gelu's chain is not recognised: it is primed);
- each collective of the compiled HLO is attached to the statement XLA inserted it for (its metadata's
  operation and source line: a dot_general's to the product, an add's to the ``+``), its replica groups are
  mesh axes (:mod:`.groups`), and it becomes a **step**: a collective on the statement's operand (before the
  local product or elementwise op; an all-to-all of an elementwise statement's operand is read from the
  layouts it moves between) or on its result (after it); an operand of an elementwise statement that the
  result shards over more axes gets a free slice. A collective with several such statements (on one line)
  is attached to the one of them whose local op it alone makes meet (whose plan as read so far is
  incomplete without it and complete with it), and is otherwise listed apart. XLA's plan of a statement
  is complete when its local op meets; :mod:`.verdict` does not price an incomplete one.

Imports: :mod:`shardalg.notation` (the notation's subscripts), :mod:`.hlo`, :mod:`.groups`, and (inside
:func:`_meets`) :func:`shardalg.costs.programplan.program_plan`, to tell whether a plan as read is complete.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import prod
from typing import Any

from shardalg.errors import UsageError

from .groups import GroupAxes, axes_of_groups, permute_axes, permute_cycle
from .hlo import HloCollective, collectives

__all__ = ["Layout", "XlaStep", "Statement", "AuditProgram", "build", "dtype_of"]

ELEMENTWISE = frozenset(
    "add sub mul div neg exp log tanh logistic integer_pow pow max min abs sqrt rsqrt erf sin cos "
    "convert_element_type select_n sign square exp2 log1p expm1 erf_inv".split()
)
BINARY = {"add": "+", "sub": "-", "mul": ".*"}  # elementwise ops of two tensors the program writes
UNARY = frozenset({"silu"})  # functions of one tensor the program writes, recognised from their chain
LETTERS = "BDFIJKLMNPQRSTVWZ"
DTYPES = {  # jax's and torch's dtype names -> the notation's (bf16, its default, is written without one)
    "float64": "fp64",
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": None,
    "int32": "int32",
    "int8": "int8",
}


def dtype_of(name: str) -> str | None:
    """The notation's dtype for a jax or torch dtype name (``torch.float32`` too)."""
    short = name.removeprefix("torch.")
    if short not in DTYPES:
        raise UsageError(f"a value of dtype {name}: the notation has fp64, fp32, fp16, bf16, int32 and int8")
    return DTYPES[short]


@dataclass(frozen=True)
class Layout:
    """A tensor in one layout: its name, dims (name, axes major first) and unreduced axes."""

    name: str
    dims: tuple[tuple[str, tuple[str, ...]], ...]
    unreduced: tuple[str, ...] = ()
    dtype: str | None = None  # the notation's spelling (fp32); None: bf16, the notation's default

    def text(self) -> str:
        def sub(axes: Sequence[str]) -> str:
            if not axes:
                return ""
            if all(len(a) == 1 for a in axes):
                return "_" + "".join(axes)
            return "_{" + ",".join(axes) + "}"

        body = f"{self.name}{': ' + self.dtype if self.dtype else ''}[{', '.join(d + sub(a) for d, a in self.dims)}]"
        return body + ("{" + ", ".join(f"U_{a}" for a in self.unreduced) + "}" if self.unreduced else "")

    def local(self, sizes: Mapping[str, int], mesh: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(sizes[d] // _size_of(axes, mesh) for d, axes in self.dims)

    def replace_dim(self, dim: str, axes: tuple[str, ...]) -> Layout:
        return replace(self, dims=tuple((d, axes if d == dim else a) for d, a in self.dims))


@dataclass(frozen=True)
class XlaStep:
    """One collective of XLA's, in the notation: ``op``, axes (sub-axes in Shardy's spelling), the tensor
    before and after, and the HLO instruction it was read from. ``text`` is its statement; ``problem`` says
    what could not be mapped (then ``before``/``after`` are None)."""

    op: str
    axes: tuple[str, ...]
    hlo: HloCollective | None
    before: Layout | None = None
    after: Layout | None = None
    dim: str | None = None
    problem: str = ""

    @property
    def sub_axes(self) -> tuple[str, ...]:
        return tuple(a for a in self.axes if ":" in a)

    @property
    def subscript(self) -> str:
        return GroupAxes(self.axes).text if self.axes else "?"

    @property
    def text(self) -> str:
        if self.before is None or self.after is None:
            return f"{self.op}_{self.subscript} on {self.hlo.name if self.hlo else '?'}: {self.problem}"
        sub = self.subscript
        if self.op in ("ReduceScatter", "AllToAll", "Slice") and self.dim:
            sub = "{" + ",".join([*self.axes, self.dim]) + "}"
        elif len(self.axes) > 1 or len(sub) > 1:
            sub = "{" + ",".join(self.axes) + "}" if any(len(a) > 1 for a in self.axes) else sub
        return f"{self.op}_{sub}({self.before.text()}) -> {self.after.text()}"

    @property
    def bytes_per_device(self) -> int:
        """The operand's bytes on each device (the HLO's own shape); 0 for a free slice."""
        if self.hlo is None or self.op == "Slice":
            return 0
        width = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "s32": 4, "s8": 1, "u8": 1}.get(self.hlo.dtype, 4)
        return prod(self.hlo.operand) * width


@dataclass
class Statement:
    """One dot_general (``op`` ``·``), an elementwise op of two tensors (``+``, ``-``, ``.*``; a
    lower-rank operand broadcasts), or a function of one (``silu``: ``rhs`` is ``lhs``): its operands and
    result in XLA's layouts, and XLA's steps for it."""

    lhs: Layout
    rhs: Layout
    out: Layout
    line: int | None
    before: list[XlaStep] = field(default_factory=list)
    after: list[XlaStep] = field(default_factory=list)
    op: str = "·"

    @property
    def primitive(self) -> str:
        """The jax primitive it was read from (a collective's metadata names it); a function's own name,
        which no metadata names (its chain's ops are several)."""
        return {v: k for k, v in BINARY.items()}.get(self.op, "dot_general" if self.op == "·" else self.op)

    @property
    def operands(self) -> tuple[Layout, ...]:
        return (self.lhs,) if self.op in UNARY else (self.lhs, self.rhs)

    def _local(self, lhs: Layout, rhs: Layout, out: Layout) -> str:
        if self.op in UNARY:
            return f"{self.op}({lhs.text()}) -> {out.text()}"
        op = f" {self.op} " if self.op != "·" else " *_LOCAL " if out.unreduced else " · "
        return f"{lhs.text()}{op}{rhs.text()} -> {out.text()}"

    @property
    def text(self) -> str:
        if self.op in UNARY:
            return self._local(self.lhs, self.rhs, self.out)
        return f"{self.lhs.text()} {self.op} {self.rhs.text()} -> {self.out.text()}"

    @property
    def steps(self) -> list[XlaStep]:
        return [*self.before, *self.after]

    def plan_text(self) -> str:
        """XLA's plan as a program: operand collectives, the local product, result collectives."""
        lhs = self.before_last(self.lhs)
        rhs = self.before_last(self.rhs)
        first = self.after[0].before if self.after and self.after[0].before is not None else self.out
        lines = [s.text for s in self.before] + [self._local(lhs, rhs, first)]
        return "\n".join(lines + [s.text for s in self.after])

    def before_last(self, t: Layout) -> Layout:
        out = t
        for s in self.before:
            if s.after is not None and s.after.name == t.name:
                out = s.after
        return out


@dataclass
class AuditProgram:
    """The function as statements, the sizes of its dims, the mesh, and what was left aside."""

    statements: list[Statement]
    sizes: dict[str, int]
    mesh: dict[str, int]
    inputs: list[Layout]
    outside: list[XlaStep]
    notes: list[str]

    @property
    def text(self) -> str:
        return "\n".join(s.text for s in self.statements)

    @property
    def sub_axes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for s in self.statements for st in s.steps for a in st.sub_axes))


class _Dims:
    """Union-find over (value, position) pairs: which array dims are one named dim."""

    def __init__(self) -> None:
        self.parent: dict[tuple[int, int], tuple[int, int]] = {}
        self.names: dict[tuple[int, int], str] = {}

    def find(self, x: tuple[int, int]) -> tuple[int, int]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        na, nb = self.names.get(ra), self.names.get(rb)
        if na and nb and na != nb:
            return  # two named dims met (e.g. a square matmul of two inputs): keep both names
        self.parent[rb] = ra
        if nb and not na:
            self.names[ra] = nb


def _unify(rec: Mapping[str, Any], dims: _Dims) -> None:
    shape = lambda v: rec["values"][str(v)]["shape"]  # noqa: E731
    for e in rec["eqns"]:
        ins = [v for v in e["ins"] if v is not None]
        if e["primitive"] == "dot_general":
            (lc, rc, lb, rb), (lhs, rhs), out = e["dims"], e["ins"], e["outs"][0]
            for a, b in zip(lc, rc, strict=True):
                dims.union((lhs, a), (rhs, b))
            for k, (a, b) in enumerate(zip(lb, rb, strict=True)):
                dims.union((lhs, a), (rhs, b))
                dims.union((lhs, a), (out, k))
            free_l = [d for d in range(len(shape(lhs))) if d not in lc and d not in lb]
            free_r = [d for d in range(len(shape(rhs))) if d not in rc and d not in rb]
            for k, (v, d) in enumerate([(lhs, d) for d in free_l] + [(rhs, d) for d in free_r]):
                dims.union((v, d), (out, len(lb) + k))
        elif e["primitive"] in ELEMENTWISE:
            out = e["outs"][0]
            for v in ins:
                if len(shape(v)) == len(shape(out)):  # a dim of size 1 against a larger one broadcasts
                    for d in range(len(shape(out))):
                        if shape(v)[d] == shape(out)[d]:
                            dims.union((out, d), (v, d))
        elif _pure_broadcast(e, shape):
            for d, to in enumerate(e["bdims"]):
                dims.union((e["ins"][0], d), (e["outs"][0], to))


def _pure_broadcast(e: Mapping[str, Any], shape: Any) -> bool:
    """A broadcast_in_dim that only adds dims (each operand dim is a result dim of the same size): the
    notation's broadcasting of a lower-rank operand (``g[D]`` against ``H[B, D]``)."""
    if e["primitive"] != "broadcast_in_dim" or "bdims" not in e or e["ins"][0] is None:
        return False
    src, out = shape(e["ins"][0]), shape(e["outs"][0])
    return len(src) == len(e["bdims"]) and all(src[d] == out[to] for d, to in enumerate(e["bdims"]))


def build(
    rec: Mapping[str, Any], names: Sequence[str], given: Sequence[Layout | None] = (), *, hlo_key: str = "hlo"
) -> AuditProgram:
    """The program and XLA's steps of a trace record; ``names`` the inputs' names, ``given`` the user's
    tensors for them (their dim names), or None each."""
    mesh = dict(zip(rec["mesh"]["names"], rec["mesh"]["sizes"], strict=True))
    values = rec["values"]
    dims = _Dims()
    notes: list[str] = []
    for k, v in enumerate(rec["inputs"]):
        if k < len(given) and given[k] is not None:
            for d, (dname, _) in enumerate(given[k].dims):
                dims.names[dims.find((v, d))] = dname
    _unify(rec, dims)
    used = set(dims.names.values())
    pool = iter(c for c in LETTERS + "".join(f"N{k}" for k in range(100)) if c not in used)

    def dim_name(v: int, d: int) -> str:
        r = dims.find((v, d))
        if r not in dims.names:
            dims.names[r] = next(pool)
        return dims.names[r]

    tensor: dict[int, str] = {v: names[k] for k, v in enumerate(rec["inputs"])}
    made_by: dict[int, dict[str, Any]] = {o: e for e in rec["eqns"] for o in e["outs"]}
    outputs = set(rec["outputs"])
    counter = iter(range(1, 10_000))
    elementwise: set[str] = set()
    shape = lambda v: values[str(v)]["shape"]  # noqa: E731

    def source(v: int) -> int:
        """The value a pure broadcast (or a chain of them) was made from; ``v`` itself otherwise."""
        e = made_by.get(v)
        while e is not None and _pure_broadcast(e, shape):
            v = e["ins"][0]
            e = made_by.get(v)
        return v

    def root(v: int | None) -> str | None:
        """The tensor of the program ``v`` is, or is made from by elementwise ops of it alone (``H1`` for
        ``H1'``), a broadcast seen through; None for a literal, a constant, a scalar."""
        if v is None:
            return None
        v = source(v)
        if not shape(v) or (v not in tensor and v not in made_by):
            return None
        e = made_by.get(v)
        if e is not None and e["primitive"] == "broadcast_in_dim" and e["ins"][0] is None:
            return None
        return name_of(v).rstrip("'")

    def silu_of(e: Mapping[str, Any]) -> int | None:
        """``a`` when ``e`` is ``a * logistic(a)`` (either order) of a tensor ``a`` of the program: silu."""
        if e["primitive"] != "mul" or len(e["ins"]) != 2 or None in e["ins"]:
            return None
        for a, b in (e["ins"], e["ins"][::-1]):
            made = made_by.get(b)
            if made is not None and made["primitive"] == "logistic" and made["ins"] == [a]:
                return a if root(a) is not None and shape(a) == shape(e["outs"][0]) else None
        return None

    def two_tensors(e: Mapping[str, Any]) -> bool:
        """Whether ``e`` is an add, sub or mul of two distinct tensors of the program: a statement."""
        if e["primitive"] not in BINARY or len(e["ins"]) != 2:
            return False
        a, b = (root(u) for u in e["ins"])
        if a is None or b is None or a == b:
            return False
        out = e["outs"][0]
        have = {dims.find((out, d)) for d in range(len(shape(out)))}
        return all(  # each operand's dims are the result's (a lower-rank operand broadcasts)
            dims.find((source(u), d)) in have for u in e["ins"] for d in range(len(shape(source(u))))
        )

    def name_of(v: int) -> str:
        if v in tensor:
            return tensor[v]
        e = made_by.get(v)
        if e is not None and (e["primitive"] == "dot_general" or silu_of(e) is not None or two_tensors(e)):
            tensor[v] = "Out" if v in outputs and len(outputs) == 1 else f"H{next(counter)}"
        elif e is not None and e["primitive"] in ELEMENTWISE:
            roots = {r for r in (root(u) for u in e["ins"]) if r is not None}
            base = next(iter(roots)) if len(roots) == 1 else f"E{next(counter)}"
            tensor[v] = base + "'"
            if len(roots) > 1:
                notes.append(
                    f"{tensor[v]} is made by {e['primitive']} of {', '.join(sorted(roots))}, an elementwise "
                    "op the audit does not write: it is written as a tensor of its own, in the layout XLA gave it"
                )
            else:
                elementwise.add(e["primitive"])
        else:
            tensor[v] = f"T{next(counter)}"
            if e is not None:
                notes.append(
                    f"{tensor[v]} is made by {e['primitive']}, outside the notation: its layout is XLA's"
                )
        return tensor[v]

    def layout(v: int) -> Layout:
        spec = rec["specs"].get(str(v))
        n = len(values[str(v)]["shape"])
        if spec is None:
            spec = [[] for _ in range(n)]
            notes.append(f"{name_of(v)}: no sharding was reported for it; written replicated")
        dims = tuple((dim_name(v, d), tuple(spec[d])) for d in range(n))
        return Layout(name_of(v), dims, (), dtype_of(values[str(v)]["dtype"]))

    statements: list[Statement] = []
    by_line: dict[int | None, list[Statement]] = {}
    for e in rec["eqns"]:
        if e["primitive"] == "dot_general":
            lhs, rhs = layout(e["ins"][0]), layout(e["ins"][1])
            st = Statement(lhs, rhs, layout(e["outs"][0]), e["line"])
        elif (a := silu_of(e)) is not None:
            st = Statement(layout(a), layout(a), layout(e["outs"][0]), e["line"], op="silu")
        elif two_tensors(e):  # a broadcast operand is written as the lower-rank tensor it was made from
            lhs, rhs = layout(source(e["ins"][0])), layout(source(e["ins"][1]))
            st = Statement(lhs, rhs, layout(e["outs"][0]), e["line"], op=BINARY[e["primitive"]])
        else:
            continue
        statements.append(st)
        by_line.setdefault(e["line"], []).append(st)
    sizes: dict[str, int] = {}  # of the dims named: given, or by the layouts above
    for v, info in values.items():
        for d, n in enumerate(info["shape"]):
            r = dims.find((int(v), d))
            if r in dims.names:
                sizes[dims.names[r]] = n
    written = {st.out.name for st in statements} | {names[k] for k in range(len(rec["inputs"]))}
    for v in rec["outputs"]:
        if v in made_by and name_of(v) not in written:
            notes.append(f"the function's output is {name_of(v)}, made by ops the program does not write")
    if elementwise:
        notes.append(
            "elementwise ops of one tensor ("
            + ", ".join(sorted(elementwise))
            + ") are not written: a value they make from one tensor (and constants) is that tensor primed "
            "(H1'), in the layout XLA gave it"
        )
    inputs = [layout(v) for v in rec["inputs"]]
    outside: list[XlaStep] = []
    order = rec["mesh"]
    pending: dict[int, list[HloCollective]] = {}
    several: list[tuple[HloCollective, list[Statement]]] = []
    for c in collectives(rec[hlo_key]):
        if c.backward:
            continue
        found = [  # an elementwise op's by its known line only (ops inside a library function have none)
            st
            for st in by_line.get(c.line, [])
            if st.primitive == c.primitive and (c.line is not None or st.op == "·")
        ]
        if len(found) > 1:
            several.append((c, found))
        elif not found:
            outside.append(_unmapped(c, order, "not inserted for one statement of the program"))
        else:
            pending.setdefault(statements.index(found[0]), []).append(c)
    for k, cs in sorted(pending.items()):
        permutes: list[tuple[HloCollective, GroupAxes]] = []
        on_result = [c for c in cs if not _on_operand(statements[k], c, order, sizes, mesh, permutes)]
        outside.extend(
            XlaStep(c.kind, g.axes, c, problem="a permute XLA's later steps do not explain")
            for c, g in permutes
        )
        for c in reversed(on_result):
            _on_result(statements[k], c, order, mesh, outside)
    for c, found in several:  # a line with several statements of its kind: the one it alone completes
        what = "products" if c.primitive == "dot_general" else f"{c.primitive} statements"
        done = [st for st in found if _completes(st, c, order, sizes, mesh)]
        if len(done) == 1:
            _place(done[0], c, order, sizes, mesh, outside)
            notes.append(
                f"{c.name}: {len(found)} {what} on line {c.line}; attached to the one whose local "
                f"{'product' if done[0].op == '·' else 'op'} it alone makes meet, {done[0].text}"
            )
        else:
            outside.append(_unmapped(c, order, "not inserted for one statement of the program"))
            notes.append(f"{c.name}: {len(found)} {what} on line {c.line}; it is listed apart")
    for st in statements:
        if st.op == "·":
            _slices(st)
        else:
            _aligned(st)
    hlo_names = {"f32": "fp32", "bf16": None, "f16": "fp16", "f64": "fp64", "s32": "int32", "s8": "int8"}
    for st in statements:
        for s in st.steps:
            if s.hlo is None or s.before is None or s.op == "Slice" or s.hlo.dtype not in hlo_names:
                continue
            if hlo_names[s.hlo.dtype] != s.before.dtype:
                notes.append(
                    f"XLA communicates {s.before.name} as {s.hlo.dtype} ({s.hlo.name}) where the program has "
                    f"{s.before.dtype or 'bf16'} (XLA's CPU backend computes bf16 in f32): priced as the program's"
                )
    return AuditProgram(statements, sizes, mesh, inputs, outside, notes)


def _place(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    outside: list[XlaStep],
) -> None:
    """Place one collective (not a permute) on the statement's operand, else on its result."""
    if not _on_operand(st, c, order, sizes, mesh, []):
        _on_result(st, c, order, mesh, outside)


def _meets(st: Statement, sizes: Mapping[str, int], mesh: Mapping[str, int]) -> bool:
    """Whether XLA's plan of ``st`` as read so far (its free slices added) is complete: its local product
    or op meets, so the plan is priced as written, not as shardalg's cheapest."""
    from shardalg.algebra.mesh import Mesh
    from shardalg.costs.programplan import REPLANNED, program_plan
    from shardalg.errors import ShardalgError
    from shardalg.notation.parse import parse

    trial = replace(st, before=list(st.before), after=list(st.after))
    if trial.op == "·":
        _slices(trial)
    else:
        _aligned(trial)
    if any(s.before is None or s.sub_axes for s in trial.steps):
        return False
    try:
        _, said = program_plan(parse(trial.plan_text()), Mesh(dict(mesh)), dict(sizes))
    except ShardalgError:
        return False
    return not any(REPLANNED in n for n in said)


def _completes(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
) -> bool:
    """Whether ``c`` (not a permute) makes XLA's plan of ``st`` complete where it was not."""
    if c.kind == "Permute" or _meets(st, sizes, mesh):
        return False
    trial = replace(st, before=list(st.before), after=list(st.after))
    scratch: list[XlaStep] = []
    _place(trial, c, order, sizes, mesh, scratch)
    return not scratch and _meets(trial, sizes, mesh)


def group_axes(c: HloCollective, order: Mapping[str, Any]) -> GroupAxes:
    names, sizes, devices = order["names"], order["sizes"], order["devices"]
    if c.kind == "Permute":
        return permute_axes(c.groups, names, sizes, devices)
    return axes_of_groups(c.groups, names, sizes, devices)


def _unmapped(c: HloCollective, order: Mapping[str, Any], why: str) -> XlaStep:
    g = group_axes(c, order)
    return XlaStep(c.kind, g.axes, c, problem=g.problem or why)


def _size_of(axes: Sequence[str], mesh: Mapping[str, int]) -> int:
    out = 1
    for a in axes:
        if ":" in a:
            out *= int(a.rsplit(")", 1)[1])
        else:
            out *= mesh[a]
    return out


def _on_operand(
    st: Statement,
    c: HloCollective,
    order: Mapping[str, Any],
    sizes: Mapping[str, int],
    mesh: Mapping[str, int],
    permutes: list[tuple[HloCollective, GroupAxes]],
) -> bool:
    """Place ``c`` on one of the statement's operands (an all-gather of it); False if it is not one.

    A collective-permute of an operand is held in ``permutes`` until the all-gather that reads its result
    says which layout it made (XLA slices, permutes, then gathers: ``Permute_{X,Y}: B[J, K_X] -> B[J, K_Y]``
    before ``AllGather_Y``)."""
    g = group_axes(c, order)
    if g.problem:
        return False
    axes = g.axes
    if c.kind == "Permute":
        permutes.append((c, g))
        return True
    if c.kind == "AllToAll" and st.op != "·":
        return _all_to_all(st, c, axes, sizes, mesh)
    if c.kind != "AllGather" or c.dim is None:
        return False
    mesh_sub = dict(mesh)
    for a in axes:
        mesh_sub.setdefault(a, _size_of([a], mesh))
    for t in [st.before_last(x) for x in st.operands]:
        local = t.local(sizes, mesh_sub)
        dim, held = t.dims[c.dim]
        if local == tuple(c.operand):
            if tuple(held[len(held) - len(axes) :]) == axes:
                after = t.replace_dim(dim, held[: len(held) - len(axes)])
                st.before.append(XlaStep(c.kind, axes, c, t, after, dim))
                return True
        elif permutes and tuple(permutes[0][0].result) == tuple(c.operand):
            # the permute made dim c.dim sharded over the gather's axes, the rest of the layout as it was;
            # before it, XLA sliced the operand (free) when its block was larger than the permute's
            others = [k for k in range(len(local)) if k != c.dim]
            if not all(local[k] == c.operand[k] for k in others) or sizes[dim] != c.result[c.dim]:
                continue
            if local[c.dim] % c.operand[c.dim]:
                continue
            pc, pg = permutes[0]
            moved = t.replace_dim(dim, axes)
            sliced = _sliced(t, dim, local[c.dim] // c.operand[c.dim], moved, pc, order)
            if sliced is None:
                continue
            permutes.pop(0)
            if sliced != t:
                sub = sliced.dims[c.dim][1][-1]
                st.before.append(XlaStep("Slice", (sub,), pc, t, sliced, dim, problem=""))
            # the notation's Permute renames axes in a cycle (XLA's K_{X,Y:(1)2} -> K_Y: X to Y:(1)2 to Y:(2)2)
            cycle = permute_cycle([a for _, a in sliced.dims], [a for _, a in moved.dims], dict(mesh))
            st.before.append(XlaStep("Permute", cycle or pg.axes, pc, sliced, moved, dim))
            st.before.append(XlaStep(c.kind, axes, c, moved, t.replace_dim(dim, ()), dim))
            return True
    return False


def _like_result(st: Statement, t: Layout) -> Layout:
    """Operand ``t`` of an elementwise statement in the layout its local op needs: each of its dims sharded
    as the result's first layout (before the steps on the result) shards it."""
    first = st.after[0].before if st.after and st.after[0].before is not None else st.out
    want = dict(first.dims)
    return replace(t, dims=tuple((d, want.get(d, a)) for d, a in t.dims))


def _all_to_all(
    st: Statement, c: HloCollective, axes: tuple[str, ...], sizes: Mapping[str, int], mesh: Mapping[str, int]
) -> bool:
    """Place an all-to-all on an operand of an elementwise statement: the one operand whose block has the
    collective's elements and that reaches the result's layout by moving exactly ``axes`` (minor last) from
    one of its dims to another (the HLO's tuple form names no dims: the layouts do)."""
    for t in [st.before_last(x) for x in st.operands]:
        want = _like_result(st, t)
        if want == t or prod(t.local(sizes, mesh)) != prod(c.operand):
            continue
        moved = [(d, a, b) for (d, a), (_, b) in zip(t.dims, want.dims, strict=True) if a != b]
        if len(moved) != 2:
            continue
        k = len(axes)
        (d1, a1, b1), (d2, a2, b2) = moved
        for (_src, held, left), (dst, have, get) in (
            ((d1, a1, b1), (d2, a2, b2)),
            ((d2, a2, b2), (d1, a1, b1)),
        ):
            if held[len(held) - k :] == axes and held[: len(held) - k] == left and get == (*have, *axes):
                st.before.append(XlaStep("AllToAll", axes, c, t, want, dst))
                return True
    return False


def _aligned(st: Statement) -> None:
    """The free slices XLA made of an elementwise statement's operands: an operand whose dim the result
    (its first layout) shards over more axes than the operand, after XLA's steps on it, is sliced to it."""
    for t in st.operands:
        t = st.before_last(t)
        want = _like_result(st, t)
        for (d, have), (_, need) in zip(t.dims, want.dims, strict=True):
            if have != need and need[: len(have)] == have:
                sliced = t.replace_dim(d, need)
                st.before.append(XlaStep("Slice", need[len(have) :], None, t, sliced, d))
                t = sliced


def _slices(st: Statement) -> None:
    """The free slices XLA made (a dynamic-slice, no collective) so that the local product has the partial
    sums its result's first step reduces: a contracted dim sharded over axes on one side only, those axes
    unreduced in the local result, gets the other operand sliced over them."""
    first = st.after[0].before if st.after and st.after[0].before is not None else st.out
    lhs, rhs = st.before_last(st.lhs), st.before_last(st.rhs)
    out_dims = {d for d, _ in st.out.dims}
    for dim, la in lhs.dims:
        ra = dict(rhs.dims).get(dim)
        if ra is None or dim in out_dims or la == ra:
            continue
        for have, other in ((la, rhs), (ra, lhs)):
            if have and not dict(other.dims)[dim] and set(have) <= set(first.unreduced):
                sliced = other.replace_dim(dim, have)
                st.before.append(XlaStep("Slice", have, None, other, sliced, dim))
                break


def _coordinate(axis: str, coords: Mapping[str, int], mesh: Mapping[str, int]) -> tuple[int, int]:
    """A device's coordinate along an axis or sub-axis ``Y:(k)m``, and that (sub-)axis's size."""
    if ":" not in axis:
        return coords[axis], mesh[axis]
    name, rest = axis.split(":")
    k, m = int(rest[1 : rest.index(")")]), int(rest[rest.index(")") + 1 :])
    return (coords[name] // (mesh[name] // (k * m))) % m, m


def _block(axes: Sequence[str], coords: Mapping[str, int], mesh: Mapping[str, int]) -> int:
    """Which block of a dim sharded over ``axes`` (major first) a device holds."""
    idx = 0
    for a in axes:
        c, n = _coordinate(a, coords, mesh)
        idx = idx * n + c
    return idx


def _sliced(
    t: Layout, dim: str, factor: int, moved: Layout, permute: HloCollective, order: Mapping[str, Any]
) -> Layout | None:
    """The layout XLA sliced ``t`` to before a permute to ``moved``: ``dim`` further split ``factor`` ways
    over the (sub-)axis for which every source-target pair hands the target the block it needs (found
    from the pairs, not assumed); ``t`` itself when ``factor`` is 1; None when no (sub-)axis fits."""
    names, sizes, devices = order["names"], order["sizes"], order["devices"]
    mesh = dict(zip(names, sizes, strict=True))
    where = {}
    for i, d in enumerate(devices):
        rest, coords = i, {}
        for n, s in zip(reversed(names), reversed(sizes), strict=True):
            coords[n] = rest % s
            rest //= s
        where[d] = coords
    held = dict(t.dims)[dim]
    target = dict(moved.dims)[dim]
    candidates: list[tuple[str, ...]] = [held] if factor == 1 else []
    if factor > 1:
        for n, size in mesh.items():
            if n in held or size % factor:
                continue
            for k in range(1, size // factor + 1):
                if (size // factor) % k == 0:
                    candidates.append((*held, n if factor == size else f"{n}:({k}){factor}"))
    for axes in candidates:
        if all(
            _block(axes, where[s], mesh) == _block(target, where[d], mesh)
            for s, d in permute.groups
            if s in where and d in where
        ):
            return t.replace_dim(dim, axes)
    return None


def _on_result(
    st: Statement, c: HloCollective, order: Mapping[str, Any], mesh: Mapping[str, int], outside: list[XlaStep]
) -> None:
    """Place ``c`` on the statement's result, working back from its last known layout (the collectives
    on the result are placed last first)."""
    g = group_axes(c, order)
    if g.problem:
        outside.append(XlaStep(c.kind, (), c, problem=g.problem))
        return
    axes = g.axes
    last = st.after[0].before if st.after and st.after[0].before is not None else st.out
    if c.kind == "AllReduce":
        before = replace(last, unreduced=tuple(dict.fromkeys([*last.unreduced, *axes])))
        after = last
        st.after.insert(0, XlaStep(c.kind, axes, c, before, after))
        return
    if c.kind == "ReduceScatter" and c.dim is not None:
        dim, held = last.dims[c.dim]
        if tuple(held[len(held) - len(axes) :]) == axes:
            before = replace(
                last.replace_dim(dim, held[: len(held) - len(axes)]), unreduced=(*last.unreduced, *axes)
            )
            st.after.insert(0, XlaStep(c.kind, axes, c, before, last, dim))
            return
    if c.kind == "AllGather" and c.dim is not None:
        dim, held = last.dims[c.dim]
        before = last.replace_dim(dim, (*held, *axes))
        st.after.insert(0, XlaStep(c.kind, axes, c, before, last, dim))
        return
    outside.append(XlaStep(c.kind, axes, c, problem=f"could not be placed in {st.text}"))
