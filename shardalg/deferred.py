"""Which imports may sit inside a function, and why; every other import is at the top of its module
(``tests/test_deferred_imports.py`` fails on any other import inside a function).

- :data:`DEFERRED`: heavy libraries and optional extras (and the few modules that are one of them in another
  name), imported by the functions that use them only, so that ``import shardalg``, ``shardalg parse``,
  ``check`` and ``shape`` start without them and a missing extra fails only the feature that needs it.
- :data:`DEFERRING_PACKAGES`: the CLI's command handlers import the layers they drive inside themselves: ``--help``
  builds every command's parser (imports every module of :mod:`shardalg.cli`), and a command's run loads only
  its own handler's layers (``python -m bench cold`` times ``plan`` and ``compare`` against ``import sympy``).
- :data:`GENERATED`: generated modules, written by a tool, not edited by hand.

A module is named by its dotted name; a name covers its submodules (``"matplotlib"`` covers
``matplotlib.pyplot``).
"""

from __future__ import annotations

__all__ = ["DEFERRED", "DEFERRING_PACKAGES", "GENERATED"]

DEFERRED: tuple[str, ...] = (
    # the optional extras
    "jax",  # export.specs (the jax export's check)
    "torch",  # export.specs, export.bridges (the torch export's check)
    "matplotlib",  # pictures, notes.costs
    "scipy",  # search.chainsolve, search.polyhedra (linear programs)
    "rich",  # the CLI's progress display
    "shtab",  # shell completion
    # heavy: the notation, its checks and shapes run without them
    "sympy",
    "numpy",
    "shardalg.algebra.symbols",  # sympy's symbols, as the algebra modules read them (mesh, shape, traffic)
    # only for one rare path, and each costs a cold start a few ms
    "tomllib",  # costs.chipspec: a chip read from a TOML file
    "importlib.resources",  # notation.grammar: the grammar found inside an installed wheel
    "subprocess",  # notation.grammar: regenerating the parser
    "difflib",  # errors.closest: a "did you mean" for a word that is wrong
    "json",  # cli.common.json_text, costs.derive: the --json output (plan and compare start without it)
    "html",  # notation.printing.display.html_escape: a notebook's HTML tables
    # a layer a cold command loads only when its input needs it
    "shardalg.planning.planner",  # costs.programplan: a written statement that does not meet (compare starts
    # without the planner's ~30 modules when every statement of both plans is written out)
)

DEFERRING_PACKAGES: tuple[str, ...] = ("shardalg.cli",)

GENERATED: tuple[str, ...] = ("shardalg.notation.lalr",)  # python -m lark.tools.standalone
