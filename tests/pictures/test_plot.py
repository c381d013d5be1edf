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
    crossover_plot(
        GATHER,
        REDUCE,
        over=D,
        lo=64,
        hi=65536,
        values=VALUES,
        out=out,
        labels=("AllGather weights", "AllReduce partials"),
    )
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


def test_draws_into_the_callers_axes(tmp_path):
    import matplotlib

    matplotlib.use("agg", force=True)
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2)
    try:
        curves = crossover_plot(
            GATHER,
            REDUCE,
            over=D,
            lo=64,
            hi=65536,
            values=VALUES,
            ax=right,
            labels=("AllGather_X(Y)", "AllReduce_X(Z)"),
            title="q4",
        )
        assert not left.lines and len(right.lines) >= 2  # only the given axes are drawn on
        assert right.get_title() == "q4"
        # drawn as math: the subscript lowered, the name upright
        assert [t.get_text() for t in right.get_legend().get_texts()] == [
            r"$\mathrm{AllGather}_{X}$(Y)",
            r"$\mathrm{AllReduce}_{X}$(Z)",
        ]
        # only the regions' labels and the crossover are written on the axes: the caption is the document's
        assert [t.get_text() for t in right.texts] == [
            r"$\mathrm{AllGather}_{X}$(Y) cheaper",
            r"$\mathrm{AllReduce}_{X}$(Z) cheaper",
            "crossover $D = 2048$",
        ]
        assert not right.figure.texts
        assert curves.crossovers[0].at == pytest.approx(2048, rel=1e-9)
    finally:
        plt.close(fig)
    with pytest.raises(UsageError, match="needs out= .* or ax="):
        crossover_plot(GATHER, REDUCE, over=D, lo=64, hi=65536, values=VALUES)


Q4_A = "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]"
Q4_B = "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]"


def test_plot_command_title_labels_caption_and_json(tmp_path, capsys):
    import json

    from shardalg.cli import main

    out = tmp_path / "q4.svg"
    code = main(
        [
            "plot",
            Q4_A,
            Q4_B,
            "--over",
            "D",
            "--range",
            "128:65536",
            "--mesh",
            "X=8",
            "--sizes",
            "B=1024,F=8192",
            "--hw",
            "tpu-v5p",
            "--regime",
            "comms",
            "--title",
            "Question 4",
            "--out",
            str(out),
            "--json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["labels"] == ["AllReduce_X(Z)", "AllGather_X(Y)"]  # the plans' own notation
    assert data["caption"] == "communication time on tpu-v5p; mesh X=8; B = 1024, F = 8192"
    assert data["title"] == "Question 4"
    (crossover,) = data["crossovers"]
    assert crossover["at"] == pytest.approx(2048, rel=1e-6)  # D = 2B, the book's answer
    assert crossover["cheaper_above"] == "AllReduce_X(Z)"
    assert data["latex_figure"].splitlines()[2:4] == [
        rf"  \includegraphics[width=\linewidth]{{{out.with_suffix('').as_posix()}}}".replace(
            "includegraphics", "includesvg"
        ),
        r"  \caption{communication time on tpu-v5p; mesh X=8; B = 1024, F = 8192}",
    ]
    svg = out.read_text()
    for text in ("Question 4", r"$\mathrm{AllReduce}_{X}$(Z)", r"$\mathrm{AllGather}_{X}$(Y)"):
        assert text in svg  # matplotlib keeps each text, as typed, in a comment beside its glyphs
    assert "tpu-v5p" not in svg  # the caption is not drawn in the picture: the document numbers it


def test_show_png_of_a_reducescatter_on_4x2(tmp_path, capsys):
    from shardalg.cli import main

    out = tmp_path / "rs.png"
    assert (
        main(
            [
                "show",
                "ReduceScatter_{X,K}(C[I, K]{U_X})",
                "--mesh",
                "X=4,Y=2",
                "--format",
                "png",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == f"{out}\n"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
