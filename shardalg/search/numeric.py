"""The numeric strategy search: every assignment of the space (:mod:`.space`) priced (:mod:`.price`), the
fastest that fits the memory cap, the best of each named strategy, and why each other one lost.

    >>> r = search("params W_in, W_out\\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\\nTmp[B, F] * W_out[F, D] -> Out[B, D]",
    ...            mesh="X=2,Y=2", sizes="B=128,D=8192,F=32768", hw="tpu-v5e", memory="300MB", mode="infer")
    >>> r.winner.strategy, r.winner.assignment.params_text
    ('TP', 'F=XY')

Ranking: fitting candidates by seconds, then communication seconds, then bytes per device, then the order
of the space (deterministic). Every assignment in the space is either priced or dropped for a reason that is
counted (symmetric, illegal, equivalent, over the cap before pricing), so the winner is the optimum over
the whole space: the tests check it against a brute force over all assignments. Each printed row that lost
says what it pays beyond the winner: the collectives of its plans the winner's do not run (:mod:`.paid`,
worked out for the printed rows once the search is done).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from shardalg.algebra.context import context_for, tensors_of
from shardalg.algebra.mesh import Mesh, a_mesh_or_none, as_mesh
from shardalg.costs.chipspec import as_chip_text
from shardalg.costs.nodes import place_in_nodes
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.models.analysis import MODES
from shardalg.models.optimizers import optimizer_named
from shardalg.models.program import derived_sizes, replaced_notes
from shardalg.models.source import program_source
from shardalg.models.step import DEFAULT_POLICY
from shardalg.models.trainstate import TrainState
from shardalg.notation.parse import parse
from shardalg.notation.syntax import Program
from shardalg.planning import symbolic

from .branchbound import Bounds, bounded, price_bounded
from .paid import attach
from .pieces import StatementPricer, pricer_for
from .price import Entry, Pricer, Settings, rank_key, size_text
from .searchresult import SearchResult
from .space import Pruned, Space, enumerate_space, space_of, wider_note

__all__ = ["SearchResult", "search", "parse_bytes", "Progress"]

Progress = Callable[[int, int], None]  # (assignments done, assignments in the space)

_UNITS = {
    "": 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_bytes(text: str | float | int) -> float:
    """``300MB``, ``16GiB``, ``3e8`` to bytes (decimal MB, binary MiB)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        try:
            value = float(text)
        except OverflowError:  # an int past the largest float: refused below as not finite
            value = float("inf")
    else:
        s = str(text).strip().upper().replace(" ", "")
        head = s.rstrip("KMGTIB")
        unit = s[len(head) :]
        try:
            value = float(head) * _UNITS[unit]
        except (ValueError, KeyError):
            raise UsageError(
                f"a memory cap is a number of bytes with a unit (B, KB, MB, GB, MiB, GiB), not {text!r}",
                fix="e.g. --memory 300MB",
            ) from None
    if not value > 0:
        raise UsageError(f"the memory cap must be positive, not {text!r}")
    if value == float("inf"):
        raise UsageError(
            f"the memory cap must be a finite number of bytes, not {text!r} (over 1.8e308 bytes)",
            fix="leave --memory out for the chip's HBM, or give a size, e.g. --memory 96GB",
        )
    return value


def _keep_note(keep: bool | None) -> str:
    """What the backward does with the forward's gathered copies, as chosen or by default."""
    if keep is None:
        return (
            "each candidate's backward keeps the forward's gathered copies or gathers them again, the faster "
            "that fits the cap (default; --keep-gathered or --gather-again forces one)"
        )
    return (
        "the backward keeps the forward's gathered copies (forced)"
        if keep
        else ("the backward gathers the forward's gathered copies again (forced)")
    )


def _mode(program: Program, mode: str | None, notes: list[tuple[str, str]]) -> str:
    if mode is None:
        mode = "infer" if program.roles is not None and program.roles.kvcache else "train"
        notes.append(
            (
                "mode",
                f"{mode} (default: {'the program declares a KV cache' if mode == 'infer' else 'training'})",
            )
        )
    if mode not in MODES:
        raise UsageError(f"the mode is train or infer, not {mode!r}")
    return mode


