"""What an audited program is made of (:mod:`.program` builds it, :mod:`.placing` puts XLA's collectives on
it): a tensor in one XLA layout, a step of XLA's, a statement (a dot_general, an elementwise op of two tensors,
or a recognised function of one) with XLA's steps for it, and the program; the jax primitives it reads and the
dtypes it knows."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from math import prod

from shardalg.errors import UsageError

from .groups import GroupAxes
from .hlo import HloCollective

__all__ = [
    "Layout",
    "XlaStep",
    "Statement",
    "AuditProgram",
    "dtype_of",
    "size_of",
    "ELEMENTWISE",
    "BINARY",
    "UNARY",
    "LETTERS",
]

ELEMENTWISE = frozenset(
    "add sub mul div neg exp log tanh logistic integer_pow pow max min abs sqrt rsqrt erf sin cos "
    "convert_element_type select_n sign square exp2 log1p expm1 erf_inv erfc copy".split()
)
BINARY = {"add": "+", "sub": "-", "mul": ".*"}  # elementwise ops of two tensors the program writes
# functions of one tensor the program writes, recognised from their chain (:func:`.program.build`)
UNARY = frozenset({"silu", "gelu", "relu"})
LETTERS = "BDFIJKLMNPQRSTVWZ"
DTYPES = {  # jax's and torch's dtype names -> the notation's (bf16, its default, is written without one)
    "float64": "fp64",
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": None,
    "int32": "int32",
    "int8": "int8",
}


def dtype_of(name: str) -> str | None:
    """The notation's dtype for a jax or torch dtype name (``torch.float32`` too)."""
    short = name.removeprefix("torch.")
    if short not in DTYPES:
        raise UsageError(f"a value of dtype {name}: the notation has fp64, fp32, fp16, bf16, int32 and int8")
    return DTYPES[short]


