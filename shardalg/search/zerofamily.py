"""The ZeRO stages as members of the strategy map's FSDP family: ZeRO-1, ZeRO-2, and ZeRO-3, which is FSDP.

    >>> s = family_strategies("params W\\nIn[B, D] * W[D, F] -> Out[B, F]", names=("DP", "ZeRO-1"))[0]
    >>> [x.name for x in s], sympy.simplify(s[1].cost.total - s[0].cost.total)          # doctest: +SKIP
    (['DP', 'ZeRO-1'], 0)

The family runs from DP (everything replicated over the data axis X) to FSDP (parameters, gradients and
optimizer state sharded over X, Rajbhandari et al. 2019's P_os+g+p):

- ZeRO-1: DP's sharding with the optimizer state sharded over X (P_os);
- ZeRO-2: the gradients too (P_os+g);
- ZeRO-3: the parameters too, which is FSDP as the map builds it (``W[D_X, F]``, gathered before use): the name
  is taken as FSDP's, said in a note, and not built twice.

ZeRO-1 and ZeRO-2 are DP's sharded program read by the models layer under that stage
(:mod:`shardalg.models.zerostep`: the gradients reduce-scattered over X and the updated parameters all-gathered
once per step, in the backward's phase), priced by the map's own :func:`.programmap._cost`; their memory is the
models layer's (:func:`shardalg.models.memory.model_memory` with ``zero``), the optimizer state (and the
gradients) divided by X. So under a memory cap each gets the region where it fits and DP does not. No
formula is typed here: whether a member's cost equals DP's is read off the two costs and said.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.costs.costmodel import CostModel
from shardalg.costs.schedule import OverlapPolicy
from shardalg.errors import UsageError
from shardalg.models.analysis import analyze
from shardalg.models.memory import model_memory
from shardalg.models.program import model_program
from shardalg.models.trainstate import TrainState
from shardalg.models.zerostep import pass_analysis, step_parts
from shardalg.notation.plan import Plan

from .programmap import STATE, STRATEGY_NAMES, Strategy, _cost, strategies_of

__all__ = ["ZERO_NAMES", "FAMILY_NAMES", "SAME_AS", "family_strategies", "zero_strategy", "cap_notes"]

# the ZeRO members, by stage; a member named here is built from DP's sharding under that stage
STAGES: dict[str, int] = {"ZeRO-1": 1, "ZeRO-2": 2}
# a member that is another strategy of the map, and what it is there
SAME_AS: dict[str, tuple[str, str]] = {
    "ZeRO-3": (
        "FSDP",
        "parameters, gradients and optimizer state sharded over X, the weights gathered before use",
    ),
}
ZERO_NAMES: tuple[str, ...] = ("ZeRO-1", "ZeRO-2", "ZeRO-3")
FAMILY_NAMES: tuple[str, ...] = (*STRATEGY_NAMES, *ZERO_NAMES)  # every name the map takes
SHARDS = {1: "the optimizer state", 2: "the gradients and optimizer state"}


def _phases(
    a: Any, state: TrainState, passes: str
) -> tuple[list[tuple[str, list[Plan]]], list[tuple[str, str]]]:
    """The chosen passes of a one-pass training step under ``state``'s stage, by phase, and the stage's notes.
    :func:`shardalg.models.zerostep.step_parts` gives each part's forward and backward (the recomputed
    forward first, then the gradients, their reductions and the once-a-step gathers); the backward pass
    alone leaves out the recomputed forward, as the map's other strategies do."""
    run, notes = pass_analysis(a, state)
    fwd: list[Plan] = []
    bwd: list[Plan] = []
    grads: list[Plan] = []
    by_index = {s.index: s for s in run.model.statements}
    for once, _name, _count, (forward, backward) in step_parts(run, state, lambda a, once: [], 1):
        recomputed = sum(1 for i in run.recomputed if by_index[i].once == once)
        fwd += forward
        bwd += backward
        grads += backward[recomputed:]
    chosen = {
        "step": [("forward", fwd), ("backward", bwd)],
        "forward": [("forward", fwd)],
        "backward": [("backward", grads)],
    }[passes]
    return chosen, notes


def zero_strategy(
    dp: Strategy,
    stage: int,
    overlap: object = OverlapPolicy.STEADY,
    passes: str = "step",
    remat: Any = None,
    optimizer: Any = None,
    keep_gathered: bool = False,
) -> Strategy:
    """ZeRO-``stage`` built from DP's strategy: its sharded program read under the stage, priced by phase
    as the map prices DP, with the stage's memory of the parts the cap bounds. The map builds stages 1 and
    2; stage 3 is FSDP there (a test checks that this function's stage 3 costs and holds what FSDP does)."""
    state = TrainState(optimizer=optimizer, zero=stage)
    a = analyze(
        model_program(dp.program, Mesh({ax: None for ax in dp.axes}), {}), "train", remat, keep_gathered
    )
    phases, zero_notes = _phases(a, state, passes)
    costs = CostModel(overlap=OverlapPolicy.of(overlap), latency=False, symbolic_links=True)
    pc, parts = _cost(phases, dp.axes, costs)
    report = model_memory(a, None, optimizer, zero=stage)
    state_bytes = sympy.Add(*(report.parts[p] for p in STATE))
    kept = sympy.Add(*(b * n for _, b, n in a.kept()))
    notes = [(k, v) for k, v in report.notes if k not in ("layers", "mode", "zero")]
    notes += [(k, f"ZeRO-{stage}: {v}") for k, v in zero_notes]
    return Strategy(
        f"ZeRO-{stage}",
        dp.program,
        dp.axes,
        pc,
        parts,
        dp.substitute,
        dp.minimize,
        tuple(notes),
        state_bytes,
        kept if keep_gathered else None,
    )


