"""The forward program as the backward pass reads it: each einsum with the versions of the global values it
reads and writes (a value resharded by a collective is a new version of the same global value), which
version the forward keeps for the backward, and the program's inputs and outputs.

Every statement is also planned as written (the planner's default plan): a product whose operands do not
meet as written (case 4, a contraction sharded differently on the two sides) gets the collectives its plan
runs first, and the local einsum then reads the versions those make. Those versions, when an AllGather
made them, are the forward's *gathered copies*: the backward either gathers again from the version the
program wrote (the copy is freed, as FSDP does) or reads the copy the forward kept (``keep_gathered``).

    >>> fw = analyze(parse("In[B_X, D] * W[D_X, F] -> Out[B_X, F]"), Mesh(X=4), {})
    >>> fw.einsums[0].read[1], fw.einsums[0].kept[1]          # the plan gathers W; the copy is W[D, F]
    (W[D, F], W[D, F])
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.registry import RECORDS
from shardalg.algebra.statements import apply_statement
from shardalg.algebra.traffic import Sizes
from shardalg.errors import ShapeMismatch, ShardalgError, UsageError
from shardalg.notation.plan import Plan, Step
from shardalg.notation.syntax import Apply, Arrow, Collective, Op, Product, Program, Statement, Tensor

from .held import Held
from .planner import Problem, plan

__all__ = ["Forward", "Einsum", "Call", "grad_name", "analyze"]


def grad_name(name: str) -> str:
    """The name of the gradient of ``name``: ``W`` -> ``dW``, ``W_in`` -> ``dW_in``."""
    return f"d{name}"


# ---- the forward program, read as versions of global values ----------------------------------------


@dataclass(frozen=True)
class Einsum:
    """One forward einsum ``left · right -> out`` as the program wrote it (the shardings at use).

    ``plan`` is the statement's default plan; ``read`` the two operands its local einsum multiplies (the
    written ones unless the plan reshards them first); ``kept[i]`` is ``read[i]`` when an AllGather (a
    statement or a step of the plan) made it, else None: the gathered copy the forward may keep."""

    index: int
    left: Tensor
    right: Tensor
    out: Tensor
    contract: tuple[str, ...] | None
    roots: tuple[str, str, str]  # the global values of left, right, out
    statement: Statement
    plan: Plan | None = None
    read: tuple[Tensor, Tensor] | None = None
    kept: tuple[Tensor | None, Tensor | None] = (None, None)


@dataclass(frozen=True)
class Call:
    """One forward function statement ``f(operands) -> out`` (elementwise, a reduction, softmax, a norm) as the
    program wrote it: ``operands`` are the tensors it reads, ``roots`` the global values of the operands and
    of ``out`` (last)."""

    index: int
    apply: Apply
    operands: tuple[Tensor, ...]
    out: Tensor
    roots: tuple[str, ...]
    statement: Statement
    plan: Plan | None = None


@dataclass
class Forward:
    """What backward needs to know about a forward program.

    ``origin[r]``: the tensor as global value ``r`` was made (a program input, an einsum's output);
    ``latest[r]``: its last version; ``gathered[t]``: for a tensor made by an AllGather statement, the
    tensor it was gathered from; ``root[name]``: the global value a name denotes (a collective may rename);
    ``plans``: the default plan of each statement that runs something, in program order.
    """

    program: Program
    mesh: Mesh
    sizes: dict[str, int]
    einsums: list[Einsum] = field(default_factory=list)
    origin: dict[str, Tensor] = field(default_factory=dict)
    latest: dict[str, Tensor] = field(default_factory=dict)
    gathered: dict[Tensor, Tensor] = field(default_factory=dict)
    root: dict[str, str] = field(default_factory=dict)
    produced: set[str] = field(default_factory=set)
    plans: list[Plan] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    nodes: list[Einsum | Call] = field(default_factory=list)  # the einsums and function calls, in order

    def stored(self, t: Tensor) -> Tensor:
        """The version of ``t`` the forward keeps for the backward: undo AllGathers (their copies are freed)."""
        while t in self.gathered:
            t = self.gathered[t]
        return t

    @property
    def inputs(self) -> list[str]:
        """Global values the program reads but does not make, in order of first use."""
        return [r for r in self.origin if r not in self.produced]

    @property
    def outputs(self) -> list[str]:
        """Global values made by an einsum or a function and read by no later one, in order."""
        read = {r for e in self.nodes for r in e.roots[:-1]}
        return [e.roots[-1] for e in self.nodes if e.roots[-1] not in read]


def _named(t: Tensor, what: str) -> str:
    if not t.name:
        raise UsageError(f"backward needs named tensors: {what} {t} has no name", fix="name it, e.g. A[I, J]")
    return t.name


def analyze(program: Program, mesh: Mesh, sizes: dict[str, int], checked: bool = False) -> Forward:
    """Read a forward program statement by statement; a ShapeMismatch when a statement reads a value in a
    sharding that is not the one the program last gave it. ``checked``: the program passed every legality
    rule already (a model's program, checked when it was read), so its statements are planned without the
    rules run again."""
    fw = Forward(program, mesh, sizes)
    held = (
        Held()
    )  # each global value's layouts (:mod:`.held`): a collective's output is held beside its input

    def see(t: Tensor, what: str) -> str:
        name = _named(t, what)
        r = fw.root.setdefault(name, name)
        if r not in fw.latest:
            fw.origin[r] = fw.latest[r] = t
            held.computed(r, t)
        elif held.find(r, t) is None:
            raise ShapeMismatch(
                f"{t} is read in a sharding the program did not give it: it was last {fw.latest[r]}",
                span=t.span,
                source=program.source,
                fix=f"write the collective that makes it, e.g. {fw.latest[r]} -> {t}",
            )
        return r

    def make(t: Tensor, r: str, moved: bool = False) -> None:
        fw.root[_named(t, "the result")] = r
        fw.latest[r] = t
        fw.origin.setdefault(r, t)
        if moved:  # a collective or a resharding: the value is held in one more layout
            held.moved(r, r, t)
        else:
            held.computed(r, t)

    def produce(s: Statement, result: Tensor, what: str) -> tuple[str, Plan]:
        """Plan ``s``, whose result is a new global value (its name not used before, or a UsageError)."""
        out_name = _named(result, "the result")
        if out_name in fw.root:
            raise UsageError(
                f"{out_name} is assigned twice; give each {what} a new name",
                span=result.span,
                source=program.source,
            )
        p = _planned(s, program, mesh, sizes, checked)
        fw.plans.append(p)
        fw.produced.add(out_name)
        make(result, out_name)
        return out_name, p

    for i, s in enumerate(program.statements):
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        if isinstance(expr, Product):
            left, right = expr.left, expr.right
            if not isinstance(left, Tensor) or not isinstance(right, Tensor):
                raise UsageError(
                    "backward takes one product per statement: name the intermediate (A · B -> T; T · C -> D)",
                    span=s.span,
                    source=program.source,
                )
            if result is None:
                raise UsageError(
                    "backward needs each product's result written: A · B -> C[...]",
                    span=s.span,
                    source=program.source,
                )
            roots = (see(left, "operand"), see(right, "operand"))
            out_name, p = produce(s, result, "product")
            read, kept = _operands(p, fw)
            fw.einsums.append(
                Einsum(i, left, right, result, expr.contract, (*roots, out_name), s, p, read, kept)
            )
            fw.nodes.append(fw.einsums[-1])
        elif isinstance(expr, Apply):
            if not all(isinstance(x, Tensor) for x in expr.operands):
                raise UsageError(
                    "backward takes one function per statement: name the intermediate (gelu(H) -> G; G + X -> R)",
                    span=s.span,
                    source=program.source,
                )
            if result is None:
                raise UsageError(
                    f"backward needs each function's result written: {expr.op.value}(...) -> Y[...]",
                    span=s.span,
                    source=program.source,
                )
            if getattr(RECORDS.get(expr.op), "derivative_of", None) is not None:
                raise UsageError(
                    f"{expr.op.value} is a derivative, a statement of a backward: shardalg derives first-order "
                    "backward passes of forward programs, not the backward of a backward",
                    span=s.span,
                    source=program.source,
                    fix="differentiate the forward program it came from",
                )
            operands = tuple(x for x in expr.operands if isinstance(x, Tensor))
            roots = tuple(see(x, "operand") for x in operands)
            out_name, p = produce(s, result, "statement")
            fw.calls.append(Call(i, expr, operands, result, (*roots, out_name), s, p))
            fw.nodes.append(fw.calls[-1])
        elif isinstance(expr, Collective) or (isinstance(expr, Tensor) and result is not None):
            arg = expr.arg if isinstance(expr, Collective) else expr
            while isinstance(arg, Collective):
                arg = arg.arg
            if not isinstance(arg, Tensor):
                raise UsageError(
                    "a collective in a program applies to a tensor", span=s.span, source=program.source
                )
            if _shifts(expr):
                raise UsageError(
                    "backward reads a program as dense einsums on global values, where every collective is the "
                    "identity; a Shift or a Send moves blocks between devices (it rolls or moves the value "
                    "along the dim its axis shards), so it has no place there",
                    span=s.span,
                    source=program.source,
                    fix="differentiate per-device code in the local view: shardalg.transpose (the transpose of "
                    "Shift_{X,+k} is Shift_{X,-k}, of Send_{X,+k} Send_{X,-k})",
                )
            r = see(arg, "operand")
            fw.plans.append(_planned(s, program, mesh, sizes, checked))
            if isinstance(expr, Collective):
                out = apply_statement(s if isinstance(s, Arrow) else expr, mesh, sizes)
                if out.name is None:
                    out = replace(out, name=arg.name)
                if expr.op is Op.ALL_GATHER and isinstance(expr.arg, Tensor):
                    fw.gathered[out] = arg
            else:
                assert result is not None
                out = result if result.name else replace(result, name=arg.name)
            make(out, r, moved=True)
        elif isinstance(expr, Tensor):
            see(expr, "declared")
        else:
            raise UsageError(f"backward cannot read the statement {s}", span=s.span, source=program.source)
    if not fw.nodes:
        raise UsageError("the program has no product or function: there is nothing to differentiate")
    return fw


def _planned(
    s: Statement, program: Program, mesh: Mesh, sizes: dict[str, int], checked: bool = False
) -> Plan:
    """The statement's default plan (planned as a checked Problem when the program passed the rules); a
    planner error is located in the program's source."""
    try:
        if checked:
            return plan(Problem(s, mesh, Sizes(sizes), None, checked=True))
        return plan(s, mesh, sizes)
    except ShardalgError as err:
        if err.span is None:
            err.span = getattr(s, "span", None)
        if program.source is not None:
            err.with_source(program.source)
        raise


def _operands(p: Plan, fw: Forward) -> tuple[tuple[Tensor, Tensor], tuple[Tensor | None, Tensor | None]]:
    """The operands the plan's local einsum reads, and for each the gathered copy it is (or None): a
    version whose making (the plan's steps before the einsum, then the program's AllGather statements)
    includes an AllGather. Plan steps that gather are recorded in ``fw.gathered`` like statements."""
    einsum = next(st for st in p.steps if st.op is Op.EINSUM)
    made: dict[Tensor, Step] = {}
    for st in p.steps:
        if st is einsum:
            break
        made[st.output] = st
    read = (einsum.inputs[0], einsum.inputs[1])
    kept: list[Tensor | None] = []
    for t in read:
        gathered, cur = False, t
        while cur in made:
            st = made[cur]
            if st.op is Op.ALL_GATHER:
                gathered = True
                fw.gathered.setdefault(st.output, st.inputs[0])
            cur = st.inputs[0]
        gathered = gathered or cur in fw.gathered
        kept.append(t if gathered else None)
    return read, (kept[0], kept[1])


def _shifts(expr: object) -> bool:
    """Whether a collective statement applies a Shift or a Send anywhere in its chain."""
    while isinstance(expr, Collective):
        if expr.op in (Op.SHIFT, Op.SEND):
            return True
        expr = expr.arg
    return False
