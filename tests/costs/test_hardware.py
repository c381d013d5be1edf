"""Hardware presets: every number has a source, the seeds' ratios hold, wraparound rules, user chips."""

from __future__ import annotations

import pytest

import shardalg
from shardalg.algebra.symbols import quantity
from shardalg.costs import hardware
from shardalg.costs.hardware import Chip, Sourced, WrapRule
from shardalg.errors import UsageError

EXPECTED = ("tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "h100", "h200", "b200")


def test_names_and_lookup():
    assert hardware.names() == EXPECTED
    assert hardware.get("TPU-V5E") is hardware.get("tpu-v5e")
    assert shardalg.hardware is hardware


def test_unknown_preset_lists_known_ones():
    with pytest.raises(UsageError, match="tpu-v5e"):
        hardware.get("tpu-v9")


@pytest.mark.parametrize("name", EXPECTED)
def test_every_number_has_a_source(name):
    chip = hardware.get(name)
    for key, number in chip.numbers().items():
        assert number.value > 0 and len(number.source) > 10, (name, key)
    assert chip.hbm_capacity.source
    assert set(chip.values()) == {quantity(k) for k in chip.numbers()}


def test_seed_ratios():
    v5p, v5e, h100 = hardware.get("tpu-v5p"), hardware.get("tpu-v5e"), hardware.get("h100")
    assert v5p.flops.value / v5p.ici_bandwidth.value == pytest.approx(2550)  # seed 000 / 002
    assert v5p.flops.value / v5p.dcn_bandwidth.value == pytest.approx(73_440)  # seed 002 cross-pod DP
    assert v5e.ici_bandwidth.value / 2 == pytest.approx(4.5e10)  # one-way per axis, seed 000
    assert v5e.hop_latency.value * v5e.ici_bandwidth.value / 2 == pytest.approx(45e3)  # the 45 kB
    assert 8 <= v5e.hbm_bandwidth.value / v5e.ici_bandwidth.value <= 10  # seed 002: beta ~ 8 (v5e/v6e)
    assert h100.alpha.value == 2e-6 and h100.link_bandwidth.value == 450e9  # seed 003
    assert hardware.get("tpu-v4p").ici_bandwidth.value == 9e10  # seed 000 problem 2


def test_default_models():
    assert {n: hardware.get(n).model for n in EXPECTED} == {
        "tpu-v4p": "ici",
        "tpu-v5e": "ici",
        "tpu-v5p": "ici",
        "tpu-v6e": "ici",
        "h100": "alpha-beta",
        "h200": "alpha-beta",
        "b200": "alpha-beta",
    }


@pytest.mark.parametrize(
    ("name", "size", "links", "wraps"),
    [
        ("tpu-v5e", 16, 1, True),
        ("tpu-v5e", 4, 1, False),
        ("tpu-v5e", 8, 1, False),
        ("tpu-v6e", 16, 1, True),
        ("tpu-v6e", 2, 1, False),
        ("tpu-v4p", 4, 1, True),
        ("tpu-v4p", 8, 1, True),
        ("tpu-v4p", 2, 1, False),
        ("tpu-v5p", 16, 2, True),
        ("tpu-v5p", 8, 3, False),
        ("tpu-v5p", 64, 3, True),
        ("h100", 8, 1, True),
    ],
)
def test_wraparound_rules(name, size, links, wraps):
    assert hardware.get(name).wraps(size, links) is wraps


def test_user_chip():
    chip = Chip(
        "mine",
        "a test chip",
        flops=Sourced(1e15, "made up for a test"),
        hbm_bandwidth=Sourced(1e12, "made up"),
        hbm_capacity=Sourced(1e10, "made up"),
        ici_bandwidth=Sourced(1e11, "made up"),
        hop_latency=Sourced(1e-6, "made up"),
        wrap=WrapRule(lengths=(8,)),
    )
    assert chip.wraps(8) and not chip.wraps(4)
    assert hardware.as_chip(chip) is chip
    assert chip.values()[quantity("C")] == 1e15
    assert "mine" in str(chip) and chip.to_json()["numbers"]["W_ici"]["value"] == 1e11


def test_bad_chip_numbers_and_models_are_usage_errors():
    with pytest.raises(UsageError):
        Sourced(-1.0, "negative")
    with pytest.raises(UsageError):
        Sourced(True, "a bool")  # type: ignore[arg-type]
    base = hardware.get("tpu-v5e")
    with pytest.raises(UsageError):
        Chip(
            "x",
            "y",
            base.flops,
            base.hbm_bandwidth,
            base.hbm_capacity,
            base.ici_bandwidth,
            base.hop_latency,
            model="carrier-pigeon",
        )
    with pytest.raises(UsageError):
        hardware.as_chip(42)  # type: ignore[arg-type]


def test_show_and_json():
    text = str(hardware.get("tpu-v5p"))
    assert "W_ici" in text and "2550" in text
    data = hardware.get("tpu-v5e").to_json()
    assert data["model"] == "ici" and "16" in data["wraparound"]
