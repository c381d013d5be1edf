"""Pictures of a sharding: which block of a tensor lives on which device.

    >>> print(show(parse_tensor("A[I_X, J]{U_Y}"), Mesh(X=2, Y=2)))

draws the mesh as a grid (rows: the first half of the mesh axes, columns: the rest, each mixed-radix with
the first axis major), one cell per device, saying which block of every dim the device holds (``I1`` is block
1 of I's blocks, ``J`` the whole dim) and, for an unreduced tensor, which partial sum it holds (``+1``). A
second grid, for tensors of one or two dims, is the tensor's own block grid (as
``jax.debug.visualize_array_sharding`` draws it): each block lists the devices that hold it, replicas
separated by commas and the partial sums that add up to it joined by ``+``.

:func:`show_tikz` draws the device grid for LaTeX notes, and :func:`show_collective` a collective as a
before/after pair. The block arithmetic is :func:`device_blocks`, the same as the executor's.

A sub-axis (``A[I_{Y:(1)2}, J]`` on ``X=2, Y=4``) is drawn on the user's mesh: a device's coordinate along
``Y:(p)n`` is the digit ``(y // (|Y| / (p·n))) % n`` of its Y coordinate (:mod:`shardalg.algebra.factors`),
which is where the executor, running on the mesh refined into factors, puts the block.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from shardalg import limits
from shardalg.algebra.factors import factor_of
from shardalg.algebra.legality import check_or_raise
from shardalg.algebra.mesh import Mesh, a_mesh, as_mesh
from shardalg.algebra.statements import apply_statement
from shardalg.algebra.subaxes import refine, within
from shardalg.errors import ShardalgError, UnknownAxis, UsageError
from shardalg.notation.parse import parse_statement, parse_tensor
from shardalg.notation.plan import Step
from shardalg.notation.printing import text
from shardalg.notation.printing.latex import axis_latex
from shardalg.notation.syntax import Arrow, Collective, Tensor

__all__ = ["Block", "device_blocks", "show", "show_tikz", "show_collective"]

Coord = tuple[int, ...]


@dataclass(frozen=True)
class Block:
    """What one device holds: per dim (block index, number of blocks), and the partial-sum index among
    ``partials`` (1 when the tensor is not unreduced)."""

    dims: tuple[tuple[int, int], ...]
    partial: int
    partials: int


def _parent(mesh: Mesh, a: str) -> tuple[int, int, int]:
    """(index of the mesh axis, divisor, size): a device's coordinate along axis ``a`` is
    ``c[index] // divisor % size``; for a sub-axis ``Y:(p)n`` the divisor is ``|Y| / (p·n)``."""
    if a in mesh.names:
        i = mesh.names.index(a)
        return i, 1, mesh.shape[i]
    f = factor_of(a)
    if f is None or f.parent not in mesh.names:
        mesh[a]  # noqa: B018 -- raises UnknownAxis, saying why
        raise UnknownAxis(f"mesh axis {a} is not in the mesh ({', '.join(mesh.names)})")
    return mesh.names.index(f.parent), mesh.size(f.parent) // f.stop, f.size


def _digit(mesh: Mesh, c: Coord, a: str) -> int:
    """Device ``c``'s coordinate along axis ``a``, a mesh axis or a sub-axis of one."""
    i, div, n = _parent(mesh, a)
    return c[i] // div % n


def _rank(mesh: Mesh, c: Coord, axes: Sequence[str]) -> int:
    """Mixed-radix index of device ``c`` over ``axes``, the first axis major (the executor's)."""
    r = 0
    for a in axes:
        r = r * mesh.size(a) + _digit(mesh, c, a)
    return r


def _off(mesh: Mesh, c: Coord, axes: Sequence[str]) -> Coord:
    """``c`` with its digits along ``axes`` set to 0: the devices that differ only there share it."""
    out = list(c)
    for a in axes:
        i, div, _ = _parent(mesh, a)
        out[i] -= _digit(mesh, c, a) * div
    return tuple(out)


def _mesh_order(mesh: Mesh, axes: Sequence[str]) -> tuple[str, ...]:
    """``axes`` in the mesh's order, the sub-axes of one axis major first."""
    return tuple(sorted(axes, key=lambda a: (_parent(mesh, a)[0], -_parent(mesh, a)[1])))


def _subaxes(tensor: Tensor, mesh: Mesh) -> list[str]:
    """The sub-axes ``tensor`` names that are not axes of ``mesh`` itself."""
    return [a for a in tensor.used_axes if a not in mesh.names and factor_of(a) is not None]


