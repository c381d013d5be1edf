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
  written out) is the statement ``silu(H1) -> H2``, and ``h * (0.5 * (1 + tanh(sqrt(2/pi) * (h + 0.044715
  * h^3))))`` (jax.nn.gelu's default tanh form, or GPT-2's ``0.5 * h * (...)``; its constants read, within
  bf16's rounding) the statement ``gelu(H1) -> H2`` (gelu's erf form is not the notation's gelu: it is
  primed), and ``max(h, 0)`` (jax.nn.relu) ``relu(H1) -> H2``;
- each collective of the compiled HLO is attached to the statement XLA inserted it for (its metadata's
  operation and source line: a dot_general's to the product, an add's to the ``+``), its replica groups are
  mesh axes (:mod:`.groups`), and it becomes a **step**: a collective on the statement's operand (before the
  local product or elementwise op; an all-to-all of an elementwise statement's operand is read from the
  layouts it moves between) or on its result (after it); an operand of an elementwise statement that the
  result shards over more axes gets a free slice. A collective with several such statements (on one line)
  is attached to the one of them whose local op it alone makes meet (whose plan as read so far is
  incomplete without it and complete with it), and is otherwise listed apart. XLA's plan of a statement
  is complete when its local op meets; :mod:`.verdict` does not price an incomplete one.

