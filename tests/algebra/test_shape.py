"""Shapes and memory: the seed's quick questions, symbolic sizes, dtypes, and a brute-force count of what
every device of a mesh really holds."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from fractions import Fraction
from math import prod

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shardalg.algebra.mesh import Mesh
from shardalg.algebra.shape import format_bytes, shape
from shardalg.algebra.symbols import axis_size, dim_size
from shardalg.errors import AxisUsedTwice, IndivisibleDim, UnknownAxis, UsageError
from shardalg.notation.syntax import Dim, DType, Tensor
from tests.shared import ROOT

# ---- seed 000, the quick questions -----------------------------------------------------------------


def test_fp32_1024x4096_as_I_XY_J_on_8x2():
    info = shape("A: fp32[I_XY, J] where I=1024, J=4096", "X=8,Y=2")
    assert info.global_shape == (1024, 4096)
    assert info.local_shape == (64, 4096)
    assert info.dtype is DType.FP32
    assert info.bytes_per_device == 2**20  # 1 MiB
    assert info.total_bytes == 16 * 2**20
    assert info.replication == 1
    assert shape("A: fp32[I_XY, J]", "X=8,Y=2", "I=1024,J=4096") == info
    assert shape("A: fp32[I_XY, J]", "X=8,Y=2", {"I": 1024, "J": 4096}) == info


def test_int8_128x2048_as_I_XY_J_on_2x8x2():
    info = shape("A: int8[I_XY, J] where I=128, J=2048", Mesh({"X": 2, "Y": 8, "Z": 2}))
    assert info.local_shape == (8, 2048)
    assert info.bytes_per_device == 16_384
    assert info.total_bytes == 512 * 1024  # 512 KiB
    assert info.replication == 2
    assert info.devices == 32
    # literal sizes need no where clause
    assert shape("A: int8[128_XY, 2048]", "X=2,Y=8,Z=2").bytes_per_device == 16_384


def test_replication_of_A_IX_J_K_on_4x8x2():
    assert shape("A[I_X, J, K]", "X=4,Y=8,Z=2").replication == 16


# ---- symbolic and numeric ---------------------------------------------------------------------------


def test_symbolic_sizes_stay_symbols():
    info = shape("A[I_X, J]", "X=4")
    i, j = dim_size("I"), dim_size("J")
    assert info.dtype is DType.BF16 and info.dtype_default
    assert info.local_shape == (i / 4, j)
    assert info.bytes_per_device == i * j / 2
    assert info.total_bytes == 2 * i * j
    assert info.to_json()["bytes_per_device"] == "I*J/2"


def test_symbolic_mesh_axis():
    info = shape("A: fp32[B_X, D] where B=1024, D=512", Mesh(X=None, Y=2))
    x = axis_size("X")
    assert info.local_shape == (1024 / x, 512)
    assert info.bytes_per_device == 4 * 1024 * 512 / x
    assert info.replication == 2
    assert info.devices == 2 * x


@pytest.mark.parametrize(
    ("dtype", "bytes_each"),
    [("fp32", 4), ("f32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1), ("int8", 1), ("int4", Fraction(1, 2))],
)
def test_dtypes(dtype, bytes_each):
    info = shape(f"A: {dtype}[I_X, J] where I=8, J=6", "X=2")
    assert info.bytes_per_device == 4 * 6 * bytes_each


def test_int4_odd_count_keeps_the_half_byte():
    info = shape("A: int4[3, 1]", "X=2")
    assert info.bytes_per_device == Fraction(3, 2)
    assert info.to_json()["bytes_per_device"] == "3/2"
    assert info.to_json()["total_bytes"] == 3


def test_unreduced_and_invariant_count_as_replicated():
    assert shape("A[I_X]{U_Y} where I=8", "X=2,Y=4").replication == 4
    global_bytes = shape("A[I] where I=8", "X=1").bytes_per_device  # 8 bf16 = 16 bytes
    assert shape("A[I_X]{U_Y} where I=8", "X=2,Y=4").total_bytes == 4 * global_bytes
    assert shape("A[I_X]{I_Y} where I=8", "X=2,Y=4").replication == 4
    assert shape("A[I_XY] where I=8", "X=2,Y=4").total_bytes == global_bytes


def test_json_contract():
    info = shape("A: fp32[I_XY, J] where I=1024, J=4096", "X=8,Y=2")
    out = info.to_json()
    assert out == {
        "tensor": "A: fp32[I_XY, J]",
        "mesh": {"X": 8, "Y": 2},
        "dtype": "fp32",
        "dtype_default": False,
        "bits_per_element": 32,
        "global_shape": [1024, 4096],
        "local_shape": [64, 4096],
        "bytes_per_device": 1048576,
        "total_bytes": 16777216,
        "replication": 1,
        "devices": 16,
    }
    json.dumps(out)


def test_human_output():
    assert str(shape("A: fp32[I_XY, J] where I=1024, J=4096", "X=8,Y=2")) == (
        "tensor            A: fp32[I_XY, J]\n"
        "mesh              X=8, Y=2 (16 devices)\n"
        "dtype             fp32\n"
        "global shape      fp32[1024, 4096]\n"
        "local shape       fp32[64, 4096]\n"
        "bytes per device  1,048,576 bytes (1.05 MB, 1 MiB)\n"
        "total bytes       16,777,216 bytes (16.8 MB, 16 MiB)\n"
        "replication       1"
    )


def test_format_bytes():
    # the one unit policy: exact, then decimal (GB = 10^9) and binary (GiB = 2^30) units, each labelled
    assert format_bytes(16_384) == "16,384 bytes (16.4 kB, 16 KiB)"
    assert format_bytes(1536) == "1,536 bytes (1.54 kB, 1.5 KiB)"
    assert format_bytes(1000) == "1,000 bytes (1 kB)"
    assert format_bytes(96 * 10**9) == "96,000,000,000 bytes (96 GB, 89.4 GiB)"
    assert (
        format_bytes(-503_621_834_752) == "-503,621,834,752 bytes (-504 GB, -469 GiB)"
    )  # a negative headroom
    assert format_bytes(999) == "999 bytes"
    assert format_bytes(1_073_000_000) == "1,073,000,000 bytes (1.07 GB, 1,023 MiB)"  # no 1.02e+03
    assert format_bytes(Fraction(3, 2)) == "3/2 bytes"


# ---- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "mesh", "error"),
    [
        ("A[I_X, J_X]", "X=2", AxisUsedTwice),
        ("A[I_Z, J]", "X=2", UnknownAxis),
        ("A[I_X, J] where I=5", "X=2", IndivisibleDim),
        ("A[I, J]", None, UsageError),
        ("A[I, J]; B[J]", "X=2", UsageError),
        ("A[I, J] · B[J, K]", "X=2", UsageError),
        ("A[I, J]", "X=two", UsageError),
    ],
)
def test_errors(source, mesh, error):
    with pytest.raises(error):
        shape(source, mesh)


def test_bad_sizes_text_is_a_usage_error():
    for bad in ("I=1024;J=2", "I=0", "I=abc", "I=1e3", "__import__('os')=1", "I=1,I=2"):
        with pytest.raises(UsageError):
            shape("A[I_X, J]", "X=2", bad)


def test_numeric_path_does_not_import_sympy():
    code = (
        "import sys\n"
        "from shardalg.algebra.shape import shape\n"
        "info = shape('A: fp32[I_XY, J] where I=1024, J=4096', 'X=8,Y=2')\n"
        "assert info.bytes_per_device == 2**20\n"
        "assert 'sympy' not in sys.modules, 'sympy was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


# ---- brute force: what every device holds -----------------------------------------------------------


@st.composite
def sharded(draw):
    names = ["X", "Y", "Z"][: draw(st.integers(1, 3))]
    sizes = {a: draw(st.integers(1, 4)) for a in names}
    ndims = draw(st.integers(1, 3))
    dims: list[list[str]] = [[] for _ in range(ndims)]
    placement = {}
    for a in draw(st.permutations(names)):
        where = draw(st.sampled_from(["R", "U"] + list(range(ndims))))
        placement[a] = where
        if isinstance(where, int):
            dims[where].append(a)
    dim_sizes = [prod(sizes[a] for a in axes) * draw(st.integers(1, 3)) for axes in dims]
    tensor = Tensor(
        "A",
        tuple(Dim(None, tuple(axes), size=n) for axes, n in zip(dims, dim_sizes, strict=True)),
        unreduced=tuple(a for a, w in placement.items() if w == "U"),
        dtype=draw(st.sampled_from([DType.FP32, DType.BF16, DType.INT8])),
    )
    return Mesh(sizes), tensor


@given(sharded())
def test_shape_matches_what_each_device_holds(case):
    mesh, tensor = case
    info = shape(tensor, mesh)
    full = tuple(d.size for d in tensor.dims)
    held = np.zeros(full, dtype=int)
    total = 0
    for coords in itertools.product(*(range(a.size) for a in mesh.axes)):
        at = dict(zip(mesh.names, coords, strict=True))
        index = []
        for d in tensor.dims:
            block, count = 0, 1
            for a in d.axes:  # X major: block = c_X·|Y| + c_Y
                block, count = block * mesh.size(a) + at[a], count * mesh.size(a)
            step = d.size // count
            index.append(slice(block * step, (block + 1) * step))
        local = held[tuple(index)]
        assert local.shape == info.local_shape
        held[tuple(index)] += 1
        total += local.size * tensor.dtype.bytes
    assert (held == info.replication).all()  # every element is held by `replication` devices
    assert total == info.total_bytes
    assert info.bytes_per_device * info.devices == info.total_bytes
