"""A flat mesh larger than a GPU chip's node is placed into nodes, the last axis innermost, and said
(:mod:`shardalg.costs.nodes`); the chip presets and chip text carry the node (:mod:`shardalg.costs.hardware`,
:mod:`shardalg.costs.chipspec`)."""

from __future__ import annotations

import warnings

import pytest

import shardalg
from shardalg.algebra.mesh import Mesh
from shardalg.costs import hardware
from shardalg.costs.chipspec import chip_from_pairs, chip_from_toml
from shardalg.costs.nodes import _HOW, place_in_nodes, subaxis_parents
from shardalg.errors import NoteWarning, UsageError

H100 = hardware.get("h100")
GATHER = "AllGather_X(A[I_X, J])"
SIZES = "I=4096,J=4096"


# ---- the presets and chip text -----------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "node"), [("h100", 8), ("h200", 8), ("b200", 8)])
def test_gpu_presets_carry_their_nvlink_domain_with_a_source(name: str, node: int) -> None:
    chip = hardware.get(name)
    assert chip.devices_per_node == node
    assert chip.node is not None and "[used]" in chip.node.source and "nvidia.com" in chip.node.source


@pytest.mark.parametrize("name", ["tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e"])
def test_tpu_presets_have_no_node(name: str) -> None:
    assert hardware.get(name).devices_per_node is None


def test_the_node_is_shown_with_its_source() -> None:
    assert "node   = 8" in str(H100) and "8x NVIDIA H100 Tensor Core GPUs" in str(H100)
    assert H100.to_json()["node"]["value"] == 8
    assert "node" not in hardware.get("tpu-v5e").to_json()


def test_chip_text_sets_and_inherits_the_node(tmp_path) -> None:
    assert chip_from_pairs("base=h100,W_dcn=1e11").devices_per_node == 8  # inherited from base=
    assert chip_from_pairs("base=h100,node=4").devices_per_node == 4
    assert chip_from_pairs("base=tpu-v5p,hbm=96e9").devices_per_node is None
    own = chip_from_pairs("C=1e15,W_hbm=3e12,hbm=8e10,W_ici=9e11,T_min=2e-6,node=72")
    assert own.devices_per_node == 72 and own.node is not None
    assert own.node.source == "given on the command line"
    file = tmp_path / "nvl.toml"
    file.write_text('base = "b200"\nnode = {value = 72, source = "an NVL72 rack"}\n', encoding="utf-8")
    chip = chip_from_toml(file)
    assert chip.devices_per_node == 72 and chip.node.source == "an NVL72 rack"  # type: ignore[union-attr]


def test_chip_text_refuses_a_fractional_node() -> None:
    with pytest.raises(UsageError, match="chip key node on the command line is a whole number"):
        chip_from_pairs("base=h100,node=2.5")


# ---- the placement -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flat", "placed"),
    [
        ("X=64", "X=64:node8"),
        ("X=8,Y=8", "X=8:node1,Y=8"),
        ("X=4,Y=4", "X=4:node2,Y=4"),
        ("X=2,Y=16", "X=2:node1,Y=16:node8"),
        ("X=2,Y=2,Z=4", "X=2:node1,Y=2,Z=4"),
        ("X=16*2:line,Y=4", "X=16*2:line:node2,Y=4"),  # the axis keeps its other options
        ("P=4:dcn,X=16", "P=4:dcn,X=16:node8"),  # an axis over DCN is outside the node
    ],
)
def test_a_flat_mesh_is_placed_last_axis_innermost(flat: str, placed: str) -> None:
    done = place_in_nodes(Mesh.parse(flat), H100)
    assert done.mesh == Mesh.parse(placed)
    assert len(done.notes) == 1 and done.notes[0].startswith("mesh: ")


def test_the_note_says_what_was_placed() -> None:
    (note,) = place_in_nodes(Mesh.parse("X=64"), H100).notes
    assert note == (
        "mesh: X=64 spans 8 h100 nodes of 8 GPUs; priced as X=64:node8 (the last axis innermost); "
        "write :nodeN to place it yourself"
    )


@pytest.mark.parametrize("text", ["X=8", "X=2,Y=4", "X=1,Y=8", "X=64:node8", "X=8:node8,Y=8", "P=16:dcn,X=8"])
def test_a_mesh_in_one_node_or_placed_by_hand_is_unchanged_without_a_note(text: str) -> None:
    mesh = Mesh.parse(text)
    assert place_in_nodes(mesh, H100) == place_in_nodes(mesh, None)
    assert place_in_nodes(mesh, H100).mesh == mesh and place_in_nodes(mesh, H100).notes == ()


def test_dcn_axes_named_by_the_cost_options_are_outside_the_node() -> None:
    assert place_in_nodes(Mesh.parse("P=16,X=8"), H100, ("P",)).mesh == Mesh.parse("P=16,X=8")


@pytest.mark.parametrize("name", ["tpu-v5e", "tpu-v5p"])
def test_a_tpu_mesh_is_unchanged(name: str) -> None:
    mesh = Mesh.parse("X=64,Y=4")
    assert place_in_nodes(mesh, hardware.get(name)).mesh == mesh
    assert place_in_nodes(mesh, hardware.get(name)).notes == ()


