"""The search space of the numeric strategy search: which mesh axes shard which dims, for the parameters and
for the activations, and the names of the classic strategies in it.

    >>> from shardalg.notation.parse import parse
    >>> from shardalg.algebra.mesh import Axis, Mesh
    >>> s = space_of(parse("params W\\nIn[B, D] * W[D, F] -> Out[B, F]"), Mesh(X=2, Y=2))
    >>> s.param_dims, s.batch_dims, s.size
    (('D', 'F'), ('B',), 64)

An :class:`Assignment` gives each mesh axis (in mesh order) the dims it shards in the parameters and in the
activations (each a tuple, empty: none). An axis shards one parameter dim, or, with the activations following
them, a set of dims no parameter holds two of (*Megatron TP*: the attention heads and the MLP's ``F`` over one
axis, :attr:`Space.together`). A dim sharded over several axes takes them in mesh order (another order holds
the same blocks on other devices). Per tensor where needed: a parameter's axis may shard its ``D`` while the same axis
shards the activations' batch ``B`` (FSDP: ``In[B_X, D] · W[D_X, F]``, the weight gathered before use). An
activation's dim is sharded over an axis only when the parameters shard that dim over it too (tensor
parallelism: the activations follow the weights) or when it is a batch dim (a dim no parameter has: data
parallelism, FSDP, and sequence parallelism on a later ``tokens`` dim); the other placements of activations
(a model dim split while the weights are whole) are not in the space. Every activation follows the one map,
so an output is sharded like the input wherever they share dims.

Before anything is priced, :func:`enumerate_space` drops an assignment that is the image of another under a
permutation of interchangeable axes (same size, links and wraparound: *symmetric*) and one whose dims are not
divisible by their axes (*illegal*); :mod:`.price` drops those whose sharded program is another's
(*equivalent*) and those whose parameters alone exceed the memory cap (*over the cap before pricing*).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import permutations, product
from math import prod

from shardalg.algebra.mesh import Axis, Mesh
from shardalg.errors import UsageError
from shardalg.notation.syntax import Arrow, Collective, Product, Program, Tensor

__all__ = [
    "Assignment",
    "Space",
    "space_of",
    "enumerate_space",
    "assignments_over",
    "Choice",
    "Pruned",
    "STRATEGIES",
    "MAX_CANDIDATES",
    "MAX_TOGETHER",
    "wider_note",
]

MAX_CANDIDATES = 20_000  # assignments in the space before pruning: above this the search refuses up front
MAX_TOGETHER = 3  # parameter dims one axis shards together (Megatron TP: heads, F and the vocabulary)

STRATEGIES = (
    "DP",
    "FSDP",
    "TP",
    "DP+TP",
    "FSDP+TP",
    "Megatron-TP",
    "DP+Megatron-TP",
    "FSDP+Megatron-TP",
    "SP",
    "EP",
    "DP+EP",
    "Megatron-SP",
)  # the named ones, in the order printed


def _tensors(expr: object) -> list[Tensor]:
    if isinstance(expr, Tensor):
        return [expr]
    if isinstance(expr, Product):
        return _tensors(expr.left) + _tensors(expr.right)
    if isinstance(expr, Collective):
        return _tensors(expr.arg)
    if isinstance(expr, Arrow):
        return _tensors(expr.expr) + _tensors(expr.result)
    return []


Dims = tuple[str, ...]  # the dims one axis shards, in the order they are mapped


def _dims(x: Dims | str | None) -> Dims:
    return () if x is None else (x,) if isinstance(x, str) else tuple(x)


@dataclass(frozen=True)
class Assignment:
    """Per mesh axis (in mesh order): the dims it shards in the parameters and in the activations (``()``:
    none; a dim name or None is taken as one dim or none)."""

    axes: tuple[str, ...]
    params: tuple[Dims, ...]
    activations: tuple[Dims, ...]
    megatron: tuple[str, ...] = ()  # tensor-parallel axes with Megatron sequence parallelism

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(_dims(d) for d in self.params))
        object.__setattr__(self, "activations", tuple(_dims(d) for d in self.activations))

    @staticmethod
    def _map(axes: tuple[str, ...], dims: tuple[Dims, ...]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for a, ds in zip(axes, dims, strict=True):
            for d in ds:
                out[d] = out.get(d, ()) + (a,)
        return out

    @property
    def param_map(self) -> dict[str, tuple[str, ...]]:
        """{dim: axes} of the parameters (the form :func:`shardalg.models.expand.shard` takes)."""
        return self._map(self.axes, self.params)

    @property
    def activation_map(self) -> dict[str, tuple[str, ...]]:
        return self._map(self.axes, self.activations)

    @staticmethod
    def _text(m: dict[str, tuple[str, ...]]) -> str:
        one = all(len(a) == 1 for a in m)
        return ",".join(f"{d}={('' if one else '+').join(axes)}" for d, axes in m.items()) or "-"

    @property
    def params_text(self) -> str:
        """``D=X,F=Y`` (``-``: replicated): what ``shardalg model show --params`` and ``sa.shard`` take."""
        return self._text(self.param_map)

    @property
    def activations_text(self) -> str:
        return self._text(self.activation_map)

    @property
    def megatron_text(self) -> str:
        """``Y`` (``-``: none): the axes ``shardalg model show --megatron-sp`` takes."""
        return "".join(self.megatron) if all(len(a) == 1 for a in self.megatron) else "+".join(self.megatron)

    def __str__(self) -> str:
        sp = f"; megatron-sp {self.megatron_text}" if self.megatron else ""
        return f"params {self.params_text}; activations {self.activations_text}{sp}"


Choice = tuple[Dims, Dims]  # one axis's (parameter dims, activation dims)


@dataclass(frozen=True)
class Space:
    """The dims a search may place: the parameters', the batch dims (the first data, later ones sequence),
    the expert dims (a parameter dim its product keeps, as ``E`` in ``X[E, C, D] · W[E, D, F]``), and the sets
    of parameter dims one axis may shard together (no parameter holds two of them: Megatron TP's heads and
    ``F``), each of at most :data:`MAX_TOGETHER` dims and with a dim no routing's experts are."""

    mesh: Mesh
    sizes: dict[str, int]
    param_dims: tuple[str, ...]
    batch_dims: tuple[str, ...]
    expert_dims: tuple[str, ...]
    together: tuple[Dims, ...] = ()

    def activation_choices(self, param: str | None) -> tuple[Dims, ...]:
        """With one parameter dim (or none): none, the activations following it, a batch dim, and for an
        expert dim the batch with it (EP: the batch first, as ``B=X,E=X``)."""
        follow = ((param,),) if param is not None else ()
        experts = tuple((b, param) for b in self.batch_dims[:1]) if param in self.expert_dims else ()
        return ((), *follow, *((b,) for b in self.batch_dims), *experts)

    @property
    def choices(self) -> tuple[Choice, ...]:
        """One axis's choices, in order: per parameter dim (none first) its activation choices, then each
        set of :attr:`together` with the activations following it."""
        one = [((p,) if p else (), d) for p in (None, *self.param_dims) for d in self.activation_choices(p)]
        return (*one, *((t, t) for t in self.together))

    @property
    def sequence_dim(self) -> str | None:
        """The dim Megatron sequence parallelism shards: the last batch dim after the first (``T``)."""
        return self.batch_dims[-1] if len(self.batch_dims) > 1 else None

    @property
    def size(self) -> int:
        """Assignments before pruning: per axis, its :attr:`choices`, where a dim an axis shards with others
        another axis shards only with the same set (:func:`_apart`); and with a sequence dim, each assignment
        with a tensor-parallel axis once more with Megatron SP on them. Counted axis by axis, the state being
        the sets of :attr:`together` placed so far and their dims placed alone."""
        seq = self.sequence_dim is not None
        tracked = {d for t in self.together for d in t}
        State = tuple[frozenset[Dims], frozenset[str], bool]  # sets placed, their dims placed alone, TP
        counts: dict[State, int] = {(frozenset(), frozenset(), False): 1}
        for _ in self.mesh.axes:
            after: dict[State, int] = {}
            for (sets, alone, tp), n in counts.items():
                for p, d in self.choices:
                    if not _fits(sets, alone, p):
                        continue
                    key = (
                        sets | {p} if len(p) > 1 else sets,
                        alone | (set(p) & tracked) if len(p) == 1 else alone,
                        tp or (seq and _tensor_parallel(self, p, d)),
                    )
                    after[key] = after.get(key, 0) + n
            counts = after
        return sum(n * (2 if tp else 1) for (_, _, tp), n in counts.items())

    def strategy(self, a: Assignment) -> str:
        """The classic strategy an assignment is: DP, FSDP, TP, Megatron TP (an axis sharding several
        parameter dims), their sums, SP, EP (experts and the tokens' batch over one axis), or ``replicated``."""
        kinds: set[str] = set()
        for p, d in zip(a.params, a.activations, strict=True):
            batch = [x for x in d if x in self.batch_dims]
            if batch and any(x in self.expert_dims for x in d):
                kinds.add("EP")
            elif batch:
                kinds.add("SP" if self.batch_dims.index(batch[0]) > 0 else "FSDP" if p else "DP")
            elif len(p) > 1:
                kinds.add("Megatron-TP")
            elif p:
                kinds.add("TP")
        if a.megatron:  # every tensor-parallel axis runs Megatron SP (the variant the space adds)
            kinds -= {"TP", "Megatron-TP"}
            kinds.add("Megatron-SP")
        if "FSDP" in kinds:
            kinds.discard("DP")
        parts = [k for k in ("FSDP", "DP", "TP", "Megatron-TP", "SP", "EP", "Megatron-SP") if k in kinds]
        return "+".join(parts) or "replicated"


