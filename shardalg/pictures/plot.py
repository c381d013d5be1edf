"""Pictures for the notes: two plans' costs against one parameter, the crossover marked, the regions labelled.

matplotlib is an optional extra (``pip install shardalg[plot]``) and is imported only when a picture is
drawn. The numbers come from sympy: each cost is substituted with the given values, lambdified in the swept
parameter, and evaluated on a log-spaced grid; crossovers are the sign changes of the difference, refined by
bisection on the exact expressions, and also solved symbolically where sympy can.

    >>> from shardalg.pictures.plot import crossover_plot
    >>> fig = crossover_plot(cost_a, cost_b, over=D, lo=128, hi=65536, values={B: 1024}, out="d.png")
"""

from __future__ import annotations

import math
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sympy

from shardalg.algebra.symbols import as_expr
from shardalg.errors import UsageError
from shardalg.notation.printing.symbology import latex_escape_prose

__all__ = ["Crossover", "CostCurves", "cost_curves", "crossover_plot", "FORMATS", "PAPER_RC", "as_mathtext"]

# Output formats by file suffix, and the matplotlib backend that writes each.
FORMATS: dict[str, str] = {".png": "agg", ".pdf": "pdf", ".pgf": "pgf", ".svg": "svg"}

# The pictures' type matches the notes' (Latin Modern, set by LaTeX): Computer Modern for the math (matplotlib's
# mathtext "cm") and a serif for the text, with the tick labels set as math too.
PAPER_RC: dict[str, object] = {
    "mathtext.fontset": "cm",
    "font.family": "serif",
    "font.serif": ["cmr10", "DejaVu Serif"],
    "axes.formatter.use_mathtext": True,
    "axes.unicode_minus": False,
}


def as_mathtext(latex: str) -> str:
    """The package's LaTeX of a formula (its printers') as matplotlib mathtext between dollars: the
    ``\\textbf`` and ``\\text`` that mathtext lacks become ``\\mathbf`` and ``\\mathrm``."""
    return "$" + latex.replace(r"\textbf{", r"\mathbf{").replace(r"\text{", r"\mathrm{") + "$"


_SUBSCRIPTED = re.compile(r"\b([A-Za-z][A-Za-z0-9]*)_(\{[^{}]*\}|[A-Za-z0-9]+)")


def math_label(text: str) -> str:
    """A label as drawn: notation written in ASCII (``AllGather_X(Y)``) set as math, the subscript lowered
    (``$\\mathrm{AllGather}_{X}$(Y)``); text that already has mathtext (a ``$``) is left as it is."""
    if "$" in text:
        return text
    return _SUBSCRIPTED.sub(lambda m: rf"$\mathrm{{{m[1]}}}_{{{m[2].strip('{}')}}}$", text)


_GRID_POINTS = 400
_BISECTION_STEPS = 80


@dataclass(frozen=True)
class Crossover:
    """A value of the swept parameter where the two costs are equal, and which plan is cheaper above it."""

    at: float
    cost: float
    cheaper_above: int  # 0: the first plan, 1: the second


@dataclass(frozen=True)
class CostCurves:
    """Both costs sampled over the sweep, with the crossovers found."""

    over: sympy.Symbol
    xs: tuple[float, ...]
    ys: tuple[tuple[float, ...], tuple[float, ...]]
    crossovers: tuple[Crossover, ...]
    exact: tuple[sympy.Expr, ...]  # crossovers sympy solved in closed form (may be empty)

    def cheaper(self, x: float) -> int:
        """Which plan is cheaper at ``x`` (0 or 1), by the sampled curves' interpolation."""
        i = min(range(len(self.xs)), key=lambda k: abs(math.log(self.xs[k]) - math.log(x)))
        return 0 if self.ys[0][i] <= self.ys[1][i] else 1


