"""Chips from text (every --hw): presets, NAME=VALUE pairs, TOML files with sources; each mistake a UsageError
that names the key or file and the fix; no user text evaluated."""

from __future__ import annotations

import builtins

import pytest
import sympy

from shardalg.algebra.mesh import Mesh
from shardalg.costs import hardware
from shardalg.costs.chipspec import chip_from_text
from shardalg.costs.plancost import cost
from shardalg.errors import UsageError


def test_a_preset_by_name():
    assert chip_from_text("TPU-v5p") is hardware.get("tpu-v5p")


def test_pairs_from_a_base_or_complete():
    chip = chip_from_text("base=tpu-v5p,hbm=96e9,W_ici=9e10")
    assert (
        chip.hbm_capacity.value == 96e9 and chip.ici_bandwidth.value == 9e10 and chip.flops.value == 4.59e14
    )
    assert chip.name == "tpu-v5p*" and chip.wrap == hardware.get("tpu-v5p").wrap
    assert chip.hbm_capacity.source == "given on the command line"
    mine = chip_from_text("C=4.6e14,W_hbm=2.8e12,hbm=96e9,W_ici=9e10,T_min=1e-6,wrap=length16,name=mine")
    assert mine.name == "mine" and mine.model == "ici" and mine.wraps(16) and not mine.wraps(8)
    gpu = chip_from_text("C=1e15,W_hbm=3e12,hbm=8e10,W_ici=9e11,T_min=2e-6,alpha=2e-6,beta=4.5e11,W_dcn=5e10")
    assert gpu.model == "alpha-beta"


def test_a_toml_file_with_sources(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        'name = "mine"\ndescription = "a test chip"\nC = {value = 4.6e14, source = "the spec sheet"}\n'
        "W_hbm = 2.8e12\nhbm = 96e9\nW_ici = 9e10\nT_min = 1e-6\nwrap = {lengths = [8, 16]}\n"
    )
    chip = chip_from_text(str(f))
    assert chip.flops.source == "the spec sheet" and chip.hbm_bandwidth.source == "user chip file mine.toml"
    assert chip.wraps(8) and chip.wraps(16) and not chip.wraps(4)
    # and it prices a collective like any chip
    assert cost(
        "AllGather_X(A[I_X, J])", mesh=Mesh.parse("X=8"), sizes="I=1024,J=1024", hw=chip
    ).seconds == pytest.approx(2 * 1024 * 1024 / 9e10)


@pytest.mark.parametrize(
    ("text", "message", "fix"),
    [
        ("C=4.6e14", "the chip on the command line lacks W_hbm, hbm, W_ici, T_min", "base=tpu-v5p"),
        ("base=tpu-v5p,flops=1e15,Cx=1", "unknown chip key 'Cx' on the command line", "spell the key"),
        ("base=tpu-v9", "names a preset, not 'tpu-v9'", None),
        (
            "base=tpu-v5p,C=1e",
            "chip key C on the command line needs a positive number, not '1e'",
            "e.g. C=4.6e14",
        ),
        ("base=tpu-v5p,C=-1", "needs a positive number", None),
        ("base=tpu-v5p,C=1,C=2", "chip key C is given twice", None),
        ("base=tpu-v5p,model=alpha-beta", "the alpha-beta model needs alpha and beta", "alpha=2e-6"),
        ("base=tpu-v5p,wrap=sometimes", "wrap on the command line is always, never, lengthN or cubesN", None),
        ("base=tpu-v5p,,C=1", "bad chip item ''", None),
        ("nope", "unknown hardware 'nope'", None),
        ("missing.toml", "cannot read the chip file missing.toml", "TOML file"),
    ],
)
def test_mistakes_name_the_key_and_the_fix(text, message, fix):
    with pytest.raises(UsageError) as err:
        chip_from_text(text)
    assert message in err.value.message
    if fix:
        assert fix in (err.value.fix or "")


def test_bad_toml_names_the_file_and_line(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("C = 4.6e14\nW_hbm = = 3\n")
    with pytest.raises(UsageError, match=r"bad.toml is not valid TOML: .*line 2"):
        chip_from_text(str(f))
    f.write_text('base = "tpu-v5p"\nC = {value = 1, unit = "x"}\n')
    with pytest.raises(UsageError, match="is a number or a table"):
        chip_from_text(str(f))


def test_no_chip_text_is_evaluated(monkeypatch):
    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("evaluated user text")

    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(sympy, "sympify", boom)
    for hostile in ("C=__import__('os')", "base=tpu-v5p,C=1e9*2", "C=1e9;import os", "hbm=0x10"):
        with pytest.raises(UsageError):
            chip_from_text(hostile)
