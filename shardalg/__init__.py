"""shardalg: a symbolic algebra engine for the sharding rules of distributed matrix programs.

    >>> import shardalg as sa
    >>> p = sa.parse("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]")

The public names are loaded on first use, so ``import shardalg`` (and the CLI's start) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # notation
    "parse": "notation.parse",
    "parse_tensor": "notation.parse",
    "parse_statement": "notation.parse",
    "Mesh": "algebra.mesh",
    "Axis": "algebra.mesh",
    "DType": "notation.syntax",
    "Op": "notation.syntax",
    "Dim": "notation.syntax",
    "Tensor": "notation.syntax",
    "Product": "notation.syntax",
    "Collective": "notation.syntax",
    "Arrow": "notation.syntax",
    "Program": "notation.syntax",
    # legality and shapes
    "check": "algebra.legality",
    "shape": "algebra.shape",
    # printers
    "text": "notation.printing",
    "unicode": "notation.printing",
    "latex": "api",
    "to_json": "notation.printing",
    "from_json": "notation.jsonread",
    # errors
    "ShardalgError": "errors",
    "ParseError": "errors",
    "IllegalSharding": "errors",
    "UsageError": "errors",
    # plans
    "Plan": "notation.plan",
    "Step": "notation.plan",
    "redistribute": "costs.ranking",
    "check_program": "planning.programs",
    "simulate": "numeric.execute",
    "backward": "api",
    "gradcheck": "numeric.gradcheck",
    "verify": "planning.verify",
    "transpose": "algebra.transpose",
    "run_plan": "numeric.execute",
    "plans": "api",
    "plan": "api",
    "piecewise": "planning.symbolic",
    "NeedsSizes": "planning.symbolic",
    # costs and derivations
    "cost": "api",
    "plan_cost": "costs.plancost",
    "PlanCost": "costs.plancost",
    "Chip": "costs.hardware",
    "slice_mesh": "costs.topology",
    "slice_topology": "costs.topology",
    "compare": "api",
    "optimum": "costs.derive",
    "compute_bound": "api",
    "critical": "costs.derive",
    "Derivation": "costs.derive",
    "lambdify": "costs.sweep",
    "sweep": "costs.sweep",
    # whole models
    "model_program": "models.program",
    "memory": "models.memory",
    "step_time": "models.step",
    "serve": "models.serving",
    "largest": "models.fit",
    "fewest_devices": "models.fit",
    "smallest_slice": "models.fit",
    "largest_params": "models.fit",
    "to_fit": "models.advice",
    "expand": "models.expand",
    "shard": "models.expand",
    "chip_from_text": "costs.chipspec",
    "symbols": "algebra.symbols",
    # strategy search
    "search": "search.numeric",
    "search_chain": "search.chainsolve",
    "ChainResult": "search.chainsolve",
    "search_graph": "search.graph",
    "GraphResult": "search.graph",
    "strategy_map": "search.programresult",
    "StrategyMap": "search.strategymap",
    "ProgramMap": "search.programresult",
    "region_map": "pictures.regionmap",
    # pictures and the bridge to JAX / PyTorch
    "show": "pictures.show",
    "show_tikz": "pictures.show",
    "show_collective": "pictures.show",
    "export_jax": "export.jax",
    "export_torch": "export.torch_export",
    "to_partition_spec": "export.bridges",
    "from_partition_spec": "export.specs",
    "to_named_sharding": "export.specs",
    "to_placements": "export.specs",
    "from_placements": "export.specs",
    "to_torch_placements": "export.bridges",
    "from_torch_placements": "export.bridges",
    # audits of real code: XLA's collectives against shardalg's plans
    "audit": "audit.run",
    "audit_file": "audit.run",
    # teaching: proofs, notes, fragments, plots
    "Lemma": "numeric.proofs",
    "run_all": "numeric.proofs",
    "build_notes": "notes",
    "write_notes": "notes",
    "to_latex": "notes.fragments",
    "to_markdown": "notes.fragments",
    "crossover_plot": "pictures.plot",
    # the one cache layer
    "clear_caches": "cache",
}

# public name -> a module that is itself the public object
_MODULES: dict[str, str] = {"hardware": "costs.hardware", "model_presets": "models.presets"}

__all__ = sorted([*_EXPORTS, *_MODULES]) + ["__version__"]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        value = importlib.import_module(f".{_MODULES[name]}", __name__)
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    else:
        raise AttributeError(f"module 'shardalg' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