def _together(param_dims: list[str], tensors: list[tuple[str, ...]], expert: list[str]) -> tuple[Dims, ...]:
    """The sets of 2 to :data:`MAX_TOGETHER` parameter dims no parameter holds two of, in the order of
    ``param_dims`` (each set's dims too), with at least one dim that is not an expert dim."""
    apart = {
        (a, b): not any(a in t and b in t for t in tensors) for a in param_dims for b in param_dims if a != b
    }
    out: list[Dims] = []

    def grow(chosen: Dims, start: int) -> None:
        if len(chosen) > 1 and any(d not in expert for d in chosen):
            out.append(chosen)
        if len(chosen) == MAX_TOGETHER:
            return
        for k in range(start, len(param_dims)):
            d = param_dims[k]
            if all(apart[(c, d)] for c in chosen):
                grow((*chosen, d), k + 1)

    grow((), 0)
    return tuple(sorted(out, key=lambda t: (len(t), [param_dims.index(d) for d in t])))


def _some_axis_divides(mesh: Mesh, sizes: dict[str, int] | None, dim: str) -> bool:
    """Whether some axis of ``mesh`` divides ``dim`` (True when its size is unknown): a set holding a dim no
    axis divides would be illegal on every axis, so :attr:`Space.together` leaves it out."""
    n = (sizes or {}).get(dim)
    return n is None or any(n % mesh.size(a) == 0 for a in mesh.names)


