"""The JAX side of an audit: trace a function, compile it on the devices, read what XLA chose.

:func:`trace` takes a function and its inputs (``jax.ShapeDtypeStruct`` or arrays, each with a
``NamedSharding`` on one mesh) and returns a plain, JSON-ready record:

- the function's operations from its jaxpr (calls such as an inner ``jax.jit`` or a ``custom_jvp`` inlined),
  each with its primitive, value ids, shapes, a dot_general's dimension numbers, and its source line;
- a broadcast_in_dim's ``broadcast_dimensions`` (which result dim each operand dim is);
- the sharding XLA chose for every input and output of every dot_general and of every add, sub and mul (and
  every broadcast_in_dim's operand), read with
  ``jax.debug.inspect_array_sharding`` on a copy of the program (the inspection pins nothing: it reports);
- the compiled, partitioned HLO text of the function itself (the collectives are read from it), and, with
  ``backward``, of ``jax.grad`` of the sum of its (first) output with respect to every input.

jax is imported inside the functions only (it is an optional extra, :mod:`shardalg.deferred`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from shardalg.errors import UsageError

__all__ = ["trace", "spec_of"]

_CALLS = ("jaxpr", "call_jaxpr", "fun_jaxpr")
# whose operands (and results) have their sharding read: the products, the elementwise ops of two operands
# the program may write as statements (max: relu, max(h, 0)), and the broadcasts that feed them (a gain g[D]
# broadcast to [B, D])
_INSPECTED = frozenset({"dot_general", "add", "sub", "mul", "max", "broadcast_in_dim"})


def spec_of(sharding: Any, ndim: int) -> list[list[str]]:
    """A NamedSharding's PartitionSpec as one list of axis names per dim (major first)."""
    spec = list(getattr(sharding, "spec", ()))
    spec += [None] * (ndim - len(spec))
    out = []
    for entry in spec[:ndim]:
        if entry is None:
            out.append([])
        elif isinstance(entry, (tuple, list)):
            out.append([str(a) for a in entry])
        else:
            out.append([str(entry)])
    return out


def _scalar(x: Any) -> float | None:
    """A literal's value as a float (None when it is not a real scalar)."""
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def _frame(eqn: Any) -> tuple[str, int | None]:
    try:
        from jax._src import source_info_util

        frame = source_info_util.user_frame(eqn.source_info.traceback)
    except Exception:  # the frame is a convenience: a collective is then matched by order
        return "", None
    return (frame.file_name, frame.start_line) if frame is not None else ("", None)


def _name_stack(eqn: Any) -> str:
    try:
        return str(eqn.source_info.name_stack)
    except Exception:
        return ""


def _inner(eqn: Any) -> Any:
    for key in _CALLS:
        inner = eqn.params.get(key)
        if inner is not None and hasattr(inner, "jaxpr") and hasattr(inner.jaxpr, "eqns"):
            return inner
    return None


class _Walk:
    """Evaluates a jaxpr equation by equation (inlining calls), numbering values and recording each
    equation; inspects the sharding of every dot_general's operands and result."""

    def __init__(self, inspect: bool) -> None:
        self.inspect = inspect
        self.eqns: list[dict[str, Any]] = []
        self.values: dict[int, dict[str, Any]] = {}
        self.specs: dict[int, list[list[str]]] = {}
        self.next = 0

    def new(self, aval: Any) -> int:
        self.next += 1
        self.values[self.next] = {"shape": [int(d) for d in aval.shape], "dtype": str(aval.dtype)}
        return self.next

    def look(self, vid: int, x: Any) -> None:
        import jax

        if self.inspect and vid not in self.specs:
            ndim = len(self.values[vid]["shape"])
            jax.debug.inspect_array_sharding(
                x, callback=lambda s: self.specs.__setitem__(vid, spec_of(s, ndim))
            )

    def run(self, closed: Any, args: Sequence[Any], ids: Sequence[int], stack: str = "") -> tuple[list, list]:
        env: dict[Any, tuple[Any, int]] = {}
        jaxpr = closed.jaxpr
        for v, c in zip(jaxpr.constvars, closed.consts, strict=True):
            env[v] = (c, self.new(v.aval))
        for v, a, i in zip(jaxpr.invars, args, ids, strict=True):
            env[v] = (a, i)

        def read(v: Any) -> tuple[Any, int | None]:
            if type(v).__name__ == "Literal":
                return v.val, None
            return env[v]

        for eqn in jaxpr.eqns:
            ins = [read(v) for v in eqn.invars]
            inner = _inner(eqn)
            name = eqn.primitive.name
            if inner is not None and len(inner.jaxpr.invars) == len(ins):
                in_ids = [
                    i if i is not None else self.new(v.aval)
                    for (_, i), v in zip(ins, eqn.invars, strict=True)
                ]
                outs, out_ids = self.run(inner, [x for x, _ in ins], in_ids, f"{stack}{_name_stack(eqn)}")
            else:
                res = eqn.primitive.bind(*[x for x, _ in ins], **eqn.params)
                outs = list(res) if eqn.primitive.multiple_results else [res]
                out_ids = [self.new(v.aval) for v in eqn.outvars]
                file, line = _frame(eqn)
                record = {
                    "primitive": name,
                    "ins": [i for _, i in ins],
                    "outs": out_ids,
                    "file": file,
                    "line": line,
                    "name_stack": _name_stack(eqn),
                }
                # a literal operand's value (a scalar): the constants of a chain the program recognises
                if any(i is None for _, i in ins):
                    record["consts"] = [_scalar(x) if i is None else None for x, i in ins]
                if name == "integer_pow":
                    record["y"] = int(eqn.params["y"])
                if name == "broadcast_in_dim":
                    record["bdims"] = [int(d) for d in eqn.params["broadcast_dimensions"]]
                if name == "dot_general":
                    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
                    record["dims"] = [list(lc), list(rc), list(lb), list(rb)]
                if name in _INSPECTED:
                    for x, i in ins:
                        if i is not None:
                            self.look(i, x)
                    if name != "broadcast_in_dim":
                        for x, i in zip(outs, out_ids, strict=True):
                            self.look(i, x)
                self.eqns.append(record)
            for v, x, i in zip(eqn.outvars, outs, out_ids, strict=True):
                env[v] = (x, i)
        results = [read(v) for v in jaxpr.outvars]
        return [x for x, _ in results], [i if i is not None else 0 for _, i in results]


