"""What one strategy map has proved about its polyhedra, so that most of its questions need no linear program.

The region engine asks two questions of open polyhedra in log space (conjunctions of atoms ``λ·y + b < 0``,
within the box of :mod:`.polyhedra`): is one non-empty, and does one lie inside an atom. An LP answers a
question and also yields certificates, each exact, that answer other questions without an LP:

- **points**: the interior point of a non-empty polyhedron, the maximizer of an implication LP (a point of the
  polyhedron's closure). A known point deep inside a polyhedron shows it non-empty; a known point of its
  closure that breaks an atom by more than TOL shows the atom is not implied.
- **supports**: the atoms with a non-zero dual value. By LP duality those atoms alone (with the box) give the
  same optimum, so an implication or an emptiness they prove holds in every polyhedron that has them (more
  facets, a smaller polyhedron).
- **cones**: an atom ``a`` is implied by atoms ``a1``, ``a2`` of the polyhedron when its direction is
  ``α·λ1 + β·λ2`` (α, β ≥ 0) and ``α·b1 + β·b2`` is at least ``b`` (one atom: the direction is parallel).
- **complements**: a polyhedron ``P ∧ f`` is empty when ``P`` implies ``not f``.

Only what an LP would answer the same way is derived: a derived "implied" or "empty" keeps half of TOL in
hand (an LP's own rounding is far below it), a point is used only when it clears its atoms by ``GAP`` more
than TOL. Everything proved here lives for one map: the certificates are facts about its atoms, and what
the next map asks, it proves again (so the count of LPs a map poses does not depend on what ran before it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import polyhedra as lp
from .conditions import Atom

__all__ = ["Prover"]

SAFE = lp.TOL / 2  # a derived implication or emptiness holds with this much of TOL to spare
GAP = 1e-6  # a point certifies only when it clears (or breaks) its atoms by this much beyond TOL
ON = 1e-9  # a point counts as in a polyhedron's closure when it breaks no atom by more than this
SPAN = 1e-9  # two directions are not parallel, and span a third, past this (exponents are small rationals)


class Prover:
    """Answers "is this polyhedron non-empty" and "does it imply this atom" for one map, by certificates
    first and by an LP (:mod:`.polyhedra`) when none applies; each LP's certificates are kept."""

    def __init__(self, dims: int) -> None:
        self.dims = dims
        self._ids: dict[tuple[float, ...], int] = {}
        self._halves: list[tuple[float, ...]] = []  # per id: λ and b
        self._normal: list[tuple[int, float, float]] = []  # per id: direction id, offset, scale
        self._directions: dict[tuple[float, ...], int] = {}
        self._vectors: list[np.ndarray] = []  # per direction id: the unit direction
        self._empty: dict[int, list[frozenset[int]]] = {}  # supports of empty polyhedra, by their least id
        self._implied: dict[int, list[frozenset[int]]] = {}  # supports that imply an atom, by its id
        self._found: list[tuple[float, ...]] = []
        self._points = np.zeros((0, dims))
        self._frames: dict[frozenset[int], _Frame] = {}
        self._atom_ids: dict[Atom, int] = {}
        self._negations: dict[int, int] = {}
        self._span_table: dict[int, tuple[int, list[tuple[int, int, float, float]]]] = {}

    # ---- the atoms, numbered by their half-space -------------------------------------------------------

    def _id(self, half: tuple[float, ...]) -> int:
        got = self._ids.get(half)
        if got is None:
            got = self._ids[half] = len(self._normal)
            self._halves.append(half)
            vec = np.array(half[: self.dims])
            scale = float(np.abs(vec).max())
            unit = tuple((vec / scale).tolist())
            d = self._directions.get(unit)
            if d is None:
                d = self._directions[unit] = len(self._vectors)
                self._vectors.append(np.array(unit))
            self._normal.append((d, half[self.dims] / scale, scale))
        return got

    def _atom(self, a: Atom) -> int:
        got = self._atom_ids.get(a)
        if got is None:
            got = self._atom_ids[a] = self._id(a.half)
        return got

    def ids(self, atoms: Sequence[Atom]) -> frozenset[int]:
        return frozenset(map(self._atom, atoms))

    def _negation(self, i: int) -> int:
        """The id of the complement of atom ``i``'s half-space."""
        got = self._negations.get(i)
        if got is None:
            got = self._negations[i] = self._id(tuple(-x for x in self._halves[i]))
        return got

    # ---- cheap tests ------------------------------------------------------------------------------------

    def _frame(self, ids: frozenset[int]) -> _Frame:
        got = self._frames.get(ids)
        if got is None:
            got = self._frames[ids] = _Frame(self, ids)
        return got

    def _spans(self, d: int) -> list[tuple[int, int, float, float]]:
        """The pairs of known directions that span direction ``d`` with positive weights: (d1, d2, α, β) with
        ``d = α·d1 + β·d2``. Extended when directions are added."""
        done, pairs = self._span_table.get(d, (0, []))
        n = len(self._vectors)
        if done < n:
            u = np.array(self._vectors)
            i, j = np.triu_indices(n, 1)
            new = j >= done
            i, j = i[new], j[new]
            g = u @ u.T
            det = g[i, i] * g[j, j] - g[i, j] ** 2
            r = u @ u[d]
            with np.errstate(divide="ignore", invalid="ignore"):
                alpha = (g[j, j] * r[i] - g[i, j] * r[j]) / det
                beta = (g[i, i] * r[j] - g[i, j] * r[i]) / det
                fit = np.abs(u[d] - alpha[:, None] * u[i] - beta[:, None] * u[j]).max(axis=1)
            ok = (det > SPAN) & (alpha > 0) & (beta > 0) & (fit < SPAN)  # not parallel, spanning d
            pairs = pairs + [
                (int(a), int(b), float(x), float(y))
                for a, b, x, y in zip(i[ok], j[ok], alpha[ok], beta[ok], strict=True)
            ]
            self._span_table[d] = (n, pairs)
        return pairs

    def _bounded(self, frame: _Frame, targets: Sequence[int], tol: float) -> bool:
        """Whether for some target atom one atom of the frame parallel to it, or two whose directions span its
        direction with positive weights (``λ_t = α·λ_1 + β·λ_2``), bound its left side by ``tol`` (SAFE for
        two) in its own scale."""
        tight = frame.tight
        for t in targets:
            d, o, scale = self._normal[t]
            if d in tight and scale * (o - tight[d]) <= tol:
                return True
        for t in targets:
            d, o, scale = self._normal[t]
            for d1, d2, alpha, beta in self._spans(d):
                if d1 in tight and d2 in tight and scale * (o - alpha * tight[d1] - beta * tight[d2]) <= SAFE:
                    return True
        return False

    def _known_implied(self, frame: _Frame, target: int) -> bool:
        return any(s <= frame.ids for s in self._implied.get(target, ())) or self._bounded(
            frame, [target], lp.TOL
        )

    def _known_empty(self, frame: _Frame) -> bool:
        """Empty by a known support, or since the other atoms imply some atom's complement (one atom parallel
        to the complement, or two that span it: the atom is left out of its own test, since a pair with its
        direction is parallel to the complement's and never spans it)."""
        ids = frame.ids
        for i in ids:
            if any(s <= ids for s in self._empty.get(i, ())):
                return True
        negations = [(i, self._negation(i)) for i in sorted(ids)]
        if any(any(s <= ids - {i} for s in self._implied.get(n, ())) for i, n in negations):
            return True
        return self._bounded(frame, [n for _, n in negations], SAFE)

    def _points_in(self, frame: _Frame) -> np.ndarray:
        """The known points in the frame's closure (rows of the known points)."""
        if len(self._found) != len(self._points):
            self._points = np.array(self._found)
        n = len(frame.closure)
        if n < len(self._points):
            lhs = self._points[n:] @ frame.m[:, : self.dims].T + frame.m[:, self.dims]
            frame.closure = np.concatenate([frame.closure, (lhs <= ON).all(axis=1)])
            frame.deep = np.concatenate([frame.deep, (lhs < -(lp.TOL + GAP)).all(axis=1)])
        return frame.closure

    # ---- the two questions ------------------------------------------------------------------------------

    def interior(self, atoms: Sequence[Atom]) -> tuple[float, ...] | None:
        """A point with slack above TOL in the open polyhedron, or None when it is empty (as
        :func:`.polyhedra.interior_point`)."""
        if not atoms:
            return (0.0,) * self.dims
        frame = self._frame(self.ids(atoms))
        if self._known_empty(frame):
            return None
        self._points_in(frame)
        inside = np.flatnonzero(frame.deep)
        if inside.size:
            return self._found[int(inside[0])]
        s, y, support = lp.slack_certificate(atoms, self.dims)
        if y is not None:
            self._found.append(y)
        if s <= SAFE:
            empty = frozenset(self._atom(atoms[k]) for k in support)
            self._empty.setdefault(min(empty), []).append(empty)
        return y if s > lp.TOL else None

    def implies(self, atoms: Sequence[Atom], target: Atom) -> bool:
        """Whether every point of the polyhedron's closure satisfies ``target`` (as :func:`.polyhedra.implies`)."""
        if not atoms:
            return False
        frame, t = self._frame(self.ids(atoms)), self._atom(target)
        if self._known_implied(frame, t):
            return True
        closure = self._points_in(frame)
        if closure.any():
            h = self._halves[t]
            if (self._points[closure] @ np.array(h[: self.dims]) + h[self.dims] > lp.TOL + GAP).any():
                return False
        value, y, support = lp.implication_certificate(atoms, target, self.dims)
        if y is not None:
            self._found.append(y)
        if value <= SAFE:
            self._implied.setdefault(t, []).append(frozenset(self._atom(atoms[k]) for k in support))
        return value <= lp.TOL

    def simplify(self, atoms: Sequence[Atom], keep: Sequence[Atom] = ()) -> tuple[Atom, ...]:
        """The atoms without those the others imply, as :func:`.polyhedra.simplify`."""
        kept = list(dict.fromkeys(atoms))
        i = len(kept) - 1
        while i >= 0:
            if self.implies(kept[:i] + kept[i + 1 :] + list(keep), kept[i]):
                del kept[i]
            i -= 1
        return tuple(kept)


class _Frame:
    """One polyhedron as the cheap tests read it: its atoms' ids and matrix, the tightest atom of each
    direction, and which known points lie in it."""

    def __init__(self, prover: Prover, ids: frozenset[int]) -> None:
        self.ids = ids
        self.m = np.array([prover._halves[i] for i in sorted(ids)])
        self.tight: dict[int, float] = {}
        for i in ids:
            d, o, _ = prover._normal[i]
            if o > self.tight.get(d, -np.inf):
                self.tight[d] = o
        self.closure = np.zeros(0, dtype=bool)  # per known point: in the closure
        self.deep = np.zeros(0, dtype=bool)  # per known point: inside by more than TOL + GAP