def _checked(
    tensor: Tensor, mesh: Mesh, source: str | None = None, sizes: Mapping[str, int] | None = None
) -> Mesh:
    """The numeric mesh, once ``tensor`` is legal on it with ``sizes`` (the legality rules: known axes, each
    used once, no sub-axis overlapping its parent, the sub-axes of one axis nesting, every size divisible by
    its dim's shards: a block the picture cannot draw is refused, never dropped); an error carries ``source``
    (the text) for its caret."""
    try:
        m = a_mesh(mesh, "a picture")
        if not m.is_numeric:
            raise UsageError("show needs a mesh with numeric axis sizes, e.g. X=4,Y=2")
        limits.require("devices", m.devices, f"the mesh {', '.join(f'{a.name}={a.size}' for a in m)}")
        check_or_raise(tensor, m, sizes)  # refuses sub-axes that do not nest too: no refinement holds them
    except ShardalgError as err:
        if source is not None:
            err.with_source(source)
        raise
    return m


def device_blocks(tensor: Tensor, mesh: Mesh | str | Mapping[str, int]) -> dict[Coord, Block]:
    """For each device (mesh coordinates, row-major), the block of ``tensor`` it holds."""
    m = _checked(tensor, mesh)
    unreduced = _mesh_order(m, tensor.unreduced)
    out = {}
    for c in itertools.product(*(range(n) for n in m.shape)):
        dims = tuple((_rank(m, c, d.axes), m.group_size(d.axes)) for d in tensor.dims)
        out[c] = Block(dims, _rank(m, c, unreduced), m.group_size(unreduced))
    return out


# ------------------------------------------------------------------------------------ text
def _dim_part(label: str, index: int, parts: int, size: int | None) -> str:
    if size is not None:
        k = size // parts
        return f"{label}[{index * k}:{(index + 1) * k}]"
    return label if parts == 1 else f"{label}{index}"


def _cell(tensor: Tensor, b: Block, sizes: Mapping[str, int]) -> str:
    parts = [
        _dim_part(d.label, i, n, d.size if d.size is not None else sizes.get(d.label))
        for d, (i, n) in zip(tensor.dims, b.dims, strict=True)
    ]
    if b.partials > 1:
        parts.append(f"+{b.partial}")
    return " ".join(parts)


def _coord_label(mesh: Mesh, axes: Sequence[str], values: Sequence[int]) -> str:
    return ",".join(f"{a}={v}" for a, v in zip(axes, values, strict=True))


def _grid(rows: list[str], cols: list[str], cells: list[list[str]]) -> list[str]:
    """An ASCII table: row labels on the left, column labels on top."""
    lw = max((len(r) for r in rows), default=0)
    widths = [max(len(cols[j]), *(len(cells[i][j]) for i in range(len(rows)))) for j in range(len(cols))]
    rule = " " * lw + " +" + "+".join("-" * (w + 2) for w in widths) + "+"
    head = " " * lw + "  " + " ".join(f" {c:^{w}} " for c, w in zip(cols, widths, strict=True))
    lines = [head, rule]
    for label, row in zip(rows, cells, strict=True):
        lines.append(
            f"{label:>{lw}} |" + "|".join(f" {v:<{w}} " for v, w in zip(row, widths, strict=True)) + "|"
        )
    lines.append(rule)
    return lines


def _split(mesh: Mesh) -> tuple[tuple[str, ...], tuple[str, ...]]:
    half = len(mesh) // 2
    return mesh.names[:half], mesh.names[half:]


def _values(mesh: Mesh, axes: Sequence[str]) -> list[tuple[int, ...]]:
    return list(itertools.product(*(range(mesh.size(a)) for a in axes)))


def _device_grid(tensor: Tensor, m: Mesh, sizes: Mapping[str, int]) -> list[str]:
    blocks = device_blocks(tensor, m)
    row_axes, col_axes = _split(m)
    rows, cols = _values(m, row_axes), _values(m, col_axes)
    cells = []
    for r in rows:
        line = []
        for c in cols:
            at = dict(zip(row_axes + col_axes, r + c, strict=True))
            line.append(_cell(tensor, blocks[tuple(at[a] for a in m.names)], sizes))
        cells.append(line)
    row_labels = [_coord_label(m, row_axes, r) for r in rows] if row_axes else [""]
    return _grid(row_labels, [_coord_label(m, col_axes, c) for c in cols], cells)


