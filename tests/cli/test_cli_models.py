"""``shardalg memory | fit | step | model``, and custom chips and mesh options on every command that takes
``--hw`` or ``--mesh``: exit codes, outputs, JSON contracts, help texts, clear errors."""

from __future__ import annotations

import argparse
import json

import pytest

from shardalg.cli import build_parser, main

FSDP = "params W_in, W_out\ntokens B\nIn[B_X, D] * W_in[D_X, F] -> H[B_X, F]\nH[B_X, F] * W_out[F_X, D] -> Out[B_X, D]"
SIZES = "B=1024,D=1024,F=4096"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def chip_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text(
        'name = "mine"\nC = {value = 4.6e14, source = "spec"}\nW_hbm = 2.8e12\nhbm = 96e9\n'
        "W_ici = 9e10\nT_min = 1e-6\nW_dcn = 6.25e9\n"
    )
    return str(f)


def test_memory_text_and_json(capsys):
    code, out, _ = run(capsys, "memory", FSDP, "--mesh", "X=4", "--sizes", SIZES, "--hw", "tpu-v5e")
    assert code == 0 and "params       4,194,304 bytes (4.19 MB, 4 MiB)" in out and "fits         yes" in out
    assert "note: optimizer: adam (default" in out
    code, out, _ = run(
        capsys,
        "memory",
        FSDP,
        "--mesh",
        "X=4",
        "--sizes",
        SIZES,
        "--hw",
        "tpu-v5e",
        "--json",
        "--optimizer",
        "sgd",
        "--remat",
        "block",
    )
    data = json.loads(out)
    assert data["bytes_per_device"]["optimizer"] == 0 and data["remat"]["policy"] == "block"
    assert data["params"] == 2 * 1024 * 4096 and data["fits"] is True