def prepare_search(
    program: Program | str,
    mesh: Mesh | None,
    sizes: Mapping[str, int] | str | None,
    hw: Any,
    memory: str | float | None,
    mode: str | None,
    optimizer: str | None,
    remat: str | None,
    overlap: str | None,
    overlap_default: str,
    state: TrainState | None = None,
) -> tuple[Program, Space, Settings, list[tuple[str, str]]]:
    """What every search checks and defaults first: the program, mesh, chip and sizes (all bound), the mode,
    the memory cap, the overlap policy, the optimizer and remat; each default the user did not choose is a
    note. A flat mesh (the caller's, else the program's ``mesh`` line) larger than a GPU chip's node is placed
    into its nodes, with a note (:func:`shardalg.costs.nodes.place_in_nodes`). Returns the program, its whole
    space, the settings and the notes."""
    prog = parse(program_source(program)) if isinstance(program, str) else program
    if not isinstance(prog, Program):
        raise UsageError("the search takes a program in the notation with its params declared")
    ctx = context_for(prog, a_mesh_or_none(mesh, "the search"), sizes)
    if ctx.mesh is None:
        raise UsageError("a search needs a mesh: --mesh X=2,Y=2 (API: mesh='X=2,Y=2')")
    chip = as_chip_text(hw)
    if chip is None:
        raise UsageError("a search needs a chip for its seconds and HBM: --hw tpu-v5e (API: hw='tpu-v5e')")
    notes = replaced_notes(ctx.replaced)  # what --mesh and --sizes replaced of the program's, said first
    placed = place_in_nodes(ctx.mesh, chip, (), (prog,))  # a flat mesh larger than a GPU chip's node
    notes += placed.pairs()
    mesh = placed.mesh if placed.mesh is not None else ctx.mesh
    chosen_mode = _mode(prog, mode, notes)
    if memory is None:
        cap = chip.hbm_capacity.value
        notes.append(("memory", f"{size_text(cap)} per device (default: the HBM of {chip.name})"))
    else:
        cap = parse_bytes(memory)
    if overlap is None:
        overlap = DEFAULT_POLICY
        notes.append(("overlap", f"{overlap} (default: {overlap_default})"))
    overlap = OverlapPolicy.of(overlap)
    if chosen_mode == "train":
        state = state or TrainState()
        if optimizer is None:  # what the search's memory counts: the default under the recipe
            o, r = optimizer_named(None), state.recipe
            notes.append(("optimizer", f"{o.name} (default: {o.in_brief(r)}, {o.per_parameter(r)})"))
        if remat is None:
            notes.append(("remat", "the program's saved list, else none (default)"))
        notes += [(k, v) for k, v in state.default_notes() if k != "optimizer"]
        if state.precision is not None:  # the bytes held follow the recipe; the seconds, the program's dtypes
            notes.append(
                (
                    "precision",
                    f"{state.recipe.name} sets the bytes held; a step's collectives and HBM traffic are priced "
                    "in the program's own dtypes (as shardalg step prices them)",
                )
            )
        if state.stage.stage in (1, 2):
            notes.append(
                (
                    "zero",
                    f"ZeRO-{state.stage.stage} keeps the parameters whole over the data axes: a candidate "
                    "that shards one over them (FSDP, ZeRO-3) is left out",
                )
            )
    sizes_known = dict(ctx.sizes)
    for dim, (kind, n, said) in derived_sizes(prog.statements, sizes_known).items():
        sizes_known[dim] = n  # a renamed dim's size, a routing's capacity: as the model derives them
        notes.append((kind, said))
    space = space_of(prog, mesh, sizes_known)
    written = (d for t in tensors_of(prog) for d in t.dim_names)  # a dim only an activation has counts too
    missing = [
        d for d in dict.fromkeys((*space.param_dims, *space.batch_dims, *written)) if d not in sizes_known
    ]
    layers = prog.roles.layers if prog.roles is not None else None
    if isinstance(layers, str) and layers not in sizes_known and layers not in missing:
        missing.append(layers)  # the layer count multiplies every figure: a symbol cannot be ranked or fit
    if missing:
        raise UsageError(
            f"a numeric search needs every size: {', '.join(missing)} unbound",
            fix="bind them with --sizes, e.g. --sizes " + ",".join(f"{d}=1024" for d in missing),
        )
    settings = Settings(
        mesh, sizes_known, chip, chosen_mode, optimizer, remat, overlap, cap, state or TrainState()
    )
    return prog, space, settings, notes


