"""Every preset number equals its cited source: one row per number.

A row is (chip, field, value, the quote the preset uses, its unit, other sources' quotes). The test checks
that the preset holds ``value``, that its source text quotes the used figure, marks it ``[used]`` and names
the URL, that the quoted figure times its unit is ``value`` (so a value that drifts from its quote fails),
and that a differing figure from another source is quoted too and marked as not used (both facts visible).
The quotes were read from the pages the URLs name (the book's chapters 2 and 12, Google Cloud's TPU pages,
NVIDIA's datasheets) and from the seeds (named in a source as the book or lecture they condense).
"""

from __future__ import annotations

import re

import pytest

from shardalg.costs import hardware
from shardalg.costs.hardware import WrapRule

BOOK_TPU = "https://jax-ml.github.io/scaling-book/tpus/"
BOOK_GPU = "https://jax-ml.github.io/scaling-book/gpus/"
SEED003 = "CS349E lecture 4"  # the alpha-beta lecture (seed 003), named as a reader knows it


def gc(v: str) -> str:
    return f"https://cloud.google.com/tpu/docs/{v}"


G, T, P = 1e9, 1e12, 1e15
HALF = 0.5  # NVIDIA quotes bf16 with sparsity; dense is half

# chip, field, value, used quote, unit, url of the used quote, other quotes (and whether they differ: those
# must be marked "not used")
ROWS = [
    ("tpu-v4p", "flops", 2.75e14, "2.75e14", 1, BOOK_TPU, [("275 teraflops (bf16 or int8)", False)]),
    ("tpu-v4p", "hbm_bandwidth", 1.2e12, "1.2e12", 1, BOOK_TPU, [("32 GiB, 1200 GBps", False)]),
    ("tpu-v4p", "hbm_capacity", 32e9, "32GB", G, BOOK_TPU, [("32 GiB, 1200 GBps", True)]),
    ("tpu-v4p", "ici_bandwidth", 9e10, "9e10", 1, BOOK_TPU, []),
    ("tpu-v4p", "hop_latency", 1e-6, "about 1 us", 1e-6, BOOK_TPU, []),
    ("tpu-v5e", "flops", 1.97e14, "1.97e14", 1, BOOK_TPU, [("197 TFLOPs", False)]),
    ("tpu-v5e", "hbm_bandwidth", 8.2e11, "8.2e11", 1, BOOK_TPU, [("819 GBps", True), ("8.1e11", True)]),
    ("tpu-v5e", "hbm_capacity", 16e9, "16GB", G, BOOK_TPU, [("16 GiB", True)]),
    ("tpu-v5e", "ici_bandwidth", 9e10, "9e10", 1, BOOK_TPU, [("400 GBps", True), ("4.5e10", False)]),
    ("tpu-v5e", "hop_latency", 1e-6, "about 1 us", 1e-6, BOOK_TPU, []),
    ("tpu-v5e", "dcn_bandwidth", 3.125e9, "3.125e9", 1, BOOK_TPU, [("6.4 Tbps", False)]),
    ("tpu-v5p", "flops", 4.59e14, "4.59e14", 1, BOOK_TPU, [("459", False)]),
    ("tpu-v5p", "hbm_bandwidth", 2.8e12, "2.8e12", 1, BOOK_TPU, [("2765 GBps", True)]),
    ("tpu-v5p", "hbm_capacity", 96e9, "96GB", G, BOOK_TPU, [("95 GiB", True)]),
    (
        "tpu-v5p",
        "ici_bandwidth",
        1.8e11,
        "1.8e11",
        1,
        BOOK_TPU,
        [("1200 GBps", True), ("C/W_ici = 2550", False)],
    ),
    ("tpu-v5p", "hop_latency", 1e-6, "about 1 us", 1e-6, BOOK_TPU, []),
    (
        "tpu-v5p",
        "dcn_bandwidth",
        6.25e9,
        "6.25e9",
        1,
        BOOK_TPU,
        [("50 Gbps", False), ("C/W_dcn = 73,440", False)],
    ),
    ("tpu-v6e", "flops", 9.2e14, "9.20e14", 1, BOOK_TPU, [("918 TFLOPs", True)]),
    ("tpu-v6e", "hbm_bandwidth", 1.6e12, "1.6e12", 1, BOOK_TPU, [("1638 GBps", True)]),
    ("tpu-v6e", "hbm_capacity", 32e9, "32GB", G, BOOK_TPU, [("32 GB", False)]),
    ("tpu-v6e", "ici_bandwidth", 1.8e11, "1.8e11", 1, BOOK_TPU, [("800 GBps", True)]),
    ("tpu-v6e", "hop_latency", 1e-6, "about 1 us", 1e-6, BOOK_TPU, []),
    ("tpu-v6e", "dcn_bandwidth", 1.25e10, "12.5e9", 1, BOOK_TPU, []),
    (
        "h100",
        "flops",
        9.895e14,
        "BFLOAT16 Tensor Core 1,979 teraFLOPS",
        T * HALF,
        "https://www.nvidia.com/en-us/data-center/h100/",
        [("9.9e14", True)],
    ),
    (
        "h100",
        "hbm_bandwidth",
        3.35e12,
        "GPU Memory Bandwidth 3.35TB/s",
        T,
        "https://www.nvidia.com/en-us/data-center/h100/",
        [("3.4e12", True)],
    ),
    (
        "h100",
        "hbm_capacity",
        80e9,
        "GPU Memory 80GB",
        G,
        "https://www.nvidia.com/en-us/data-center/h100/",
        [("80GB", False)],
    ),
    (
        "h100",
        "ici_bandwidth",
        9e11,
        "NVIDIA NVLink: 900GB/s",
        G,
        "https://www.nvidia.com/en-us/data-center/h100/",
        [("450 GB/s", False)],
    ),
    ("h100", "hop_latency", 2e-6, "alpha = 2 us", 1e-6, SEED003, []),
    ("h100", "alpha", 2e-6, "alpha = 2 us", 1e-6, SEED003, []),
    ("h100", "link_bandwidth", 4.5e11, "450 GB/s", G, SEED003, [("900GB/s", False)]),
    (
        "h100",
        "dcn_bandwidth",
        5e10,
        "400Gb/s",
        G / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-h100/",
        [],
    ),
    (
        "h200",
        "flops",
        9.895e14,
        "BFLOAT16 Tensor Core 1,979 TFLOPS",
        T * HALF,
        "https://www.nvidia.com/en-us/data-center/h200/",
        [("9.9e14", True)],
    ),
    (
        "h200",
        "hbm_bandwidth",
        4.8e12,
        "GPU Memory Bandwidth 4.8TB/s",
        T,
        "https://www.nvidia.com/en-us/data-center/h200/",
        [("4.8e12", False)],
    ),
    (
        "h200",
        "hbm_capacity",
        141e9,
        "GPU Memory 141GB",
        G,
        "https://www.nvidia.com/en-us/data-center/h200/",
        [("141GB", False)],
    ),
    (
        "h200",
        "ici_bandwidth",
        9e11,
        "NVIDIA NVLink: 900GB/s",
        G,
        "https://www.nvidia.com/en-us/data-center/h200/",
        [],
    ),
    ("h200", "hop_latency", 2e-6, "H100's alpha", 2e-6, SEED003, []),
    ("h200", "alpha", 2e-6, "H100's alpha", 2e-6, SEED003, []),
    (
        "h200",
        "link_bandwidth",
        4.5e11,
        "NVIDIA NVLink: 900GB/s",
        G * HALF,
        "https://www.nvidia.com/en-us/data-center/h200/",
        [],
    ),
    (
        "h200",
        "dcn_bandwidth",
        5e10,
        "400Gb/s",
        G / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-h200/",
        [],
    ),
    (
        "b200",
        "flops",
        2.25e15,
        "FP16/BF16 Tensor Core 36 PFLOPS",
        P / 8 * HALF,
        "https://www.nvidia.com/en-us/data-center/hgx/",
        [("2.3e15", True)],
    ),
    (
        "b200",
        "hbm_bandwidth",
        8e12,
        "64TB/s HBM3e bandwidth",
        T / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [("8.0e12", False)],
    ),
    (
        "b200",
        "hbm_capacity",
        180e9,
        "1,440GB total GPU memory",
        G / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [("192GB", True)],
    ),
    (
        "b200",
        "ici_bandwidth",
        1.8e12,
        "14.4TB/s aggregate bandwidth",
        T / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [],
    ),
    ("b200", "hop_latency", 2e-6, "H100's alpha", 2e-6, SEED003, []),
    ("b200", "alpha", 2e-6, "H100's alpha", 2e-6, SEED003, []),
    (
        "b200",
        "link_bandwidth",
        9e11,
        "14.4TB/s aggregate bandwidth",
        T / 8 * HALF,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [],
    ),
    (
        "b200",
        "dcn_bandwidth",
        5e10,
        "400Gb/s",
        G / 8,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [],
    ),
    # devices per NVLink domain: a DGX node's 8 GPUs
    (
        "h100",
        "node",
        8,
        "8x NVIDIA H100 Tensor Core GPUs",
        1,
        "https://www.nvidia.com/en-us/data-center/dgx-h100/",
        [],
    ),
    (
        "h200",
        "node",
        8,
        "8x NVIDIA H200 Tensor Core GPUs",
        1,
        "https://www.nvidia.com/en-us/data-center/dgx-h200/",
        [],
    ),
    (
        "b200",
        "node",
        8,
        "8x NVIDIA Blackwell GPUs",
        1,
        "https://www.nvidia.com/en-us/data-center/dgx-b200/",
        [],
    ),
]


