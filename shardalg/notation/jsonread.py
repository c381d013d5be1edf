"""Reading the JSON dict form back: :func:`from_json` is the inverse of :func:`shardalg.notation.printing.to_json`
(the forms are listed in :mod:`shardalg.notation.printing.json`); it reads the dict or its JSON text. Anything
malformed is a UsageError; text that is not JSON says where :func:`json.loads` stopped, with a caret there.
What it reads is notation: a node whose text the parser does not read back as the same node (a name that is
not a name, ``"axes": ["X Y"]``, a mesh axis of size 0, a tensor with no dims) is a UsageError too, so JSON
never builds what the text, Unicode and LaTeX forms cannot write."""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from shardalg import limits
from shardalg.errors import ShardalgError, Span, UsageError

from .grammar import START
from .plan import Plan, Step
from .printing import text
from .syntax import (
    Apply,
    Arrow,
    Collective,
    Dim,
    MeshDecl,
    Node,
    Op,
    Product,
    Program,
    Roles,
    Tensor,
    dtype_named,
    nesting,
)
from .syntaxerrors import parsed

__all__ = ["from_json"]

Json = dict[str, Any]


def _strs(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{what} must be a list of strings, not {value!r}")
    return tuple(value)


def _pairs(value: Any, what: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(value, list):
        raise UsageError(f"{what} must be a list of {{name, size}} objects")
    return tuple((_field(v, "name", str), _field(v, "size", int)) for v in value)


def _field(obj: Any, key: str, kind: type | tuple[type, ...], optional: bool = False) -> Any:
    if not isinstance(obj, dict) or key not in obj:
        raise UsageError(f"missing {key!r} in {obj!r}")
    value = obj[key]
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise UsageError(f"{key!r} has the wrong type in {obj!r}")
    return value


def _dim(j: Json) -> Dim:
    try:
        return Dim(
            _field(j, "name", str, True), _strs(j.get("axes", []), "axes"), _field(j, "size", int, True)
        )
    except UsageError as err:
        raise UsageError(f"bad dim {j!r}: {err.message}") from None


def _tensor(j: Json) -> Tensor:
    dtype = _field(j, "dtype", str, True)
    return Tensor(
        _field(j, "name", str, True),
        tuple(_read(d) for d in _field(j, "dims", list)),
        _strs(j.get("unreduced", []), "unreduced"),
        _strs(j.get("invariant", []), "invariant"),
        dtype_named(dtype) if dtype is not None else None,
    )


def _op(j: Json) -> Op:
    try:
        return Op(_field(j, "op", str))
    except ValueError:
        raise UsageError(f"unknown op {j.get('op')!r}") from None


def _offset(j: Json) -> int | None:
    """A Shift's offset (the key is absent for other ops)."""
    return _field(j, "offset", int, True) if "offset" in j else None


def _contract(j: Json) -> tuple[str, ...] | None:
    value = j.get("contract")
    return None if value is None else _strs(value, "contract")


def _flags(j: Json) -> tuple[str, ...]:
    """A function's flags (``"causal"``, ``"flash"``): absent means none."""
    if "to" in j:  # a rename's new name for its dim, held as its one flag
        return (_field(j, "to", str),)
    return _strs(j["flags"], "flags") if "flags" in j else ()


def _factor(j: Json) -> Fraction | None:
    """A scale's factor, written as a fraction's text ("1/8", "0.125"); absent for other ops."""
    if "factor" not in j:
        return None
    value = _field(j, "factor", str)
    if len(value) > 40:
        raise UsageError("a scale's factor is at most 40 characters")
    try:
        out = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f'a scale\'s factor is a fraction such as "1/8", not {value!r}') from None
    if out == 0:
        raise UsageError(f"a scale's factor is nonzero, not {value}")
    return out


def _layers(value: Any) -> str | int | None:
    if value is None or (isinstance(value, str) and value) or (type(value) is int and value > 0):
        return value
    raise UsageError(f"layers is a dim name, a positive integer or null, not {value!r}")


_READERS: dict[str, Callable[[Json], Any]] = {
    "dim": _dim,
    "tensor": _tensor,
    "product": lambda j: Product(_read(j["left"]), _read(j["right"]), _contract(j), bool(j.get("local"))),
    "collective": lambda j: Collective(
        _op(j), _strs(j["axes"], "axes"), _read(j["arg"]), _field(j, "dim", str, True), _offset(j)
    ),
    "apply": lambda j: Apply(
        _op(j),
        tuple(_read(x) for x in _field(j, "operands", list)),
        _field(j, "dim", str, True),
        _factor(j),
        _flags(j),
        _offset(j),
    ),
    "arrow": lambda j: Arrow(_read(j["expr"]), _read(j["result"])),
    "mesh": lambda j: MeshDecl(_pairs(j["axes"], "mesh axes")),
    "program": lambda j: Program(
        tuple(_read(s) for s in _field(j, "statements", list)),
        _read(j["mesh"]) if j.get("mesh") is not None else None,
        _pairs(j.get("sizes", []), "sizes"),
        _read(j["roles"]) if j.get("roles") is not None else None,
    ),
    "roles": lambda j: Roles(
        _strs(j.get("params", []), "params"),
        _strs(j.get("embeddings", []), "embeddings"),
        _strs(j.get("saved", []), "saved"),
        _strs(j.get("kvcache", []), "kvcache"),
        _strs(j.get("tokens", []), "tokens"),
        _layers(j.get("layers")),
    ),
    "step": lambda j: Step(
        _op(j),
        tuple(_read(t) for t in _field(j, "inputs", list)),
        _read(j["output"]),
        _strs(j.get("axes", []), "axes"),
        _field(j, "dim", str, True),
        _contract(j) or (),
        bool(j.get("local")),
        str(j.get("reason", "")),
        _offset(j),
        _factor(j),
        _flags(j),
    ),
    "plan": lambda j: Plan(
        tuple(_read(t) for t in _field(j, "inputs", list)),
        tuple(_read(s) for s in _field(j, "steps", list)),
        _read(j["output"]),
        tuple(_strs(j.get("cases", []), "cases")),
        str(j.get("note", "")),
    ),
}


def _loads(source: str) -> Any:
    """The value JSON text ``source`` holds; a UsageError saying where it stops being JSON."""
    try:
        return json.loads(source)
    except json.JSONDecodeError as err:
        raise UsageError(
            f"the text is not valid JSON: {err}", span=Span(err.pos, err.pos + 1), source=source
        ) from None
    except RecursionError:
        raise UsageError("the JSON text nests too deeply to read") from None


def _read(j: Any) -> Any:
    """The node a dict describes, read field by field (the readers call it for the nodes inside)."""
    kind = _field(j, "kind", str)
    reader = _READERS.get(kind)
    if reader is None:
        raise UsageError(f"unknown kind {kind!r}; known: {', '.join(sorted(_READERS))}")
    try:
        return reader(j)
    except KeyError as err:
        raise UsageError(f"missing {err.args[0]!r} in a {kind} object") from None
    except (TypeError, ValueError) as err:
        raise UsageError(f"bad {kind} object: {err}") from None


def _written(node: Node) -> None:
    """Refuse ``node`` unless the notation writes it: its text parses back to the same node (a plan's and a
    step's tensors each, their reasons being prose). A dim, a mesh and roles are read inside a tensor or a
    program."""
    if isinstance(node, Plan | Step):
        for part in (*node.inputs, *(node.steps if isinstance(node, Plan) else ()), node.output):
            _written(part)
        return
    whole: Node = {
        Dim: lambda: Tensor("A", (node,)),
        MeshDecl: lambda: Program((), node),
        Roles: lambda: Program((), None, (), node),
    }.get(type(node), lambda: node)()
    statements = whole.statements if isinstance(whole, Program) else (whole,)
    limits.require("statements", len(statements), "the program")
    deepest = max((nesting(s) for s in statements), default=0)
    if deepest > limits.value("depth"):  # before the printer, which recurses once a level
        raise limits.refuse("depth", f"a statement nests {deepest} levels")
    written = text(whole)
    start = START[{Program: "program", Tensor: "tensor"}.get(type(whole), "statement")]
    try:  # the grammar's reading, without the text limit: JSON is bounded by its statements and depth
        back = parsed(written, start)
    except ShardalgError as err:
        where = err.span.start if err.span is not None else 0
        raise UsageError(
            f"the JSON describes {_line_at(written, where)!r}, which is not in the notation: {err.message}",
            fix="write names as the notation does (a letter, then letters and digits) and sizes as positive "
            "integers",
        ) from None
    if back != whole:
        pairs = zip(statements, back.statements if isinstance(back, Program) else (back,), strict=False)
        quoted = next((text(s) for s, b in pairs if s != b), _line_at(written, 0))
        raise UsageError(
            f"the JSON describes {quoted!r}, which the notation reads back as something else",
            fix="write each name as the notation does: a name is a letter, then letters and digits, and a "
            "tensor's name is no dtype",
        )


def _line_at(written: str, at: int) -> str:
    """The line of ``written`` holding offset ``at`` (what a message quotes of a long program)."""
    start = written.rfind("\n", 0, at) + 1
    end = written.find("\n", at)
    return written[start : end if end >= 0 else len(written)]


def from_json(j: Any) -> Any:
    """The node a :func:`to_json` dict describes (the dict, or its JSON text); a UsageError for anything
    malformed or that the notation cannot write, a LimitExceeded for nesting over the depth limit."""
    if isinstance(j, str):
        j = _loads(j)
    try:
        node = _read(j)
    except RecursionError:
        raise limits.refuse("depth", "the JSON nests too deeply to read") from None
    _written(node)
    return node
