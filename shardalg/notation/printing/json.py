"""A stable dict form of every node, for scripts and the CLI's ``--format json``; :func:`shardalg.notation.jsonread.from_json` reads it back.

The forms (keys always present, lists for tuples, ``null`` for absent values)::

    dim        {"kind": "dim", "name": "I" | null, "size": 1024 | null, "axes": ["X", "Y"]}
    tensor     {"kind": "tensor", "name": "A" | null, "dtype": "bf16" | null, "dims": [dim, ...],
                "unreduced": ["X"], "invariant": []}
    product    {"kind": "product", "left": expr, "right": expr, "contract": ["J"] | null, "local": false}
    collective {"kind": "collective", "op": "ReduceScatter", "axes": ["X"], "dim": "K" | null, "arg": expr}
               (a Shift also has "offset": +1, its signed step; no other collective has the key)
    arrow      {"kind": "arrow", "expr": expr, "result": tensor}
    mesh       {"kind": "mesh", "axes": [{"name": "X", "size": 4}, ...]}
    program    {"kind": "program", "mesh": mesh | null, "statements": [statement, ...],
                "sizes": [{"name": "I", "size": 1024}, ...], "roles": roles | null}
    roles      {"kind": "roles", "params": ["W_in"], "embeddings": [], "saved": [], "kvcache": [],
                "tokens": ["B", "T"], "layers": "L" | 80 | null}
    step       {"kind": "step", "op": "AllGather", "inputs": [tensor], "output": tensor, "axes": [...],
                "dim": null, "contract": [], "local": false, "reason": "...", "statement": statement}
    plan       {"kind": "plan", "inputs": [tensor], "steps": [step], "output": tensor, "cases": [...], "note": ""}

A node with a source span also has ``"span": [start, end]`` (character offsets); ``from_json`` ignores it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from .base import Node, Printer

__all__ = ["JsonPrinter", "to_json"]

Json = dict[str, Any]


class JsonPrinter(Printer):
    _default_settings: ClassVar[dict[str, Any]] = {"spans": True}

    def _with_span(self, node: Node, out: Json) -> Json:
        if self._settings["spans"] and node.span is not None:
            out["span"] = [node.span.start, node.span.end]
        return out

    def _print_Dim(self, d: Node) -> Json:
        return self._with_span(d, {"kind": "dim", "name": d.name, "size": d.size, "axes": list(d.axes)})

    def _print_Tensor(self, t: Node) -> Json:
        return self._with_span(
            t,
            {
                "kind": "tensor",
                "name": t.name,
                "dtype": t.dtype.value if t.dtype else None,
                "dims": [self._print(d) for d in t.dims],
                "unreduced": list(t.unreduced),
                "invariant": list(t.invariant),
            },
        )

    def _print_Product(self, p: Node) -> Json:
        contract = list(p.contract) if p.contract is not None else None
        return self._with_span(
            p,
            {
                "kind": "product",
                "left": self._print(p.left),
                "right": self._print(p.right),
                "contract": contract,
                "local": p.local,
            },
        )

    def _print_Collective(self, c: Node) -> Json:
        out: Json = {
            "kind": "collective",
            "op": c.op.value,
            "axes": list(c.axes),
            "dim": c.dim,
            "arg": self._print(c.arg),
        }
        if c.offset is not None:  # a Shift only: other collectives keep the keys they always had
            out["offset"] = c.offset
        return self._with_span(c, out)

    def _print_Apply(self, a: Node) -> Json:
        out: Json = {
            "kind": "apply",
            "op": a.op.value,
            "operands": [self._print(x) for x in a.operands],
            "dim": a.dim,
        }
        if a.factor is not None:  # a scale only: its factor as an exact fraction's text ("1/8")
            out["factor"] = str(a.factor)
        if a.to is not None:  # a rename's new name for its dim
            out["to"] = a.to
        elif a.flags:  # a softmax's or a block of attention's: "causal", "flash"
            out["flags"] = list(a.flags)
        if a.offset is not None:  # a block of attention's ring offset
            out["offset"] = a.offset
        return self._with_span(a, out)

    def _print_Arrow(self, a: Node) -> Json:
        return self._with_span(
            a, {"kind": "arrow", "expr": self._print(a.expr), "result": self._print(a.result)}
        )

    def _print_MeshDecl(self, m: Node) -> Json:
        return self._with_span(m, {"kind": "mesh", "axes": [{"name": n, "size": s} for n, s in m.axes]})

    def _print_Program(self, p: Node) -> Json:
        return self._with_span(
            p,
            {
                "kind": "program",
                "mesh": self._print(p.mesh) if p.mesh is not None else None,
                "statements": [self._print(s) for s in p.statements],
                "sizes": [{"name": n, "size": s} for n, s in p.sizes],
                "roles": self._print(p.roles) if p.roles is not None else None,
            },
        )

    def _print_Roles(self, r: Node) -> Json:
        return self._with_span(
            r,
            {
                "kind": "roles",
                "params": list(r.params),
                "embeddings": list(r.embeddings),
                "saved": list(r.saved),
                "kvcache": list(r.kvcache),
                "tokens": list(r.tokens),
                "layers": r.layers,
            },
        )

    def _print_Step(self, s: Node) -> Json:
        out: Json = {
            "kind": "step",
            "op": s.op.value,
            "inputs": [self._print(t) for t in s.inputs],
            "output": self._print(s.output),
            "axes": list(s.axes),
            "dim": s.dim,
            "contract": list(s.contract),
            "local": s.local,
            "reason": s.reason,
            "statement": self._print(s.statement()),
        }
        if s.offset is not None:
            out["offset"] = s.offset
        if s.factor is not None:
            out["factor"] = str(s.factor)
        if s.to is not None:
            out["to"] = s.to
        elif s.flags:
            out["flags"] = list(s.flags)
        return out

    def _print_Plan(self, p: Node) -> Json:
        return {
            "kind": "plan",
            "inputs": [self._print(t) for t in p.inputs],
            "steps": [self._print(s) for s in p.steps],
            "output": self._print(p.output),
            "cases": list(p.cases),
            "note": p.note,
        }


def to_json(node: object, **settings: Any) -> Json:
    """The stable dict form of ``node`` (see the module docstring)."""
    return JsonPrinter(**settings).doprint(node)