def space_of(program: Program, mesh: Mesh, sizes: dict[str, int] | None = None) -> Space:
    """The space of ``program`` (unsharded, with a ``params`` declaration) on ``mesh``."""
    roles = program.roles
    params = set(roles.params) | set(roles.embeddings) if roles is not None else set()
    if not params:
        raise UsageError(
            "the search places parameters and activations: the program declares no parameters",
            fix="add a line such as 'params W_in, W_out' naming the weights",
        )
    if any(a.size is None for a in mesh.axes):
        raise UsageError(
            f"a numeric search needs every mesh axis's size, not {mesh.text()}",
            fix="give sizes, e.g. --mesh X=2,Y=2 (the symbolic map is shardalg strategy-map)",
        )
    param_dims: list[str] = []
    act_dims: list[str] = []
    expert: list[str] = []
    held: list[tuple[str, ...]] = []  # each parameter's dims: one axis shards at most one of them
    for s in program.statements:
        for t in _tensors(s):
            if t.name in params:
                held.append(t.dim_names)
            if t.used_axes or t.unreduced:
                raise UsageError(
                    f"the search chooses the shardings, but {t} already has one",
                    span=t.span,
                    source=program.source,
                    fix="write the program without shardings",
                )
            into = param_dims if t.name in params else act_dims
            into += [d.label for d in t.dims if d.label not in into]
        expr, result = (s.expr, s.result) if isinstance(s, Arrow) else (s, None)
        operands = [_tensors(expr.left)[0], _tensors(expr.right)[0]] if isinstance(expr, Product) else []
        if operands and result is not None and any(t.name in params for t in operands):
            # a product of activations (the attention core's Q·K, P·V) keeps its heads and batch: not experts
            both = set(operands[0].dim_names) & set(operands[1].dim_names)
            expert += [d for d in result.dim_names if d in both and d not in expert]
    declared = [d for d in (roles.tokens if roles is not None else ()) if d in act_dims]
    batch = declared or [d for d in act_dims if d not in param_dims]
    if not batch:
        raise UsageError(
            "no batch dim: every activation dim is also a parameter's",
            fix="declare the dims that count tokens, e.g. 'tokens B, T'",
        )
    experts = [d for d in expert if d in param_dims]
    return Space(
        mesh,
        dict(sizes or {}),
        tuple(param_dims),
        tuple(batch),
        tuple(experts),
        _together([d for d in param_dims if _some_axis_divides(mesh, sizes, d)], held, experts),
    )


