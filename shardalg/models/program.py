"""A program read as a whole model: its values, their roles, the repeated layer and the part outside it.

    >>> m = model_program("params W; layers L\\nIn[B_X, D] * W[D, F] -> Out[B_X, F]", mesh="X=4")
    >>> [v.name for v in m.params], m.layers
    (['W'], L)

The declarations (``params``, ``embeddings``, ``saved``, ``kvcache``, ``tokens``, ``layers``; see
:class:`shardalg.notation.syntax.Roles`) say what each tensor is. Every statement that reads an
``embeddings`` tensor, or a value made by such a statement, is *once*: outside the repeated layer (the
unembedding); so is the head's part that reads no ``embeddings`` tensor: a product or function after the
layer's last output (the last that depends on the layer's inputs) that depends on nothing the layer takes or
makes, whose result only once statements read (the final norm of the last layer's output, ``rmsnorm_D(Xl) ->
Xfr`` read by ``Xfr .* g_final``), and a collective of what only such statements read. Every other statement
is repeated ``layers`` times.

A value is one global tensor of the program, named by the name it first has (a collective that writes
``-> W_g[...]`` makes a new version of the same value). Its ``tensor`` is the tensor as first written: the
sharding it lives in (a parameter's, an activation's).

The notation has no elementwise steps (activations, softmax, norms, residual adds). Their traces are read as
such: a product's result that no later statement reads, other than the layer's output (the result of the
repeated layer's last product), feeds a step the notation does not show; an input first read after the layer's
first product is made by such a step from the dangling results made since the previous such input. These
steps cost no FLOPs here, and their backward reads their inputs (:mod:`.analysis` keeps them for the backward).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import sympy
from sympy import Expr, Integer

from shardalg.algebra.context import as_sizes, context_for, merged_sizes, refuse_unknown_dims, tensors_of
from shardalg.algebra.factors import parent_of
from shardalg.algebra.legality import check_or_raise
from shardalg.algebra.mesh import Mesh, as_mesh
from shardalg.algebra.ops.rename import renamed_dims, tied_sizes
from shardalg.algebra.ops.route import capacity_dims, derived_capacities
from shardalg.algebra.symbols import dim_size
from shardalg.errors import UsageError
from shardalg.notation.parse import parse
from shardalg.notation.syntax import (
    Apply,
    Arrow,
    Collective,
    Op,
    Product,
    Program,
    Role,
    Roles,
    Statement,
    Tensor,
)

from .quantities import dim_value, elements, tensor_bytes
from .source import program_source

__all__ = ["Value", "StatementInfo", "ModelProgram", "model_program", "replaced_notes"]


@dataclass(frozen=True)
class Value:
    """One global value: its name, the tensor as first written, its role, and where it is made."""

    name: str
    tensor: Tensor
    role: Role | None
    made_by: int | None  # index of the product statement that makes it; None for an input of the program
    once: bool  # outside the repeated layer

    @property
    def is_param(self) -> bool:
        return self.role in (Role.PARAMS, Role.EMBEDDINGS)

    @property
    def is_activation(self) -> bool:
        return self.role in (None, Role.SAVED)


@dataclass(frozen=True)
class StatementInfo:
    """One statement: what kind it is, the values it reads, the value it makes, and whether it is once."""

    index: int
    statement: Statement
    kind: str  # "product", "function", "collective", "declaration"
    reads: tuple[str, ...]
    result: str | None
    once: bool

    @property
    def computes(self) -> bool:
        """Whether it computes a new value: a product or a function (a norm, softmax, a residual add)."""
        return self.kind in ("product", "function")


@dataclass
class ModelProgram:
    """A program with roles, on a mesh, with sizes. Build it with :func:`model_program`."""

    program: Program
    mesh: Mesh
    sizes: dict[str, int]
    roles: Roles
    values: dict[str, Value]
    statements: tuple[StatementInfo, ...]
    layers: Expr
    notes: list[tuple[str, str]] = field(default_factory=list)  # (key, what was assumed): stated defaults
    aliases: dict[str, str] = field(default_factory=dict)  # every name the program writes -> its value's name
    hidden_makers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    layer_inputs: tuple[str, ...] = ()
    layer_output: str | None = None
    held: dict[str, Tensor] = field(
        default_factory=dict
    )  # value -> the version it lives in, when not its first
    ties: dict[str, str] = field(default_factory=dict)  # a renamed dim -> its unbound source (S -> T)
    replaced: tuple[str, ...] = ()  # what the caller's mesh and sizes replaced of the program's (in notes)

    def tied(self, x: Expr) -> Expr:
        """``x`` with each renamed dim's symbol as its source's (``rename_{T,S}`` with T unbound: S is T)."""
        if not self.ties or not isinstance(x, sympy.Basic):
            return x
        return x.subs({dim_size(to): dim_size(src) for to, src in self.ties.items()})

    def kept_tensor(self, name: str) -> Tensor:
        """The version of value ``name`` the program holds: as first written, or as a collective other than an
        AllGather last rewrote it (``ReduceScatter_{Y,T}(Att[B, T, D]{U_Y}) -> Att[B, T_Y, D]``: the partial
        sums are gone); an AllGather's copy is the backward's to make again, as it gathers again."""
        return self.held.get(name, self.values[name].tensor)

    # ---- values by role
    def with_role(self, *roles: Role | None) -> list[Value]:
        return [v for v in self.values.values() if v.role in roles]

    @property
    def params(self) -> list[Value]:
        """Parameters of the repeated layer, then those outside it (``embeddings``)."""
        return self.with_role(Role.PARAMS) + self.with_role(Role.EMBEDDINGS)

    @property
    def activations(self) -> list[Value]:
        return [v for v in self.values.values() if v.is_activation]

    @property
    def kv_cache(self) -> list[Value]:
        return self.with_role(Role.KV_CACHE)

    def factor(self, value_or_once: Value | bool) -> Expr:
        """How many times a value (or a statement, by its ``once``) occurs in the model: 1 or ``layers``."""
        once = value_or_once.once if isinstance(value_or_once, Value) else value_or_once
        return Integer(1) if once else self.layers

    def product_statements(self, once: bool | None = None) -> list[StatementInfo]:
        return [s for s in self.statements if s.kind == "product" and (once is None or s.once == once)]

    def computing_statements(self, once: bool | None = None) -> list[StatementInfo]:
        """The statements that compute a new value: products and functions (norms, softmax, residual adds)."""
        return [s for s in self.statements if s.computes and (once is None or s.once == once)]

    @property
    def layer_start(self) -> int:
        """The index of the repeated layer's first product or function (the statement count when there is
        none): the part outside written before it is the embedding side, after it the head."""
        layer = self.computing_statements(once=False)
        return layer[0].index if layer else len(self.statements)

    # ---- sizes
    def bytes_of(self, t: Tensor, *, per_device: bool = True) -> Expr:
        """Bytes of ``t`` on one device (its sharding), or in all (``per_device=False``: once, unsharded)."""
        return self.tied(tensor_bytes(t, self.mesh if per_device else None, self.sizes))

    def elements_of(self, t: Tensor) -> Expr:
        return self.tied(elements(t, self.sizes))

    @property
    def devices(self) -> Expr:
        return sympy.Mul(*(self.mesh.size_expr(a.name) for a in self.mesh.axes))

    @property
    def tokens(self) -> Expr | None:
        """Tokens per step: the product of the ``tokens`` dims' sizes, or None without a declaration."""
        if not self.roles.tokens:
            return None
        found: dict[str, Expr] = {}
        for v in self.values.values():
            for d in v.tensor.dims:
                if d.label in self.roles.tokens:
                    found.setdefault(d.label, dim_value(d, self.sizes))
        missing = [d for d in self.roles.tokens if d not in found]
        if missing:
            raise UsageError(
                f"tokens names {', '.join(missing)}, which no tensor of the program has",
                fix="list the dims that count tokens, e.g. tokens B, T",
            )
        return sympy.Mul(*(found[d] for d in self.roles.tokens))

    def value_named(self, name: str | None) -> Value | None:
        """The value a name the program writes (or a plan step's tensor name) belongs to."""
        return self.values.get(self.aliases.get(name, name)) if name else None

    def with_sizes(self, **sizes: int) -> ModelProgram:
        """The same program with more sizes bound."""
        return _again(self, {**self.sizes, **sizes})


