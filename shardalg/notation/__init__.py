"""The notation of "How To Scale Your Model" as values: text in, AST out, text out.

- :mod:`.syntax`: the AST, frozen and hashable (``Tensor``, ``Dim``, ``Product``, ``Collective``, ``Arrow``,
  ``Program``; the ``DType`` enum) and :mod:`.op` (``Op``, the open set of operations);
- :mod:`.plan`: ``Step`` and ``Plan``, a program of rule applications with reasons (the data every layer
  above passes around);
- :mod:`.parse`: the parser of ``grammar/shardalg.lark`` (ASCII, Unicode, the book's LaTeX), lark's
  standalone parser generated into :mod:`.lalr`; :mod:`.jsonread` reads the JSON form back;
- :mod:`.printing`: text, Unicode, LaTeX and JSON printers, dispatching on the node's class name (sympy's
  ``_print_<Class>``), one glyph table and one precedence table.

Imports: :mod:`shardalg.errors` and :mod:`shardalg.limits` only. Inside, ``printing`` knows nodes by class
name and never imports them; nodes reach the printers only through the thin ``__str__``/``latex()`` methods. A new spelling goes in
the grammar and the glyph table; a new output format is a new printer class.
"""
