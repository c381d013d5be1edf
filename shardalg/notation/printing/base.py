"""The printer base class (sympy's ``Printer``): dispatch on the node's class hierarchy to the first
``_print_<ClassName>`` method; children go through ``self._print``; settings are declared per printer and
an unknown one is an error."""

from __future__ import annotations

from typing import Any, ClassVar

from shardalg.errors import UsageError

__all__ = ["Node", "Printer"]

# What a printer is handed: a notation node (or a plan or step). Printers know nodes by class name only (the
# AST imports the printers, never the other way round), so the annotation names no class.
Node = Any


class Printer:
    """Subclasses define ``_print_<ClassName>`` methods and ``_default_settings``."""

    _default_settings: ClassVar[dict[str, Any]] = {}

    def __init__(self, **settings: Any) -> None:
        unknown = sorted(set(settings) - set(self._default_settings))
        if unknown:
            known = ", ".join(sorted(self._default_settings)) or "none"
            raise UsageError(
                f"unknown setting {', '.join(unknown)} for {type(self).__name__} (known: {known})"
            )
        self._settings: dict[str, Any] = {**self._default_settings, **settings}

    def doprint(self, node: object) -> Any:
        if isinstance(node, str):  # notation text: the printers take what the parser makes of it
            raise UsageError(
                f"{type(self).__name__} prints a node, not text: {node[:60]!r}",
                fix="parse it first: shardalg.parse(text) (or parse_tensor, parse_statement)",
            )
        return self._print(node)

    def _print(self, node: object) -> Any:
        for cls in type(node).__mro__:
            method = getattr(self, f"_print_{cls.__name__}", None)
            if method is not None:
                return method(node)
        return self.emptyPrinter(node)

    def emptyPrinter(self, node: object) -> Any:  # noqa: N802 - sympy's name
        if isinstance(node, str):  # inside a node made by hand: Tensor("A", ("I",))
            raise UsageError(
                f"{type(self).__name__} cannot print the str {node[:60]!r} inside a node: a Tensor's dims are "
                "Dim values, its name and axes str",
                fix="Tensor('A', (Dim('I', ('X',)),)) for A[I_X], or parse it: shardalg.parse_tensor('A[I_X]')",
            )
        raise UsageError(f"{type(self).__name__} cannot print a {type(node).__name__}")