# ---- reading a program ---------------------------------------------------------------------------------


def _named(t: Tensor, program: Program) -> str:
    if not t.name:
        raise UsageError(
            f"a whole model needs named tensors: {t} has no name",
            span=t.span,
            source=program.source,
            fix="name it, e.g. In[B, D]",
        )
    return t.name


def _layer_count(roles: Roles, sizes: Mapping[str, int], notes: list[tuple[str, str]]) -> Expr:
    if roles.layers is None:
        notes.append(("layers", "1 (no 'layers' declaration: the program is the whole model)"))
        return Integer(1)
    if isinstance(roles.layers, int):
        return Integer(roles.layers)
    if roles.layers in sizes:
        return Integer(sizes[roles.layers])
    return dim_size(roles.layers)


def refuse_sizes_it_lacks(program: Program, sizes: Mapping[str, int] | str | None) -> None:
    """A UsageError when ``sizes`` binds a dim ``program`` lacks (a size would be ignored without a word);
    the layer count's symbol (``layers L``) and the program's own ``where`` sizes count as its dims."""
    given = [d for d in as_sizes(sizes) if d not in program.sizes]
    layers = program.roles.layers if program.roles is not None else None
    known = [d for t in tensors_of(program) for d in t.dim_names] + (
        [layers] if isinstance(layers, str) else []
    )
    refuse_unknown_dims(given, known, "--sizes", "the program")


