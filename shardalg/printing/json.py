"""A stable dict form of every node, for scripts and the CLI's ``--format json``; ``from_json`` reads it back.

The forms (keys always present, lists for tuples, ``null`` for absent values)::

    dim        {"kind": "dim", "name": "I" | null, "size": 1024 | null, "axes": ["X", "Y"]}
    tensor     {"kind": "tensor", "name": "A" | null, "dtype": "bf16" | null, "dims": [dim, ...],
                "unreduced": ["X"], "invariant": []}
    product    {"kind": "product", "left": expr, "right": expr, "contract": ["J"] | null, "local": false}
    collective {"kind": "collective", "op": "ReduceScatter", "axes": ["X"], "dim": "K" | null, "arg": expr}
    arrow      {"kind": "arrow", "expr": expr, "result": tensor}
    mesh       {"kind": "mesh", "axes": [{"name": "X", "size": 4}, ...]}
    program    {"kind": "program", "mesh": mesh | null, "statements": [statement, ...],
                "sizes": [{"name": "I", "size": 1024}, ...]}
    step       {"kind": "step", "op": "AllGather", "inputs": [tensor], "output": tensor, "axes": [...],
                "dim": null, "contract": [], "local": false, "reason": "...", "statement": statement}
    plan       {"kind": "plan", "inputs": [tensor], "steps": [step], "output": tensor, "cases": [...], "note": ""}

A node with a source span also has ``"span": [start, end]`` (character offsets); ``from_json`` ignores it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from ..errors import UsageError
from ..plan import Plan, Step
from ..syntax import Arrow, Collective, Dim, MeshDecl, Node, Op, Product, Program, Tensor, dtype_named
from .base import Printer

__all__ = ["JsonPrinter", "to_json", "from_json"]

Json = dict[str, Any]


class JsonPrinter(Printer):
    _default_settings: ClassVar[dict[str, Any]] = {"spans": True}

    def _with_span(self, node: Node, out: Json) -> Json:
        if self._settings["spans"] and node.span is not None:
            out["span"] = [node.span.start, node.span.end]
        return out

    def _print_Dim(self, d: Dim) -> Json:
        return self._with_span(d, {"kind": "dim", "name": d.name, "size": d.size, "axes": list(d.axes)})

    def _print_Tensor(self, t: Tensor) -> Json:
        return self._with_span(t, {
            "kind": "tensor", "name": t.name, "dtype": t.dtype.value if t.dtype else None,
            "dims": [self._print(d) for d in t.dims],
            "unreduced": list(t.unreduced), "invariant": list(t.invariant),
        })  # fmt: skip

    def _print_Product(self, p: Product) -> Json:
        contract = list(p.contract) if p.contract is not None else None
        return self._with_span(p, {
            "kind": "product", "left": self._print(p.left), "right": self._print(p.right),
            "contract": contract, "local": p.local,
        })  # fmt: skip

    def _print_Collective(self, c: Collective) -> Json:
        return self._with_span(c, {
            "kind": "collective", "op": c.op.value, "axes": list(c.axes), "dim": c.dim, "arg": self._print(c.arg),
        })  # fmt: skip

    def _print_Arrow(self, a: Arrow) -> Json:
        return self._with_span(a, {"kind": "arrow", "expr": self._print(a.expr), "result": self._print(a.result)})

    def _print_MeshDecl(self, m: MeshDecl) -> Json:
        return self._with_span(m, {"kind": "mesh", "axes": [{"name": n, "size": s} for n, s in m.axes]})

    def _print_Program(self, p: Program) -> Json:
        return self._with_span(p, {
            "kind": "program", "mesh": self._print(p.mesh) if p.mesh is not None else None,
            "statements": [self._print(s) for s in p.statements],
            "sizes": [{"name": n, "size": s} for n, s in p.sizes],
        })  # fmt: skip

    def _print_Step(self, s: Step) -> Json:
        return {
            "kind": "step", "op": s.op.value, "inputs": [self._print(t) for t in s.inputs],
            "output": self._print(s.output), "axes": list(s.axes), "dim": s.dim, "contract": list(s.contract),
            "local": s.local, "reason": s.reason, "statement": self._print(s.statement()),
        }  # fmt: skip

    def _print_Plan(self, p: Plan) -> Json:
        return {
            "kind": "plan", "inputs": [self._print(t) for t in p.inputs], "steps": [self._print(s) for s in p.steps],
            "output": self._print(p.output), "cases": list(p.cases), "note": p.note,
        }  # fmt: skip


def to_json(node: object, **settings: Any) -> Json:
    """The stable dict form of ``node`` (see the module docstring)."""
    return JsonPrinter(**settings).doprint(node)


# ------------------------------------------------------------------------------------------------ reading
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
        return Dim(_field(j, "name", str, True), _strs(j.get("axes", []), "axes"), _field(j, "size", int, True))
    except ValueError as err:
        raise UsageError(f"bad dim {j!r}: {err}") from None


def _tensor(j: Json) -> Tensor:
    dtype = _field(j, "dtype", str, True)
    return Tensor(
        _field(j, "name", str, True),
        tuple(from_json(d) for d in _field(j, "dims", list)),
        _strs(j.get("unreduced", []), "unreduced"),
        _strs(j.get("invariant", []), "invariant"),
        dtype_named(dtype) if dtype is not None else None,
    )


def _op(j: Json) -> Op:
    try:
        return Op(_field(j, "op", str))
    except ValueError:
        raise UsageError(f"unknown op {j.get('op')!r}") from None


def _contract(j: Json) -> tuple[str, ...] | None:
    value = j.get("contract")
    return None if value is None else _strs(value, "contract")


_READERS: dict[str, Callable[[Json], Any]] = {
    "dim": _dim,
    "tensor": _tensor,
    "product": lambda j: Product(from_json(j["left"]), from_json(j["right"]), _contract(j), bool(j.get("local"))),
    "collective": lambda j: Collective(_op(j), _strs(j["axes"], "axes"), from_json(j["arg"]), _field(j, "dim", str, True)),
    "arrow": lambda j: Arrow(from_json(j["expr"]), from_json(j["result"])),
    "mesh": lambda j: MeshDecl(_pairs(j["axes"], "mesh axes")),
    "program": lambda j: Program(
        tuple(from_json(s) for s in _field(j, "statements", list)),
        from_json(j["mesh"]) if j.get("mesh") is not None else None,
        _pairs(j.get("sizes", []), "sizes"),
    ),
    "step": lambda j: Step(
        _op(j), tuple(from_json(t) for t in _field(j, "inputs", list)), from_json(j["output"]),
        _strs(j.get("axes", []), "axes"), _field(j, "dim", str, True), _contract(j) or (), bool(j.get("local")),
        str(j.get("reason", "")),
    ),
    "plan": lambda j: Plan(
        tuple(from_json(t) for t in _field(j, "inputs", list)), tuple(from_json(s) for s in _field(j, "steps", list)),
        from_json(j["output"]), tuple(_strs(j.get("cases", []), "cases")), str(j.get("note", "")),
    ),
}  # fmt: skip


def from_json(j: Any) -> Any:
    """The node a :func:`to_json` dict describes; a UsageError for anything malformed."""
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