def _number(quote: str) -> float:
    """The first number in a quote that is not part of a name: 'BFLOAT16 Tensor Core 1,979 teraFLOPS' -> 1979,
    '64TB/s HBM3e bandwidth' -> 64, 'alpha = 2 us' -> 2, "H100's alpha" -> 1 (no number)."""
    found = re.search(r"(?<![A-Za-z\d.,])\d[\d,]*(?:\.\d+)?(?:e\d+)?", quote)
    return float(found.group().replace(",", "")) if found else 1.0


def test_the_table_covers_every_number_of_every_preset():
    have = {(name, key) for name, chip in hardware.PRESETS.items() for key in _fields(chip)}
    assert have == {(r[0], r[1]) for r in ROWS}


def _fields(chip) -> list[str]:
    names = [
        "flops",
        "hbm_bandwidth",
        "hbm_capacity",
        "ici_bandwidth",
        "hop_latency",
        "alpha",
        "link_bandwidth",
        "dcn_bandwidth",
        "node",
    ]
    return [n for n in names if getattr(chip, n) is not None]


@pytest.mark.parametrize(
    ("chip", "field", "value", "quote", "unit", "url", "others"), ROWS, ids=[f"{r[0]}-{r[1]}" for r in ROWS]
)
def test_preset_number_equals_its_source(chip, field, value, quote, unit, url, others):
    number = getattr(hardware.get(chip), field)
    assert number.value == pytest.approx(value, rel=1e-12)
    assert _number(quote) * unit == pytest.approx(value, rel=1e-12), "the quoted figure is not the value"
    assert f"'{quote}'" in number.source or quote in number.source
    assert url in number.source
    if url != SEED003:
        assert f"'{quote}' [used]" in number.source
    for other, differs in others:
        assert other in number.source, other
        if differs:  # a figure the preset does not use is quoted, and marked as not used
            after = number.source[number.source.index(f"'{other}'") :]
            assert after[len(other) + 2 :].startswith(" [") and "not used" in after[: after.index("]")], other