Its parts are :mod:`.records` (what a program is made of) and :mod:`.placing` (XLA's collectives as steps);
imports: :mod:`.hlo`, :mod:`.groups`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from .groups import GroupAxes
from .hlo import HloCollective, collectives
from .placing import aligned, completes, on_operand, on_result, place, slices, unmapped
from .records import BINARY, ELEMENTWISE, LETTERS, AuditProgram, Layout, Statement, XlaStep, dtype_of

__all__ = ["build"]


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
    elementwise: dict[int, str] = {}  # a value made by an elementwise op of one tensor, unwritten: the op
    inside: set[int] = set()  # the values a recognised function's chain makes on the way (gelu's tanh form)
    laid: set[int] = set()  # the values the program writes in a layout (read or made by a statement, inputs)
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
        """``a`` when ``e`` is ``a * logistic(a)`` (either order): silu."""
        if e["primitive"] != "mul" or len(e["ins"]) != 2 or None in e["ins"]:
            return None
        for a, b in (e["ins"], e["ins"][::-1]):
            made = made_by.get(b)
            if made is not None and made["primitive"] == "logistic" and made["ins"] == [a]:
                return a
        return None

    def strip(v: int | None) -> int | None:
        """``v`` with the dtype conversions that made it seen through."""
        e = made_by.get(v) if v is not None else None
        while e is not None and e["primitive"] == "convert_element_type":
            v = e["ins"][0]
            e = made_by.get(v) if v is not None else None
        return v

    def by_constant(v: int | None, primitive: str, want: float) -> int | None:
        """The operand ``u`` when ``v`` is ``primitive(c, u)`` (either order) with a literal ``c`` within 1%
        of ``want`` (bf16 rounds gelu's constants by up to 0.2%); None otherwise."""
        e = made_by.get(strip(v)) if v is not None else None
        if e is None or e["primitive"] != primitive or len(e["ins"]) != 2 or e["ins"].count(None) != 1:
            return None
        c = next(x for x, i in zip(e.get("consts", [None, None]), e["ins"], strict=True) if i is None)
        if c is None or abs(c - want) > 0.01 * abs(want):
            return None
        return strip(next(i for i in e["ins"] if i is not None))

    def tanh_of_cube(v: int | None, a: int) -> bool:
        """Whether ``v`` is ``1 + tanh(sqrt(2/pi) * (a + 0.044715 * a^3))``, gelu's tanh form's core."""
        t = made_by.get(strip(by_constant(v, "add", 1.0)))
        if t is None or t["primitive"] != "tanh":
            return False
        inner = made_by.get(strip(by_constant(t["ins"][0], "mul", math.sqrt(2 / math.pi))))
        if inner is None or inner["primitive"] != "add" or None in inner["ins"]:
            return False
        for x, y in (inner["ins"], inner["ins"][::-1]):
            cube = made_by.get(strip(by_constant(y, "mul", 0.044715)))
            if (
                strip(x) == a
                and cube is not None
                and cube["primitive"] == "integer_pow"
                and cube.get("y") == 3
            ):
                return strip(cube["ins"][0]) == a
        return False

    def gelu_of(e: Mapping[str, Any]) -> int | None:
        """``a`` when ``e`` is gelu's tanh form of ``a``, its constants read:
        ``a * (0.5 * (1 + tanh(sqrt(2/pi) * (a + 0.044715 * a^3))))`` (``jax.nn.gelu``'s default) or
        ``(0.5 * a) * (1 + tanh(...))`` (as GPT-2 writes it), either order, dtype conversions seen through."""
        if e["primitive"] != "mul" or len(e["ins"]) != 2 or None in e["ins"]:
            return None
        for x, y in (e["ins"], e["ins"][::-1]):
            for a, rest in ((strip(x), by_constant(y, "mul", 0.5)), (by_constant(x, "mul", 0.5), y)):
                if a is not None and tanh_of_cube(rest, a):
                    return a
        return None

    def chain_of(e: Mapping[str, Any], a: int) -> set[int]:
        """The values a recognised function's chain makes from ``a`` on the way to ``e``'s output."""
        out: set[int] = set()
        todo = [u for u in e["ins"] if u is not None]
        while todo:
            u = todo.pop()
            if u == a or u in out or u not in made_by:
                continue
            out.add(u)
            todo.extend(i for i in made_by[u]["ins"] if i is not None)
        return out

    def relu_of(e: Mapping[str, Any]) -> int | None:
        """``a`` when ``e`` is ``max(a, 0)`` (either order): relu (``jax.nn.relu``)."""
        return by_constant(e["outs"][0], "max", 0.0) if e["primitive"] == "max" else None

    # the functions of UNARY, each by its chain
    recognised = {"silu": silu_of, "gelu": gelu_of, "relu": relu_of}

    def unary_of(e: Mapping[str, Any]) -> tuple[str, int] | None:
        """The function of one tensor ``e`` ends (:data:`.records.UNARY`) and the tensor it reads, recognised
        from its chain: a tensor of the program, of the result's shape; None for any other op."""
        for op, of in recognised.items():
            if (a := of(e)) is not None:
                return (op, a) if root(a) is not None and shape(a) == shape(e["outs"][0]) else None
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
        if e is not None and (e["primitive"] == "dot_general" or unary_of(e) is not None or two_tensors(e)):
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
                elementwise[v] = e["primitive"]
        else:
            tensor[v] = f"T{next(counter)}"
            if e is not None:
                notes.append(
                    f"{tensor[v]} is made by {e['primitive']}, outside the notation: its layout is XLA's"
                )
        return tensor[v]

    def layout(v: int) -> Layout:
        laid.add(v)
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
        elif (unary := unary_of(e)) is not None:
            op, a = unary
            st = Statement(layout(a), layout(a), layout(e["outs"][0]), e["line"], op=op)
            inside.update(chain_of(e, a))
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
    inputs = [layout(v) for v in rec["inputs"]]
    # a value inside a recognised function's chain is written by the function, unless the program reads it too
    unwritten = {op for v, op in elementwise.items() if v not in inside or v in laid}
    if unwritten:
        notes.append(
            "elementwise ops of one tensor ("
            + ", ".join(sorted(unwritten))
            + ") are not written: a value they make from one tensor (and constants) is that tensor primed "
            "(H1'), in the layout XLA gave it"
        )
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
            outside.append(unmapped(c, order, "not inserted for one statement of the program"))
        else:
            pending.setdefault(statements.index(found[0]), []).append(c)
    for k, cs in sorted(pending.items()):
        permutes: list[tuple[HloCollective, GroupAxes]] = []
        after = [c for c in cs if not on_operand(statements[k], c, order, sizes, mesh, permutes)]
        outside.extend(
            XlaStep(c.kind, g.axes, c, problem="a permute XLA's later steps do not explain")
            for c, g in permutes
        )
        for c in reversed(after):
            on_result(statements[k], c, order, mesh, outside)
    for c, found in several:  # a line with several statements of its kind: the one it alone completes
        what = "products" if c.primitive == "dot_general" else f"{c.primitive} statements"
        done = [st for st in found if completes(st, c, order, sizes, mesh)]
        if len(done) == 1:
            place(done[0], c, order, sizes, mesh, outside)
            notes.append(
                f"{c.name}: {len(found)} {what} on line {c.line}; attached to the one whose local "
                f"{'product' if done[0].op == '·' else 'op'} it alone makes meet, {done[0].text}"
            )
        else:
            outside.append(unmapped(c, order, "not inserted for one statement of the program"))
            notes.append(f"{c.name}: {len(found)} {what} on line {c.line}; it is listed apart")
    for st in statements:
        if st.op == "·":
            slices(st)
        else:
            aligned(st)
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
