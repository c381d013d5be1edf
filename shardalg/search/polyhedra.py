"""Polyhedra in log space, decided by linear programs (scipy's HiGHS, imported on first use).

A conjunction of atoms ``λ·y + log c < 0`` (y the log-coordinates) is an open polyhedron. It is non-empty
when the largest slack ``s`` with ``λ·y + log c + s <= 0`` for every atom is positive: one LP. An atom is
implied by a polyhedron when its left side cannot become positive there: one LP (maximize λ·y). These two
questions drop the empty cells, the redundant facets and the polyhedra inside others, so that what is
printed is what bounds the region. Constant atoms never reach here (they are decided exactly, in sympy).

scipy is imported inside the functions: ``import shardalg`` and the CLI's start do not pay for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from shardalg.cache import Kind, memoized

from .conditions import Atom

__all__ = [
    "TOL",
    "slack",
    "nonempty",
    "implies",
    "simplify",
    "interior_point",
    "contained",
    "slack_certificate",
    "implication_certificate",
]

TOL = 1e-7  # a region thinner than this in log space (a factor 1 + 1e-7) counts as empty
# Every LP works in the box |log p| <= BOX: parameters a float can hold (e^700 ~ 1e304). The box keeps
# every LP bounded, so HiGHS answers optimal or infeasible, never unbounded or unknown.
BOX = 700.0


def _matrix(atoms: Sequence[Atom]) -> tuple[list[list[float]], list[float]]:
    rows = [list(a.vec) for a in atoms]
    rhs = [-a.log_coef for a in atoms]
    return rows, rhs


# Linear programs posed since import (read before and after a map to count its LPs). Each is answered once per
# value of its atoms through the cache layer; a repeat counts too, so a map's count does not depend on what
# ran before it.
LP_CALLS = [0]
DUAL = 1e-12  # a dual value below this (in size) leaves its atom out of a certificate's support


def _linprog(c, a_ub, b_ub, bounds):
    from scipy.optimize import linprog  # lazy: scipy's import costs ~0.3 s

    return linprog(c, A_ub=a_ub or None, b_ub=b_ub or None, bounds=bounds, method="highs")


def _support(res, n: int) -> tuple[int, ...]:
    """The rows with a non-zero dual value: by LP duality those atoms alone (with the box) give the same
    optimum, so what the LP proved holds for any polyhedron that has them."""
    return tuple(i for i, m in enumerate(res.ineqlin.marginals[:n]) if abs(m) > DUAL)


def _solve_slack(atoms: Sequence[Atom], dims: int, box: float = BOX) -> tuple[float, list[float] | None]:
    """(largest slack, a point attaining it): maximize s subject to λ·y + s <= -log c, s <= 1, |y| <= box."""
    s, y, _ = slack_certificate(atoms, dims, box)
    return s, None if y is None else list(y)


def slack_certificate(
    atoms: Sequence[Atom], dims: int, box: float = BOX
) -> tuple[float, tuple[float, ...] | None, tuple[int, ...]]:
    """(largest slack, a point attaining it, the support: the indices of the atoms that bound the slack)."""
    if not atoms:
        return 1.0, (0.0,) * dims, ()
    LP_CALLS[0] += 1
    return _slack_lp(tuple(atoms), dims, box)


@memoized(Kind.PIECE)
def _slack_lp(
    atoms: tuple[Atom, ...], dims: int, box: float
) -> tuple[float, tuple[float, ...] | None, tuple[int, ...]]:
    """:func:`slack_certificate`'s LP, by the atoms' values (the regions of one map, and the maps of one
    program under other formats or chips, pose the same LPs)."""
    rows, rhs = _matrix(atoms)
    a_ub = [r + [1.0] for r in rows]
    res = _linprog([0.0] * dims + [-1.0], a_ub, rhs, [(-box, box)] * dims + [(None, 1.0)])
    if res.status == 2:  # infeasible: only when the box itself cuts every point off
        return float("-inf"), None, tuple(range(len(atoms)))
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on a region's feasibility LP: {res.message}")
    return -float(res.fun), tuple([float(v) for v in res.x[:dims]]), _support(res, len(atoms))


def slack(atoms: Sequence[Atom], dims: int) -> float:
    return _solve_slack(atoms, dims)[0]


def nonempty(atoms: Sequence[Atom], dims: int) -> bool:
    """Whether the open polyhedron has an interior (a slack above TOL)."""
    return slack(atoms, dims) > TOL


def interior_point(atoms: Sequence[Atom], dims: int, boxes: Sequence[float] = (BOX,)) -> list[float] | None:
    """A point of the polyhedron (log-coordinates) with slack above TOL, or None when empty. With several
    ``boxes`` the smallest box that holds one is used (moderate numbers for examples and pictures)."""
    for box in boxes:
        s, y = _solve_slack(atoms, dims, box)
        if s > TOL:
            return y
    return None


def _parallel(atoms: Sequence[Atom], target: Atom) -> bool:
    """A cheap sufficient test: some atom is ``target`` divided by k > 0 with a constant at least as tight
    (``λ·y < -b`` gives ``kλ·y < -k·b <= -b_t``). Exponents are rationals, so the scale is exact."""
    for a in atoms:
        if any((s == 0) != (t == 0) for s, t in zip(a.lam, target.lam, strict=True)):
            continue
        scales = {t / s for s, t in zip(a.lam, target.lam, strict=True) if s != 0}
        if len(scales) == 1:
            (k,) = scales
            if k > 0 and float(k) * a.log_coef >= target.log_coef - TOL:
                return True
    return False


def implies(atoms: Sequence[Atom], target: Atom, dims: int) -> bool:
    """Whether every point of the polyhedron (its closure) satisfies ``target``."""
    if not atoms:
        return False
    if _parallel(atoms, target):
        return True
    return implication_certificate(atoms, target, dims)[0] <= TOL


def implication_certificate(
    atoms: Sequence[Atom], target: Atom, dims: int
) -> tuple[float, tuple[float, ...] | None, tuple[int, ...]]:
    """(the largest value of the target's left side ``λ·y + log c`` over the polyhedron's closure, a point
    attaining it, the support: the indices of the atoms that bound it). The target is implied when the
    value is at most TOL; an empty closure gives -inf, no point, and every atom as the support."""
    LP_CALLS[0] += 1
    return _implies_lp(tuple(atoms), target.half, dims)


@memoized(Kind.PIECE)
def _implies_lp(
    atoms: tuple[Atom, ...], target: tuple[float, ...], dims: int
) -> tuple[float, tuple[float, ...] | None, tuple[int, ...]]:
    """:func:`implication_certificate`'s LP (maximize the target's left side over the polyhedron), by the
    atoms' values."""
    rows, rhs = _matrix(atoms)
    res = _linprog([-k for k in target[:dims]], rows, rhs, [(-BOX, BOX)] * dims)
    if res.status == 2:  # empty: implies anything
        return float("-inf"), None, tuple(range(len(atoms)))
    if res.status != 0:
        raise RuntimeError(f"HiGHS failed on an implication LP: {res.message}")
    point = tuple([float(v) for v in res.x[:dims]])
    return -float(res.fun) + target[dims], point, _support(res, len(atoms))


def simplify(atoms: Sequence[Atom], dims: int, keep: Sequence[Atom] = ()) -> tuple[Atom, ...]:
    """The atoms without those the others imply (earlier atoms are kept first: deterministic). Atoms in
    ``keep`` constrain the polyhedron but are not returned (a domain that goes without saying)."""
    kept = list(dict.fromkeys(atoms))
    i = len(kept) - 1
    while i >= 0:
        others = kept[:i] + kept[i + 1 :] + list(keep)
        if implies(others, kept[i], dims):
            del kept[i]
        i -= 1
    return tuple(kept)


def contained(inner: Sequence[Atom], outer: Sequence[Atom], dims: int) -> bool:
    """Whether the polyhedron ``inner`` lies inside ``outer`` (each atom of outer implied by inner)."""
    return all(implies(inner, a, dims) for a in outer)
