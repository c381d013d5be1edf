"""Text to AST: parse with the LALR parser of ``grammar/shardalg.lark`` (:mod:`.grammar`) through the fast
path (:mod:`.fastparse`) or lark's route and the transformer (:mod:`.build`), into :mod:`shardalg.notation.syntax`.

    >>> parse_tensor("A[I_XY, J]{U_Z}")
    Tensor(name='A', dims=(Dim(name='I', axes=('X', 'Y'), size=None), Dim(name='J', axes=(), size=None)), unreduced=('Z',), invariant=(), dtype=None)

Every failure is a :class:`~shardalg.errors.ParseError` with a span into the text and a short message that
says what was expected (:mod:`.syntaxerrors`). Nothing here evaluates user text: numbers and names come from
grammar tokens.
"""

from __future__ import annotations

from typing import Any

from lark.exceptions import UnexpectedInput, VisitError

from shardalg.errors import ParseError, ShardalgError, Span, UsageError

from .build import LOCAL, TRANSFORMER, split_axes
from .fastparse import fast_parser
from .grammar import START, build_parser, grammar_path, grammar_text, lalr_parser
from .syntax import Program, Statement, Tensor
from .syntaxerrors import parse_error

__all__ = [
    "parse", "parse_tensor", "parse_statement", "grammar_text", "grammar_path", "build_parser", "split_axes", "LOCAL",
]  # fmt: skip

def _run(text: object, kind: str) -> Any:
    if not isinstance(text, str):
        raise UsageError(f"parse takes text (a str), not {type(text).__name__}")
    start = START[kind]
    fast = fast_parser()
    if fast is not None:
        try:
            return fast.parse(text, start)
        except Exception:  # noqa: BLE001 - GiveUp, or anything else: lark's route below is the reference
            pass
    try:
        tree = lalr_parser().parse(text, start=start)
        return TRANSFORMER.transform(tree)
    except UnexpectedInput as err:
        raise parse_error(err, text, start) from None
    except VisitError as err:
        inner = err.orig_exc
        if isinstance(inner, ShardalgError):
            raise inner.with_source(text) from None
        raise ParseError(f"not in the notation: {inner}", span=Span(0, len(text)), source=text) from None
    except RecursionError:
        raise ParseError("the expression is nested too deeply", span=Span(0, len(text)), source=text) from None


def parse(text: str) -> Program:
    """Parse a program: statements separated by newlines or ``;``, an optional ``mesh`` line and
    ``where`` bindings. Always returns a :class:`Program` with ``source`` set to ``text``."""
    program: Program = _run(text, "program")
    return Program(program.statements, program.mesh, program.sizes, program.roles, span=program.span, source=text)


def parse_tensor(text: str) -> Tensor:
    """Parse one tensor: ``A[I_X, J]{U_Y}``, ``bf16[B_X, D]``, ``\\mathbf{A}[I_{XY}, J]``."""
    tensor: Tensor = _run(text, "tensor")
    return tensor


def parse_statement(text: str) -> Statement:
    """Parse one statement: an expression, or ``expr -> tensor``."""
    statement: Statement = _run(text, "statement")
    return statement