def resized(m: ModelProgram, changes: Mapping[str, int], free: Sequence[str] = ()) -> ModelProgram:
    """``m`` again with ``changes`` bound and the dims in ``free`` unbound; a routing's capacity, derived from
    its tokens, is derived again (a smaller batch routes fewer tokens), and so is a renamed dim (S of
    ``rename_{T,S}``: T's size)."""
    again = capacity_dims(m.program.statements) | set(renamed_dims(m.program.statements))
    sizes = {k: v for k, v in m.sizes.items() if k not in free and k not in again}
    return _again(m, {**sizes, **changes})


def _again(m: ModelProgram, sizes: Mapping[str, int]) -> ModelProgram:
    """``m``'s program read again with ``sizes`` (over its ``where``, as any read): a size bound here is the
    tool's (a microbatch's B, a solved-for dim), not one the caller gave in place of the program's, so only
    what ``m``'s caller replaced is said again."""
    bare = replace(m.program, mesh=None, sizes=())  # nothing of its own for ``sizes`` to replace
    out = model_program(bare, m.mesh, {**dict(m.program.sizes), **sizes})
    out.program, out.replaced = m.program, m.replaced
    out.notes[:0] = replaced_notes(m.replaced)
    return out


def replaced_notes(replaced: Sequence[str]) -> list[tuple[str, str]]:
    """The notes of what the caller's mesh and sizes replaced of the program's
    (:func:`~shardalg.algebra.context.merged_sizes`): ``sizes: --sizes L=2 replaces the program's L=80``; a
    mesh's line may start with the words that gave it (``--slice v5e-8 gives the mesh ...``)."""
    return [("sizes" if line.startswith("--sizes ") else "mesh", line) for line in replaced]


def _unsharded_axes(m: ModelProgram) -> list[tuple[str, str]]:
    """A note naming the mesh axes (of more than one device) that shard no tensor of the program: over them
    every device holds the same copy of everything (the model is replicated), and no collective runs."""
    used = {parent_of(a) for t in tensors_of(m.program) for a in (*t.sharded_axes, *t.unreduced)}
    idle = [a for a in m.mesh.axes if a.name not in used and a.size != 1]
    if not idle:
        return []
    names = ", ".join(a.name if a.size is None else f"{a.name}={a.size}" for a in idle)
    ways = sympy.Mul(*(m.mesh.size_expr(a.name) for a in idle))
    count = f"{int(ways):,}" if ways.is_Integer else str(ways)
    over = "it" if len(idle) == 1 else "them"
    return [
        (
            "replicated",
            f"no tensor of the program is sharded over {names}: every device holds the same copy over {over} "
            f"({count} ways)",
        )
    ]


def derived_sizes(statements: Sequence[object], given: Mapping[str, int]) -> dict[str, tuple[str, int, str]]:
    """The sizes a program derives from ``given``, each dim with its kind (``renamed``: S of ``rename_{T,S}``
    is T's size; ``capacity``: a routing's capacity from its tokens, k and cf), its size and the line that
    says so. The model and the search both bind them."""
    tied = tied_sizes(statements, given)
    derived = derived_capacities(statements, {**given, **{d: n for d, (n, _) in tied.items()}})
    out = {d: ("renamed", n, said) for d, (n, said) in tied.items()}
    return out | {d: ("capacity", n, said) for d, (n, said) in derived.items()}


