"""Pictures: crossover plots of two costs (:mod:`.plot`, matplotlib, an optional extra), which block lives
on which device (:mod:`.show`, text grids and TikZ), and the strategy map as a log-log region picture
(:mod:`.regionmap`).

Imports: :mod:`shardalg.search`, :mod:`shardalg.costs`, :mod:`shardalg.numeric` and everything below; never
:mod:`shardalg.export`.
"""
