"""Proof on numbers: the virtual mesh of numpy buffers, every op as real data movement, ops as matrices,
and the machinery of the executable proofs.

- :mod:`.devices` (the virtual mesh, ``shard``/``unshard``), :mod:`.movement` (each op's data movement, registered
  on ``MOVES``), :mod:`.kernels` (every buffer the executor allocates, and the local product through
  BLAS), :mod:`.execute` (running a plan, ``execute_plan``, and checking it against the dense einsum,
  ``run_plan``);
- :mod:`.operators` (each op as the explicit linear operator on the stacked buffers, for the transposes'
  dot-product test), :mod:`.proofs` (``Lemma``, and running the lemmas of the top-level ``proofs/``).

Imports: :mod:`shardalg.planning` and everything below it; never :mod:`shardalg.costs` (its sibling). A new
op needs a method registered on ``movement.MOVES``; without one the executor refuses it by name.
"""