def model_program(
    program: Program | str,
    mesh: Mesh | Mapping[str, int] | str | None = None,
    sizes: Mapping[str, int] | str | None = None,
    *,
    check: Callable[[Program, Mesh, dict[str, int]], object] = check_or_raise,
) -> ModelProgram:
    """Read ``program`` (notation text, a file's name, a model preset's name, or a Program) as a model on
    ``mesh`` with ``sizes`` (the program's ``mesh`` line and ``where`` clause apply too). Checks legality, and
    that every role names a tensor of the program. ``check(program, mesh, sizes)`` checks it, with every size
    bound (default: :func:`~shardalg.algebra.legality.check_or_raise`; a search passes one that checks each
    statement once per search: :meth:`shardalg.search.price.Pricer.check`)."""
    if isinstance(program, str):
        program = parse(program_source(program))
    if not isinstance(program, Program):
        raise UsageError(f"a model is a program in the notation, not {type(program).__name__}")
    found = derived_sizes(program.statements, merged_sizes(program.sizes, sizes)[0])
    if found:
        sizes = {**as_sizes(sizes), **{dim: n for dim, (_, n, _) in found.items()}}
    ctx = context_for(program, as_mesh(mesh), sizes)
    if ctx.mesh is None:
        raise UsageError(
            "a model needs a mesh: pass mesh='X=4,Y=2' (CLI: --mesh X=4,Y=2) or write 'mesh X=4'"
        )
    check(program, ctx.mesh, ctx.sizes)
    roles = program.roles or Roles()
    notes = replaced_notes(ctx.replaced)
    layers = _layer_count(roles, ctx.sizes, notes)
    notes += [(k, said) for k in ("capacity", "renamed") for key, _, said in found.values() if key == k]

    root: dict[str, str] = {}
    first: dict[str, Tensor] = {}
    made_by: dict[str, int] = {}
    held: dict[str, Tensor] = {}
    infos: list[StatementInfo] = []
    once_values: set[str] = set()
    embeddings = set(roles.embeddings)
    for i, s in enumerate(program.statements):
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        reads: list[str] = []
        for t in tensors_of(expr):
            name = _named(t, program)
            r = root.setdefault(name, name)
            first.setdefault(r, t)
            if r not in reads:
                reads.append(r)
        out: str | None = None
        if isinstance(expr, Product) or _applies(expr):
            kind = "product" if isinstance(expr, Product) else "function"
            if result is not None:
                out = _named(result, program)
                if out in root:
                    raise UsageError(
                        f"{out} is made twice; give each {kind}'s result a new name",
                        span=result.span,
                        source=program.source,
                    )
                root[out] = out
                first[out] = result
                made_by[out] = i
        elif isinstance(expr, Collective) or result is not None:
            kind = "collective"
            if result is not None and reads:
                name = _named(result, program)
                root.setdefault(name, reads[0])  # a new version of the value it reads
                if isinstance(expr, Collective) and not _gathers(expr) and root[name] == reads[0]:
                    held[reads[0]] = result
        else:
            kind = "declaration"
        once = any(r in embeddings or r in once_values for r in reads)
        if once and out is not None:
            once_values.add(out)
        infos.append(StatementInfo(i, s, kind, tuple(reads), out, once))

    infos = _with_head(infos, made_by, roles)
    declared = [n for role in Role for n in roles.names(role)]
    unknown = [n for n in declared if n not in first]
    if unknown:
        raise UsageError(
            f"{', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} declared but not a tensor of the program "
            f"(its tensors: {', '.join(first) or 'none'})",
            fix="declare a tensor the program writes, or add a line that writes it, e.g. W_emb[V, D]",
        )
    touched_by: dict[str, set[bool]] = {}
    for info in infos:
        for r in (*info.reads, *((info.result,) if info.result else ())):
            touched_by.setdefault(r, set()).add(info.once)
    values = {
        name: Value(name, t, roles.role_of(name), made_by.get(name), touched_by.get(name, {False}) == {True})
        for name, t in first.items()
    }
    for name in roles.embeddings:
        values[name] = replace(values[name], once=True)
    model = ModelProgram(program, ctx.mesh, dict(ctx.sizes), roles, values, tuple(infos), layers, notes, root)
    model.held = held
    model.replaced = ctx.replaced
    notes += _unsharded_axes(model)
    model.ties = {to: src for to, src in renamed_dims(program.statements).items() if to not in ctx.sizes}
    notes += [
        (
            "renamed",
            f"{to} = {src} (rename_{{{src},{to}}}: the same positions; {src} unbound, {to} written as {src})",
        )
        for to, src in model.ties.items()
    ]
    _hidden_steps(model)
    return model


