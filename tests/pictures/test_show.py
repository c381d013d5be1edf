"""Pictures of shardings: the block arithmetic against the executor, the text grids pinned, TikZ compiled."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.errors import IllegalSharding, UsageError
from shardalg.notation.parse import parse_tensor as T
from shardalg.notation.syntax import Tensor
from shardalg.pictures.show import device_blocks, show, show_collective, show_tikz
from tests.shared.latex import pdflatex

README_PERMUTE = "Permute_{X,Y:(1)2}(A[I_{X,Y:(2)2}, J]) -> A[I_Y, J]"  # the README's sub-axis plan


@st.composite
def layouts(draw: st.DrawFn) -> tuple[Mesh, str]:
    names = ["X", "Y", "Z"][: draw(st.integers(1, 3))]
    mesh = Mesh({n: draw(st.sampled_from([1, 2, 3])) for n in names})
    order = draw(st.permutations(names))
    where = {a: draw(st.sampled_from(["I", "J", "U", "R"])) for a in order}
    dims = [
        d + ("_" + "".join(a for a in order if where[a] == d) if any(where[a] == d for a in order) else "")
        for d in ("I", "J")
    ]
    u = [f"U_{a}" for a in names if where[a] == "U"]
    return mesh, f"A[{', '.join(dims)}]" + ("{" + ", ".join(u) + "}" if u else "")


@given(layouts())
def test_blocks_are_the_executors(case: tuple[Mesh, str]) -> None:
    """Cut a dense array with the executor and read each device's block off device_blocks: equal."""
    from shardalg.numeric.execute import shard

    mesh, text = case
    t = T(text)
    n = {"I": 2 * mesh.devices, "J": mesh.devices}
    dense = np.arange(n["I"] * n["J"], dtype=float).reshape(n["I"], n["J"])
    bufs = shard(dense, t, mesh)
    sums: dict[tuple, np.ndarray] = {}
    for c, b in device_blocks(t, mesh).items():
        (i, pi), (j, pj) = b.dims
        block = dense[i * n["I"] // pi : (i + 1) * n["I"] // pi, j * n["J"] // pj : (j + 1) * n["J"] // pj]
        if b.partials == 1:
            assert np.array_equal(bufs[c], block)
        else:  # the partials of one copy add up to the block
            copy = tuple(v for a, v in zip(mesh.names, c, strict=True) if a not in t.unreduced)
            sums[copy + (i, j)] = sums.get(copy + (i, j), 0) + bufs[c]
            assert 0 <= b.partial < b.partials
    for key, total in sums.items():
        i, j = key[-2:]
        some = next(b for b in device_blocks(t, mesh).values() if (b.dims[0][0], b.dims[1][0]) == (i, j))
        (_, pi), (_, pj) = some.dims
        assert np.allclose(
            total, dense[i * n["I"] // pi : (i + 1) * n["I"] // pi, j * n["J"] // pj : (j + 1) * n["J"] // pj]
        )


def test_unreduced_grid_is_pinned() -> None:
    assert show("A[I_X, J]{U_Y}", Mesh(X=2, Y=2)) == "\n".join(
        [
            "A[I_X, J]{U_Y} on the mesh X=2, Y=2: local shape [I/2, J]",
            "  Ik = block k of 2 (over X, X major)",
            "  +k = partial sum k of 2: the value is their sum over Y",
            "",
            "devices (what each holds):",
            "        Y=0       Y=1   ",
            "    +---------+---------+",
            "X=0 | I0 J +0 | I0 J +1 |",
            "X=1 | I1 J +0 | I1 J +1 |",
            "    +---------+---------+",
            "",
            "blocks (who holds each; device numbers: row-major over X, Y):",
            "     J0  ",
            "   +-----+",
            "I0 | 0+1 |",
            "I1 | 2+3 |",
            "   +-----+",
        ]
    )


def test_three_axes_and_x_major_blocks() -> None:
    out = show(T("A[I_XY, J]{U_Z}"), Mesh(X=2, Y=2, Z=2))
    assert "X=0 | I0 J +0 | I0 J +1 | I1 J +0 | I1 J +1 |" in out
    assert "X=1 | I2 J +0 | I2 J +1 | I3 J +0 | I3 J +1 |" in out
    assert "I3 | 6+7 |" in out
    yx = show(T("A[I_YX, J]"), Mesh(X=2, Y=2))
    assert "X=0 | I0 J | I2 J |" in yx  # Y major: block c_Y * 2 + c_X


def test_replicas_and_partials_in_one_block() -> None:
    out = show("C[I, K]{U_X}", Mesh(X=2, Y=2))
    assert "I0 | 0+2, 1+3 |" in out  # two copies (Y), each the sum of two partials (X)
    assert "replicated over Y" in out


def test_sizes_give_index_ranges_and_rank_three_has_no_block_grid() -> None:
    out = show("A[I_X, J]", Mesh(X=4), sizes={"I": 1024, "J": 8})
    assert "| I[0:256] J[0:8] | I[256:512] J[0:8] |" in out
    assert "blocks" not in show("A[B_X, S, D_Y]", Mesh(X=2, Y=2))


INDIVISIBLE = "dim I has size 10, not divisible by |X| = 4"  # as check words it


@pytest.mark.parametrize(
    "draw",
    [
        lambda: show("A[I_X, J]", Mesh(X=4), sizes={"I": 10}),
        lambda: show_tikz("A[I_X, J]", Mesh(X=4), sizes={"I": 10}),
        lambda: show_collective("AllGather_X(A[I_X, J])", Mesh(X=4), sizes={"I": 10}),
        lambda: show_collective("AllGather_X(A[I_X, J])", Mesh(X=4), format="tikz", sizes={"I": 10}),
    ],
    ids=["text", "tikz", "collective", "collective-tikz"],
)
def test_sizes_the_mesh_does_not_divide_are_refused(draw) -> None:
    """I=10 on X=4: the picture drew I[0:2] ... I[6:8] and lost I[8:10]; refused, as check refuses it."""
    with pytest.raises(IllegalSharding, match=INDIVISIBLE) as err:
        draw()
    assert err.value.fix == "replicate I: A[I, J], or make its size a multiple of 4"


@pytest.mark.parametrize("expr", ["A[I_X, J]", "AllGather_X(A[I_X, J])"])
def test_a_drawn_picture_refuses_sizes_the_mesh_does_not_divide(tmp_path: Path, expr: str) -> None:
    pytest.importorskip("matplotlib")
    from shardalg.pictures.grids import draw_show

    with pytest.raises(IllegalSharding, match=INDIVISIBLE):
        draw_show(expr, Mesh(X=4), tmp_path / "grid.png", sizes={"I": 10})
    assert not (tmp_path / "grid.png").exists()


def test_collective_pair() -> None:
    out = show_collective("AllGather_X(A[I_X, J])", Mesh(X=2, Y=2))
    before, after = out.split("    | AllGather_X\n    v")
    assert "X=1 | I1 J | I1 J |" in before
    assert "I0 | 0, 1, 2, 3 |" in after
    rs = show_collective("ReduceScatter_{X,K}(C[I, K]{U_X})", Mesh(X=2))
    assert "| ReduceScatter_{X,K}" in rs and "| I K0 | I K1 |" in rs


def test_bad_input() -> None:
    with pytest.raises(IllegalSharding):
        show("A[I_X, J_X]", Mesh(X=2))
    with pytest.raises(IllegalSharding):
        show("A[I_Q, J]", Mesh(X=2))
    with pytest.raises(UsageError):
        show("A[I_X, J]", Mesh(X=None))
    with pytest.raises(UsageError):
        show_collective("A[I_X, J] * B[J, K] -> C[I_X, K]", Mesh(X=2))


def test_tikz_shapes() -> None:
    tex = show_tikz("A[I_X, J]{U_Y}", Mesh(X=2, Y=2))
    assert tex.startswith(r"\begin{tikzpicture}") and tex.endswith(r"\end{tikzpicture}")
    assert tex.count(r"\draw[thick, fill=orange!15]") == 4
    assert r"\node at (1, -1) {$I_{1}\,J\;{+}1$};" in tex
    pair = show_collective("ReduceScatter_{X,K}(C[I, K]{U_X})", Mesh(X=4, Y=2), format="tikz")
    assert pair.count(r"\begin{tikzpicture}") == 1  # one picture: before, the arrow, after
    lines = pair.splitlines()
    arrow = next(n for n, line in enumerate(lines) if r"\draw[-stealth" in line)
    before = [n for n, line in enumerate(lines) if r"{+}" in line]
    after = [n for n, line in enumerate(lines) if "K_{" in line]
    assert max(before) < arrow < min(after)  # drawn between the two grids
    assert lines[arrow] == r"  \draw[-stealth, line width=1.5pt] (1.6, -1.5) -- (3.2, -1.5)"  # at mid height
    assert lines[arrow + 1] == r"    node[midway, above] {$\mathbf{ReduceScatter}_{X,K}$};"


def test_tikz_compiles(tmp_path: Path) -> None:
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed")
    body = "\n\n".join(
        [
            show_tikz("A: fp32[I_XY, J]{U_Z}", Mesh(X=2, Y=2, Z=2)),
            show_collective("ReduceScatter_{X,K}(C[I, K]{U_X})", Mesh(X=4, Y=2), format="tikz"),
            show_collective("AllToAll_{X,J}: A[I_X, J] -> A[I, J_X]", Mesh(X=4), format="tikz"),
            show_collective(README_PERMUTE, "X=2,Y=4", format="tikz"),
            show_tikz("A[I_{data}, J]{U_{model}}", "data=2,model=2"),
        ]
    )
    # self-contained: tikz and nothing else (no amsmath, no TikZ library)
    doc = "\\documentclass{article}\n\\usepackage{tikz}\n\\begin{document}\n" + body + "\n\\end{document}\n"
    run = pdflatex(tmp_path, "pic", doc, timeout=120)
    if "tikz.sty' not found" in run.stdout:
        pytest.skip("the TeX installation has no tikz")
    assert run.returncode == 0, run.stdout[-2000:]
    assert (tmp_path / "pic.pdf").stat().st_size > 1000


# ------------------------------------------------------------------------------------ sub-axes


def _executor_buffers(t: Tensor, mesh: Mesh, dense: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """The executor's placement of ``dense`` by ``t``, keyed by coordinates of ``mesh`` (the executor runs a
    sub-axis on the refined mesh; a coarse coordinate is the factors' digits, major first)."""
    from shardalg.algebra.factors import is_subaxis
    from shardalg.algebra.subaxes import refine
    from shardalg.numeric.execute import shard

    r = refine(mesh, [a for a in t.used_axes if is_subaxis(a)])
    bufs = shard(dense, r.expand(t), r.fine)
    out = {}
    for fine, buf in bufs.items():
        digits = dict(zip(r.fine.names, fine, strict=True))
        coarse = []
        for a in mesh.names:
            parts = dict(r.parts).get(a)
            if parts is None:
                coarse.append(digits[a])
            else:
                v = 0
                for f in parts:
                    v = v * f.size + digits[f.name]
                coarse.append(v)
        out[tuple(coarse)] = buf
    return out


@pytest.mark.parametrize(
    ("text", "mesh"),
    [
        ("A[I_{Y:(1)2}, J]", "X=2,Y=4"),
        ("A[I_{Y:(2)2}, J]", "X=2,Y=4"),
        ("A[I_{X,Y:(2)2}, J]", "X=2,Y=4"),
        ("A[I_{Y:(2)2,X}, J_{Y:(1)2}]", "X=2,Y=4"),
        ("A[I_{Y:(2)2}, J]{U_{Y:(1)2}}", "X=2,Y=4"),
        ("A[I_{Z:(2)2}, J_X]{U_{Z:(4)2}}", "X=2,Z=8"),
        ("A[I_{Y:(1)2}, J_{Y:(2)3}]", "Y=6"),
    ],
)
def test_subaxis_blocks_are_the_executors(text: str, mesh: str) -> None:
    """A sub-axis is a digit of its parent's coordinate: device_blocks puts each block where the executor does
    (partial sums of one copy adding up to the block)."""
    t, m = T(text), Mesh.parse(mesh)
    n = {"I": 4 * m.devices, "J": 2 * m.devices}
    dense = np.arange(n["I"] * n["J"], dtype=float).reshape(n["I"], n["J"])
    bufs = _executor_buffers(t, m, dense)
    blocks = device_blocks(t, m)
    assert set(blocks) == set(bufs)
    parts: dict[tuple[int, int], dict[int, np.ndarray]] = {}
    wholes: dict[tuple[int, int], np.ndarray] = {}
    for c, b in blocks.items():
        (i, pi), (j, pj) = b.dims
        block = dense[i * n["I"] // pi : (i + 1) * n["I"] // pi, j * n["J"] // pj : (j + 1) * n["J"] // pj]
        if b.partials == 1:
            assert np.array_equal(bufs[c], block), c
        else:  # one block and partial index, one part of the executor's; the parts add up to the block
            assert np.array_equal(parts.setdefault((i, j), {}).setdefault(b.partial, bufs[c]), bufs[c]), c
            wholes[i, j] = block
    for key, by_partial in parts.items():
        assert len(by_partial) == blocks[next(iter(blocks))].partials
        assert np.allclose(sum(by_partial.values()), wholes[key])


def test_subaxis_single_tensor_text_is_pinned() -> None:
    assert show("A[I_{Y:(1)2}, J]", "X=2,Y=4") == "\n".join(
        [
            "A[I_{Y:(1)2}, J] on the mesh X=2, Y=4: local shape [I/2, J]",
            "  Y:(1)2 is a factor of Y=4: a device at Y=c is at Y:(1)2 = c // 2",
            "  Ik = block k of 2 (over Y:(1)2, Y:(1)2 major)",
            "  replicated over X, Y:(2)2",
            "",
            "devices (what each holds):",
            "      Y=0    Y=1    Y=2    Y=3  ",
            "    +------+------+------+------+",
            "X=0 | I0 J | I0 J | I1 J | I1 J |",
            "X=1 | I0 J | I0 J | I1 J | I1 J |",
            "    +------+------+------+------+",
            "",
            "blocks (who holds each; device numbers: row-major over X, Y):",
            "         J0     ",
            "   +------------+",
            "I0 | 0, 1, 4, 5 |",
            "I1 | 2, 3, 6, 7 |",
            "   +------------+",
        ]
    )


def test_subaxis_whole_axis_and_partials() -> None:
    # Y:(1)4 of Y=4 is Y itself: refused with the fix to write Y, as shape, check and simulate refuse it
    with pytest.raises(IllegalSharding, match="is the whole of Y=4: write Y"):
        device_blocks(T("A[I_{Y:(1)4}, J]"), Mesh(X=2, Y=4))
    out = show("A[I_{Y:(2)2}, J]{U_{Y:(1)2}}", "X=2,Y=4")
    assert "X=0 | I0 J +0 | I1 J +0 | I0 J +1 | I1 J +1 |" in out
    assert "I0 | 0+2, 4+6 |" in out  # two copies (X), each the sum of the two partials (Y's major half)
    assert "replicated over X" in out and "Y:(1)2" in out


def test_readme_subaxis_permute_text_and_tikz() -> None:
    out = show_collective(README_PERMUTE, "X=2,Y=4")
    before, after = out.split("    | Permute_{X,Y:(1)2}\n    v")
    assert "X=0 | I0 J | I1 J | I0 J | I1 J |" in before  # block x·2 + (y % 2)
    assert "X=1 | I2 J | I3 J | I2 J | I3 J |" in before
    assert "X=0 | I0 J | I1 J | I2 J | I3 J |" in after
    assert "X=1 | I0 J | I1 J | I2 J | I3 J |" in after
    tex = show_collective(README_PERMUTE, "X=2,Y=4", format="tikz")
    assert r"\mathbf{Permute}_{X,Y{:}(1)2}" in tex  # the colon braced, as the LaTeX printer writes it
    assert tex.count(r"\draw[thick]") == 16
    assert r"\node at (3, -1) {$I_{3}\,J$};" in tex  # before: device x=1, y=3 holds block 3


def test_subaxis_tikz_single_tensor() -> None:
    tex = show_tikz("A[I_{Y:(1)2}, J]", "X=2,Y=4")
    assert tex.count(r"\draw[thick]") == 8
    assert r"\node at (2, 0) {$I_{1}\,J$};" in tex
    assert r"\node at (1, -1) {$I_{0}\,J$};" in tex
    assert r"{$A[I_{Y{:}(1)2}, J]$}" in tex  # the caption


def test_tikz_axis_names_upright() -> None:
    """An axis name of several letters is upright, as the LaTeX printer writes it (``\\text{data}``), set
    with ``\\mathrm`` so the picture still needs no amsmath; one letter stays italic, as in the printer."""
    from shardalg.notation.printing import latex

    assert r"\text{data}" in latex(T("A[I_{data}, J]"))
    tex = show_tikz("A[I_{data}, J]", "data=2,model=2")
    assert r"{$\mathrm{data}=0$}" in tex and r"{$\mathrm{model}=1$}" in tex
    assert "$data=" not in tex and "$model=" not in tex
    assert r"{$X=0$}" in show_tikz("A[I_X, J]", "X=2,Y=2")
    pair = show_collective("AllGather_{data}(A[I_{data}, J])", "data=2", format="tikz")
    assert r"\mathbf{AllGather}_{\mathrm{data}}" in pair


def test_subaxis_bad_input_is_a_shardalg_error() -> None:
    with pytest.raises(IllegalSharding):  # overlaps its parent
        show("A[I_{Y:(1)2}, J_Y]", "X=2,Y=4")
    with pytest.raises(IllegalSharding):  # not a factor of Y=4
        show_tikz("A[I_{Y:(1)3}, J]", "X=2,Y=4")
    with pytest.raises(UsageError, match="do not nest"):  # no refinement of Y=6 holds both
        show("A[I_{Y:(1)2}, J_{Y:(3)2}]", "Y=6")
