"""Audits of real code: what XLA (and PyTorch DTensor) actually communicate, read back into the notation and
judged against shardalg's plans.

    >>> from shardalg.audit import audit_file
    >>> a = audit_file("model.py:mlp", ["x[B_X, D]", "w_in[D, F_Y]", "w_out[F_Y, D]"], "X=2,Y=4",
    ...                {"B": 64, "D": 128, "F": 256})
    >>> print(report_text(a))

The job is split one module a step, parent side first:

- :mod:`.run`: jobs from the user's inputs, the jax subprocess (8 CPU devices by
  ``--xla_force_host_platform_device_count``), the :class:`Audit` of each;
- :mod:`.driver` and :mod:`.trace` (the subprocess, the only modules that import jax, inside functions):
  the jaxpr's operations, the shardings XLA chose, the compiled HLO text;
- :mod:`.hlo`: the collectives of the HLO text; :mod:`.groups`: replica groups as mesh axes and sub-axes;
- :mod:`.program`: the program in the notation and XLA's collectives as each statement's steps;
- :mod:`.verdict`: XLA's plan among shardalg's, priced under one ``CostModel``; backward pairs;
- :mod:`.report`: one report record, printed as text, LaTeX and HTML; and JSON.

Imports: :mod:`shardalg.api` and the layers below it, and :func:`shardalg.export.harness.run_driver` (the
subprocess runner the export checks use); nothing imports it but the CLI.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .run import Audit, AuditJob, audit, audit_file, audit_files

__all__ = ["Audit", "AuditJob", "audit", "audit_file", "audit_files"]


class _Callable(types.ModuleType):
    """``shardalg.audit`` is both this package and the public function: once the package is imported, the
    attribute ``shardalg.audit`` is the package (Python sets it), so calling it audits."""

    def __call__(self, *args: Any, **kwargs: Any) -> Audit:
        return audit(*args, **kwargs)


sys.modules[__name__].__class__ = _Callable