def _block_grid(tensor: Tensor, m: Mesh) -> list[str]:
    """The tensor's blocks (rows: dim 0, columns: dim 1) with the devices holding each."""
    blocks = device_blocks(tensor, m)
    coords = list(blocks)
    holders: dict[tuple[int, ...], dict[int, list[int]]] = {}
    for rank, c in enumerate(coords):
        b = blocks[c]
        key = tuple(i for i, _ in b.dims)
        # devices summing to one copy: same block, same coordinates off the unreduced axes
        holders.setdefault(key, {}).setdefault(_off(m, c, tensor.unreduced), []).append(rank)

    def cell(key: tuple[int, ...]) -> str:
        return ", ".join("+".join(map(str, devs)) for devs in holders[key].values())

    d0 = tensor.dims[0]
    n0 = m.group_size(d0.axes)
    if len(tensor.dims) == 1:
        return _grid([""], [f"{d0.label}{i}" for i in range(n0)], [[cell((i,)) for i in range(n0)]])
    d1 = tensor.dims[1]
    n1 = m.group_size(d1.axes)
    return _grid(
        [f"{d0.label}{i}" for i in range(n0)],
        [f"{d1.label}{j}" for j in range(n1)],
        [[cell((i, j)) for j in range(n1)] for i in range(n0)],
    )


def _joined(axes: Sequence[str], word: Callable[[str], str] = str) -> str:
    """Axes side by side (``XY``), or separated by commas when a name has more than one letter; each written
    by ``word``."""
    return ("" if all(len(a) == 1 for a in axes) else ",").join(map(word, axes))


def _factor_line(m: Mesh, a: str) -> str:
    """What sub-axis ``a`` is: which digit of its parent's coordinate is a device's coordinate along it."""
    i, div, n = _parent(m, a)
    parent = m.names[i]
    digit = "c" if div == 1 else f"c // {div}"
    if div * n < m.shape[i]:  # below the major factor: keep the digit only
        digit = f"{digit} % {n}" if div == 1 else f"({digit}) % {n}"
    return f"{a} is a factor of {parent}={m.shape[i]}: a device at {parent}=c is at {a} = {digit}"


def _free(tensor: Tensor, m: Mesh) -> list[str]:
    """The mesh axes (or the factors of them) ``tensor`` does not use: it is replicated over them."""
    used = tensor.used_axes
    subs = _subaxes(tensor, m)
    if not subs:
        return [a for a in m.names if a not in used]
    r = refine(m, subs)
    return list(r.coarsen_axes(tuple(a for a in r.fine.names if not within(a, used, m))))


def _summary(tensor: Tensor, m: Mesh) -> list[str]:
    local = ", ".join(d.label if not d.axes else f"{d.label}/{m.group_size(d.axes)}" for d in tensor.dims)
    lines = [
        f"{text(tensor)} on the mesh {', '.join(f'{a.name}={a.size}' for a in m)}: local shape [{local}]"
    ]
    what = [_factor_line(m, a) for a in dict.fromkeys(_mesh_order(m, _subaxes(tensor, m)))]
    for d in tensor.dims:
        if d.axes:
            what.append(
                f"{d.label}k = block k of {m.group_size(d.axes)} (over {_joined(d.axes)}, {d.axes[0]} major)"
            )
    if tensor.unreduced:
        what.append(
            f"+k = partial sum k of {m.group_size(tensor.unreduced)}: the value is their sum over "
            f"{', '.join(tensor.unreduced)}"
        )
    free = _free(tensor, m)
    if free or tensor.invariant:
        what.append("replicated over " + ", ".join(free + [f"{a} (invariant)" for a in tensor.invariant]))
    return lines + [f"  {w}" for w in what]


def show(
    tensor: Tensor | str, mesh: Mesh | str | Mapping[str, int], sizes: Mapping[str, int] | None = None
) -> str:
    """A text picture of ``tensor`` on ``mesh``: the device grid, and the block grid for one or two dims."""
    t = _as_tensor(tensor)
    m = _checked(t, as_mesh(mesh), tensor if isinstance(tensor, str) else None, sizes)
    lines = _summary(t, m) + ["", "devices (what each holds):"] + _device_grid(t, m, sizes or {})
    if 1 <= len(t.dims) <= 2:
        ranks = "device numbers: row-major over " + ", ".join(m.names)
        lines += ["", f"blocks (who holds each; {ranks}):"] + _block_grid(t, m)
    return "\n".join(lines)


def _as_tensor(tensor: Tensor | str) -> Tensor:
    if isinstance(tensor, Tensor):
        return tensor
    return parse_tensor(tensor)