def _mesh_of(args: Sequence[Any]) -> Any:
    """The one mesh of the inputs' NamedShardings; an input without one is an error naming it."""
    meshes: dict[int, Any] = {}
    for k, a in enumerate(args):
        sharding = getattr(a, "sharding", None)
        if sharding is None or not hasattr(sharding, "mesh") or not hasattr(sharding, "spec"):
            kind = type(sharding).__name__ if sharding is not None else "no sharding"
            raise UsageError(
                f"input {k} has {kind}, not a NamedSharding: an audit needs each input's NamedSharding on one mesh"
            )
        meshes[id(sharding.mesh)] = sharding.mesh
    if not meshes:
        raise UsageError("an audit needs at least one input with a NamedSharding")
    if len(meshes) > 1:
        raise UsageError("the inputs' NamedShardings are on different meshes: an audit takes one mesh")
    return next(iter(meshes.values()))


def _compile(fn: Callable, args: Sequence[Any], what: str) -> Any:
    import jax

    try:
        return jax.jit(fn).lower(*args).compile()
    except UsageError:
        raise
    except Exception as err:  # jax raises many types; the user's function is at fault, say so in one line
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(
            f"{what} does not lower and compile with these shardings: {type(err).__name__}: {first}"
        ) from None


def trace(fn: Callable, args: Sequence[Any], *, backward: bool = False) -> dict[str, Any]:
    """The record described in the module docstring."""
    import jax
    import jax.numpy as jnp

    mesh = _mesh_of(args)
    if mesh.devices.size > len(jax.devices()):
        raise UsageError(f"the mesh has {mesh.devices.size} devices, this jax has {len(jax.devices())}")
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding) for a in args]
    for k, s in enumerate(structs):
        spec = spec_of(s.sharding, len(s.shape))
        for d, axes in enumerate(spec):
            n = 1
            for a in axes:
                n *= int(mesh.shape[a])
            if s.shape[d] % n:
                raise UsageError(
                    f"input {k}: dim {d} has {s.shape[d]} elements, not divisible by the {n} devices of "
                    f"{'x'.join(axes)} that shard it"
                )
    try:
        closed = jax.make_jaxpr(fn)(*structs)
    except Exception as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UsageError(f"the function does not trace: {type(err).__name__}: {first}") from None
    walk = _Walk(inspect=True)
    in_ids = [walk.new(v.aval) for v in closed.jaxpr.invars]
    out_ids: list[int] = []

    def instrumented(*xs: Any) -> Any:
        walk.eqns.clear()
        walk.next = len(in_ids)
        for i, x in zip(in_ids, xs, strict=True):
            walk.look(i, x)
        outs, ids = walk.run(closed, xs, in_ids)
        out_ids[:] = ids
        return outs

    compiled = _compile(fn, structs, "the function")
    _compile(instrumented, structs, "the function")  # runs the inspections: fills walk.specs
    for i, x in zip(
        out_ids,
        compiled.output_shardings
        if isinstance(compiled.output_shardings, (list, tuple))
        else [compiled.output_shardings],
        strict=False,
    ):
        walk.specs.setdefault(i, spec_of(x, len(walk.values[i]["shape"])))
    record: dict[str, Any] = {
        "mesh": {
            "names": [str(n) for n in mesh.axis_names],
            "sizes": [int(mesh.shape[n]) for n in mesh.axis_names],
            "devices": [int(d.id) for d in mesh.devices.flat],
        },
        "inputs": in_ids,
        "outputs": out_ids,
        "eqns": walk.eqns,
        "values": {str(k): v for k, v in walk.values.items()},
        "specs": {str(k): v for k, v in walk.specs.items()},
        "input_specs": [spec_of(s.sharding, len(s.shape)) for s in structs],
        "hlo": compiled.as_text(),
    }
    if backward:

        def loss(*xs: Any) -> Any:
            out = fn(*xs)
            first = out[0] if isinstance(out, (tuple, list)) else out
            return jnp.sum(first)

        grad = jax.grad(loss, argnums=tuple(range(len(structs))))
        record["backward_hlo"] = _compile(grad, structs, "jax.grad of the function").as_text()
    return record
