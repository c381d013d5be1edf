"""Executable proofs: one lemma per module, each ``prove(model=None) -> shardalg.numeric.proofs.Lemma``.

Every lemma takes its objects from the engine (cost model, planner, derivations, collective operators) and
checks them with sympy against an independent route (a hop count, a simulated ring schedule, a Kronecker
product). Run them all with ``shardalg proofs`` or ``python -m proofs.run``; the test suite runs them too.
``common`` holds the independent routes shared by several lemmas.
"""