# ------------------------------------------------------------------------------------ TikZ
def _tex_cell(tensor: Tensor, b: Block) -> str:
    parts = [
        d.label if n == 1 else f"{d.label}_{{{i}}}" for d, (i, n) in zip(tensor.dims, b.dims, strict=True)
    ]
    body = r"\,".join(parts)
    if b.partials > 1:
        body += rf"\;{{+}}{b.partial}"
    return f"${body}$"


def _tikz_grid(t: Tensor, m: Mesh, *, dx: float = 0.0, caption: str | None = None) -> list[str]:
    """The device grid's TikZ commands, shifted right by ``dx`` (in grid units)."""
    blocks = device_blocks(t, m)
    row_axes, col_axes = _split(m)
    rows, cols = _values(m, row_axes), _values(m, col_axes)
    fill = ", fill=orange!15" if t.unreduced else ""
    out = []
    for j, c in enumerate(cols):
        out.append(rf"  \node at ({_n(dx + j)}, 0.75) {{${_tex_coord(col_axes, c)}$}};")
    for i, r in enumerate(rows):
        if row_axes:
            out.append(rf"  \node[anchor=east] at ({_n(dx - 0.55)}, {-i}) {{${_tex_coord(row_axes, r)}$}};")
        for j, c in enumerate(cols):
            at = dict(zip(row_axes + col_axes, r + c, strict=True))
            b = blocks[tuple(at[a] for a in m.names)]
            out.append(
                rf"  \draw[thick{fill}] ({_n(dx + j - 0.48)}, {-i - 0.4}) rectangle ({_n(dx + j + 0.48)}, {-i + 0.4});"
            )
            out.append(rf"  \node at ({_n(dx + j)}, {-i}) {{{_tex_cell(t, b)}}};")
    if caption is not None:
        out.append(rf"  \node[anchor=north west] at ({_n(dx - 0.5)}, {-len(rows) + 0.4}) {{{caption}}};")
    return out


def _n(x: float) -> str:
    """A coordinate without float noise: 3 for 3.0, 2.52 for 2.5200000000000005."""
    return f"{x:.4g}"


def _tex_tensor(t: Tensor) -> str:
    """The tensor in LaTeX for a caption that needs no amsmath (dtype upright via \\mathrm, not \\text)."""
    return "$" + t.latex().replace(r"\text{", r"\mathrm{") + "$"


_TIKZ_OPEN = r"\begin{tikzpicture}[x=2.2cm, y=0.9cm, every node/.style={font=\small}]"


def show_tikz(
    tensor: Tensor | str,
    mesh: Mesh | str | Mapping[str, int],
    *,
    caption: bool = True,
    sizes: Mapping[str, int] | None = None,
) -> str:
    """A ``tikzpicture`` of the device grid: one box per device with the blocks it holds (unreduced
    cells shaded). Self-contained: needs ``\\usepackage{tikz}`` and nothing else (no amsmath). ``sizes``
    are checked (a size its shards do not divide is refused), not drawn."""
    t = _as_tensor(tensor)
    m = _checked(t, as_mesh(mesh), tensor if isinstance(tensor, str) else None, sizes)
    body = _tikz_grid(t, m, caption=_tex_tensor(t) if caption else None)
    return "\n".join([_TIKZ_OPEN, *body, r"\end{tikzpicture}"])


def _tex_coord(axes: Sequence[str], values: Sequence[int]) -> str:
    return ",".join(f"{axis_latex(a)}={v}" for a, v in zip(axes, values, strict=True))


def _tex_sub(axes: Sequence[str], dim: str | None) -> str:
    """A collective's subscript in TeX: ``XY``, ``X,K``, ``\\mathrm{data}``, ``X,Y{:}(1)2``."""
    return ",".join([_joined(axes, axis_latex)] + ([axis_latex(dim)] if dim else []))


# ------------------------------------------------------------------------------------ collectives
def _sub(axes: Sequence[str], dim: str | None) -> str:
    sub = ",".join([_joined(axes)] + ([dim] if dim else []))
    return sub if len(sub) == 1 else "{" + sub + "}"


