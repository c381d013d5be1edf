"""Executable proofs: lemmas whose every step is computed by the engine and checked by sympy.

A lemma lives in its own module under ``proofs/`` and exposes ``prove(model=None) -> Lemma``. It builds its
objects with the engine (the cost model, the planner, the derivations, the collective operators), records
each fact it establishes as a :class:`ProofStep` through a :class:`Proof` builder, and returns the
:class:`Lemma`: the statement, the steps, and whether every step held. Nothing is asserted by typing a
formula twice: the right-hand sides of the checks come from an independent route (a hop count, a ring
simulation, a Kronecker product, the book's closed form), the left-hand sides from the engine.

    >>> from shardalg.numeric.proofs import run_all
    >>> all(lemma.holds for lemma in run_all())
    True

``model`` is handed to the engine's cost calls unchanged (None: the engine's default model), so a test can
perturb the model and watch the matching proof fail.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from types import ModuleType
from typing import Any

import sympy

from shardalg.algebra.symbols import as_expr, latex_names
from shardalg.errors import UsageError
from shardalg.notation.printing.display import pretty_text, short
from shardalg.notation.printing.symbology import latex_escape_prose, latex_escape_text

__all__ = ["ProofStep", "Lemma", "Proof", "discover", "load", "prove", "run_all", "sym_latex"]

# Modules of proofs/ that are not lemmas.
_NOT_LEMMAS = frozenset({"run", "common"})


def sym_latex(expr: Any) -> str:
    """A sympy expression (or relation, or matrix) in LaTeX, with the book's symbol names."""
    return sympy.latex(expr, symbol_names=latex_names(expr))


@dataclass(frozen=True)
class ProofStep:
    """One fact of a proof: ``claim`` (LaTeX math), whether it held, and a plain-text note saying where
    the two sides came from."""

    claim: str
    holds: bool
    note: str = ""

    def latex_row(self) -> str:
        mark = "" if self.holds else r"\quad\text{(FAILS)}"
        note = rf"&& \text{{{latex_escape_text(self.note)}}}" if self.note else ""
        return f"& {self.claim}{mark} {note}"


@dataclass(frozen=True)
class Lemma:
    """The record a lemma module's ``prove`` returns."""

    name: str
    title: str
    statement: str
    steps: tuple[ProofStep, ...]
    holds: bool
    prose: str = ""
    failure: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        held = sum(s.holds for s in self.steps)
        return short(
            "Lemma",
            f"{self.name} {'HOLDS' if self.holds else 'FAILS'} ({held} of {len(self.steps)} steps): "
            f"{self.title}",
        )

    def _repr_pretty_(self, p: object, cycle: bool) -> None:
        pretty_text(self, p, cycle)

    def fragments(self) -> list[str]:
        """Every LaTeX math string of the lemma, for checking one by one (KaTeX)."""
        return [self.statement, *(s.claim for s in self.steps), self.derivation_latex()]

    def derivation_latex(self) -> str:
        """The steps as one ``align*`` block (display math)."""
        rows = " \\\\\n".join(s.latex_row() for s in self.steps)
        return "\\begin{align*}\n" + rows + "\n\\end{align*}"

    def steps_latex(self) -> str:
        """The steps as a list for a document (text mode): each step's note, then its claim as math."""
        items = []
        for s in self.steps:
            mark = r"$\checkmark$" if s.holds else r"\textbf{FAILS}"
            note = latex_escape_prose(s.note) + ": " if s.note else ""
            items.append(rf"\item[{mark}] {note}${s.claim}$")
        return "\\begin{itemize}\\small\n" + "\n".join(items) + "\n\\end{itemize}"

    def latex(self) -> str:
        """The lemma as a block of a LaTeX document: title, statement, derivation, verdict."""
        verdict = "holds" if self.holds else "does NOT hold"
        parts = [
            rf"\paragraph{{Lemma ({latex_escape_prose(self.name)}): {latex_escape_prose(self.title)}.}}",
            rf"\[ {self.statement} \]",
        ]
        if self.prose:
            parts.append(latex_escape_prose(self.prose))
        parts.append(r"\emph{Proof, as computed by shardalg:}")
        parts.append(self.steps_latex())
        parts.append(rf"\emph{{Checked: the lemma {verdict} ({len(self.steps)} steps).}}")
        if self.failure:
            parts.append(r"\emph{Failure:} " + latex_escape_prose(self.failure))
        return "\n".join(parts) + "\n"

    def markdown(self) -> str:
        """The lemma as Markdown with ``$...$`` math."""
        lines = [f"**Lemma ({self.name}): {self.title}.**", "", f"$${self.statement}$$", ""]
        if self.prose:
            lines += [self.prose, ""]
        for s in self.steps:
            status = "" if s.holds else " **(fails)**"
            lines.append(f"- ${s.claim}${status}" + (f" — {s.note}" if s.note else ""))
        lines += ["", f"*{'Holds' if self.holds else 'Does NOT hold'}* ({len(self.steps)} steps)."]
        if self.failure:
            lines.append(f"Failure: {self.failure}")
        return "\n".join(lines) + "\n"

    def text(self) -> str:
        """One line per step, for the terminal."""
        head = f"{'HOLDS' if self.holds else 'FAILS'}  {self.name}: {self.title}"
        body = [f"    [{'ok' if s.holds else 'FAIL'}] {s.note or s.claim}" for s in self.steps]
        if self.failure:
            body.append(f"    failure: {self.failure}")
        return "\n".join([head, *body])

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "title": self.title,
            "holds": self.holds,
            "statement": self.statement,
            "steps": [{"claim": s.claim, "holds": s.holds, "note": s.note} for s in self.steps],
            "failure": self.failure,
        }


