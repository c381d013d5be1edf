"""The whole-model search over the degrees of a real slice: which physical axes hold the pipeline stages, the
pods over DCN as a data axis, and how the rest of the chips are factored into the mesh that FSDP and TP shard.

    >>> r = search_degrees(PROGRAM, "v5p-8960", "B=1280,T=4096", remat="block")   # doctest: +SKIP
    >>> r.winner.degrees.mesh_text, r.winner.microbatches, r.winner.seconds        # doctest: +SKIP

A degree point is a partition of the slice's physical axes (:mod:`shardalg.costs.topology`: a torus side, the
pods over DCN) into roles, since a logical axis is a product of whole physical axes:

- the pipeline axis ``P`` (none, the pods, or a product of torus sides whose chips divide the layer count), with
  ``m`` microbatches from :data:`MICROBATCH_FACTORS` times the stages;
- the pods over DCN, when they are not the pipeline, as their own axis ``R`` that only holds data (DP, or FSDP
  over DCN): a logical axis cannot mix DCN and ICI;
- the other torus sides grouped into at most :data:`MAX_LOGICAL` logical axes ``X``, ``Y``, ``Z`` (each set
  partition, in the slice's order).

Inside each point, every dimension map of the ordinary search's space (:mod:`.space`: DP, FSDP, TP, Megatron
TP's dim sets with Megatron SP, sequence parallelism, EP for a program with experts) on the logical axes is a
candidate; the pods' axis holds data only (the first batch dim; the parameters whole, DP, or along one dim,
FSDP). An axis takes only the choices whose dims its size divides; more than :data:`MAX_MAPS` dimension maps over
all the factorings is refused up front. A map its axes do not divide and one symmetric to another
(interchangeable axes) are dropped, counted; then a map whose parameters, gradients and optimizer state alone
(over the stages) pass the cap is pruned by its memory floor (:mod:`.degreefloor`, from its parameter dims,
no program written), counted with the least such map in the result, its JSON and on stderr; :data:`MAX_MAPS`
counts the maps left. Of those, a sharding the planner calls illegal and one whose program another map wrote
are dropped, counted.

Each candidate is priced by the model's own machinery: :func:`shardalg.models.step.step_seconds` (the parts of
:func:`shardalg.models.step.model_step` in seconds, without its formula) and
:func:`shardalg.models.memory.model_memory` (one repeated layer priced once, times the layer count), and with a
pipeline :func:`shardalg.models.pipeline.model_pipeline` per microbatch count, on the same analysis. So the
winner's seconds and bytes are what ``shardalg step`` and ``shardalg memory`` (with ``--pipeline P
--microbatches m``) print for the program :func:`degrees_program` writes. The outer loop is bounded: more than
:data:`MAX_POINTS` degree points is refused up front.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from math import prod
from typing import Any

from shardalg.algebra.context import context_for
from shardalg.algebra.mesh import Mesh
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.topology import Topology, slice_topology
from shardalg.errors import IllegalSharding, UsageError
from shardalg.models.analysis import analyze
from shardalg.models.expand import shard
from shardalg.models.memory import model_memory
from shardalg.models.pipeline import PipelineReport, model_pipeline
from shardalg.models.program import model_program, replaced_notes
from shardalg.models.source import program_source
from shardalg.models.step import DEFAULT_POLICY, step_seconds
from shardalg.models.trainstate import TrainState
from shardalg.models.unplanned import param_bytes
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Program

from .degreefloor import Floor
from .degreestext import result_json, result_text
from .numeric import parse_bytes
from .price import size_text
from .space import MAX_TOGETHER, Assignment, Choice, Pruned, Space, assignments_over, space_of

__all__ = [
    "MAX_MAPS",
    "MAX_POINTS",
    "MAX_LOGICAL",
    "MICROBATCH_FACTORS",
    "Degrees",
    "Candidate",
    "DegreesResult",
    "degree_points",
    "search_degrees",
]

MAX_POINTS = 256  # degree points (pipeline axis x pods x factoring x microbatches): above, refused up front
# dimension maps over all the factorings (each axis the dims it divides, symmetric maps dropped), each priced
# whole (about 0.2 s of CPU on LLaMA-3 70B): above, refused up front
MAX_MAPS = 2_000
MAX_LOGICAL = 3  # logical ICI axes a point factors the torus sides into
MICROBATCH_FACTORS = (1, 2, 4, 8)  # a pipeline of p stages tries m = p, 2p, 4p, 8p microbatches
LOGICAL_NAMES = ("X", "Y", "Z")
PIPE, PODS = "P", "R"


@dataclass(frozen=True)
class Degrees:
    """One degree point: the physical axes of the pipeline (empty: none), of the pods' data axis ``R`` (empty:
    no pods, or they pipeline), and of each logical ICI axis (name, physical axes), in mesh order."""

    pipeline: tuple[str, ...]
    pods: tuple[str, ...]
    ici: tuple[tuple[str, tuple[str, ...]], ...]

    @property
    def factoring(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        if self.pipeline:
            out[PIPE] = self.pipeline
        if self.pods:
            out[PODS] = self.pods
        out.update(dict(self.ici))
        return out

    @property
    def mesh_text(self) -> str:
        """``P=x,X=y,Y=z``: what ``--mesh`` takes with ``--slice``."""
        return ",".join(f"{k}={'*'.join(v)}" for k, v in self.factoring.items())

    def to_json(self) -> dict[str, Any]:
        return {"pipeline": list(self.pipeline), "pods": list(self.pods), "mesh": self.mesh_text}


@dataclass
class Candidate:
    """A priced point: degrees, the inner dimension map, microbatches (None: no pipeline), seconds and bytes per
    device (the worst stage's with a pipeline), and why it does not fit (empty: it fits)."""

    degrees: Degrees
    strategy: str
    assignment: Assignment
    microbatches: int | None
    seconds: float | None
    bytes: float
    refused: str = ""
    program: Program | None = None
    pipeline: PipelineReport | None = None
    comms: float = 0.0
    compute: float = 0.0

    @property
    def fits(self) -> bool:
        return not self.refused

    @property
    def stages(self) -> int:
        return self.pipeline.stages if self.pipeline is not None else 1

    def text(self) -> str:
        pipe = (
            f"pipeline {self.stages} stages x {self.microbatches} microbatches"
            if self.pipeline is not None
            else "no pipeline"
        )
        return f"{self.degrees.mesh_text} ({pipe}): {self.strategy}: {self.assignment}"

    def to_json(self) -> dict[str, Any]:
        return {
            "degrees": self.degrees.to_json(),
            "strategy": self.strategy,
            "params": self.assignment.params_text,
            "activations": self.assignment.activations_text,
            "stages": self.stages,
            "microbatches": self.microbatches,
            "seconds": self.seconds,
            "bytes": self.bytes,
            "fits": self.fits,
            "refused": self.refused or None,
            "pipeline": self.pipeline.to_json() if self.pipeline is not None else None,
        }


@dataclass(frozen=True)
class Floored:
    """The maps the memory floor pruned (:mod:`.degreefloor`): of how many, and the one of the least floor
    (a candidate without a program, its floor as its bytes)."""

    maps: int
    count: int
    least: Candidate | None

    def text(self, cap: float) -> str:
        least = f"; the least: {self.least.text()}, {size_text(self.least.bytes)}" if self.least else ""
        return (
            f"{self.count:,} of {self.maps:,} dimension maps pruned before any program is written: their "
            f"parameters, gradients and optimizer state alone (over the stages) pass {size_text(cap)}{least}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "maps": self.maps,
            "pruned": self.count,
            "least": self.least.to_json() if self.least is not None else None,
        }


@dataclass
class DegreesResult:
    """The search's winner, every priced candidate (fastest first among those that fit), the refusals counted
    by reason, and the settings the winner's commands need again."""

    slice: str
    sizes: dict[str, int]
    chip: Any
    cap: float
    remat: str | None
    policy: str
    points: int
    ranked: list[Candidate]
    refused: list[Candidate]
    dropped: dict[str, int]
    base: Program
    given: dict[str, int]
    notes: list[tuple[str, str]] = field(default_factory=list)
    floored: Floored = field(default_factory=lambda: Floored(0, 0, None))
    optimizer: str | None = None  # as given (None: the default), in the winner's commands

    def __str__(self) -> str:
        return result_text(self)

    def text(self, top: int = 10, explain: bool = False) -> str:
        return result_text(self, top, explain)

    def to_json(self, top: int = 10, explain: bool = False) -> dict[str, Any]:
        return result_json(self, top, explain)

    @property
    def winner(self) -> Candidate | None:
        return self.ranked[0] if self.ranked else None

    def runner_up(self) -> Candidate | None:
        """The best fitting candidate of other degrees than the winner's (another pipeline, pods or mesh)."""
        w = self.winner
        return next((c for c in self.ranked[1:] if w is not None and c.degrees != w.degrees), None)

    def best_without_pipeline(self) -> Candidate | None:
        return next((c for c in self.ranked if c.pipeline is None), None)

    def best_pipeline(self) -> Candidate | None:
        return next((c for c in self.ranked if c.pipeline is not None), None)


def _set_partitions(items: tuple[str, ...]) -> Iterator[list[tuple[str, ...]]]:
    """Every partition of ``items`` into blocks, each block in the items' order, blocks by their first item."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        yield [(first,), *part]
        for i in range(len(part)):
            yield [*part[:i], tuple(sorted((first, *part[i]), key=items.index)), *part[i + 1 :]]


def degree_points(topo: Topology, layers: int) -> list[tuple[Degrees, tuple[int, ...]]]:
    """Every degree point of ``topo`` for a model of ``layers`` layers, each with the microbatch counts it
    tries (empty: no pipeline). A pipeline's chips must divide the layer count; of the points that differ only
    by interchangeable physical axes (the same size, kind and wraparound), the first is kept."""
    sizes = {a.name: a.size for a in topo.axes}
    order = tuple(a.name for a in topo.axes)
    dcn = tuple(a.name for a in topo.axes if a.kind == "dcn")
    ici = tuple(a.name for a in topo.axes if a.kind != "dcn")
    # a pipeline axis is the pods or one torus side: a Send along a product of sides is not priced yet
    pipes: list[tuple[str, ...]] = [(), *((n,) for n in dcn + ici)]
    out: list[tuple[Degrees, tuple[int, ...]]] = []
    kinds = {a.name: (a.size, a.kind, a.wraps) for a in topo.axes}
    seen: set[tuple[Any, ...]] = set()  # points equal up to interchangeable sides (same size, kind, ring)
    for pipe in pipes:
        p = prod(sizes[n] for n in pipe)
        if pipe and (p < 2 or layers % p):
            continue
        pods = () if pipe == dcn else dcn
        rest = tuple(n for n in order if n in ici and n not in pipe)
        micro = tuple(f * p for f in MICROBATCH_FACTORS) if pipe else ()
        for blocks in _set_partitions(rest):
            if len(blocks) > MAX_LOGICAL:
                continue
            blocks = sorted(blocks, key=lambda b: order.index(b[0]))
            named = tuple(zip(LOGICAL_NAMES, blocks, strict=False))
            key = (
                tuple(kinds[n] for n in pipe),
                tuple(tuple(kinds[n] for n in b) for b in blocks),
            )
            if key in seen:
                continue
            seen.add(key)
            out.append((Degrees(pipe, pods, named), micro))
    return out


def _axis_choices(space: Space, name: str, size: int, known: Mapping[str, int]) -> tuple[Choice, ...]:
    """The choices of one logical axis (of :attr:`Space.choices`, in their order) whose dims its size divides;
    the pods' axis ``R`` holds data only: the first batch dim, the parameters whole or along one dim."""
    batch = space.batch_dims[:1]
    out = []
    for p, d in space.choices:
        if name == PODS and (d != batch or len(p) > 1):
            continue
        if all(known.get(x, 0) % size == 0 for x in (*p, *d)):
            out.append((p, d))
    return tuple(out)


def _count(dropped: dict[str, int], why: str, n: int = 1) -> None:
    dropped[why] = dropped.get(why, 0) + n


def search_degrees(
    program: Program | str,
    slice_name: str,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    memory: str | float | None = None,
    optimizer: str | None = None,
    remat: str | None = None,
    overlap: object = None,
    progress: Any = None,
) -> DegreesResult:
    """The fastest degrees and dimension map of ``program`` (training) on the slice ``slice_name`` that
    fit ``memory`` per device (default: the chip's HBM); see the module."""
    base = parse(program_source(program)) if isinstance(program, str) else program
    if not isinstance(base, Program):
        raise UsageError("the degrees search takes a program in the notation with its params declared")
    topo = slice_topology(slice_name)
    notes: list[tuple[str, str]] = []
    chip = as_chip_text(hw if hw is not None else topo.chip)
    if hw is None:
        notes.append(("chip", f"{topo.chip} (the slice's)"))
    if chip.name.rstrip("*") != topo.chip:
        raise UsageError(f"the slice {topo.name} is made of {topo.chip} chips, not {chip.name}")
    if memory is None:
        cap = float(chip.hbm_capacity.value)
        notes.append(("memory", f"{size_text(cap)} per device (default: the HBM of {chip.name})"))
    else:
        cap = float(parse_bytes(memory))
    policy = str(overlap) if overlap is not None else DEFAULT_POLICY
    if overlap is None:
        notes.append(("overlap", f"{policy} (default)"))
    whole = topo.layout(None).mesh
    ctx = context_for(base, whole, sizes)
    # said first: what --sizes replaced of the program's, and its mesh line, which the slice's degrees replace
    said = [n for n in replaced_notes(ctx.replaced) if n[0] == "sizes"]
    if base.mesh is not None:
        mine = Mesh(dict(base.mesh.axes)).text()
        said.insert(0, ("mesh", f"--slice {topo.name} replaces the program's {mine}"))
    notes[:0] = said
    known = dict(ctx.sizes)
    own = dict(context_for(base, whole, None).sizes)
    given = {k: v for k, v in known.items() if k not in own}
    layers_model = model_program(base, whole, sizes).layers
    if getattr(layers_model, "free_symbols", None):
        raise UsageError("the degrees search needs the layer count bound", fix="--sizes L=80")
    layers = int(layers_model)
    space = space_of(base, whole, known)
    if not space.batch_dims:
        raise UsageError("the degrees search needs the batch dims declared: 'tokens B, T' in the program")
    missing = [d for d in (*space.param_dims, *space.batch_dims) if d not in known]
    if missing:
        raise UsageError(
            f"a numeric search needs every size: {', '.join(missing)} unbound",
            fix="bind them with --sizes, e.g. --sizes " + ",".join(f"{d}=1024" for d in missing),
        )
    points = degree_points(topo, layers)
    total_points = sum(max(1, len(m)) for _, m in points)
    if total_points > MAX_POINTS:
        raise UsageError(
            f"{total_points} degree points on {topo.name} (over the limit of {MAX_POINTS})",
            fix="a smaller slice, or fix the factoring: search --slice NAME --mesh X=...",
        )
    notes.append(
        (
            "degrees",
            f"{total_points} points: the pipeline over none, the pods or one torus side (a Send along a product of "
            "sides is not priced yet) whose chips divide the "
            f"{layers} layers, m = {', '.join(f'{f}p' for f in MICROBATCH_FACTORS)} microbatches (schedule "
            f"1f1b), the pods over DCN as a data axis {PODS}, the other sides in at most {MAX_LOGICAL} "
            "logical axes",
        )
    )
    dropped: dict[str, int] = {}
    inners = [_inner(base, topo, deg, known, dropped) for deg, _ in points]
    before = sum(len(inner[3]) for inner in inners)
    ranked: list[Candidate] = []
    refused: list[Candidate] = []
    floored: list[Candidate] = []  # per point, its pruned map of the least floor
    inners = [
        _prune(base, deg, inner, sizes, optimizer, cap, floored)
        for (deg, _), inner in zip(points, inners, strict=True)
    ]
    maps = sum(len(inner[3]) for inner in inners)
    pruned = Floored(before, before - maps, min(floored, key=lambda c: c.bytes, default=None))
    if maps > MAX_MAPS:
        raise UsageError(
            f"{maps:,} dimension maps over the {len(points)} factorings of {topo.name} after the memory floor "
            f"pruned {pruned.count:,} of {before:,}, over the limit of {MAX_MAPS:,} (MAX_MAPS) before any is "
            "priced",
            fix="a smaller slice, or fix the factoring: search --slice NAME --mesh X=...",
        )
    notes.append(("space", _space_note(inners[0][1], maps)))
    notes.append(("floor", pruned.text(cap)))
    for i, ((deg, micro), inner) in enumerate(zip(points, inners, strict=True)):
        _price_point(
            base,
            deg,
            micro,
            inner,
            known,
            sizes,
            chip,
            cap,
            remat,
            optimizer,
            policy,
            ranked,
            refused,
            dropped,
        )
        if progress is not None:
            progress(i + 1, len(points))
    order = {id(c): k for k, c in enumerate(ranked)}
    ranked.sort(key=lambda c: (c.seconds, c.bytes, order[id(c)]))
    return DegreesResult(
        topo.name,
        known,
        chip,
        cap,
        remat,
        policy,
        total_points,
        ranked,
        refused,
        dropped,
        base,
        given,
        notes,
        pruned,
        optimizer,
    )


def _space_note(space: Space, maps: int) -> str:
    """What each point searches: the ordinary search's space on its logical axes, the pods' axis data only."""
    batch = space.batch_dims[0]
    held = [
        f"data ({batch}; parameters whole or along one dim: DP, FSDP)",
        "one parameter dim with the activations following it (TP)",
    ]
    if len(space.batch_dims) > 1:
        held.append(f"a later tokens dim ({', '.join(space.batch_dims[1:])}: SP)")
    if space.together:
        held.append(f"a set of up to {MAX_TOGETHER} parameter dims no parameter holds two of (Megatron TP)")
    if space.sequence_dim is not None:
        held.append(f"with Megatron SP on the tensor-parallel axes ({space.sequence_dim})")
    if space.expert_dims:
        held.append(f"the experts {', '.join(space.expert_dims)} with the batch {batch} (EP)")
    return (
        f"each logical axis holds {'; or '.join(held)}; the pods' axis {PODS} holds data only; an axis takes "
        f"only the dims its size divides: {maps:,} dimension maps over the factorings to price, symmetric ones "
        f"dropped and those the memory floor prunes (limit {MAX_MAPS:,}, MAX_MAPS)"
    )


Inner = tuple[Any, Space, tuple[str, ...], list[Assignment]]  # a point's mesh, space, inner axes, maps


def _inner(
    base: Program, topo: Topology, deg: Degrees, known: Mapping[str, int], dropped: dict[str, int]
) -> Inner:
    """One point's mesh, its space, its inner axes (all but the pipeline's) and its dimension maps: each axis
    takes the choices its size divides (:func:`_axis_choices`), without the symmetric and indivisible maps
    (counted in ``dropped``)."""
    mesh = topo.layout(deg.factoring).mesh
    space = space_of(base, mesh, dict(known))
    inner = tuple(a.name for a in mesh.axes if a.name != PIPE)
    choices = tuple(_axis_choices(space, n, int(mesh.size(n)), known) for n in inner)
    every = prod(len(_axis_choices(space, n, 1, known)) for n in inner)
    pruned = Pruned()
    maps = list(assignments_over(space, inner, choices, pruned))
    _count(dropped, "a dim its axes do not divide", every - prod(len(c) for c in choices) + pruned.illegal)
    if pruned.symmetric:
        _count(dropped, "symmetric (interchangeable axes)", pruned.symmetric)
    return mesh, space, inner, maps


def _with_pipeline(a: Assignment, stages: int) -> Assignment:
    """The map on the whole mesh: with a pipeline, the pipeline's axis first, sharding no dim."""
    if stages == 1:
        return a
    return replace(a, axes=(PIPE, *a.axes), params=((), *a.params), activations=((), *a.activations))


def _prune(
    base: Program,
    deg: Degrees,
    inner: Inner,
    sizes: Any,
    optimizer: str | None,
    cap: float,
    floored: list[Candidate],
) -> Inner:
    """One point's maps without those whose memory floor (:class:`.degreefloor.Floor`: parameters, gradients
    and optimizer state over the stages) passes ``cap``; the pruned one of the least floor appended to
    ``floored``. The floor depends on the parameters' dims only: computed once for each of them."""
    mesh, space, axes, maps = inner
    stages = int(mesh.size(PIPE)) if deg.pipeline else 1
    floor = Floor(base, mesh, sizes, optimizer, stages)
    by_params = {p: floor.bytes(a) for p, a in {a.params: a for a in reversed(maps)}.items()}
    kept = [a for a in maps if by_params[a.params] <= cap]
    over = [a for a in maps if by_params[a.params] > cap]
    if over:
        a = min(over, key=lambda a: by_params[a.params])  # the first of the least floor, in the maps' order
        b = by_params[a.params]
        why = (
            f"params, grads and optimizer {size_text(b)}"
            + (f" over {stages} stages" if stages > 1 else "")
            + f" > {size_text(cap)}: pruned by the memory floor, no program written"
        )
        floored.append(Candidate(deg, space.strategy(a), _with_pipeline(a, stages), None, None, b, why))
    return mesh, space, axes, kept


def _price_point(
    base: Program,
    deg: Degrees,
    micro: tuple[int, ...],
    inner: Inner,
    known: dict[str, int],
    sizes: Any,
    chip: Any,
    cap: float,
    remat: str | None,
    optimizer: str | None,
    policy: str,
    ranked: list[Candidate],
    refused: list[Candidate],
    dropped: dict[str, int],
) -> None:
    """Every dimension map of one degree point (the search space's: DP, FSDP, TP, Megatron TP, SP, Megatron
    SP, EP), priced (each microbatch count with a pipeline)."""
    mesh, space, axes, maps = inner
    axis_size = {a.name: int(a.size) for a in mesh.axes}
    stages = axis_size.get(PIPE, 1)
    batch = space.batch_dims[0]
    seen: set[Program] = set()
    for a in maps:
        pm, am = a.param_map, a.activation_map
        full = _with_pipeline(a, stages)
        strategy = space.strategy(a)
        try:
            sharded = shard(base, pm, am, mesh=mesh, sequence=a.megatron)
            if sharded in seen:
                _count(dropped, "equivalent (the same program)")
                continue
            seen.add(sharded)
            model = model_program(sharded, mesh, sizes)
        except IllegalSharding:
            _count(dropped, "illegal")
            continue
        lower = float(param_bytes(model, "train", optimizer)) / stages
        if lower > cap:
            why = (
                f"params, grads and optimizer {size_text(lower)}"
                + (f" over {stages} stages" if stages > 1 else "")
                + f" > {size_text(cap)} before any plan"
            )
            refused.append(Candidate(deg, strategy, full, None, None, lower, why, sharded))
            continue
        analysis = analyze(model, "train", remat)
        if stages == 1:  # model_step's parts in seconds without its formula (step_seconds: the fast path)
            parts = step_seconds(analysis, chip, policy)
            total = float(model_memory(analysis, chip, optimizer).total)
            seconds = sum(float(p.count) * p.total for p in parts)
            c = Candidate(deg, strategy, full, None, seconds, total, "", sharded)
            c.compute = sum(float(p.count) * p.compute for p in parts)
            c.comms = sum(float(p.count) * p.comms for p in parts)
            if total > cap:
                c.refused = f"{size_text(total)} per device > {size_text(cap)}"
                refused.append(c)
            else:
                ranked.append(c)
            continue
        local = known[batch] // prod(axis_size[x] for x in am.get(batch, ()))
        for m in micro:
            if local % m:
                _count(dropped, "microbatches that do not divide the batch a chip holds")
                continue
            pipe = model_pipeline(analysis, chip, PIPE, m, None, policy, TrainState(optimizer))
            worst = max(s.total for s in pipe.memory)
            c = Candidate(deg, strategy, full, m, pipe.seconds, worst, "", sharded, pipe)
            if worst > cap:
                c.refused = f"stage {max(pipe.memory, key=lambda s: s.total).stage} holds {size_text(worst)} > {size_text(cap)}"
                refused.append(c)
            else:
                ranked.append(c)