def _with_head(infos: list[StatementInfo], made_by: Mapping[str, int], roles: Roles) -> list[StatementInfo]:
    """``infos`` with the head's statements once: those after the layer's last output that depend on nothing
    the layer takes or makes and whose results only the part outside the layer reads (the final norm of the
    last layer's output, ``rmsnorm_D(Xl) -> Xfr``, read by ``Xfr .* g_final``); see the module docstring."""
    layer = [s for s in infos if not s.once and s.computes]
    if not layer:
        return infos
    from_layer = {r for r in layer[0].reads if r not in made_by and roles.role_of(r) in (None, Role.SAVED)}
    end = layer[0].index
    for s in infos:
        if not s.once and s.computes and from_layer.intersection(s.reads):
            from_layer.update((s.result,) if s.result is not None else ())
            end = s.index
    head: set[int] = set()

    def outside(name: str) -> bool:
        """Whether only the part outside the layer reads ``name``: a collective of it (the gather of the final
        norm's result before the unembedding, under Megatron SP) is no reader of its own, as whatever reads
        the version it makes reads the value."""
        readers = [t for t in infos if name in t.reads and t.kind != "collective"]
        return bool(readers) and all(t.once or t.index in head for t in readers)

    for s in reversed(infos):
        if s.once or s.index <= end or not s.computes or s.result is None:
            continue
        if outside(s.result):
            head.add(s.index)
    for s in infos:  # a collective of what only the part outside the layer reads is the head's
        if not s.once and s.kind == "collective" and s.index > end and s.reads and all(map(outside, s.reads)):
            head.add(s.index)
    return [replace(s, once=True) if s.index in head else s for s in infos]


def _applies(expr: object) -> bool:
    """Whether an expression is a function of the notation (possibly of products: ``X + A·B``)."""
    return isinstance(expr, Apply)


def _gathers(expr: object) -> bool:
    """Whether a collective statement's chain includes an AllGather."""
    while isinstance(expr, Collective):
        if expr.op is Op.ALL_GATHER:
            return True
        expr = expr.arg
    return False


def _hidden_steps(m: ModelProgram) -> None:
    """Find the layer's inputs and output and the inputs made by steps the notation does not show (their
    makers: the dangling results since the previous such input); see the module docstring."""
    for once in (False, True):
        products = m.computing_statements(once)
        if not products:
            continue
        read_later: set[str] = set()
        dangling: list[str] = []
        for info in reversed([s for s in m.statements if s.once == once]):
            if info.kind == "function":  # a written function is a shown step: its result is no trace
                read_later.update(info.reads)
                continue
            if info.kind == "product" and info.result is not None and info.result not in read_later:
                dangling.insert(0, info.result)
            if info.kind != "collective":  # a collective makes a new version of what it reads: no consumer
                read_later.update(info.reads)
        last = products[-1].result
        if not once:
            m.layer_output = last
            m.layer_inputs = tuple(
                r for r in products[0].reads if m.values[r].is_activation and m.values[r].made_by is None
            )
        pending: list[str] = []
        seen: set[str] = set()
        for info in products:
            for r in info.reads:
                v = m.values[r]
                if r in seen or not v.is_activation or v.made_by is not None:
                    continue
                seen.add(r)
                if info is not products[0]:
                    m.hidden_makers[r] = tuple(pending)
                    pending = []
            if info.result is not None and info.result in dangling and (once or info.result != last):
                pending.append(info.result)
        if pending:  # dangling results no input reads: a step the notation does not show reads them
            m.hidden_makers[f"(after {last})"] = tuple(pending)