def _resolve(names: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """The names to build, in the order asked (a ZeRO-3 as FSDP, each once), and the notes that say so."""
    unknown = [n for n in names if n not in FAMILY_NAMES]
    if unknown or not names:
        raise UsageError(
            f"unknown strategies {unknown}; known: {', '.join(FAMILY_NAMES)}",
            rule="parameters",
            fix="e.g. names=('DP', 'ZeRO-1', 'FSDP') (--strategies DP,ZeRO-1,FSDP)",
        )
    out: list[str] = []
    notes: list[str] = []
    for n in names:
        if n in SAME_AS:
            other, what = SAME_AS[n]
            notes.append(f"{n} is {other} ({what}): mapped once, as {other}")
            n = other
        if n not in out:
            out.append(n)
    return tuple(out), notes


def _said(z: Strategy, dp: Strategy) -> str:
    """What a member is, and how its cost and its bytes stand to DP's (read off both, never assumed)."""
    stage = STAGES[z.name]
    held, dp_held = (sympy.expand(s.state.subs(s.substitute)) for s in (z, dp))
    cost = (
        "its cost equals DP's (ReduceScatter + AllGather move the bytes of the AllReduce)"
        if sympy.simplify(z.cost.total - dp.cost.total) == 0
        else f"its cost {sympy.sstr(z.cost.total)} against DP's {sympy.sstr(dp.cost.total)}"
    )
    memory = (
        f"it holds what DP holds ({sympy.sstr(held)} bytes per device)"
        if sympy.simplify(held - dp_held) == 0
        else f"it holds {sympy.sstr(held)} bytes per device against DP's {sympy.sstr(dp_held)}"
    )
    return (
        f"{z.name}: DP's sharding with {SHARDS[stage]} sharded over X (models.zero); the gradients "
        f"reduce-scattered over X and the parameters all-gathered once per step (models.zerostep); {cost}; "
        f"{memory}"
    )


def family_strategies(
    program: Any,
    overlap: object = OverlapPolicy.STEADY,
    passes: str = "step",
    remat: Any = None,
    names: Sequence[str] = STRATEGY_NAMES,
    optimizer: Any = None,
    keep_gathered: bool | None = None,
) -> tuple[tuple[Strategy, ...], list[str]]:
    """The strategies ``names`` asks for, in that order (the book's four from
    :func:`.programmap.strategies_of`, the ZeRO members built here), and the notes on the members."""
    wanted, notes = _resolve(names)
    if not any(n in STAGES for n in wanted):
        return strategies_of(program, overlap, passes, remat, wanted, optimizer, keep_gathered), notes
    book = tuple(n for n in STRATEGY_NAMES if n in wanted or n == "DP")  # the members start from DP
    built: dict[str, list[Strategy]] = {}
    for s in strategies_of(program, overlap, passes, remat, book, optimizer, keep_gathered):
        # their stage is 0 (as each writes its parameters); the members say theirs
        n = s.strategy
        said = tuple((k, f"{v} for {n}; each ZeRO member its own" if k == "zero" else v) for k, v in s.notes)
        built.setdefault(n, []).append(replace(s, notes=said))  # "NAME kept" beside NAME
    (dp,) = built["DP"]  # DP gathers nothing: placed once
    for n in wanted:
        if n in STAGES:
            member = zero_strategy(dp, STAGES[n], overlap, passes, remat, optimizer, bool(keep_gathered))
            built[n] = [member]
            notes.append(_said(member, dp))
    return tuple(s for n in wanted for s in built[n]), notes


def cap_notes(strategies: Sequence[Strategy]) -> list[str]:
    """Under a memory cap: each ZeRO member whose bytes are a sum (what stays whole plus what is divided by
    N) fits where that sum is at most H, which the map compares term by term (bracketed: the boundary of a
    sum is not a product of powers). Said for each, with its sum."""
    out = []
    for s in strategies:
        if s.name not in STAGES:
            continue
        held = sympy.expand(s.state.subs(s.substitute))
        terms = sympy.Add.make_args(held)
        if len(terms) > 1:
            out.append(
                f"{s.name} fits where {sympy.sstr(held)} <= H, a sum: the map places it where each term is at "
                f"most H, so its region may reach past the exact boundary by up to a factor {len(terms)} in H"
            )
    return out
