"""Local einsum typing: the dims of ``left · right -> out``, the case of each contracted dim, and the layout
a local product of the shards produces, or the error that says why it is not a local product.

Dims go by name (DESIGN.md section 1): a dim in both inputs and not in the output is contracted, a dim in
both inputs and the output is a batch dim, any other is free (of the operand that has it). Per contracted dim
the book's case (seed 000): 1 sharded on neither side, 2 on one side only, 3 on the same axes on both sides
(the local product is unreduced over them), or mismatched (different axes). Case 4 is two result dims
sharded on one axis. A local product also needs batch dims sharded alike, no axis unreduced in one input
and used by the other, and no axis unreduced in both (a product of sums is not the sum of products).

    >>> spec = Spec.of(parse_tensor("A[I, J_X]"), parse_tensor("B[J_X, K]"))
    >>> local_output(parse_tensor("A[I, J_X]"), parse_tensor("B[J_X, K]"), spec, Mesh(X=4))  # C[I, K]{U_X}
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from shardalg.cache import Kind, Memo, memo, memoized
from shardalg.errors import (
    BatchDimMismatch,
    IllegalSharding,
    SameAxisResultDims,
    ShapeMismatch,
    UnreducedProduct,
)
from shardalg.lazy import hashed_once
from shardalg.notation.syntax import Dim, Tensor

from .layout import subscript, validate
from .mesh import Mesh

__all__ = [
    "Role",
    "Case",
    "Spec",
    "DimCase",
    "NotLocal",
    "classify",
    "case_lines",
    "local_output",
    "local_output_or_none",
    "default_name",
]


class NotLocal(IllegalSharding):
    """A contracted dim sharded on one side only (case 2) or on different axes: gather or slice first."""

    rule = "not-local"


class Role(enum.Enum):
    CONTRACTED = "contracted"
    BATCH = "batch"
    LEFT = "free (left)"
    RIGHT = "free (right)"


class Case(enum.Enum):
    """The book's case of a contracted dim."""

    UNSHARDED = 1
    ONE_SIDE = 2
    SAME_AXES = 3
    MISMATCHED = "mismatched"


def default_name(*taken: str | None) -> str:
    """The result's name when none is written: the book's C, unless an operand is called that."""
    for name in ("C", "Z", "Out"):
        if name not in taken:
            return name
    i = 1
    while f"Out{i}" in taken:
        i += 1
    return f"Out{i}"


@hashed_once  # a planner's memos of local products are keyed by it, once per candidate
@dataclass(frozen=True)
class Spec:
    """The structure of a two-operand einsum: dim labels of each operand and of the output, in order."""

    left: tuple[str, ...]
    right: tuple[str, ...]
    out: tuple[str, ...]
    contracted: tuple[str, ...]
    batch: tuple[str, ...]

    def role(self, label: str) -> Role:
        if label in self.contracted:
            return Role.CONTRACTED
        if label in self.batch:
            return Role.BATCH
        return Role.LEFT if label in self.left else Role.RIGHT

    @classmethod
    def of(
        cls,
        left: Tensor,
        right: Tensor,
        contract: tuple[str, ...] | None = None,
        result: Tensor | None = None,
    ) -> Spec:
        """Classify by name; a ShapeMismatch when the dims cannot form an einsum. Memoized by the dims'
        names and literal sizes (legality and the planner both ask, for every query); errors are not kept,
        so each is raised with its own tensors' spans."""
        key = (_dims_key(left), _dims_key(right), contract, None if result is None else result.dim_names)
        got = _SPECS.get(key)
        if got is None:
            got = _SPECS.keep(key, cls._of(left, right, contract, result))
        return got

    @classmethod
    def _of(
        cls, left: Tensor, right: Tensor, contract: tuple[str, ...] | None, result: Tensor | None
    ) -> Spec:
        for t in (left, right) + ((result,) if result is not None else ()):
            names = t.dim_names
            dup = None if len(set(names)) == len(names) else next(n for n in names if names.count(n) > 1)
            if dup is not None:
                raise ShapeMismatch(f"dim {dup} appears twice in {t}", span=t.span, fix="name each dim once")
        ln, rn = left.dim_names, right.dim_names
        shared = tuple([n for n in ln if n in rn])
        for n in shared:
            a, b = left.dim(n).size, right.dim(n).size
            if a is not None and b is not None and a != b:
                raise ShapeMismatch(
                    f"dim {n} has size {a} in {left} but {b} in {right}", span=right.dim(n).span
                )
        if contract is not None:
            missing = [d for d in contract if d not in shared]
            if missing:
                raise ShapeMismatch(
                    f"·_{','.join(contract)} contracts {missing[0]}, which is not a dim of both {left} and {right}",
                    fix=f"contract a shared dim: {', '.join(shared) or 'there is none'}",
                )
            contracted = tuple([n for n in shared if n in contract])
        elif result is not None:
            contracted = tuple([n for n in shared if n not in result.dim_names])
        else:
            contracted = shared
        natural = tuple([n for n in ln if n not in contracted]) + tuple(
            [n for n in rn if n not in contracted and n not in ln]
        )
        if result is not None:
            out = result.dim_names
            extra = [n for n in out if n not in natural]
            if extra:
                raise ShapeMismatch(
                    f"the result {result} has dim {extra[0]}, which {left} · {right} does not produce",
                    span=result.span,
                    fix=f"the product's dims are {', '.join(natural) or 'none (a scalar)'}",
                )
            lost = [n for n in natural if n not in out]
            if lost:
                raise ShapeMismatch(
                    f"dim {lost[0]} is in only one operand and not in the result {result}; "
                    "a product sums only dims of both operands",
                    span=result.span,
                    fix=f"keep {lost[0]} in the result",
                )
        else:
            out = natural
        batch = tuple([n for n in shared if n not in contracted])
        return cls(ln, rn, out, contracted, batch)


