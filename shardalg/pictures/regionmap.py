"""The strategy map as a picture, like the book's figures: a log-log plane over two of the map's parameters,
each point coloured by the strategy the symbolic map says is fastest there, each region labelled, and the
current point marked. Moving along an axis moves one symbol of that parameter (B for B/N), every other
symbol held at the current point: a map over B/N and F with a memory cap moves D*F/H with F.

    >>> from shardalg.pictures.regionmap import region_map
    >>> pic = region_map(sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes=...), "map.png")

The colours come from the map's own regions (their half-spaces in log coordinates, evaluated on a grid), not
from pricing the strategies again. matplotlib is an optional extra (``pip install shardalg[plot]``),
imported only when a picture is drawn.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sympy
from sympy import Expr

from shardalg.errors import UsageError
from shardalg.search.monotext import parameter

from .plot import FORMATS, PAPER_RC, _pyplot, save_figure

__all__ = ["RegionPicture", "region_map", "MAX_GRID"]

MAX_GRID = 1000  # grid points per axis (bounded work: the picture evaluates every region at every point)
COLORS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
)


@dataclass(frozen=True)
class RegionPicture:
    """What was drawn: the file, the two axes and their ranges, the strategies present with the share of the
    picture each covers, the labels written, the current point (None when none was marked)."""

    path: Path
    x: Expr
    y: Expr
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    shares: dict[str, float]
    labels: tuple[str, ...]
    point: tuple[float, float] | None
    winner_at_point: str | None


def _index(m: Any, p: Expr | str | None, default: int) -> int:
    params = list(m.parameters)
    if p is None:
        if default >= len(params):
            raise UsageError("a region picture needs two parameters; the map has one", rule="parameters")
        return default
    if isinstance(p, str):
        known = {s.name: s for q in params for s in q.free_symbols}
        known.setdefault("W", next((s for s in known.values() if s.name == "W_ici"), None))
        p = parameter(p, {k: v for k, v in known.items() if v is not None})
    for k, q in enumerate(params):
        if sympy.simplify(q - p) == 0:
            return k
    raise UsageError(
        f"{sympy.sstr(p)} is not a parameter of the map ({', '.join(map(sympy.sstr, params))})",
        rule="parameters",
    )


def _driver_column(coords: Any, i: int) -> np.ndarray:
    """How every parameter's log moves when parameter i's log moves by 1, its other parameters' symbols held:
    one symbol of parameter i (the one fewest parameters share: B in B/N) drives the move. So a picture over
    B/N and F keeps D, N and the cap H fixed and moves D*F/H with F, as the numbers would."""
    mono = coords.monos[i]
    uses = {s: sum(1 for m in coords.monos if m.powers.get(s, 0)) for s, _ in mono.exps}
    driver, k = min(mono.exps, key=lambda se: uses[se[0]])
    return np.array([float(m.powers.get(driver, 0)) / float(k) for m in coords.monos])


def _margins(regions: Sequence[Any], grid: np.ndarray) -> np.ndarray:
    """For each region, how deep each grid point (rows of log coordinates) lies inside it."""
    out = np.empty((len(regions), grid.shape[0]))
    for k, r in enumerate(regions):
        best = np.full(grid.shape[0], -np.inf)
        for poly in r.polyhedra:
            depth = np.full(grid.shape[0], np.inf)
            for a in poly:
                lam = np.array([float(v) for v in a.lam])
                depth = np.minimum(depth, -(grid @ lam + a.log_coef))
            best = np.maximum(best, depth)
        out[k] = best
    return out


def region_map(
    result: Any,
    out: str | Path,
    x: Expr | str | None = None,
    y: Expr | str | None = None,
    *,
    decades: float = 2.0,
    xlim: tuple[float, float] | None = None,
    ylim: tuple[float, float] | None = None,
    grid: int = 240,
    title: str | None = None,
) -> RegionPicture:
    """Draw the map of ``result`` (a :class:`~shardalg.search.ProgramMap` with a current point) over ``x``
    and ``y`` (default: its first two parameters), ``decades`` each side of the point unless ``xlim`` /
    ``ylim`` are given; the format follows the suffix of ``out`` (.png, .pdf, .svg)."""
    path = Path(out)
    backend = FORMATS.get(path.suffix.lower())
    if backend is None or backend == "pgf":
        raise UsageError(f"unknown picture format {path.suffix!r}; use .png, .pdf or .svg")
    if isinstance(grid, bool) or not isinstance(grid, int) or not 2 <= grid <= MAX_GRID:
        raise UsageError(f"the grid is 2 to {MAX_GRID} points per axis, not {grid!r}", rule="search-limit")
    if not (isinstance(decades, int | float) and 0 < decades <= 50):
        raise UsageError(
            f"decades is a reach in powers of ten in (0, 50], not {decades!r}", rule="parameters"
        )
    m = result.map
    ix, iy = _index(result, x, 0), _index(result, y, 1)
    if ix == iy:
        raise UsageError("the picture's two axes must be different parameters", rule="parameters")
    center = result.point()
    if center is None:
        missing = sorted(s.name for s in m.coords.symbols if s not in result.values)
        raise UsageError(
            f"a region picture holds the other parameters at the current point; no values for "
            f"{', '.join(missing)}",
            rule="parameters",
            fix="give --sizes, --mesh and --hw",
        )
    lims = []
    for i, lim in ((ix, xlim), (iy, ylim)):
        if lim is None:
            lims.append((center[i] - decades * math.log(10), center[i] + decades * math.log(10)))
        elif not (0 < lim[0] < lim[1]):
            raise UsageError(f"a range is (low, high) with 0 < low < high, not {lim!r}", rule="parameters")
        else:
            lims.append((math.log(lim[0]), math.log(lim[1])))
    gx, gy = (np.linspace(lo, hi, grid) for lo, hi in lims)
    mx, my = np.meshgrid(gx, gy)
    pts = np.tile(np.array(center, dtype=float), (mx.size, 1))
    for i, moved in ((ix, mx.ravel() - center[ix]), (iy, my.ravel() - center[iy])):
        pts += np.outer(moved, _driver_column(m.coords, i))
    regions = list(m.regions)
    margins = _margins(regions, pts)
    inside = margins.max(axis=0) > -1e-9
    parents = sorted({r.parent for r in regions}, key=[e.parent for e in m.entries].index)
    which = np.array([parents.index(r.parent) for r in regions])[margins.argmax(axis=0)]
    cat = np.where(inside, which, -1).reshape(mx.shape)
    shares = {p: float(np.mean(cat == k)) for k, p in enumerate(parents) if np.any(cat == k)}
    px, py = center[ix], center[iy]
    here = result.here.parent if result.here is not None else None
    plt = _pyplot(backend)
    with plt.rc_context(PAPER_RC):  # the notes' type: Computer Modern math, a serif for the text
        labels = _draw(
            plt,
            path,
            np.exp(gx),
            np.exp(gy),
            cat,
            parents,
            shares,
            (math.exp(px), math.exp(py)),
            here,
            (sympy.latex(m.parameters[ix]), sympy.latex(m.parameters[iy])),
            title,
        )
    return RegionPicture(
        path,
        m.parameters[ix],
        m.parameters[iy],
        tuple(math.exp(v) for v in lims[0]),
        tuple(math.exp(v) for v in lims[1]),
        shares,
        labels,
        (math.exp(px), math.exp(py)),
        here,
    )


def _label_spot(cat: np.ndarray, k: int, xs: np.ndarray, ys: np.ndarray) -> tuple[float, float]:
    """A point of category k near the middle of its pixels (in log space), inside the category."""
    rows, cols = np.nonzero(cat == k)
    r0, c0 = rows.mean(), cols.mean()
    j = int(np.argmin((rows - r0) ** 2 + (cols - c0) ** 2))
    return float(xs[cols[j]]), float(ys[rows[j]])


def _draw(
    plt: Any,
    path: Path,
    xs: np.ndarray,
    ys: np.ndarray,
    cat: np.ndarray,
    parents: list[str],
    shares: Mapping[str, float],
    point: tuple[float, float],
    here: str | None,
    names: tuple[str, str],
    title: str | None,
) -> tuple[str, ...]:
    from matplotlib.colors import ListedColormap

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    labels = []
    try:
        cmap = ListedColormap(["white"] + [COLORS[k % len(COLORS)] for k in range(len(parents))])
        ax.pcolormesh(
            xs,
            ys,
            cat + 1,
            cmap=cmap,
            vmin=0,
            vmax=len(parents),
            shading="nearest",
            alpha=0.35,
            rasterized=True,  # one image in a PDF or SVG, not a path per pixel (57,600 at the default grid)
        )
        if len(shares) > 1:
            ax.contour(xs, ys, cat, levels=np.arange(len(parents)) + 0.5, colors="black", linewidths=0.8)
        for k, p in enumerate(parents):
            if p in shares:
                lx, ly = _label_spot(cat, k, xs, ys)
                ax.text(
                    lx,
                    ly,
                    p,
                    ha="center",
                    va="center",
                    fontsize=13,  # Computer Modern has no bold text face: larger instead
                    color=COLORS[k % len(COLORS)],
                )
                labels.append(p)
        ax.plot([point[0]], [point[1]], marker="*", color="black", markersize=14, linestyle="none")
        ax.annotate(
            f"current point{f': {here}' if here else ''}",
            point,
            textcoords="offset points",
            xytext=(8, 8),
            fontsize=9,
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"${names[0]}$")
        ax.set_ylabel(f"${names[1]}$")
        ax.set_title(title or f"the fastest strategy over ${names[0]}$ and ${names[1]}$")
        fig.tight_layout()
        save_figure(fig, path)
    finally:
        plt.close(fig)
    return tuple(labels)
