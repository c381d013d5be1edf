"""The strategy map as a picture: the file is written, every strategy the map says wins in the plane is
coloured and labelled, the current point is marked in the region the map gives, and the colours are the
map's (a pixel's strategy is the one the symbolic map locates there)."""

from __future__ import annotations

import numpy as np
import pytest

import shardalg as sa
from shardalg.errors import UsageError

pytest.importorskip("matplotlib", reason="matplotlib is the optional [plot] extra")

MLP = "params W_in, W_out\nIn[B, D] * W_in[D, F] -> Tmp[B, F]\nTmp[B, F] * W_out[F, D] -> Out[B, D]"


@pytest.fixture(scope="module")
def v5p():
    return sa.strategy_map(MLP, mesh="X=4,Y=4,Z=4", hw="tpu-v5p", sizes={"B": 48000, "D": 8192, "F": 32768})


def test_picture_is_written_with_labels_and_the_point(v5p, tmp_path):
    import matplotlib.image as mpimg

    pic = sa.region_map(v5p, tmp_path / "map.png", decades=3)
    assert pic.path.stat().st_size > 10_000
    assert (
        set(pic.labels) == set(pic.shares) == {"DP", "TP", "TP kept", "FSDP kept", "FSDP+TP", "FSDP+TP kept"}
    )
    # every pixel but a few lies in some region: the cells of 'FSDP+TP kept' (its steady step minimized over X,
    # sums of phases compared by their largest terms) leave holes, 22 pixels of 9,600 (the forced
    # keep_gathered=True map has them too; a known gap of the region engine, issue 27)
    assert sum(pic.shares.values()) >= 1.0 - 23 / 9600
    assert pic.winner_at_point == "FSDP+TP" == v5p.here.parent
    assert pic.point == pytest.approx((750.0, 32768.0))
    assert pic.xlim == pytest.approx((0.75, 750_000)) and pic.ylim[0] == pytest.approx(32.768)
    image = mpimg.imread(pic.path)
    assert image.shape[0] > 100 and len(np.unique(image.reshape(-1, image.shape[-1]), axis=0)) > 20


def test_pixels_follow_the_map(v5p, tmp_path):
    """Points far inside the picture's DP and TP areas are located in DP and TP by the map itself."""
    pic = sa.region_map(v5p, tmp_path / "map.svg", "B/N", "F", xlim=(1.0, 1e6), ylim=(10.0, 1e8), grid=60)
    assert pic.path.read_text().startswith("<?xml")
    values = dict(v5p.values)
    (b,) = [s for s in values if s.name == "B"]
    (f,) = [s for s in values if s.name == "F"]
    n = values[next(s for s in values if s.name == "N")]
    assert v5p.map.winner({**values, b: 1e5 * n}) == "DP"  # large batch per device: DP, compute-bound
    assert v5p.map.winner({**values, b: 10 * n, f: 1e7}).startswith("TP")
    assert "DP" in pic.shares and "TP" in pic.shares


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"out": "map.gif"}, "unknown picture format"),
        ({"out": "map.png", "grid": 5000}, "the grid is 2 to"),
        ({"out": "map.png", "x": "B/N", "y": "B/N"}, "must be different"),
        ({"out": "map.png", "x": "B"}, "is not a parameter of the map"),
        ({"out": "map.png", "x": "D"}, "unknown name .D."),
        ({"out": "map.png", "xlim": (10, 1)}, "0 < low < high"),
        ({"out": "map.png", "decades": 0}, "decades is a reach"),
    ],
)
def test_refusals(v5p, tmp_path, kwargs, message):
    kwargs["out"] = tmp_path / kwargs["out"]
    with pytest.raises(UsageError, match=message):
        sa.region_map(v5p, **kwargs)


def test_no_point_no_picture(tmp_path):
    m = sa.strategy_map(MLP, names=("DP", "TP"))
    with pytest.raises(UsageError, match="holds the other parameters at the current point"):
        sa.region_map(m, tmp_path / "map.png")