_SPECS: Memo = memo(f"{__name__}._SPECS", Kind.PIECE)  # einsum structures, by the dims' names and sizes


def _dims_key(t: Tensor) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    return t.dim_names, tuple([d.size for d in t.dims])


@dataclass(frozen=True)
class DimCase:
    """One dim of the einsum with its role, its axes on each side, and (contracted dims) its case."""

    label: str
    role: Role
    left_axes: tuple[str, ...] | None
    right_axes: tuple[str, ...] | None
    case: Case | None

    def line(self, lname: str, rname: str) -> str:
        la, ra = self.left_axes or (), self.right_axes or ()
        if self.role is Role.CONTRACTED:
            if self.case is Case.UNSHARDED:
                return f"case 1: {self.label} is contracted and sharded in neither operand"
            if self.case is Case.ONE_SIDE:
                who, axes = (lname, la) if la else (rname, ra)
                return f"case 2: {self.label} is contracted and sharded over {subscript(axes)} in {who} only"
            if self.case is Case.SAME_AXES:
                return f"case 3: {self.label} is contracted and sharded over {subscript(la)} in both {lname} and {rname}"
            return f"mismatched: {self.label} is contracted and sharded over {subscript(la)} in {lname} but {subscript(ra)} in {rname}"
        if self.role is Role.BATCH:
            if la == ra:
                how = f"sharded over {subscript(la)} in both" if la else "unsharded"
                return f"batch: {self.label} is {how}"
            return f"batch mismatch: {self.label} is sharded over {subscript(la) or 'nothing'} in {lname} but {subscript(ra) or 'nothing'} in {rname}"
        who, axes = (lname, la) if self.role is Role.LEFT else (rname, ra)
        return f"free: {self.label} of {who}" + (f", sharded over {subscript(axes)}" if axes else "")


def classify(left: Tensor, right: Tensor, spec: Spec) -> tuple[DimCase, ...]:
    """Every dim of the einsum, contracted dims first, each with its role and case."""
    out: list[DimCase] = []
    order = spec.contracted + spec.batch + tuple(n for n in spec.out if n not in spec.batch)
    for n in order:
        role = spec.role(n)
        la = left.axes_of(n) if n in spec.left else None
        ra = right.axes_of(n) if n in spec.right else None
        case = None
        if role is Role.CONTRACTED:
            la_, ra_ = la or (), ra or ()
            if not la_ and not ra_:
                case = Case.UNSHARDED
            elif not la_ or not ra_:
                case = Case.ONE_SIDE
            elif la_ == ra_:
                case = Case.SAME_AXES
            else:
                case = Case.MISMATCHED
        out.append(DimCase(n, role, la, ra, case))
    return tuple(out)


def _collisions(left: Tensor, right: Tensor, spec: Spec) -> list[tuple[str, str, str]]:
    """(axis, left dim, right dim) for result dims of the two operands sharded on one axis (case 4)."""
    found = []
    lfree = {a: n for n in spec.left if spec.role(n) is Role.LEFT for a in left.axes_of(n)}
    for n in spec.right:
        if spec.role(n) is Role.RIGHT:
            for a in right.axes_of(n):
                if a in lfree:
                    found.append((a, lfree[a], n))
    return found


@memoized(Kind.PIECE)
def case_lines(left: Tensor, right: Tensor, spec: Spec) -> tuple[str, ...]:
    """One line per dim (its role and case), then case 4 and unreduced-input lines. Memoized by the two
    operands and the einsum (every plan of a product carries them; the queries of one product share them)."""
    ln, rn = left.name or "the left operand", right.name or "the right operand"
    lines = [c.line(ln, rn) for c in classify(left, right, spec)]
    for a, ld, rd in _collisions(left, right, spec):
        lines.append(f"case 4: {ld} of {ln} and {rd} of {rn} are both sharded over {a}")
    for t in (left, right):
        if t.unreduced:
            lines.append(f"unreduced: {t.name or 'an operand'} is unreduced over {subscript(t.unreduced)}")
    return tuple(lines)


