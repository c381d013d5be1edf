"""Plans: every legal way to compute a statement, resharding, whole programs, and the backward pass.

- :mod:`.planner` (the entry point, ``plans``/``plan``) and :mod:`.einsum_plans` (the enumeration of compute
  layouts and finishes for an einsum), with :mod:`.steps` (move sequences as Steps, and the memoized pieces the
  plans of an einsum share) and :mod:`.reasons` (each planned step's reason, and plan notes);
- :mod:`.redistribute` (the cheapest sequences of rules between two shardings of one tensor), over the layout
  spaces of :mod:`.space` searched by :mod:`.search` (one weight) and :mod:`.pareto` (seconds per resource);
  :mod:`.optimum` (the cheapest plan over every compute layout);
- :mod:`.programs` (checking a program statement by statement), :mod:`.forward` (the forward as the
  backward reads it: versions of values, each statement's plan, gathered copies), :mod:`.gradients` (the two
  gradients of a product planned together), :mod:`.backward` (the derived backward program), :mod:`.verify`
  (checking a hand-written backward); :mod:`.memo` (memos by object identity, for helpers whose inputs
  share objects); :mod:`.overlap` (the overlap policies, an enum the costs layer's schedules and the
  cheapest-plan search both read); :mod:`.ranking` (the protocol of a ranking the planner is handed).

Imports: :mod:`shardalg.algebra`, :mod:`shardalg.notation`, :mod:`shardalg.errors`. The planner ranks by bytes;
it takes any other ranking as a value implementing :class:`.ranking.Ranking` (``rank=``:
:class:`~shardalg.costs.ranking.BySeconds` ranks by a cost model's seconds on its chip), which hands it functions (``key``
for plans, ``weigh`` for one step, an ``Overlap`` for how steps overlap), so planning never imports the costs
layer.
"""
