"""Plans as code other people run: JAX ``shard_map`` bodies and ``torch.distributed`` calls.

    >>> from shardalg.export import export_jax, export_torch
    >>> print(export_jax(plan, Mesh(X=4, Y=2)))          # a module with ``forward(A, B)``

This package never imports jax or torch at import time: the generators write text, and the checks run the
text in a subprocess (8 fake CPU devices for JAX, gloo processes for torch) against the dense einsum.

What the generators share lives in one module a job, all re-exported here:

- :mod:`.flow`: a :class:`Flow` (a plan, or several chained, with named variables) and :func:`as_flow`;
- :mod:`.emit`: a step's layout change, the einsum subscripts of a local product, the generated body;
- :mod:`.harness`: random inputs, the dense reference, the subprocess run, and the check's report;
- :mod:`.permute`: which device sends each device its shard in a Permute.

Conventions of the generated code (both backends):

- Unreduced values (``C[I, K]{U_X}``) cross the function boundary *stacked*: the global array has an extra
  leading dim, one slot per device group along the unreduced axes (mesh order), and its value is the sum
  over that dim. Inside, each device sees its own partial.
- A Slice step whose axes become unreduced (the transpose of Slice, S -> U) is a zero-pad: each device
  writes its block in place and zeros elsewhere.

Imports: :mod:`shardalg.numeric` (the virtual mesh for permutes and the dense reference) and the layers
below it; never :mod:`shardalg.pictures` (its sibling) or the outputs above.
"""

from __future__ import annotations

from .emit import appended_suffixes as appended_suffixes
from .emit import einsum_subscripts, is_zero_pad
from .emit import removed_suffixes as removed_suffixes
from .flow import Flow, as_flow, as_jobs
from .flow import node_text as node_text
from .flow import step_text as step_text
from .harness import CheckResult, check_sizes, dense_outputs, random_inputs
from .harness import compare as compare
from .harness import dense_value as dense_value
from .harness import global_shape as global_shape
from .harness import unreduced_in_mesh_order as unreduced_in_mesh_order
from .jax import check_jax, export_jax
from .permute import permute_pairs, permute_sources
from .torch_check import check_torch
from .torch_export import export_torch

__all__ = [
    "Flow",
    "CheckResult",
    "as_flow",
    "as_jobs",
    "permute_sources",
    "permute_pairs",
    "einsum_subscripts",
    "is_zero_pad",
    "dense_outputs",
    "random_inputs",
    "check_sizes",
    "export_jax",
    "export_torch",
    "check_jax",
    "check_torch",
]
