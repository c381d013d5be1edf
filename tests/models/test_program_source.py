"""The Python API reads a program as the CLI's PROGRAM argument does: notation text, a file (.sa, .tex, .txt)
or a model preset's name; a word that is none of these says which preset it is closest to (issue 29, item 1)."""

from __future__ import annotations

import pytest

import shardalg as sa
from shardalg.cli import main

ON = {"mesh": "X=64", "sizes": {"B": 64, "T": 4096}, "hw": "tpu-v5p", "remat": "block"}


def test_a_preset_name_is_the_preset_s_program():
    by_name = sa.memory("llama-3-70b", **ON)
    by_program = sa.memory(sa.expand("llama-3-70b"), **ON)
    assert by_name.params == 70_553_706_496
    assert by_name.parts == by_program.parts
    assert sa.step_time("llama-3-70b", **ON).seconds == sa.step_time(sa.expand("llama-3-70b"), **ON).seconds


def test_the_search_takes_a_preset_name_as_the_cli_does(capsys):
    where = {"mesh": "X=4", "sizes": {"B": 8, "T": 1024}, "hw": "tpu-v5p", "top": 1}
    by_name = sa.search("llama-3-8b", **where)
    assert by_name.to_json() == sa.search(sa.expand("llama-3-8b"), **where).to_json()
    argv = ["search", "llama-3-8b", "--mesh", "X=4", "--sizes", "B=8,T=1024", "--hw", "tpu-v5p", "--top", "1"]
    assert main([*argv, "--json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["winner"] == by_name.to_json()["winner"]
    with pytest.raises(sa.UsageError, match="did you mean llama-3-8b"):
        sa.search("llama-3-8c", **where)


def test_a_file_name_is_the_file_s_program(tmp_path, capsys):
    assert main(["model", "show", "llama-3-8b", "--params", "D=X", "--activations", "B=X"]) == 0
    path = tmp_path / "l8.sa"
    path.write_text(capsys.readouterr().out)
    from_file = sa.memory(str(path), **ON)
    fsdp = sa.shard(sa.expand("llama-3-8b"), params="D=X", activations="B=X")
    assert from_file.parts == sa.memory(fsdp, **ON).parts


@pytest.mark.parametrize(
    ("word", "error", "said"),
    [
        ("lama-3-70b", sa.UsageError, "did you mean llama-3-70b?"),
        ("missing.sa", sa.ShardalgError, "cannot read missing.sa: no such file"),
    ],
)
def test_a_word_that_names_nothing_is_refused_with_the_nearest(word, error, said):
    with pytest.raises(error) as err:
        sa.memory(word, **ON)
    assert said in str(err.value)
