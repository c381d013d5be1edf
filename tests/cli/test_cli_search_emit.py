"""``search --emit-program FILE.sa`` (the winner as a program the other commands take as it is) and
``search --explain`` (why each named strategy lost, in numbers), issue 28 item 6."""

from __future__ import annotations

import json

import pytest

from shardalg.cli import main

MLP = "params W_in, W_out; In[B, D] * W_in[D, F] -> Tmp[B, F]; Tmp[B, F] * W_out[F, D] -> Out[B, D]"
ARGS = ["--mesh", "X=2,Y=2", "--sizes", "B=128,D=8192,F=32768", "--hw", "tpu-v5e"]


def _run(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    path = tmp_path_factory.mktemp("emit") / "winner.sa"
    assert main(["search", MLP, *ARGS, "--memory", "16GB", "--emit-program", str(path), "--json", "-q"]) == 0
    return path


def test_the_winner_file_is_taken_by_plan_backward_step_memory_and_export(emitted, capsys):
    """The search, then each command on the file alone (its mesh and sizes are lines of it): step's time and
    memory's bytes per device are the search's winner's."""
    code, out, _ = _run(capsys, ["search", MLP, *ARGS, "--memory", "16GB", "--json", "-q"])
    winner = json.loads(out)["winner"]
    text = emitted.read_text()
    assert "mesh X=2, Y=2" in text and "where B=128, D=8192, F=32768" in text and "no pipeline" in text
    f = str(emitted)
    code, out, _ = _run(capsys, ["plan", f, "--hw", "tpu-v5e"])
    assert code == 0 and out.count("# statement ") == 2 and "default plan" in out
    code, out, _ = _run(capsys, ["backward", f])
    assert code == 0 and "dW_in" in out and "dW_out" in out
    code, out, _ = _run(capsys, ["export", "jax", f])
    assert code == 0 and "shard_map" in out
    code, out, _ = _run(capsys, ["step", f, "--hw", "tpu-v5e", "--overlap", "steady", "--json"])
    assert code == 0 and json.loads(out)["step"]["seconds"] == pytest.approx(winner["seconds"], rel=1e-12)
    code, out, _ = _run(capsys, ["memory", f, "--json"])
    assert code == 0
    assert json.loads(out)["bytes_per_device"]["total"] == pytest.approx(
        winner["bytes_per_device"], rel=1e-12
    )


def test_plan_of_a_program_refuses_json(emitted, capsys):
    code, _, err = _run(capsys, ["plan", str(emitted), "--json"])
    assert code == 2 and "one statement, not 2" in err


def test_no_winner_writes_nothing_and_says_why(tmp_path, capsys):
    path = tmp_path / "none.sa"
    code, _, err = _run(capsys, ["search", MLP, *ARGS, "--memory", "1MB", "--emit-program", str(path), "-q"])
    assert code == 2 and "no candidate fits" in err and not path.exists()


def test_explain_gives_each_strategys_time_and_memory_against_the_winner_and_the_cap(capsys):
    code, out, _ = _run(
        capsys, ["search", MLP, *ARGS, "--memory", "300MB", "--mode", "infer", "--json", "-q", "--explain"]
    )
    assert code == 0
    data = json.loads(out)
    w = data["winner"]
    rows = {r["strategy"]: r for r in data["explain"]}
    assert set(rows) == set(data["strategies"])
    for name, r in rows.items():
        best = data["strategies"][name]
        assert r["bytes"] == best["bytes_per_device"] and r["cap"] == data["memory_cap"]
        assert r["over_cap"] == pytest.approx(max(0.0, best["bytes_per_device"] - data["memory_cap"]))
        assert r["memory_ratio"] == pytest.approx(best["bytes_per_device"] / w["bytes_per_device"])
        if best["seconds"] is not None:
            assert r["time_ratio"] == pytest.approx(best["seconds"] / w["seconds"])
        assert r["winner"] == (name == w["strategy"])
    over = [r for r in rows.values() if not r["fits"]]
    assert over and all(r["over_cap"] > 0 for r in over)  # DP and FSDP hold more than 300 MB of parameters
    code, out, _ = _run(
        capsys, ["search", MLP, *ARGS, "--memory", "300MB", "--mode", "infer", "-q", "--explain"]
    )
    assert "why each strategy lost" in out and "over the cap of 300 MB" in out and "the winner, " in out


OWN = """params W_in, W_out
mesh X=4
where B=128, D=1024, F=4096
In[B, D] * W_in[D, F] -> Tmp[B, F]
Tmp[B, F] * W_out[F, D] -> Out[B, D]
"""


def test_a_program_with_its_own_mesh_and_sizes_is_emitted_with_the_searchs_once(tmp_path, capsys):
    """The program's mesh X=4 and B=128, replaced by --mesh and --sizes: the file held both mesh and where
    lines (step refused it: a program declares its mesh at most once) and the printed winner the stale ones."""
    src, path = tmp_path / "mlp.sa", tmp_path / "winner.sa"
    src.write_text(OWN)
    argv = ["search", str(src), "--mesh", "X=2,Y=2", "--sizes", "B=64", "--hw", "tpu-v5e"]
    code, out, _ = _run(capsys, [*argv, "--emit-program", str(path), "--json", "-q"])
    assert code == 0
    data = json.loads(out)
    lines = data["winner_program"].splitlines()
    assert "mesh X=2, Y=2" in lines and "where B=64, D=1024, F=4096" in lines
    assert "mesh X=4" not in data["winner_program"] and "B=128" not in data["winner_program"]
    code, out, _ = _run(capsys, [*argv, "-q"])
    assert "\n  mesh X=2, Y=2\n" in out and "\n  where B=64, D=1024, F=4096" in out
    assert "  mesh X=4" not in out and "where B=128" not in out
    lines = path.read_text().splitlines()
    assert [x for x in lines if x.startswith(("mesh", "where"))] == [
        "mesh X=2, Y=2",
        "where B=64, D=1024, F=4096",
    ]
    code, out, err = _run(capsys, ["step", str(path), "--hw", "tpu-v5e", "--overlap", "steady", "--json"])
    assert code == 0, err
    assert json.loads(out)["step"]["seconds"] == pytest.approx(data["winner"]["seconds"], rel=1e-12)
    assert "replaces" not in err  # nothing of the file is replaced: it states what the search used
    code, out, _ = _run(capsys, ["memory", str(path), "--json"])
    assert code == 0
    assert json.loads(out)["bytes_per_device"]["total"] == pytest.approx(
        data["winner"]["bytes_per_device"], rel=1e-12
    )
    code, out, err = _run(capsys, ["plan", str(path), "--hw", "tpu-v5e"])
    assert code == 0 and out.count("# statement ") == 2, err