def test_a_symbolic_size_is_left_and_said() -> None:
    done = place_in_nodes(Mesh.parse("X,Y=8"), H100)
    assert done.mesh == Mesh.parse("X,Y=8")
    assert done.notes == (
        "mesh: X has no size: whether the mesh spans h100 nodes of 8 GPUs is not known, so it is priced as "
        "one NVLink domain; write :nodeN to place it in nodes",
    )


def test_a_factored_axis_that_would_span_nodes_is_left_and_said() -> None:
    mesh = Mesh.parse("X=2x4,Y=8")
    done = place_in_nodes(mesh, H100)
    assert done.mesh == mesh
    (note,) = done.notes
    assert "but X has sub-axes" in note and "the node split not priced" in note


def test_an_axis_whose_sub_axes_the_program_names_is_left_and_said() -> None:
    first = "AllGather_{X:(8)2}(K[S_X]) -> K[S_{X:(1)8}]"
    assert subaxis_parents(first, None, "A[I_Y]") == {"X"}
    done = place_in_nodes(Mesh.parse("X=16"), H100, (), (first,))
    assert done.mesh == Mesh.parse("X=16") and "but X has sub-axes" in done.notes[0]
    pc = shardalg.cost(first, mesh="X=16", sizes={"S": 2**20}, hw="h100")  # not refused: priced whole
    assert pc.notes[0].startswith("mesh: X=16 spans 2 h100 nodes of 8 GPUs, but X has sub-axes")


@pytest.mark.parametrize("text", ["X=4,Y=3", "X=12", "X=2,Y=6"])
def test_sizes_that_do_not_tile_the_node_are_refused(text: str) -> None:
    with pytest.raises(UsageError) as err:
        place_in_nodes(Mesh.parse(text), H100)
    assert "does not tile h100 nodes of 8 GPUs" in str(err.value)
    assert err.value.fix is not None and ":nodeN" in err.value.fix


def test_the_refusal_names_the_axis() -> None:
    with pytest.raises(UsageError, match=r"the mesh X=4,Y=3 does not tile h100 nodes of 8 GPUs: axis Y=3"):
        place_in_nodes(Mesh.parse("X=4,Y=3"), H100)


# ---- the API -----------------------------------------------------------------------------------------------


def test_the_api_prices_a_flat_mesh_as_its_node_split_and_notes_it() -> None:
    flat = shardalg.cost(GATHER, mesh="X=64", sizes=SIZES, hw="h100")
    split = shardalg.cost(GATHER, mesh="X=64:node8", sizes=SIZES, hw="h100")
    assert flat.seconds == pytest.approx(split.seconds) == pytest.approx(1.014e-4, rel=1e-3)
    assert flat.notes[0].startswith("mesh: X=64 spans 8 h100 nodes of 8 GPUs") and split.notes == ()
    assert flat.to_json()["notes"][0] == flat.notes[0]


def test_the_api_leaves_one_node_and_a_tpu_alone() -> None:
    assert shardalg.cost(GATHER, mesh="X=8", sizes=SIZES, hw="h100").notes == ()
    v5e = shardalg.cost(GATHER, mesh="X=64", sizes=SIZES, hw="tpu-v5e")
    assert v5e.notes == ()


def test_the_api_plan_says_the_placement() -> None:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        shardalg.plan(GATHER, mesh="X=64", sizes=SIZES, hw="h100")
    assert any(issubclass(w.category, NoteWarning) and "X=64:node8" in str(w.message) for w in seen)


def test_the_api_derivations_note_the_placement() -> None:
    d = shardalg.compute_bound(GATHER, mesh="X=64", sizes=SIZES, hw="h100")
    assert d.notes[0].startswith("mesh: X=64 spans 8 h100 nodes")


def test_the_models_api_places_a_flat_mesh_and_says_so():
    """shardalg.step_time and shardalg.serve priced X=64 on h100 as one NVLink domain, with no note (the CLI placed it)."""

    prog = "params W\ntokens B\nlayers L\nIn[B_X, D] * W[D, F] -> Out[B_X, F]"
    sizes = {"B": 4096, "D": 4096, "F": 16384, "L": 2}
    flat = shardalg.step_time(prog, mesh="X=64", sizes=sizes, hw="h100")
    placed = shardalg.step_time(prog, mesh="X=64:node8", sizes=sizes, hw="h100")
    assert flat.seconds == placed.seconds
    assert flat.notes[0] == ("mesh", f"X=64 spans 8 h100 nodes of 8 GPUs; priced as X=64:node8 {_HOW}")
    assert "mesh" not in dict(placed.notes)
    served = shardalg.serve("llama-3-8b", "X=16", "B=16", "h100", 128, 2, params="F=X", activations="F=X")
    assert served.notes[0] == ("mesh", f"X=16 spans 2 h100 nodes of 8 GPUs; priced as X=16:node8 {_HOW}")
    again = shardalg.serve(
        "llama-3-8b", "X=16:node8", "B=16", "h100", 128, 2, params="F=X", activations="F=X"
    )
    assert again.ttft_s == served.ttft_s and "mesh" not in dict(again.notes)
