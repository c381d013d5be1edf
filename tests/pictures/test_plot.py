"""The crossover plot: the crossover is found where the costs are equal, regions are labelled by the cheaper
plan, and the picture is written in each format (PGF only where a LaTeX system exists)."""

from __future__ import annotations

import shutil

import pytest
import sympy

from shardalg.errors import UsageError
from shardalg.pictures.plot import cost_curves, crossover_plot

pytest.importorskip("matplotlib", reason="matplotlib is the optional [plot] extra")

B, D, F, W = (sympy.Symbol(n, positive=True) for n in "B D F W".split())
GATHER = 2 * D * F / W  # seed 000 question 4, strategy 1 (comms)
REDUCE = 4 * B * F / W  # strategy 2 (comms)
VALUES = {B: 1024, F: 8192, W: 9e10}


def test_crossover_is_where_the_costs_meet():
    curves = cost_curves(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES)
    (c,) = curves.crossovers
    assert c.at == pytest.approx(2048, rel=1e-9)
    assert c.cheaper_above == 1  # above D = 2B the AllReduce of partials is cheaper
    assert curves.exact == (sympy.Integer(2048),) or float(curves.exact[0]) == pytest.approx(2048)
    assert curves.cheaper(100) == 0 and curves.cheaper(60000) == 1


def test_no_crossover_when_one_plan_always_wins():
    curves = cost_curves(GATHER, GATHER * 2, over=D, lo=1, hi=1e6, values=VALUES)
    assert curves.crossovers == ()
    assert curves.cheaper(10) == 0


def test_two_crossovers_are_both_found():
    # a - b = (D - 100)(D - 10000): two sign changes
    curves = cost_curves(D**2 + 1_000_000, 10_100 * D, over=D, lo=1, hi=1e6)
    assert [round(c.at) for c in curves.crossovers] == [100, 10000]


@pytest.mark.parametrize("suffix", [".png", ".pdf", ".svg"])
def test_writes_each_format(tmp_path, suffix):
    out = tmp_path / f"q4{suffix}"
    crossover_plot(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES, out=out,
                   labels=("AllGather weights", "AllReduce partials"))
    data = out.read_bytes()
    assert len(data) > 1000
    magic = {".png": b"\x89PNG", ".pdf": b"%PDF", ".svg": b"<?xml"}[suffix]
    assert data.startswith(magic)


def test_pgf_output(tmp_path):
    if shutil.which("pdflatex") is None:
        pytest.skip("PGF needs pdflatex for text metrics; not installed here")
    out = tmp_path / "q4.pgf"
    crossover_plot(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES, out=out)
    assert "pgfpicture" in out.read_text()


def test_png_shows_the_marked_crossover(tmp_path):
    """The crossover line is drawn: a dashed black vertical line at D = 2048 in the picture's data."""
    import matplotlib.image as mpimg

    out = tmp_path / "q4.png"
    crossover_plot(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES, out=out)
    img = mpimg.imread(out)
    dark = (img[..., :3].sum(axis=2) < 0.3).sum(axis=0)  # dark pixels per column
    assert dark.max() > img.shape[0] * 0.3  # a tall dark column exists: the vertical crossover line


def test_bad_inputs_raise_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="format"):
        crossover_plot(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES, out=tmp_path / "x.gif")
    with pytest.raises(UsageError, match="free symbols"):
        cost_curves(GATHER, REDUCE, over=D, lo=64, hi=65536, values={B: 1})
    with pytest.raises(UsageError, match="lo < hi"):
        cost_curves(GATHER, REDUCE, over=D, lo=10, hi=1, values=VALUES)
