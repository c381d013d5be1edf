"""Issue 31's reproducers, each as a test: hostile chip files, missing extras, a symbolic layer count, a
non-finite memory cap, dims a program lacks. Each gives a clear error naming the problem and exit 2 (or the
right answer), never exit 3 and never a traceback."""

from __future__ import annotations

import os

import pytest

from shardalg.cli import main
from shardalg.costs.chipspec import chip_from_text
from shardalg.errors import FileError


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    return code, out, err


def _deep(path):
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")


def _binary(path):
    path.write_bytes(bytes([0x41, 0x20, 0xFF, 0xFE]) + os.urandom(3000))


def _huge_int(path):
    path.write_text('base = "tpu-v5p"\nhbm = ' + "9" * 400 + "\n")


def _over_digit_limit(path):
    path.write_text('base = "tpu-v5p"\nhbm = ' + "9" * 5000 + "\n")


HOSTILE_CHIP_FILES = [
    (_deep, "nests arrays or tables too deeply"),
    (_binary, "is not UTF-8 text (byte 0xff at offset 2)"),
    (_huge_int, "chip key hbm in {file} is too large for a number (400 digits)"),
    (_over_digit_limit, "holds an integer too long to read"),
]


@pytest.mark.parametrize(
    ("write", "message"), HOSTILE_CHIP_FILES, ids=["deep", "binary", "400-digits", "5000-digits"]
)
def test_a_hostile_chip_file_is_a_file_error(tmp_path, capsys, write, message):
    f = tmp_path / "chip.toml"
    write(f)
    with pytest.raises(FileError) as err:
        chip_from_text(str(f))
    assert message.format(file=f) in err.value.message and "chip.toml" in err.value.message
    code, out, err_text = run(capsys, "plan", "A[I_X, J]", "--mesh", "X=4", "--hw", str(f))
    assert code == 2 and out == "" and message.format(file=f) in err_text
