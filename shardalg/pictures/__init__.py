"""Pictures: crossover plots of two costs (:mod:`.plot`, matplotlib, an optional extra) and which block lives
on which device (:mod:`.show`, text grids and TikZ).

Imports: :mod:`shardalg.costs`, :mod:`shardalg.numeric` and everything below; never :mod:`shardalg.export`.
"""
