"""Costs as closed-form sympy expressions, the chips that give them numbers, and what is derived from them.

- :mod:`.atoms`, :mod:`.terms`, :mod:`.fromsympy` (light cost terms: monomials of positive symbols, their
  sums and maxima; evaluated without sympy, made sympy on demand);
- :mod:`.hardware` (chip presets, each number with its source), :mod:`.slicedata` and :mod:`.topology` (real
  slices: pods, shapes and GPU network levels as sourced data; a slice's physical axes factored into a logical
  mesh), :mod:`.commcost`, :mod:`.stepcost` and :mod:`.hierarchy` (the communication models: ICI torus with
  hops per torus axis, alpha-beta, GPU levels; exact ring bytes, one-way rings), :mod:`.steps` (one step's
  cost: collective, compute, HBM; and its seconds as numbers);
- :mod:`.costmodel` (the cost model as one frozen value: chip, communication model, overlap policy,
  counting options; the public functions' keyword options fold into it once; the planner's ranking by
  seconds, :class:`shardalg.planning.ranking.Ranking`);
- :mod:`.schedule` (a plan's steps on the mesh axes and the compute under an overlap policy, the enum
  :class:`~shardalg.planning.overlap.OverlapPolicy`), :mod:`.programplan` (a program as a plan), :mod:`.plancost` (a plan's cost),
  :mod:`.gantt` (the schedule as text and JSON);
- :mod:`.ranking` (reshardings ranked by seconds on a chip; the planner ranks plans by a CostModel itself),
  :mod:`.solve` and :mod:`.derive` (crossovers,
  optima, bounds, each with its steps), :mod:`.sweep` (numeric sweeps).

Imports: :mod:`shardalg.planning` and everything below it; never :mod:`shardalg.numeric` (its sibling).
A new communication model is a column of ``stepcost.FORMULAS``; a new derivation is a function in ``derive``.
"""
