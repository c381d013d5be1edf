"""One value on a mesh: what a sharding means, what is legal, and what each rule does to it.

- :mod:`.mesh` (axes, sizes, link counts, wraparound), :mod:`.symbols` (the one maker of sympy symbols);
- :mod:`.layout` (a tensor's placements per axis), :mod:`.context` (the values a program defines),
  :mod:`.legality` (the one legality: the rules as a table, with the product's rows in :mod:`.product_rules`
  and the spans they point at in :mod:`.findings`), :mod:`.shape` (local shapes, bytes, replication);
- :mod:`.ops` (one module per operation: its record, with its rule, transpose, bytes and printed forms),
  :mod:`.registry` (the records, and the methods the layers above register per operation) and
  :mod:`.statements` (applying one to a tensor), :mod:`.einsum` (the four matmul cases, generalized);
- :mod:`.traffic` (bytes a step moves: what the planner ranks by), :mod:`.transpose` (the local view's
  transposes, AllGather ⇄ ReduceScatter).

Imports: :mod:`shardalg.notation`, :mod:`shardalg.limits` and :mod:`shardalg.errors`. A new operation is one record
(``ops.register_op``); a new legality check is a row of ``legality.RULES``.
"""

from . import ops  # noqa: F401 -- the builtin operations' records, registered before any is looked up
