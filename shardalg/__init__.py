"""shardalg: a symbolic algebra engine for the sharding rules of distributed matrix programs.

    >>> import shardalg as sa
    >>> p = sa.parse("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]")

The public names are loaded on first use, so ``import shardalg`` (and the CLI's start) stays cheap.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # notation
    "parse": "parse",
    "parse_tensor": "parse",
    "parse_statement": "parse",
    "Mesh": "mesh",
    "Axis": "mesh",
    "DType": "syntax",
    "Op": "syntax",
    "Dim": "syntax",
    "Tensor": "syntax",
    "Product": "syntax",
    "Collective": "syntax",
    "Arrow": "syntax",
    "Program": "syntax",
    # legality and shapes
    "check": "legality",
    "shape": "shape",
    # printers
    "text": "printing",
    "unicode": "printing",
    "latex": "printing",
    "to_json": "printing",
    "from_json": "printing",
    # errors
    "ShardalgError": "errors",
    "ParseError": "errors",
    "IllegalSharding": "errors",
    "UsageError": "errors",
    # plans
    "Plan": "plan",
    "Step": "plan",
    "plan": "planner",
    "plans": "planner",
    "redistribute": "redistribute",
    "check_program": "programs",
    "simulate": "execute",
    "backward": "backward",
    "verify": "verify",
    "transpose": "transpose",
    "run_plan": "execute",
    # costs and derivations
    "cost": "plancost",
    "plan_cost": "plancost",
    "PlanCost": "plancost",
    "hardware": "hardware",
    "Chip": "hardware",
    "compare": "derive",
    "optimum": "derive",
    "compute_bound": "derive",
    "critical": "derive",
    "Derivation": "derive",
    "lambdify": "sweep",
    "sweep": "sweep",
    # pictures and the bridge to JAX / PyTorch
    "show": "show",
    "show_tikz": "show",
    "show_collective": "show",
    "export_jax": "export.jax",
    "export_torch": "export.torch_export",
    "to_partition_spec": "export.specs",
    "from_partition_spec": "export.specs",
    "to_named_sharding": "export.specs",
    "to_placements": "export.specs",
    "from_placements": "export.specs",
    # teaching: proofs, notes, fragments, plots
    "Lemma": "proofs",
    "run_all": "proofs",
    "build_notes": "notes",
    "write_notes": "notes",
    "to_latex": "notes.fragments",
    "to_markdown": "notes.fragments",
    "crossover_plot": "plot",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    try:
        module = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'shardalg' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


class _Package(types.ModuleType):
    """The package module, guarding public functions that share a submodule's name.

    Importing ``shardalg.backward`` makes Python set the package attribute ``backward`` to the submodule,
    which would hide the function ``shardalg.backward``. Public names win: the submodule stays in
    ``sys.modules`` (``from shardalg.backward import ...`` and ``importlib.import_module`` reach it).
    """

    def __setattr__(self, name: str, value: object) -> None:
        if (
            isinstance(value, types.ModuleType)
            and value.__name__ == f"{__name__}.{name}"
            and name in _EXPORTS
            and getattr(value, name, None) is not value
        ):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