@dataclass
class Pruned:
    """How many assignments were dropped before pricing, by reason."""

    symmetric: int = 0
    illegal: int = 0
    equivalent: int = 0
    over_cap: int = 0
    visited: int = 0  # assignments looked at so far (the progress bar's count)
    zero: int = 0  # left out by a ZeRO stage (1, 2) that keeps the parameters whole over the data axes
    # left out by a ZeRO stage that shards a parameter over the data axes where no unsharded dim of it divides
    undivided: int = 0

    def to_json(self) -> dict[str, int]:
        return {
            "symmetric": self.symmetric,
            "illegal": self.illegal,
            "equivalent": self.equivalent,
            "over_cap_before_pricing": self.over_cap,
            **({"zero": self.zero} if self.zero else {}),
            **({"zero_undivided": self.undivided} if self.undivided else {}),
        }


def _classes(axes: tuple[Axis, ...]) -> list[tuple[int, ...]]:
    """The permutations of indices into ``axes`` that map each axis to an interchangeable one (same size,
    links, wraparound, node), the identity first."""
    key = [(a.size, a.links, a.wraps, a.node) for a in axes]
    out = []
    for perm in permutations(range(len(axes))):
        if all(key[i] == key[perm[i]] for i in range(len(axes))):
            out.append(perm)
    return out


def _divides(space: Space, m: dict[str, tuple[str, ...]]) -> bool:
    for d, axes in m.items():
        n = space.sizes.get(d)
        if n is not None and n % prod(space.mesh.size(a) for a in axes):
            return False
    return True


def enumerate_space(space: Space, pruned: Pruned, *, symmetry: bool = True) -> Iterator[Assignment]:
    """Every assignment of the space, in a fixed order, without the symmetric (``symmetry``) and illegal ones
    (counted in ``pruned``). Refuses up front above :data:`MAX_CANDIDATES`."""
    if space.size > MAX_CANDIDATES:
        together = f" ({len(space.together)} sets of them one axis shards together)" if space.together else ""
        raise UsageError(
            f"the search space has {space.size:,} assignments, over the limit of {MAX_CANDIDATES:,} "
            f"(MAX_CANDIDATES): {len(space.param_dims)} parameter dims{together} and {len(space.batch_dims)} "
            f"batch dims on {len(space.mesh.axes)} mesh axes",
            fix="use fewer mesh axes, or merge dims the search need not split; for a whole model on a real "
            "slice, the degrees search: shardalg search MODEL --slice NAME --choose-degrees "
            "(in Python: shardalg.search.degrees.search_degrees)",
        )
    names = space.mesh.names
    yield from assignments_over(space, names, (space.choices,) * len(names), pruned, symmetry=symmetry)


def assignments_over(
    space: Space,
    names: tuple[str, ...],
    per_axis: tuple[tuple[Choice, ...], ...],
    pruned: Pruned,
    *,
    symmetry: bool = True,
) -> Iterator[Assignment]:
    """The assignments of the axes ``names`` (of ``space.mesh``), each axis taking one of its ``per_axis``
    choices (a subset of :attr:`Space.choices`, in their order), with Megatron SP's variants, without the
    symmetric (``symmetry``: interchangeable axes of ``names``) and illegal ones (counted in ``pruned``)."""
    axes = tuple(space.mesh[n] for n in names)
    perms = _classes(axes)[1:] if symmetry else []
    seq = space.sequence_dim
    for combo in product(*per_axis):
        if not _apart(combo):
            continue  # not in the space (nor counted in its size)
        a = _assignment(names, combo)
        tp = _tp_axes(space, names, combo)
        # with a sequence dim, Megatron SP on the TP axes too
        variants = [a, replace(a, megatron=tp)] if seq is not None and tp else [a]
        pruned.visited += len(variants)
        if perms:
            kept = [v for v in variants if not _symmetric(space, names, combo, v, perms)]
            pruned.symmetric += len(variants) - len(kept)
            variants = kept
        if not variants:
            continue
        if not (_divides(space, a.param_map) and _divides(space, a.activation_map)):
            pruned.illegal += len(variants)
            continue
        for v in variants:
            if v.megatron:
                assert seq is not None
                if not _divides(
                    space, {**a.activation_map, seq: (*a.activation_map.get(seq, ()), *v.megatron)}
                ):
                    pruned.illegal += 1
                    continue
            yield v


