"""Text to AST: parse with the LALR parser of ``grammar/shardalg.lark`` (:mod:`.grammar`; generated, no lark
imported) and the transformer (:mod:`.build`), into :mod:`shardalg.notation.syntax`.

    >>> parse_tensor("A[I_XY, J]{U_Z}")
    Tensor(name='A', dims=(Dim(name='I', axes=('X', 'Y'), size=None), Dim(name='J', axes=(), size=None)), unreduced=('Z',), invariant=(), dtype=None)

Every failure is a :class:`~shardalg.errors.ParseError` with a span into the text and a short message that
says what was expected (:mod:`.syntaxerrors`). Nothing here evaluates user text: numbers and names come from
grammar tokens.
"""

from __future__ import annotations

from typing import Any

from shardalg import limits
from shardalg.errors import UsageError

from .build import LOCAL, split_axes
from .grammar import START, grammar_path, grammar_text
from .syntax import Program, Statement, Tensor, nesting
from .syntaxerrors import parsed

__all__ = ["parse", "parse_tensor", "parse_statement", "grammar_text", "grammar_path", "split_axes", "LOCAL"]


def _bounded(node: Any, text: str) -> Any:
    """Refuse a parsed program or statement over the statements or depth limits (up front: the printers and
    checks recurse once a level)."""
    statements = node.statements if isinstance(node, Program) else (node,)
    limits.require("statements", len(statements), "the program")
    for s in statements:
        depth = nesting(s)
        if depth > limits.value("depth"):
            raise limits.refuse("depth", f"a statement nests {depth} levels", span=s.span).with_source(text)
    return node


def _run(text: object, kind: str) -> Any:
    if not isinstance(text, str):
        raise UsageError(f"parse takes text (a str), not {type(text).__name__}")
    limits.require("text", len(text), "the input")
    start = START[kind]
    return _bounded(parsed(text, start), text)


def parse(text: str) -> Program:
    """Parse a program: statements separated by newlines or ``;``, an optional ``mesh`` line and
    ``where`` bindings. Always returns a :class:`Program` with ``source`` set to ``text``."""
    program: Program = _run(text, "program")
    return Program(
        program.statements, program.mesh, program.sizes, program.roles, span=program.span, source=text
    )


def parse_tensor(text: str) -> Tensor:
    """Parse one tensor: ``A[I_X, J]{U_Y}``, ``bf16[B_X, D]``, ``\\mathbf{A}[I_{XY}, J]``."""
    tensor: Tensor = _run(text, "tensor")
    return tensor


def parse_statement(text: str) -> Statement:
    """Parse one statement: an expression, or ``expr -> tensor``."""
    statement: Statement = _run(text, "statement")
    return statement
