"""A sharded program cut into the groups of statements its search prices as pieces (:mod:`.pieces`).

:func:`split_statements` cuts a program into groups, each product with the statements it needs written before
it and the reduction of its result after it (an attention core, and products that read one operand, one group
each); :func:`blocks` joins groups into whole blocks of a layer, cut where the residual stream is written (what
Megatron SP over an attention core is priced by); a candidate's :class:`Pieces` are the sub-programs of its
groups (:func:`sub_program`) and the additions of a gradient's parts that no piece writes (:func:`joins_of`,
found on the unsharded program; :func:`join_program` makes one such addition a program of its own).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

from shardalg.models.analysis import Analysis, analyze
from shardalg.models.program import model_program
from shardalg.notation.plan import Op
from shardalg.notation.syntax import Apply, Arrow, Collective, Product, Program, Roles

from .price import Settings
from .space import _tensors

__all__ = [
    "Pieces",
    "Split",
    "blocks",
    "is_product",
    "is_softmax",
    "join_program",
    "joined",
    "joins_of",
    "split_statements",
    "sub_program",
]


@dataclass(frozen=True)
class Pieces:
    """The sub-programs a candidate is priced by: its pieces (``subs``, one per run of ``split``) and the
    additions of its gradients' parts that no piece writes (``joins``, one per ``split.joins``)."""

    split: Split
    subs: tuple[Program, ...]
    joins: tuple[Program, ...]


@dataclass(frozen=True)
class Split:
    """How a candidate's statements are priced: the places of :func:`split_statements`'s groups in each piece
    (``runs``) and the additions of a gradient's parts that no piece writes (``joins``: the value's name and
    whether it is outside the repeated layer, :func:`joins_of`)."""

    runs: tuple[tuple[int, ...], ...]
    joins: tuple[tuple[str, bool], ...]


def is_product(s: object) -> bool:
    return isinstance(s, Arrow) and isinstance(s.expr, Product)


def is_softmax(s: object) -> bool:
    return isinstance(s, Arrow) and isinstance(s.expr, Apply) and s.expr.op is Op.SOFTMAX


def _softmax_read(s: Any, before: tuple[Any, ...]) -> bool:
    """Whether statement ``s`` reads the result of a softmax among ``before`` (``P·V`` after ``softmax(Sc) -> P``)."""
    made = {r.result.name for r in before if is_softmax(r)}
    return bool(made & _names((s,)))


def split_statements(program: Program) -> list[tuple[Any, ...]]:
    """The statements of a sharded program in pieces: each product with the statements written before it
    that it reads (its gathers, a norm; one it does not read waits for the next product: a rename of V written
    with K's goes with ``P·V``, whose backward reduces dV through it) and those right after it that read its
    result (the reduction of its partial sums, as Megatron SP's ReduceScatter: its backward needs them);
    statements after the last product join it.

    Products that read one operand are one piece (Q's, K's and V's projections of ``Ha``; the gate's and the
    up projection of ``Hn``): the whole program reshards that operand once for all of them, forward and
    backward (a gradient plan reads a version another made, free), and keeps one gathered copy of it; priced
    apart, each piece paid for its own (on ``X=2,Y=2,Z=2``, 9 of 107 of the causal layer's candidates
    sampled came out with more communication, or more bytes kept, than their whole program).

    An attention core is one piece: the renames of K and V, ``Q·K -> Sc``, the softmax and ``P·V -> O``
    (the product after a softmax joins the piece of the product before it), so a causal softmax's mask,
    which halves both products forward and backward, is seen inside the piece."""
    out: list[tuple[Any, ...]] = []
    run: list[Any] = []
    last: str | None = None  # the result of the product that ended the last piece
    waiting = 0  # statements written before it that it did not read, carried on
    order = program.statements.index
    for s in program.statements:
        if is_product(s) and out and _softmax_read(s, (*out[-1], *run)):
            # the core's second product: with its first and its softmax, in the order they are written
            out[-1] = tuple(sorted((*out[-1], *run, s), key=order))
            run, last, waiting = [], s.result.name, 0
        elif is_product(s):
            mine, run = _read_by(run, s)
            if out and _operands(s) & {n for r in out[-1] if is_product(r) for n in _operands(r)}:
                # a sibling of the last piece's product: it reads one of its operands
                out[-1] = tuple(sorted((*out[-1], *mine, s), key=order))
            else:
                out.append((*mine, s))
            last, waiting = s.result.name, len(run)
        elif len(run) == waiting and out and last is not None and last in _names((s,)):
            out[-1] = (*out[-1], s)
        else:
            run.append(s)
    if run:
        if out:
            out[-1] = out[-1] + tuple(run)
        else:
            out.append(tuple(run))
    return out


def _operands(product: Any) -> set[str]:
    """The names of a product statement's operands."""
    return _names((product.expr,))