def _collective(
    stmt: object, m: Mesh, sizes: Mapping[str, int] | None
) -> tuple[Tensor, Tensor, str, tuple[str, ...], str | None]:
    """(before, after, op name, axes, dim)."""
    if isinstance(stmt, Step):
        if len(stmt.inputs) != 1:
            raise UsageError("show draws a collective's step before and after, not an einsum's")
        (before,) = stmt.inputs
        return before, stmt.output, stmt.op.value, tuple(stmt.axes), stmt.dim
    if isinstance(stmt, str):
        stmt = parse_statement(stmt)
    expr = stmt.expr if isinstance(stmt, Arrow) else stmt
    if not isinstance(expr, Collective) or not isinstance(expr.arg, Tensor):
        raise UsageError(
            "show draws a tensor, or one collective of a tensor and its result, e.g. AllGather_X(A[I_X, J]); "
            f"not {type(expr).__name__.lower()} {text(stmt)}",
            fix="draw each operand, or the collectives of its plan (shardalg plan)",
        )
    check_or_raise(stmt, m, sizes)  # the legality rules first: each refusal with its span and fix
    after = apply_statement(stmt, m, dict(sizes or {}))
    return expr.arg, after, expr.op.value, tuple(expr.axes), expr.dim


def _before_after(stmt: object, m: Mesh, sizes: Mapping[str, int] | None) -> tuple[Tensor, Tensor, str, str]:
    """(before, after, op name, subscript)."""
    before, after, op, axes, dim = _collective(stmt, m, sizes)
    return before, after, op, _sub(axes, dim)


def show_collective(
    stmt: object,
    mesh: Mesh | str | Mapping[str, int],
    *,
    format: str = "text",
    sizes: Mapping[str, int] | None = None,
) -> str:
    """A collective as a before/after pair of pictures (``format``: "text" or "tikz")."""
    m = as_mesh(mesh)
    if m is None:
        raise UsageError("show needs a mesh, e.g. X=4,Y=2")
    if format not in ("text", "tikz"):
        raise UsageError(f"unknown format {format!r}: text or tikz")
    try:
        before, after, op, axes, dim = _collective(stmt, m, sizes)
        _checked(before, m, sizes=sizes)
        _checked(after, m, sizes=sizes)
    except ShardalgError as err:  # the spans point into the statement's text: show the caret
        if isinstance(stmt, str):
            err.with_source(stmt)
        raise
    if format == "tikz":
        return _tikz_pair(before, after, m, op, _tex_sub(axes, dim))
    sub = _sub(axes, dim)
    return "\n".join(
        [
            "before:",
            show(before, m, sizes),
            "",
            f"    | {op}_{sub}",
            "    v",
            "",
            "after:",
            show(after, m, sizes),
        ]
    )


def _tikz_pair(before: Tensor, after: Tensor, m: Mesh, op: str, sub: str) -> str:
    """Before and after in one ``tikzpicture``, the collective's arrow between the two grids: side by side
    for a mesh of one or two columns, one above the other for a wider one (to stay within a page). ``sub``
    is the subscript in TeX (:func:`_tex_sub`)."""
    row_axes, col_axes = _split(m)
    cols, rows = len(_values(m, col_axes)), len(_values(m, row_axes))
    label = rf"$\mathbf{{{op}}}_{{{sub}}}$"
    if cols <= 2:
        dx = cols - 0.5 + 2.3 + (0.8 if row_axes else 0.0)
        mid = -(rows - 1) / 2
        start, end = cols - 0.5 + 0.1, dx - 0.5 - (0.9 if row_axes else 0.1)
        arrow = [
            rf"  \draw[-stealth, line width=1.5pt] ({_n(start)}, {_n(mid)}) -- ({_n(end)}, {_n(mid)})",
            rf"    node[midway, above] {{{label}}};",
        ]
        after_grid = _tikz_grid(after, m, dx=dx, caption="after: " + _tex_tensor(after))
    else:
        dy = rows + 2.2
        centre = (cols - 1) / 2
        top, bottom = -(rows - 1) - 1.15, -dy + 1.0
        arrow = [
            rf"  \draw[-stealth, line width=1.5pt] ({_n(centre)}, {_n(top)}) -- ({_n(centre)}, {_n(bottom)})",
            rf"    node[midway, right] {{{label}}};",
        ]
        after_grid = _tikz_grid(after, m, caption="after: " + _tex_tensor(after))
        after_grid = [r"  \begin{scope}[yshift=" + _n(-dy * 0.9) + "cm]", *after_grid, r"  \end{scope}"]
    body = [*_tikz_grid(before, m, caption="before: " + _tex_tensor(before)), *arrow, *after_grid]
    scale = "x=1.5cm" if cols <= 2 else "x=2.2cm"
    return "\n".join([_TIKZ_OPEN.replace("x=2.2cm", scale), *body, r"\end{tikzpicture}"])