def _relation_gap(rel: sympy.Basic) -> sympy.Expr:
    """A relation ``a > b`` (or ``a >= b``, ``b < a``, ...) as the expression that it says is positive."""
    if isinstance(rel, sympy.StrictGreaterThan | sympy.GreaterThan):
        return rel.lhs - rel.rhs
    if isinstance(rel, sympy.StrictLessThan | sympy.LessThan):
        return rel.rhs - rel.lhs
    raise UsageError(f"not an inequality: {rel}")


def _agree_on_samples(a: sympy.Expr, b: sympy.Expr, samples: int = 200, seed: int = 0) -> bool:
    free = sorted(a.free_symbols | b.free_symbols, key=str)
    fa, fb = sympy.lambdify(free, a, "math"), sympy.lambdify(free, b, "math")
    rng = Random(seed)
    for _ in range(samples):
        point = [10 ** rng.uniform(-6, 6) for _ in free]
        va, vb = float(fa(*point)), float(fb(*point))
        if abs(va - vb) > 1e-12 * max(abs(va), abs(vb), 1e-300):
            return False
    return True


class Proof:
    """Collects the steps of one lemma. Each check returns whether it held, and records it either way."""

    def __init__(self, name: str, title: str, statement: str, prose: str = "") -> None:
        self.name, self.title, self.statement, self.prose = name, title, statement, prose
        self.steps: list[ProofStep] = []

    def _add(self, claim: str, holds: bool, note: str) -> bool:
        self.steps.append(ProofStep(claim, bool(holds), note))
        return bool(holds)

    def given(self, name: str, expr: Any, note: str) -> Any:
        """Record a value the engine produced (``name`` is its LaTeX) and return it."""
        self._add(f"{name} = {sym_latex(expr)}", True, note)
        return expr

    def equal(self, a: Any, b: Any, note: str, *, name: str | None = None, numeric: bool = False) -> bool:
        """``a == b`` as sympy expressions: ``simplify(a - b) == 0``.

        With ``numeric=True``, expressions sympy cannot reduce (sums of ``Max``, say) are also accepted when
        they agree to 1e-12 at 200 seeded random positive points; the note then says so.
        """
        a, b = as_expr(a), as_expr(b)
        ok = sympy.simplify(a - b) == 0
        if not ok and numeric:
            ok = _agree_on_samples(a, b)
            note += " (checked at 200 random points)" if ok else ""
        left = sym_latex(a)
        right = sym_latex(b)
        claim = left if left == right else f"{left} = {right}"
        if name is not None:
            claim = f"{name} = {claim}"
        if not ok:
            claim = f"{left} \\neq {right}"
        return self._add(claim, ok, note)

    def zero(self, expr: Any, note: str, *, name: str) -> bool:
        """``expr`` simplifies to 0; ``name`` is the LaTeX of what ``expr`` is (a derivative, say)."""
        simplified = sympy.simplify(expr)
        ok = simplified == 0
        return self._add(f"{name} = {sym_latex(simplified)}", ok, note)

    def matrix_equal(self, a: sympy.Matrix, b: sympy.Matrix, claim: str, note: str) -> bool:
        """Exact matrix equality (shapes and every entry)."""
        ok = a.shape == b.shape and (a - b).is_zero_matrix is True
        return self._add(claim if ok else f"\\lnot\\left({claim}\\right)", ok, note)

    def equivalent(
        self,
        a: sympy.Basic,
        b: sympy.Basic,
        note: str,
        *,
        samples: int = 200,
        seed: int = 0,
    ) -> bool:
        """Two inequalities over positive symbols say the same thing.

        Symbolically when their gaps differ by a positive factor; otherwise on ``samples`` random positive
        points (log-uniform over twelve decades, seeded), where they must agree everywhere.
        """
        ga, gb = _relation_gap(a), _relation_gap(b)
        ratio = sympy.simplify(ga / gb)
        ok = bool(ratio.is_positive) and not ratio.free_symbols
        if not ok:
            free = sorted(ga.free_symbols | gb.free_symbols, key=str)
            fa = sympy.lambdify(free, ga, "math")
            fb = sympy.lambdify(free, gb, "math")
            rng = Random(seed)
            ok = True
            for _ in range(samples):
                point = [10 ** rng.uniform(-6, 6) for _ in free]
                va, vb = fa(*point), fb(*point)
                if (va > 0) != (vb > 0):
                    ok = False
                    break
        if ok and sym_latex(a) == sym_latex(b):  # the same relation as printed: say so, show it once
            return self._add(sym_latex(a), ok, f"{note}, the same relation")
        claim = f"{sym_latex(a)} \\iff {sym_latex(b)}" if ok else f"{sym_latex(a)} \\not\\iff {sym_latex(b)}"
        return self._add(claim, ok, note)

    def record(self, latex: str, note: str) -> None:
        """Show an object the proof is about (a plan in the notation, say); nothing is checked."""
        self._add(latex, True, note)

    def fact(self, claim: str, holds: bool, note: str) -> bool:
        """A fact computed outside sympy (a simulation, an enumeration); ``claim`` is its LaTeX."""
        return self._add(claim if holds else f"\\lnot\\left({claim}\\right)", holds, note)

    def lemma(self, failure: str | None = None) -> Lemma:
        holds = bool(self.steps) and all(s.holds for s in self.steps) and failure is None
        return Lemma(self.name, self.title, self.statement, tuple(self.steps), holds, self.prose, failure)