@pytest.mark.parametrize(("target", "sizes"), [("B", "D=1024,F=4096"), ("devices", SIZES), ("params", SIZES)])
def test_fit(capsys, target, sizes):
    code, out, _ = run(
        capsys,
        "fit",
        FSDP,
        "--mesh",
        "X=4",
        "--sizes",
        sizes,
        "--hw",
        "tpu-v5e",
        "--solve-for",
        target,
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["solve_for"] == target and isinstance(data["value"], float | int)
    assert data["steps"][-1]["label"] == "result"


def test_fit_slice_uses_the_chips_shapes(capsys):
    # ch. 8 (serving LLaMA 3-70B): the smallest v5e slice for the bf16 parameters is 4x4 (16 chips)
    from shardalg.models.expand import expand
    from shardalg.notation.printing import text

    program = text(expand("llama-3-70b", "decode"))
    code, out, _ = run(
        capsys,
        "fit",
        program,
        "--mesh",
        "X=1",
        "--sizes",
        "B=1,S=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "slice",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["slice"] == "4x4" and data["value"] == 16 and "TPU v5e" in data["slice_source"]
    code, out, _ = run(
        capsys,
        "fit",
        program,
        "--mesh",
        "X=1",
        "--sizes",
        "B=1,S=8192",
        "--hw",
        "tpu-v5e",
        "--solve-for",
        "slice",
        "--slices",
        "3x3,5x5",
    )
    assert code == 0 and "smallest allowed shape with at least 9 devices: 3x3" in out  # 141 GB + 2.7 GB of KV


def test_step_json(capsys):
    code, out, _ = run(
        capsys,
        "step",
        FSDP,
        "--mesh",
        "X=4",
        "--sizes",
        SIZES,
        "--hw",
        "tpu-v5p",
        "--mfu",
        "0.5",
        "--tokens",
        "1e9",
        "--json",
    )
    data = json.loads(out)
    assert code == 0 and data["mfu"] == 0.5 and data["days"] > 0 and data["overlap"] == "steady"
    # the MFU was given; the HBM and network efficiencies were not: each is said at peak
    assert [d["key"] for d in data["defaults"]] == [
        "layers",
        "mode",
        "remat",
        "overlap",
        "hbm",
        "network",
        "zero",
    ]
    assert data["efficiency"]["compute"]["source"] == "given" and data["efficiency"]["hbm"]["peak"] is True


def test_model_list_and_show(capsys):
    code, out, _ = run(capsys, "model", "list")
    assert code == 0 and out.splitlines()[0].startswith("llama-2-13b")
    code, out, _ = run(capsys, "model", "show", "llama-3-8b", "--params", "D=X", "--activations", "B=X")
    assert (
        code == 0
        and out.startswith("# llama-3-8b")
        and "AllGather_X(W_q[D_X, K, G, H]) -> W_q[D, K, G, H]" in out
    )
    from shardalg.notation.parse import parse

    assert parse(out).roles.params[0] == "W_q"  # the comments are comments: the output is a program
    code, out, _ = run(capsys, "model", "show", "mixtral-8x7b", "--format", "json")
    assert json.loads(out)["model"]["numbers"]["experts"]["value"] == 8


@pytest.mark.parametrize(
    ("show", "sizes"),
    [
        (["llama-3-8b", "--params", "D=X", "--activations", "B=X"], "B=8,T=4096"),
        (["mixtral-8x7b", "--phase", "decode", "--dtype", "int8"], "B=16,S=4096"),
    ],
)
def test_model_show_in_every_format_is_a_program_memory_reads_back(capsys, tmp_path, show, sizes):
    """The LaTeX printer's provenance and notes are `%` comments, LaTeX's own: `memory` reads the LaTeX
    (and Unicode) output as the same program as the text output, to the byte of its JSON."""
    got = {}
    for fmt in ("text", "unicode", "latex"):
        code, out, _ = run(capsys, "model", "show", *show, "--format", fmt)
        assert code == 0
        if fmt == "latex":
            assert out.startswith("% " + show[0]) and "\\begin{aligned}" in out
        path = tmp_path / f"model.{fmt}"
        path.write_text(out)
        code, out, err = run(
            capsys, "memory", str(path), "--mesh", "X=8", "--hw", "tpu-v5p", "--sizes", sizes, "--json"
        )
        assert code == 0, err
        got[fmt] = out
    assert got["latex"] == got["text"] and got["unicode"] == got["text"]


CHIPS = ["base=tpu-v5p,hbm=96e9,W_ici=9e10", "FILE"]
MESHES = ["X=4*2:ring", "X=4:line", "X=4:ring,Y=2"]
EINSUM = "X[B, D] · Y[D_X, F] -> Z[B, F]"
PLAN_SIZES = "B=512,D=8192,F=16384"


def _with_hw(chip: str, mesh: str, tmp: str) -> list[list[str]]:
    """One command line for every command that takes --hw (and --mesh)."""
    return [
        ["plan", EINSUM, "--mesh", mesh, "--sizes", PLAN_SIZES, "--hw", chip, "--all"],
        ["cost", "AllGather_X(A[I_X, J])", "--mesh", mesh, "--sizes", "I=1024,J=1024", "--hw", chip],
        [
            "compare",
            "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
            "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]",
            "--mesh",
            mesh,
            "--solve-for",
            "D",
            "--hw",
            chip,
        ],
        [
            "optimum",
            "AllGather_X(W_in[D_X, F_Y]) -> W_in[D, F_Y]; AllGather_Y(In[B_X, D_Y]) -> In[B_X, D]; "
            "In[B_X, D] · W_in[D, F_Y] -> Tmp[B_X, F_Y]",
            "--mesh",
            "X*2:ring,Y:line",
            "--over",
            "X",
            "--subject-to",
            "X*Y=N",
            "--hw",
            chip,
        ],  # symbolic sizes with numeric links and ring / line
        [  # FSDP's plan written out: which plan is cheapest depends on B, the size solved for
            "bound",
            "In[B_X, D] · AllGather_X(W[D_X, F]) -> Out[B_X, F]",
            "--mesh",
            mesh,
            "--solve-for",
            "B",
            "--hw",
            chip,
        ],
        [
            "plot",
            "X[B, D_X] ·_LOCAL Y[D_X, F] -> Z[B, F]{U_X}; AllReduce_X(Z[B, F]{U_X}) -> Z[B, F]",
            "X[B, D] · AllGather_X(Y[D_X, F]) -> Z[B, F]",
            "--over",
            "D",
            "--range",
            "128:65536",
            "--mesh",
            mesh,
            "--sizes",
            "B=1024,F=8192",
            "--hw",
            chip,
            "--out",
            f"{tmp}/plot.png",
        ],
        ["memory", FSDP, "--mesh", mesh, "--sizes", SIZES, "--hw", chip],
        ["fit", FSDP, "--mesh", mesh, "--sizes", "D=1024,F=4096", "--hw", chip, "--solve-for", "B"],
        ["step", FSDP, "--mesh", mesh, "--sizes", SIZES, "--hw", chip],
    ]


@pytest.mark.parametrize(
    ("chip", "mesh"), [(CHIPS[0], MESHES[0]), (CHIPS[1], MESHES[1]), (CHIPS[0], MESHES[2])]
)
def test_custom_chips_and_mesh_options_on_every_hw_command(capsys, tmp_path, chip_file, chip, mesh):
    pytest.importorskip("matplotlib")
    chip = chip_file if chip == "FILE" else chip
    for argv in _with_hw(chip, mesh, str(tmp_path)):
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)
        assert out


@pytest.mark.parametrize("mesh", ["X=4*2:ring", "X=4:line"])
def test_mesh_options_on_every_mesh_command(capsys, mesh):
    commands = [
        ["check", EINSUM, "--mesh", mesh],
        ["shape", "A[I_X, J]", "--mesh", mesh],
        ["simulate", "A[I_X, J] · B[J, K] -> C[I_X, K]", "--mesh", mesh],
        [
            "backward",
            "In[B_X, D] · W[D_X, F] -> Out[B_X, F]",
            "--mesh",
            mesh,
            "--sizes",
            "B=65536,D=1024,F=4096",
        ],
        [
            "verify",
            "In[B_X, D] · W[D, F] -> Out[B_X, F]",
            "dOut[B_X, F] · W[D, F] -> dIn[B_X, D]; In[B_X, D] ·_LOCAL dOut[B_X, F] -> dW[D, F]{U_X}; "
            "AllReduce_X(dW[D, F]{U_X}) -> dW[D, F]",
            "--mesh",
            mesh,
        ],
        ["export", "jax", "A[I, J_X] · B[J_X, K] -> C[I, K_X]", "--mesh", mesh],
        ["show", "A[I_X, J]", "--mesh", mesh],
        ["latex", EINSUM, "--mesh", mesh, "--plan"],
    ]
    for argv in commands:
        code, out, err = run(capsys, *argv)
        assert code == 0, (argv, err)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["memory", FSDP, "--mesh", "X=4", "--hw", "base=tpu-v5p,hbm=lots"],
            "chip key hbm on the command line needs "
            "a positive number, not 'lots' [usage]\n  fix: write a plain number, e.g. hbm=4.6e14",
        ),
        (
            ["cost", "AllGather_X(A[I_X, J])", "--mesh", "X=4", "--chip", "nothere.toml"],
            "cannot read the chip file nothere.toml",
        ),
        (["plan", EINSUM, "--mesh", "X=4:torus"], "unknown option :torus of mesh axis X"),
        (
            ["step", FSDP, "--mesh", "X=4", "--mfu", "2"],
            "the MFU is a fraction of peak FLOP/s in (0, 1], not 2.0",
        ),
        (
            ["fit", FSDP, "--mesh", "X=4", "--solve-for", "B"],
            "fit needs a chip for its HBM [usage]\n  fix: add --hw tpu-v5p",
        ),
        (
            ["memory", FSDP, "--mesh", "X=4", "--remat", "Q"],
            "--remat takes none, block, saved or activations",
        ),
    ],
)
def test_bad_chips_and_options_are_clear_errors(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert err.startswith("error: ") and len(err.splitlines()) <= 3  # one line, its caret or fix below


def test_a_bad_chip_file_names_the_fix(capsys, tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('C = 4.6e14\nhbm = "lots"\n')
    code, _, err = run(capsys, "memory", FSDP, "--mesh", "X=4", "--hw", str(f))
    assert code == 2 and f"chip key hbm in {f} needs a positive number, not 'lots'" in err and "fix:" in err


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@pytest.mark.parametrize("path", [("memory",), ("fit",), ("step",), ("model", "list"), ("model", "show")])
def test_every_new_subcommand_has_help_a_description_and_an_example(path):
    parser = build_parser()
    for name in path:
        parser = _subparsers(parser)[name]
    assert parser.description and parser.epilog and parser.epilog.startswith("examples:")
    for action in parser._actions:
        if not isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            assert action.help, (path, action.dest)
