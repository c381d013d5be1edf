"""Costs as closed-form sympy expressions, the chips that give them numbers, and what is derived from them.

- :mod:`.hardware` (chip presets, each number with its source), :mod:`.stepcost` (the per-step models:
  ICI torus, alpha-beta, compute, HBM), :mod:`.plancost` (a plan's cost and a program priced as a plan);
- :mod:`.ranking` (the planner ranked by seconds on a chip), :mod:`.derive` (crossovers, optima, bounds,
  each with its steps), :mod:`.sweep` (compiled numeric sweeps).

Imports: :mod:`shardalg.planning` and everything below it; never :mod:`shardalg.numeric` (its sibling).
A new communication model is a column of ``stepcost.FORMULAS``; a new derivation is a function in ``derive``.
"""