@dataclass(frozen=True)
class Layout:
    """A tensor in one layout: its name, dims (name, axes major first) and unreduced axes."""

    name: str
    dims: tuple[tuple[str, tuple[str, ...]], ...]
    unreduced: tuple[str, ...] = ()
    dtype: str | None = None  # the notation's spelling (fp32); None: bf16, the notation's default

    def text(self) -> str:
        def sub(axes: Sequence[str]) -> str:
            if not axes:
                return ""
            if all(len(a) == 1 for a in axes):
                return "_" + "".join(axes)
            return "_{" + ",".join(axes) + "}"

        body = f"{self.name}{': ' + self.dtype if self.dtype else ''}[{', '.join(d + sub(a) for d, a in self.dims)}]"
        return body + ("{" + ", ".join(f"U_{a}" for a in self.unreduced) + "}" if self.unreduced else "")

    def local(self, sizes: Mapping[str, int], mesh: Mapping[str, int]) -> tuple[int, ...]:
        return tuple(sizes[d] // size_of(axes, mesh) for d, axes in self.dims)

    def replace_dim(self, dim: str, axes: tuple[str, ...]) -> Layout:
        return replace(self, dims=tuple((d, axes if d == dim else a) for d, a in self.dims))


@dataclass(frozen=True)
class XlaStep:
    """One collective of XLA's, in the notation: ``op``, axes (sub-axes in Shardy's spelling), the tensor
    before and after, and the HLO instruction it was read from. ``text`` is its statement; ``problem`` says
    what could not be mapped (then ``before``/``after`` are None)."""

    op: str
    axes: tuple[str, ...]
    hlo: HloCollective | None
    before: Layout | None = None
    after: Layout | None = None
    dim: str | None = None
    problem: str = ""

    @property
    def sub_axes(self) -> tuple[str, ...]:
        return tuple(a for a in self.axes if ":" in a)

    @property
    def subscript(self) -> str:
        return GroupAxes(self.axes).text if self.axes else "?"

    @property
    def text(self) -> str:
        if self.before is None or self.after is None:
            return f"{self.op}_{self.subscript} on {self.hlo.name if self.hlo else '?'}: {self.problem}"
        sub = self.subscript
        if self.op in ("ReduceScatter", "AllToAll", "Slice") and self.dim:
            sub = "{" + ",".join([*self.axes, self.dim]) + "}"
        elif len(self.axes) > 1 or len(sub) > 1:
            sub = "{" + ",".join(self.axes) + "}" if any(len(a) > 1 for a in self.axes) else sub
        return f"{self.op}_{sub}({self.before.text()}) -> {self.after.text()}"

    @property
    def bytes_per_device(self) -> int:
        """The operand's bytes on each device (the HLO's own shape); 0 for a free slice."""
        if self.hlo is None or self.op == "Slice":
            return 0
        width = {"f32": 4, "bf16": 2, "f16": 2, "f64": 8, "s32": 4, "s8": 1, "u8": 1}.get(self.hlo.dtype, 4)
        return prod(self.hlo.operand) * width


@dataclass
class Statement:
    """One dot_general (``op`` ``·``), an elementwise op of two tensors (``+``, ``-``, ``.*``; a
    lower-rank operand broadcasts), or a function of one (:data:`UNARY`: ``rhs`` is ``lhs``): its operands
    and result in XLA's layouts, and XLA's steps for it."""

    lhs: Layout
    rhs: Layout
    out: Layout
    line: int | None
    before: list[XlaStep] = field(default_factory=list)
    after: list[XlaStep] = field(default_factory=list)
    op: str = "·"

    @property
    def primitive(self) -> str:
        """The jax primitive it was read from (a collective's metadata names it); a function's own name,
        which no metadata names (its chain's ops are several)."""
        return {v: k for k, v in BINARY.items()}.get(self.op, "dot_general" if self.op == "·" else self.op)

    @property
    def operands(self) -> tuple[Layout, ...]:
        return (self.lhs,) if self.op in UNARY else (self.lhs, self.rhs)

    def _local(self, lhs: Layout, rhs: Layout, out: Layout) -> str:
        if self.op in UNARY:
            return f"{self.op}({lhs.text()}) -> {out.text()}"
        op = f" {self.op} " if self.op != "·" else " *_LOCAL " if out.unreduced else " · "
        return f"{lhs.text()}{op}{rhs.text()} -> {out.text()}"

    @property
    def text(self) -> str:
        if self.op in UNARY:
            return self._local(self.lhs, self.rhs, self.out)
        return f"{self.lhs.text()} {self.op} {self.rhs.text()} -> {self.out.text()}"

    @property
    def steps(self) -> list[XlaStep]:
        return [*self.before, *self.after]

    def plan_text(self) -> str:
        """XLA's plan as a program: operand collectives, the local product, result collectives."""
        lhs = self.before_last(self.lhs)
        rhs = self.before_last(self.rhs)
        first = self.after[0].before if self.after and self.after[0].before is not None else self.out
        lines = [s.text for s in self.before] + [self._local(lhs, rhs, first)]
        return "\n".join(lines + [s.text for s in self.after])

    def before_last(self, t: Layout) -> Layout:
        out = t
        for s in self.before:
            if s.after is not None and s.after.name == t.name:
                out = s.after
        return out


@dataclass
class AuditProgram:
    """The function as statements, the sizes of its dims, the mesh, and what was left aside."""

    statements: list[Statement]
    sizes: dict[str, int]
    mesh: dict[str, int]
    inputs: list[Layout]
    outside: list[XlaStep]
    notes: list[str]

    @property
    def text(self) -> str:
        return "\n".join(s.text for s in self.statements)

    @property
    def sub_axes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a for s in self.statements for st in s.steps for a in st.sub_axes))


def size_of(axes: Sequence[str], mesh: Mapping[str, int]) -> int:
    out = 1
    for a in axes:
        if ":" in a:
            out *= int(a.rsplit(")", 1)[1])
        else:
            out *= mesh[a]
    return out