def _numeric(expr: Any, over: sympy.Symbol, values: Mapping[sympy.Symbol, float]) -> sympy.Expr:
    e = as_expr(expr).subs(dict(values))
    extra = e.free_symbols - {over}
    if extra:
        names = ", ".join(sorted(str(s) for s in extra))
        raise UsageError(f"the cost still has free symbols besides {over}: {names}; give them values")
    return e


def cost_curves(
    cost_a: Any,
    cost_b: Any,
    *,
    over: sympy.Symbol,
    lo: float,
    hi: float,
    values: Mapping[sympy.Symbol, float] | None = None,
    points: int = _GRID_POINTS,
) -> CostCurves:
    """Sample both costs over ``[lo, hi]`` (log-spaced) and find where they cross."""
    if not (0 < lo < hi < math.inf):
        raise UsageError(f"the sweep needs finite 0 < lo < hi, not lo={lo}, hi={hi}")
    values = values or {}
    ea, eb = _numeric(cost_a, over, values), _numeric(cost_b, over, values)
    fa, fb = sympy.lambdify(over, ea, "math"), sympy.lambdify(over, eb, "math")
    step = (math.log(hi) - math.log(lo)) / (points - 1)
    xs = tuple(math.exp(math.log(lo) + i * step) for i in range(points))
    try:
        ya = tuple(float(fa(x)) for x in xs)
        yb = tuple(float(fb(x)) for x in xs)
    except (OverflowError, ZeroDivisionError, ValueError) as err:
        raise UsageError(
            f"the costs cannot be evaluated over {lo:g}..{hi:g}: {err}", fix="sweep a smaller range"
        ) from None
    if not all(math.isfinite(y) and y > 0 for y in ya + yb):
        raise UsageError(
            f"the costs are not finite and positive over {lo:g}..{hi:g}, so they have no log plot",
            fix="sweep a smaller range, or give the sizes the costs need",
        )
    crossovers: list[Crossover] = []
    for i in range(points - 1):
        d0, d1 = ya[i] - yb[i], ya[i + 1] - yb[i + 1]
        if d0 == 0 or (d0 > 0) == (d1 > 0):
            continue
        left, right = xs[i], xs[i + 1]
        for _ in range(_BISECTION_STEPS):
            mid = math.sqrt(left * right)
            if (float(fa(mid)) - float(fb(mid)) > 0) == (d0 > 0):
                left = mid
            else:
                right = mid
        at = math.sqrt(left * right)
        crossovers.append(Crossover(at, float(fa(at)), 0 if d1 < 0 else 1))
    exact: tuple[sympy.Expr, ...] = ()
    try:
        sols = sympy.solve(sympy.Eq(ea, eb), over)
        exact = tuple(s for s in sols if s.is_real and s.is_positive)
    except (NotImplementedError, TypeError, ValueError):
        exact = ()
    return CostCurves(over, xs, (ya, yb), tuple(crossovers), exact)


def _matplotlib() -> Any:
    """The matplotlib module, or a UsageError that says it is an optional extra."""
    try:
        import matplotlib
    except ImportError:
        raise UsageError(
            "drawing needs matplotlib, an optional extra: pip install 'shardalg[plot]'"
        ) from None
    return matplotlib


def _pyplot(backend: str) -> Any:
    matplotlib = _matplotlib()
    matplotlib.use(backend, force=True)
    import matplotlib.pyplot as plt

    return plt


# What makes two drawings of the same picture differ: the date in SVG and PDF metadata, and SVG's ids (clip
# paths, glyphs), hashed with a salt that is random unless set. Fixed, the same input writes the same file.
_NO_DATE: dict[str, dict[str, None]] = {
    ".svg": {"Date": None},
    ".pdf": {"CreationDate": None, "ModDate": None},
}
_SALT = {"svg.hashsalt": "shardalg"}


def save_figure(fig: Any, path: Path, **kw: Any) -> None:
    """``fig.savefig(path)`` with no date in the metadata and a fixed SVG id salt: the same bytes every run."""
    matplotlib = _matplotlib()
    metadata = _NO_DATE.get(path.suffix.lower())
    if metadata is not None:  # only the formats that take metadata (PGF's writer refuses the keyword)
        kw["metadata"] = metadata
    with matplotlib.rc_context(_SALT):
        fig.savefig(path, **kw)


