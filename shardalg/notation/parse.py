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
from shardalg.errors import ParseError, ShardalgError, Span, UsageError

from .build import LOCAL, split_axes, transformer
from .grammar import START, grammar_path, grammar_text, lalr_parser
from .lalr import UnexpectedInput, VisitError
from .syntax import Apply, Arrow, Collective, Node, Product, Program, Statement, Tensor
from .syntaxerrors import parse_error

__all__ = ["parse", "parse_tensor", "parse_statement", "grammar_text", "grammar_path", "split_axes", "LOCAL"]


def _depth(statement: Node) -> int:
    """How many products, collectives and functions nest in a statement (walked without recursion)."""
    deepest, todo = 0, [(statement, 0)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, Arrow):
            todo.append((node.expr, level))
        elif isinstance(node, Product):
            todo += [(node.left, level + 1), (node.right, level + 1)]
        elif isinstance(node, Collective):
            todo.append((node.arg, level + 1))
        elif isinstance(node, Apply):
            todo += [(a, level + 1) for a in node.operands]
        deepest = max(deepest, level)
    return deepest


def _bounded(node: Any, text: str) -> Any:
    """Refuse a parsed program or statement over the statements or depth limits (up front: the printers and
    checks recurse once a level)."""
    statements = node.statements if isinstance(node, Program) else (node,)
    limits.require("statements", len(statements), "the program")
    for s in statements:
        depth = _depth(s)
        if depth > limits.value("depth"):
            raise limits.refuse("depth", f"a statement nests {depth} levels", span=s.span).with_source(text)
    return node


def _run(text: object, kind: str) -> Any:
    if not isinstance(text, str):
        raise UsageError(f"parse takes text (a str), not {type(text).__name__}")
    limits.require("text", len(text), "the input")
    start = START[kind]
    return _bounded(_parse(text, start), text)


def _parse(text: str, start: str) -> Any:
    try:
        tree = lalr_parser().parse(text, start=start)
        return transformer().transform(tree)
    except UnexpectedInput as err:
        raise parse_error(err, text, start) from None
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, ShardalgError):
            raise inner.with_source(text) from None
        raise ParseError(f"not in the notation: {inner}", span=Span(0, len(text)), source=text) from None
    except RecursionError:
        raise limits.refuse(
            "depth",
            "the input nests too deeply to read (parentheses, products or collectives)",
            span=Span(0, len(text)),
        ).with_source(text) from None


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