def _assignment(names: tuple[str, ...], combo: tuple[Choice, ...]) -> Assignment:
    """The assignment of ``combo``: each axis of ``names`` its (parameter dims, activation dims)."""
    return Assignment(names, tuple(p for p, _ in combo), tuple(d for _, d in combo))


def _tp_axes(space: Space, names: tuple[str, ...], combo: tuple[Choice, ...]) -> tuple[str, ...]:
    """The tensor-parallel axes of ``combo``, in mesh order (Megatron SP's variant splits the sequence over them)."""
    return tuple(ax for ax, (p, d) in zip(names, combo, strict=True) if _tensor_parallel(space, p, d))


def _symmetric(
    space: Space,
    names: tuple[str, ...],
    combo: tuple[Choice, ...],
    a: Assignment,
    perms: list[tuple[int, ...]],
) -> bool:
    """Whether ``a`` (of ``combo``, or its Megatron SP variant) is another assignment of the space with its
    interchangeable axes renamed, one that comes first (its choices, axis by axis, sort lower): that one is
    priced and ``a`` is not. Only where the renaming is exact: a dim split over several axes takes them in mesh
    order, so a renaming that swaps two of them (``D=XY, B=X`` into ``D=YX, B=Y``) names a layout the space
    does not hold, and ``D=XY, B=Y`` is another candidate, priced apart (on 2x2 their steps differ)."""
    keys = [(",".join(p), ",".join(d)) for p, d in combo]
    for perm in perms:
        if not [keys[perm[i]] for i in range(len(keys))] < keys:
            continue
        image_combo = tuple(combo[perm[i]] for i in range(len(combo)))
        image = _assignment(names, image_combo)
        if a.megatron:
            image = replace(image, megatron=_tp_axes(space, names, image_combo))
        rename = {names[perm[i]]: names[i] for i in range(len(names))}
        if _renamed(a, rename) == (image.param_map, image.activation_map, image.megatron):
            return True
    return False


def _renamed(
    a: Assignment, rename: dict[str, str]
) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]], tuple[str, ...]]:
    """``a``'s maps (parameters, activations, Megatron SP's axes) with its axes renamed, each dim's axes in the
    order ``a`` gives them."""

    def moved(m: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
        return {d: tuple(rename[x] for x in axes) for d, axes in m.items()}

    return moved(a.param_map), moved(a.activation_map), tuple(rename[x] for x in a.megatron)


def _fits(sets: frozenset[Dims], alone: frozenset[str], p: Dims) -> bool:
    """Whether an axis may shard the parameter dims ``p`` next to the sets of :attr:`Space.together` other
    axes shard (``sets``) and the dims of those sets they shard alone (``alone``)."""
    if len(p) > 1:
        return not set(p) & alone and all(t == p or not set(t) & set(p) for t in sets)
    return not any(set(p) & set(t) for t in sets)


def _apart(combo: tuple[Choice, ...]) -> bool:
    """Whether each dim an axis shards together with others (Megatron TP) is sharded by the other axes only
    with the same set (``N=XY,F=XY`` is in the space; ``F=XY`` with ``N=Y`` is not)."""
    sets: frozenset[Dims] = frozenset()
    alone: frozenset[str] = frozenset()
    for p, _ in combo:
        if not _fits(sets, alone, p):
            return False
        sets, alone = (sets | {p}, alone) if len(p) > 1 else (sets, alone | set(p))
    return True


def _tensor_parallel(space: Space, params: Dims, activations: Dims) -> bool:
    """Whether an axis is tensor-parallel: it shards parameter dims (not only expert dims) and the
    activations follow them."""
    return bool(params) and activations == params and any(p not in space.expert_dims for p in params)


def wider_note(space: Space) -> str:
    """What the space holds beyond one dim per axis: Megatron TP's sets, EP's experts with the batch."""
    said = []
    if space.together:
        sets = ", ".join("{" + ", ".join(t) + "}" for t in space.together)
        said.append(
            f"an axis may shard several parameter dims no parameter holds two of, at most {MAX_TOGETHER} "
            f"(MAX_TOGETHER), another axis sharding them only all together (Megatron TP): {sets}"
        )
    if space.expert_dims:
        said.append(
            f"an axis sharding the experts {', '.join(space.expert_dims)} may shard the batch "
            f"{space.batch_dims[0]} too (EP: the routing's AllToAlls)"
        )
    return "".join(f"; {s}" for s in said)