def _pgf_texsystem() -> str:
    """The TeX engine matplotlib's PGF backend should measure text with."""
    for name in ("pdflatex", "lualatex", "xelatex"):
        if shutil.which(name) is not None:
            return name
    raise UsageError(
        "PGF output needs a LaTeX system (pdflatex) for text metrics; write .pdf or .png instead"
    )


def crossover_plot(
    cost_a: Any,
    cost_b: Any,
    *,
    over: sympy.Symbol,
    lo: float,
    hi: float,
    out: str | Path | None = None,
    values: Mapping[sympy.Symbol, float] | None = None,
    labels: Sequence[str] = ("plan A", "plan B"),
    unit: str = "s",
    title: str | None = None,
    ax: Any = None,
) -> CostCurves:
    """Draw both costs against ``over`` on log axes; mark each crossover and label the regions by the
    plan that is cheaper there. The caption (chip, mesh, sizes) is not drawn: it belongs to the document,
    whose ``\\caption`` numbers the figure (``shardalg plot`` prints one, :func:`latex_figure`).

    With ``out`` the picture is written, its format following the suffix (.png, .pdf, .pgf, .svg). With
    ``ax`` (a matplotlib Axes) the curves are drawn into it, for a figure of the caller's; ``out`` then
    saves that whole figure. One of the two is needed."""
    if out is None and ax is None:
        raise UsageError("crossover_plot needs out= (a picture file) or ax= (matplotlib axes to draw into)")
    if len(labels) != 2:
        raise UsageError("give exactly two labels, one per plan")
    path = Path(out) if out is not None else None
    backend = None
    if path is not None:
        backend = FORMATS.get(path.suffix.lower())
        if backend is None:
            raise UsageError(f"unknown picture format {path.suffix!r}; use one of {', '.join(FORMATS)}")
    _matplotlib()  # before the sweep: without the extra there is nothing to draw into
    curves = cost_curves(cost_a, cost_b, over=over, lo=lo, hi=hi, values=values)
    for what, s in (
        *(("label", label) for label in labels),
        ("title", title or ""),
        ("unit", unit),
    ):
        _drawable(s, what)
    if ax is not None:
        _draw(ax, curves, labels, unit, title, own_figure=False)
        if path is not None:
            save_figure(ax.figure, path)
        return curves
    rc = {**PAPER_RC, **({"pgf.texsystem": _pgf_texsystem()} if backend == "pgf" else {})}
    plt = _pyplot(backend or "agg")
    with plt.rc_context(rc):
        fig, own = plt.subplots(figsize=(6.4, 4.3))
        try:
            _draw(own, curves, labels, unit, title, own_figure=True)
            save_figure(fig, path)
        finally:
            plt.close(fig)
    return curves


