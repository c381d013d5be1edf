"""Strategy search: which sharding is fastest, and where: the numeric search and the symbolic strategy map.

- :mod:`.logspace` (costs as maxima of sums of monomials), :mod:`.conditions` (comparisons as half-spaces in
  log coordinates, formulas as trees of conjunctions and disjunctions), :mod:`.polyhedra` (the linear programs that decide them,
  scipy's HiGHS imported on first use);
- :mod:`.minimize` (the minimum over an axis split in closed form: X_opt), :mod:`.candidates` (what a caller
  hands over), :mod:`.regions` (the engine: cells and winner regions), :mod:`.strategymap` (the result and
  its printers), :mod:`.splits` (integer axis sizes next to a continuous optimum);
- :mod:`.programmap` (the named strategies of a program: shardings built, costed by the engine),
  :mod:`.zerofamily` (ZeRO-1 and ZeRO-2 as members of FSDP's family, from DP under that stage; ZeRO-3 is FSDP),
  :mod:`.monotext` (map parameters written as text), :mod:`.programresult` (``program_map`` and its result;
  ``strategy_map`` takes a program or a list of candidates).

The engine takes sympy expressions: it does not know how a cost was made, so any overlap policy, memory
model or cost form that ends in products of powers, ``+`` and ``Max`` maps alike.

The numeric search: :mod:`.space` (axis assignments for parameters and activations, the named strategies),
:mod:`.price` (each priced by its plans, derived backward, step seconds and memory), :mod:`.numeric` (the
fastest that fits, the best of each strategy, the ranked table); ``shardalg.search(...)`` calls it.

Imports: :mod:`shardalg.models` (a program's plans), :mod:`shardalg.costs`, :mod:`shardalg.numeric` and everything below them; never
the outputs above (export, pictures, notes, cli). scipy is imported lazily, inside the functions that solve
linear programs, so ``import shardalg`` and the CLI's start do not pay for it.
"""

import sys as _sys
import types as _types

from .candidates import Candidate, eliminate
from .minimize import Minimize, Minimum, minimize
from .numeric import search
from .programresult import ProgramMap, program_map, strategy_map
from .splits import AxisSplits, axis_splits, divisors, torus_splits
from .strategymap import Region, StrategyMap

__all__ = [
    "Candidate",
    "eliminate",
    "Minimize",
    "Minimum",
    "minimize",
    "strategy_map",
    "program_map",
    "ProgramMap",
    "Region",
    "StrategyMap",
    "AxisSplits",
    "axis_splits",
    "divisors",
    "torus_splits",
]


class _CallableModule(_types.ModuleType):
    """``sa.search(...)`` must call the numeric search even once ``import shardalg.search`` has bound the
    name ``search`` of the package ``shardalg`` to this subpackage: the subpackage, called, is the search."""

    def __call__(self, *args, **kwargs):
        return search(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