def search(
    program: Program | str,
    mesh: Any = None,
    sizes: Mapping[str, int] | str | None = None,
    hw: Any = None,
    memory: str | float | None = None,
    mode: str | None = None,
    optimizer: str | None = None,
    remat: str | None = None,
    overlap: object = None,
    top: int = 10,
    progress: Progress | None = None,
    precision: str | None = None,
    zero: int | str | None = None,
    keep_gathered: bool | None = None,
) -> SearchResult:
    """The fastest sharding of ``program`` (unsharded, with ``params`` declared) on ``mesh`` that fits
    ``memory`` per device (default: the chip's HBM), and the best of each named strategy.

    ``mode``: ``train`` (default; forward, derived backward, optimizer state) or ``infer``; ``overlap``:
    ``steady`` (default), ``serial`` or ``schedule``; ``progress(done, total)`` is called as assignments are handled;
    ``precision`` and ``zero``: the training state's recipe and ZeRO stage (:mod:`shardalg.models.trainstate`);
    ``keep_gathered``: training's backward keeps the forward's gathered copies (True) or gathers them again
    (False); None (default): each candidate is priced both ways and takes the faster that fits the cap.

    Every size is bound, so every plan is ranked on numbers: no plan is chosen by a made-up size (a choice
    left undecided raises :class:`~shardalg.planning.symbolic.NeedsSizes`, as ``shardalg search`` does)."""
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise UsageError(f"--top takes a positive number of rows, not {top!r}")
    with symbolic.strict():
        prog, space, settings, notes = prepare_search(
            program,
            as_mesh(mesh),
            sizes,
            hw,
            memory,
            mode,
            optimizer,
            remat,
            overlap,
            "compute and each axis's collectives overlap across layers",
            TrainState(optimizer, precision=precision, zero=zero),
        )
        chosen_mode = settings.mode
        if chosen_mode == "train":
            settings = replace(settings, keep=keep_gathered)
            notes.append(("gathered", _keep_note(keep_gathered)))
        pruned = Pruned()
        assignments = enumerate_space(space, pruned)
        first = next(assignments, None)  # a space over the limit is refused here, before any pricing
        candidates = assignments if first is None else itertools.chain([first], assignments)
        pricer = pricer_for(prog, space, settings, pruned, [])  # said in the result's solver
        bounds: Bounds | None = None
        fitting: list[tuple[Entry, int]] = []
        rejected: list[Entry] = []
        if bounded(settings):
            fitting, rejected, bounds = price_bounded(pricer, candidates, top, progress, space.size)
        else:
            for order, a in enumerate(candidates):
                e = pricer(a)
                if e is not None:
                    (fitting.append((e, order)) if e.fits else rejected.append(e))
                if progress is not None:
                    progress(pruned.visited, space.size)
            if progress is not None:
                progress(space.size, space.size)
        ranked = [e for e, _ in sorted(fitting, key=lambda x: rank_key(*x))]
        notes.append(
            (
                "space",
                "an activation dim is split only over the axes that split it in the parameters, or "
                "when it is a batch dim; a dim split over several axes takes them in mesh order"
                + wider_note(space),
            )
        )
        if chosen_mode == "infer":
            notes.append(
                ("inference", "memory counts parameters, KV cache and gathered weights (no activations)")
            )
        result = SearchResult(
            settings,
            space,
            prog,
            ranked,
            rejected,
            pruned,
            top,
            notes,
            solver_of(pricer, bounds),
            pricer.aliases,
        )
        shown = result.shown() + ([result.winner] if result.winner is not None else [])
        attach(shown + [x for e in shown if (x := result.against(e)) is not None], settings)
        return result


def solver_of(pricer: Pricer, bounds: Bounds | None = None) -> dict[str, Any]:
    """The search's solver: every assignment of the space enumerated (the winner optimal over the space), and
    how each was priced: its statements' prices summed (``statements``: how many pieces were priced, how many
    candidates were priced whole all the same) or its whole program (``why`` not); in training, the
    candidates that the branch and bound left unpriced (:mod:`.branchbound`: ``bound``)."""
    got: dict[str, Any] = {"method": "enumeration", "optimal": True}
    if bounds is not None:
        got["bound"] = bounds.to_json()
    if isinstance(pricer, StatementPricer):
        return {**got, "pricing": "statements", "pieces": pricer.priced, "priced_whole": pricer.whole}
    return {**got, "pricing": "whole program", "why": pricer.why}