# ---- discovery -------------------------------------------------------------------------------------


def _proofs_package() -> ModuleType:
    """The ``proofs`` package: importable from a checkout, or found beside the installed package."""
    try:
        module = importlib.import_module("proofs")
        if (
            Path(getattr(module, "__file__", "") or "")
            .parent.joinpath("allgather_time_independent_of_axis.py")
            .exists()
        ):
            return module
    except ModuleNotFoundError:
        pass
    root = Path(__file__).resolve().parents[2] / "proofs"  # shardalg/numeric/proofs.py -> the checkout
    init = root / "__init__.py"
    if not init.exists():
        raise UsageError(
            "the proofs/ directory was not found: it ships with the source tree (run from a checkout)"
        )
    spec = importlib.util.spec_from_file_location("proofs", init, submodule_search_locations=[str(root)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["proofs"] = module
    spec.loader.exec_module(module)
    return module


def discover() -> list[str]:
    """The names of all lemma modules, sorted."""
    package = _proofs_package()
    return sorted(
        m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg and m.name not in _NOT_LEMMAS
    )


def load(name: str) -> Callable[..., Lemma]:
    """The ``prove`` function of lemma ``name``."""
    _proofs_package()
    if name not in discover():
        raise UsageError(f"no lemma named {name!r}; known: {', '.join(discover())}")
    return importlib.import_module(f"proofs.{name}").prove


def prove(name: str, model: Any = None) -> Lemma:
    """Run one lemma. An exception inside it is a failed lemma (with the error), not a crash."""
    try:
        return load(name)(model=model)
    except UsageError:
        raise
    except Exception as err:  # noqa: BLE001 - a lemma that cannot run does not hold; say why
        last = traceback.extract_tb(err.__traceback__)[-1]
        where = f"{Path(last.filename).name}:{last.lineno}"
        return Lemma(
            name, name, r"\text{(not run)}", (), False, failure=f"{type(err).__name__} at {where}: {err}"
        )


def run_all(names: Iterable[str] | None = None, model: Any = None) -> list[Lemma]:
    """Run every lemma (or those named), in name order."""
    chosen: Sequence[str] = sorted(names) if names is not None else discover()
    return [prove(n, model) for n in chosen]