def latex_figure(path: str | Path, caption: str) -> str:
    """A LaTeX figure that includes the picture at ``path`` under ``caption`` (escaped as running text): the
    document numbers it. A .pgf picture is ``\\input`` (its text set in the document's fonts), an .svg needs
    the ``svg`` package's ``\\includesvg``, the rest ``\\includegraphics``."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".pgf":
        include = rf"\input{{{p.as_posix()}}}"
    elif suffix == ".svg":
        include = rf"\includesvg[width=\linewidth]{{{p.with_suffix('').as_posix()}}}"
    else:
        include = rf"\includegraphics[width=\linewidth]{{{p.as_posix()}}}"
    return "\n".join(
        [
            r"\begin{figure}[htbp]",
            r"  \centering",
            f"  {include}",
            rf"  \caption{{{latex_escape_prose(caption)}}}",
            r"\end{figure}",
        ]
    )


def _drawable(s: str, what: str) -> None:
    """Text matplotlib will draw: between an even number of ``$`` it must be mathtext (checked with
    matplotlib's own parser, so a bad label is refused before drawing, not in the middle of it)."""
    from matplotlib import cbook, mathtext

    if not cbook.is_math_text(s):
        return
    try:
        mathtext.MathTextParser("path").parse(s)
    except ValueError as err:
        said = [line for line in str(err).splitlines() if line.strip()]
        raise UsageError(
            f"the {what} {s!r} is not mathtext matplotlib can draw: {said[-1] if said else 'a parse error'}",
            fix="escape a literal dollar as \\$, or write valid mathtext between the dollars",
        ) from None


# a region's label is about this tall, as a fraction of the axes' height
_LABEL_BAND = 0.08


def _free_band(curves: CostCurves, lo_x: float, hi_x: float, ylim: tuple[float, float]) -> tuple[float, str]:
    """Where a region's label goes, in axes fraction: at the top or at the bottom, whichever band no curve
    runs through between ``lo_x`` and ``hi_x`` (the farther from the curves when both or neither are free)."""
    lo, hi = ylim
    fracs = [
        (math.log(y) - lo) / (hi - lo)
        for k in (0, 1)
        for x, y in zip(curves.xs, curves.ys[k], strict=True)
        if lo_x <= x <= hi_x
    ]
    if not fracs:
        return 0.97, "top"
    top_gap, bottom_gap = 0.97 - max(fracs), min(fracs) - 0.03
    if top_gap >= _LABEL_BAND or top_gap >= bottom_gap:
        return 0.97, "top"
    return 0.03, "bottom"


def _draw(
    ax: Any,
    curves: CostCurves,
    labels: Sequence[str],
    unit: str,
    title: str | None,
    *,
    own_figure: bool,
) -> None:
    over = curves.over
    colors = ("tab:blue", "tab:orange")
    for k in (0, 1):
        ax.plot(curves.xs, curves.ys[k], color=colors[k], label=math_label(labels[k]), linewidth=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(as_mathtext(sympy.latex(over)))
    ax.set_ylabel(f"time ({unit})")
    ax.autoscale_view()
    y_lo, y_hi = (math.log(v) for v in ax.get_ylim())
    bounds = [curves.xs[0], *(c.at for c in curves.crossovers), curves.xs[-1]]
    regions = list(zip(bounds, bounds[1:], strict=False))
    for k, (lo_x, hi_x) in enumerate(regions):
        mid = math.sqrt(lo_x * hi_x)
        who = curves.cheaper(mid)
        ax.axvspan(lo_x, hi_x, color=colors[who], alpha=0.08)
        # the region's label: the plan's name (the legend has its description), kept inside its region - the
        # first against its left edge, the last against its right edge - so neighbours never overlap
        name = math_label(labels[who].split(":")[0].strip() or labels[who])
        x, dx, ha = mid, 0, "center"
        if len(regions) > 1 and k == 0:
            x, dx, ha = lo_x, 4, "left"
        elif len(regions) > 1 and k == len(regions) - 1:
            x, dx, ha = hi_x, -4, "right"
        y, va = _free_band(curves, lo_x, hi_x, (y_lo, y_hi))
        ax.annotate(
            f"{name} cheaper",
            (x, y),
            xycoords=ax.get_xaxis_transform(),
            xytext=(dx, 0),
            textcoords="offset points",
            ha=ha,
            va=va,
            fontsize=9,
            color=colors[who],
        )
    for c in curves.crossovers:
        ax.axvline(c.at, color="black", linestyle="--", linewidth=1)
        ax.plot([c.at], [c.cost], "ko")
        ax.annotate(
            "crossover " + as_mathtext(f"{sympy.latex(over)} = {c.at:.4g}"),
            (c.at, c.cost),
            textcoords="offset points",
            xytext=(6, -14),
            fontsize=9,
        )
    if title:
        ax.set_title(math_label(title))
    # under the axes, where neither a curve nor a region's label runs
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=9, frameon=False)
    if own_figure:
        ax.figure.tight_layout()