def _unreduced_problem(left: Tensor, right: Tensor) -> Callable[[], IllegalSharding] | None:
    for a in left.unreduced:
        if a in right.unreduced:
            return lambda: UnreducedProduct(
                f"both {left} and {right} are unreduced over {a}: a product of sums is not the sum of products",
                fix=f"reduce one first: AllReduce_{a}({left})",
            )
    for u, other in ((left, right), (right, left)):
        for a in u.unreduced:
            if a in other.sharded_axes:
                return lambda: UnreducedProduct(
                    f"{u} is unreduced over {a} and {other} is sharded over {a}: "
                    "each device would multiply a partial sum by a different block",
                    fix=f"AllReduce_{a}({u}) first, or AllGather_{a}({other})",
                )
    return None


def _local_problem(left: Tensor, right: Tensor, spec: Spec) -> Callable[[], IllegalSharding] | None:
    """Why the shards cannot simply be multiplied, as a function that builds the error (the planner tries
    many layouts and drops the illegal ones: it never needs the message), or None when they can."""
    problem = _unreduced_problem(left, right)
    if problem is not None:
        return problem
    for n in spec.batch:
        la, ra = left.axes_of(n), right.axes_of(n)
        if la != ra:
            return lambda: BatchDimMismatch(
                f"batch dim {n} is sharded over {subscript(la) or 'nothing'} in {left} but {subscript(ra) or 'nothing'} in {right}",
                span=right.dim(n).span,
                fix=f"shard {n} alike in both operands",
            )
    for n in spec.contracted:
        la, ra = left.axes_of(n), right.axes_of(n)
        if la == ra:
            continue
        if not la or not ra:
            held, other, axes = (left, right, la) if la else (right, left, ra)
            return lambda: NotLocal(
                f"case 2: {n} is contracted and sharded over {subscript(axes)} in {held} only, "
                f"so a local product would sum only a block of {n}",
                fix=f"gather it: AllGather_{subscript(axes)}({held}); or slice {other.name or 'the other'} onto "
                f"{subscript(axes)} (Slice_{{{','.join(axes)},{n}}}) and reduce the product",
            )
        return lambda: NotLocal(
            f"{n} is contracted and sharded over {subscript(la)} in {left} but {subscript(ra)} in {right}: "
            "the shards on a device hold different blocks of it",
            fix=f"gather one side (AllGather_{subscript(ra)}({right})), or permute it into place",
        )
    hits = _collisions(left, right, spec)
    if hits:
        a, ld, rd = hits[0]
        return lambda: SameAxisResultDims(
            f"case 4: {ld} of {left} and {rd} of {right} are both sharded over {a}; "
            "each device would hold only a diagonal block of the result",
            fix=f"gather one operand first: AllGather_{a}({left}) or AllGather_{a}({right})",
        )
    return None


def local_output(left: Tensor, right: Tensor, spec: Spec, mesh: Mesh, name: str | None = None) -> Tensor:
    """The tensor a local product of the shards gives (``A ·_LOCAL B``), or the error that says why the
    shards cannot simply be multiplied."""
    validate(left, mesh)
    validate(right, mesh)
    problem = _local_problem(left, right, spec)
    if problem is not None:
        raise problem()
    return _product_of_shards(left, right, spec, name)


def local_output_or_none(
    left: Tensor, right: Tensor, spec: Spec, mesh: Mesh, name: str | None = None
) -> Tensor | None:
    """:func:`local_output`, or None (and no error message built) when the shards cannot simply be multiplied."""
    validate(left, mesh)
    validate(right, mesh)
    if _local_problem(left, right, spec) is not None:
        return None
    return _product_of_shards(left, right, spec, name)


def _product_of_shards(left: Tensor, right: Tensor, spec: Spec, name: str | None) -> Tensor:
    """The local product's tensor, for shards that :func:`_local_problem` passed."""
    summed = [a for n in spec.contracted for a in left.axes_of(n)]
    dims: list[Dim] = []
    for n in spec.out:
        src = left if n in spec.left else right
        d = src.dim(n)
        dims.append(Dim(d.name, d.axes, d.size))
    used = {a for d in dims for a in d.axes}
    unreduced = (set(left.unreduced) | set(right.unreduced) | set(summed)) - used
    invariant = (set(left.invariant) & set(right.invariant)) - used - unreduced
    if name is None:
        name = default_name(left.name, right.name)
    return Tensor(name, tuple(dims), tuple(unreduced), tuple(invariant), left.dtype or right.dtype)