def _read_by(run: list[Any], product: Any) -> tuple[list[Any], list[Any]]:
    """The statements of ``run`` whose results ``product`` reads, directly or through one another (in order),
    and the others; a statement without a named result stays with the product."""
    needed, mine = _operands(product), set()
    for i in range(len(run) - 1, -1, -1):
        made = run[i].result.name if isinstance(run[i], Arrow) else None
        if made is None or made in needed:
            mine.add(i)
            needed |= _names((run[i],))
    return [s for i, s in enumerate(run) if i in mine], [s for i, s in enumerate(run) if i not in mine]


def _leaves(expr: object) -> list[Any]:
    """Every tensor of a statement, a function's operands among them (``rmsnorm_D(In) .* g``)."""
    if isinstance(expr, Apply):
        return [t for o in expr.operands for t in _leaves(o)]
    if isinstance(expr, Arrow):
        return _leaves(expr.expr) + _leaves(expr.result)
    if isinstance(expr, Product | Collective):
        return [
            t
            for part in (
                getattr(expr, "left", None),
                getattr(expr, "right", None),
                getattr(expr, "arg", None),
            )
            if part is not None
            for t in _leaves(part)
        ]
    return _tensors(expr)


def _names(statements: tuple[Any, ...]) -> set[str]:
    return {t.name for s in statements for t in _leaves(s) if t.name is not None}


def sub_program(program: Program, statements: tuple[Any, ...]) -> Program:
    roles = program.roles or Roles()
    names = _names(statements)
    keep = {k: tuple(n for n in getattr(roles, k) if n in names) for k in ("params", "embeddings", "kvcache")}
    return Program(
        statements, program.mesh, program.sizes, Roles(**keep, tokens=roles.tokens, layers=roles.layers)
    )


def _added(a: Analysis) -> Counter[tuple[str, bool]]:
    """The backward's additions of a gradient's parts as their own step (``dY + dRs -> dRs``: a value read by
    a function and by another statement), by gradient and part (once or in the repeated layer)."""
    return Counter(
        (s.output.name, info.once)
        for info, p in a.grad_plans
        for s in p.steps
        if s.op is Op.ADD and s.output.name is not None
    )


def joins_of(
    base: Program, whole: Analysis, st: Settings, runs: tuple[tuple[int, ...], ...]
) -> tuple[tuple[str, bool], ...]:
    """The values whose gradient's parts the whole backward adds in a step of its own while their readers lie
    in different pieces (none of the pieces writes that addition): (name, whether it is outside the repeated
    layer), once per such addition. Found on the unsharded program (the additions are the program's, whatever
    its sharding), its statements in pieces as ``runs`` joins them (:func:`joined`)."""
    if st.mode != "train":
        return ()
    split = Counter[tuple[str, bool]]()
    for g in joined(base, split_statements(base), runs):
        sub = model_program(sub_program(base, g), st.mesh, st.sizes)
        split.update(_added(analyze(sub, st.mode, "none")))
    missing = _added(whole) - split
    return tuple((name[1:], once) for (name, once), n in sorted(missing.items()) for _ in range(n))


def blocks(
    groups: list[tuple[Any, ...]], stream: set[str], parts: list[bool | None]
) -> tuple[tuple[int, ...], ...]:
    """The places of ``groups`` (:func:`split_statements`) in blocks priced as one piece, each ending with a
    group that writes one of the ``stream`` values (the residual stream: a value whose gradient's parts the
    backward adds in a step of its own), before a group of another part of the step (``parts``: each group's,
    True outside the repeated layer: the layer's last block before the head) or with the last group."""
    blocks: list[tuple[int, ...]] = []
    run: list[int] = []
    for k, g in enumerate(groups):
        if run and parts[k] != parts[run[-1]]:
            blocks.append(tuple(run))
            run = []
        run.append(k)
        if any(isinstance(s, Arrow) and s.result.name in stream for s in g):
            blocks.append(tuple(run))
            run = []
    if run:
        blocks.append(tuple(run))
    return tuple(blocks)


def joined(
    program: Program, groups: list[tuple[Any, ...]], runs: tuple[tuple[int, ...], ...]
) -> list[tuple[Any, ...]]:
    """Each run's groups as one group, its statements in the order the program writes them."""
    where = {s: i for i, s in enumerate(program.statements)}
    return [tuple(sorted((s for k in run for s in groups[k]), key=where.__getitem__)) for run in runs]


def join_program(program: Program, name: str) -> Program:
    """The addition of two parts of ``name``'s gradient (``dRs' + dRs'' -> dRs``) as a program of its own, in
    ``name``'s sharding in ``program``: its forward is the backward's step."""
    (t, *_) = [t for s in program.statements for t in _leaves(s) if t.name == name]
    parts = (replace(t, name=f"d{name}'"), replace(t, name=f"d{name}''"))
    roles = program.roles or Roles()
    return Program(
        (Arrow(Apply(Op.ADD, parts), replace(t, name=f"d{name}")),),
        program.mesh,
        program.sizes,
        Roles(tokens=roles.tokens, layers=roles.layers),
    )