def test_vendor_pages_are_named_for_every_tpu_number_that_differs():
    v5e, v5p = hardware.get("tpu-v5e"), hardware.get("tpu-v5p")
    assert gc("v5e") in v5e.hbm_bandwidth.source and "'819 GBps' [not used" in v5e.hbm_bandwidth.source
    assert gc("v5p") in v5p.hbm_capacity.source and "'95 GiB' [not used" in v5p.hbm_capacity.source
    assert v5p.hbm_capacity.value == 96e9  # the book's 96 GB (issue 13), not the vendor's 95 GiB


# ---- the wraparound rule -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "size", "links", "wraps"),
    [
        ("tpu-v5p", 8960, 3, True),  # the full pod, 16x20x28, written as one axis on its 3 physical axes
        ("tpu-v5p", 8960, 1, True),
        ("tpu-v5p", 6144, 3, True),  # 16x16x24, the largest slice
        ("tpu-v5p", 128, 3, True),  # 4x4x8: 'any multiple of a full cube'
        ("tpu-v5p", 32, 3, False),  # 2x4x4: no full cube, no optical wraparound
        ("tpu-v5p", 8, 3, False),
        ("tpu-v4p", 4096, 3, True),  # the v4 superpod 16x16x16
        ("tpu-v5e", 256, 2, True),  # the 16x16 pod as one axis
        ("tpu-v5e", 128, 2, False),  # 8x16: only the long side wraps, so the flattened axis is no ring
        ("tpu-v6e", 16, 1, True),
        ("tpu-v6e", 8, 1, False),
    ],
)
def test_wraparound_at_full_size(name, size, links, wraps):
    assert hardware.get(name).wraps(size, links) is wraps


def test_wrap_rule_sources_quote_the_book():
    assert (
        "'Any multiple of a full cube (e.g. 4x4x4 or 4x4x8) will have wraparounds'"
        in hardware.get("tpu-v5p").wrap.source
    )
    assert "axis of size 16" in hardware.get("tpu-v6e").wrap.source
    rule = WrapRule(lengths=(8, 16))
    assert rule.wraps(128, 2) and not rule.wraps(64 * 3, 2) and rule.wraps(8 * 16 * 16, 3)
