"""Device grids drawn with matplotlib (PNG, SVG, PDF): which block of a tensor lives on which device.

    >>> from shardalg.pictures.grids import draw_show
    >>> draw_show("ReduceScatter_{X,K}(C[I, K]{U_X})", Mesh.parse("X=4,Y=2"), out="rs.png")

One box per device, laid out as the text picture of :mod:`shardalg.pictures.show` lays it out (rows: the first
half of the mesh axes, columns: the rest); each box says which block of every dim the device holds (``I1`` is
block 1 of I's blocks) and is coloured by that block, so devices holding the same block share a colour.
A partial sum is hatched and marked ``+k`` (partial sum k of those that add up to the value). A collective is
drawn as the grid before, an arrow named after the collective, and the grid after; a block region keeps its
colour on both sides. The block arithmetic is :func:`shardalg.pictures.show.device_blocks`, the executor's.

matplotlib is the optional ``[plot]`` extra, imported only when a picture is drawn.

Imports: :mod:`shardalg.algebra`, :mod:`shardalg.notation`, :mod:`shardalg.pictures.show`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

from shardalg.algebra.mesh import Mesh, a_mesh
from shardalg.algebra.shape import shape
from shardalg.errors import ParseError, UsageError
from shardalg.notation.parse import parse_tensor
from shardalg.notation.printing import latex
from shardalg.notation.printing.display import bytes_both
from shardalg.notation.syntax import Tensor

from .plot import PAPER_RC, _pyplot, as_mathtext, save_figure
from .show import Block, _as_tensor, _before_after, _checked, _split, _values, device_blocks

__all__ = ["PICTURE_FORMATS", "draw_tensor", "draw_show"]

PICTURE_FORMATS: dict[str, str] = {".png": "agg", ".svg": "svg", ".pdf": "pdf"}

# A region of the tensor: per dim the fraction [start, end) it covers. Same region, same colour.
Region = tuple[tuple[Fraction, Fraction], ...]


def _region(b: Block) -> Region:
    return tuple((Fraction(i, n), Fraction(i + 1, n)) for i, n in b.dims)


def _label(tensor: Tensor, b: Block) -> str:
    parts = [d.label if n == 1 else f"{d.label}{i}" for d, (i, n) in zip(tensor.dims, b.dims, strict=True)]
    return " ".join(parts) + (f"\n+{b.partial}" if b.partials > 1 else "")


def _palette(regions: Sequence[Region]) -> dict[Region, Any]:
    """One colour per region, in sorted order (deterministic), from a qualitative colour map."""
    import matplotlib

    ordered = sorted(set(regions))
    cmap = matplotlib.colormaps["tab20" if len(ordered) > 10 else "tab10"]
    return {r: cmap(k % cmap.N) for k, r in enumerate(ordered)}


def _text(node: object) -> str:
    """A title: the notation typeset as math (the LaTeX printer's output, as mathtext)."""
    return as_mathtext(latex(node))


def draw_tensor(
    ax: Any,
    tensor: Tensor | str,
    mesh: Mesh | str | Mapping[str, int],
    *,
    colours: Mapping[Region, Any] | None = None,
    title: str | None = None,
    sizes: Mapping[str, int] | None = None,
) -> None:
    """Draw ``tensor``'s device grid on ``mesh`` into the matplotlib axes ``ax``; with ``sizes`` (every dim's),
    the note under it gives each device's block in elements and bytes."""
    from matplotlib.patches import Rectangle

    t = _as_tensor(tensor)
    m = _checked(t, mesh, sizes=sizes)
    blocks = device_blocks(t, m)
    colours = colours or _palette([_region(b) for b in blocks.values()])
    row_axes, col_axes = _split(m)
    rows, cols = _values(m, row_axes), _values(m, col_axes)
    for i, r in enumerate(rows):
        for j, c in enumerate(cols):
            at = dict(zip(row_axes + col_axes, r + c, strict=True))
            b = blocks[tuple(at[a] for a in m.names)]
            partial = b.partials > 1
            ax.add_patch(
                Rectangle(
                    (j + 0.04, -i - 0.96),
                    0.92,
                    0.92,
                    facecolor=colours[_region(b)],
                    alpha=0.55,
                    edgecolor="black",
                    linewidth=1.2,
                    hatch="///" if partial else None,
                )
            )
            ax.text(
                j + 0.5,
                -i - 0.5,
                _label(t, b),
                ha="center",
                va="center",
                fontsize=9,
                # the hatching of a partial sum stops at the label
                bbox={"facecolor": "white", "alpha": 0.85, "edgecolor": "none", "pad": 1.5}
                if partial
                else None,
            )
    for j, c in enumerate(cols):
        ax.text(
            j + 0.5,
            0.12,
            ",".join(f"{a}={v}" for a, v in zip(col_axes, c, strict=True)),
            ha="center",
            va="bottom",
            fontsize=8,
            color="0.3",
        )
    for i, r in enumerate(rows):
        if row_axes:
            ax.text(
                -0.06,
                -i - 0.5,
                ",".join(f"{a}={v}" for a, v in zip(row_axes, r, strict=True)),
                ha="right",
                va="center",
                fontsize=8,
                color="0.3",
            )
    ax.set_xlim(-0.7 if row_axes else -0.1, len(cols) + 0.1)
    ax.set_ylim(-len(rows) - 0.1, 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    notes = [f"partial sums over {', '.join(t.unreduced)} hatched"] if t.unreduced else []
    if sizes and all(d.name in sizes for d in t.dims):
        info = shape(t, mesh=m, sizes=dict(sizes))
        local = " x ".join(f"{n:,}" for n in info.local_shape)
        notes.append(f"each device holds {local} elements, {bytes_both(info.bytes_per_device)}")
    note = "; ".join(notes)
    ax.set_title(title if title is not None else _text(t), fontsize=11)
    if note:
        ax.text(0.5, -0.02, note, transform=ax.transAxes, ha="center", va="top", fontsize=8, color="0.3")


def _figure(plt: Any, panels: int, mesh: Mesh) -> tuple[Any, list[Any]]:
    row_axes, col_axes = _split(mesh)
    cols = len(_values(mesh, col_axes))
    rows = len(_values(mesh, row_axes))
    width = max(2.5, 1.15 * cols + 0.8)
    height = max(1.8, 0.95 * rows + 1.2)
    if panels == 1:
        fig, ax = plt.subplots(figsize=(width, height))
        return fig, [ax]
    fig, axes = plt.subplots(
        1, 3, figsize=(2 * width + 1.8, height), gridspec_kw={"width_ratios": [width, 1.8, width]}
    )
    return fig, list(axes)


def draw_show(
    expr: object,
    mesh: Mesh,
    out: str | Path,
    *,
    sizes: Mapping[str, int] | None = None,
) -> Path:
    """Draw a tensor (``A[I_X, J]{U_Y}``) or one collective (before, arrow, after) to ``out``
    (.png, .svg or .pdf by its suffix)."""
    path = Path(out)
    backend = PICTURE_FORMATS.get(path.suffix.lower())
    if backend is None:
        raise UsageError(f"unknown picture format {path.suffix!r}; use one of {', '.join(PICTURE_FORMATS)}")
    m = a_mesh(mesh, "draw_show")
    tensor: Tensor | None = None
    if isinstance(expr, Tensor):
        tensor = expr
    elif isinstance(expr, str):
        try:
            tensor = parse_tensor(expr.strip())
        except ParseError:
            tensor = None
    plt = _pyplot(backend)
    with plt.rc_context(PAPER_RC):  # the notes' type: Computer Modern math, a serif for the text
        return _draw_show_in(plt, expr, tensor, m, path, sizes)


def _save(fig: Any, path: Path) -> None:
    """Lay the figure out and write it, with the titles and the note outside the axes."""
    fig.tight_layout()
    save_figure(fig, path, bbox_inches="tight", pad_inches=0.15)


def _draw_show_in(
    plt: Any, expr: object, tensor: Tensor | None, m: Mesh, path: Path, sizes: Mapping[str, int] | None
) -> Path:
    source = expr.strip() if isinstance(expr, str) else None  # an error shows its caret under the text
    if tensor is not None:
        _checked(tensor, m, source, sizes)
        fig, (ax,) = _figure(plt, 1, m)
        try:
            draw_tensor(ax, tensor, m, sizes=sizes)
            _save(fig, path)
        finally:
            plt.close(fig)
        return path
    before, after, op, sub = _before_after(expr, m, sizes)
    _checked(before, m, source, sizes)
    _checked(after, m, source, sizes)
    regions = [_region(b) for t in (before, after) for b in device_blocks(t, m).values()]
    colours = _palette(regions)
    fig, (left, middle, right) = _figure(plt, 3, m)
    try:
        draw_tensor(left, before, m, colours=colours, title="before: " + _text(before), sizes=sizes)
        draw_tensor(right, after, m, colours=colours, title="after: " + _text(after), sizes=sizes)
        middle.axis("off")
        middle.set_xlim(0, 1)
        middle.set_ylim(0, 1)
        middle.annotate(
            "",
            xy=(0.98, 0.5),
            xytext=(0.02, 0.5),
            arrowprops={"arrowstyle": "-|>", "linewidth": 2.5, "color": "black"},
        )
        middle.text(0.5, 0.58, op, ha="center", va="bottom", fontsize=12)
        middle.text(0.5, 0.42, as_mathtext(rf"\mathrm{{{op}}}_{{{sub}}}"), ha="center", va="top", fontsize=9)
        _save(fig, path)
    finally:
        plt.close(fig)
    return path
