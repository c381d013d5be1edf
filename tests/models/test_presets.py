"""Model presets: every number has a source, each expands into a program whose parameter count is the
published one, that program round-trips through the printers, and sharding by dim gathers FSDP weights."""

from __future__ import annotations

import pytest

from shardalg.models import presets
from shardalg.models.expand import expand, parse_dim_map, shard
from shardalg.models.memory import memory
from shardalg.notation.parse import parse
from shardalg.notation.printing import latex, text, unicode
from shardalg.notation.syntax import Arrow, Collective, Op

PUBLISHED = {  # the checkpoints' parameter counts (Hugging Face model cards) and Mixtral's paper
    "llama-2-13b": 13_015_864_320,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
}


@pytest.mark.parametrize("name", presets.names())
def test_every_number_has_a_source(name):
    c = presets.get(name)
    for key, number in c.numbers():
        assert number.value > 0 and len(number.source) > 30, (name, key)
    if name != "dense":
        assert all("https://huggingface.co/" in n.source for _, n in c.numbers())
        assert c.check


@pytest.mark.parametrize(("name", "count"), PUBLISHED.items())
def test_parameter_counts_are_the_published_ones(name, count):
    assert memory(expand(name), mesh="X=1").params == count


def test_mixtral_is_46_7_billion_parameters():
    # Jiang et al. 2024, "Mixtral of Experts": 46.7B parameters in all
    assert int(memory(expand("mixtral-8x7b"), mesh="X=1").params) == pytest.approx(46.7e9, rel=1e-3)


def test_the_dense_preset_is_symbolic():
    from shardalg.algebra.symbols import dim_size

    D, F, G, H, K, L, V = (dim_size(n) for n in "DFGHKLV")
    params = memory(expand("dense"), mesh="X=1").params
    assert (
        params - (L * (2 * D * K * G * H + 2 * D * K * H + 3 * D * F + 2 * D) + 2 * D * V + D)
    ).expand() == 0


@pytest.mark.parametrize("name", presets.names())
@pytest.mark.parametrize("phase", ["train", "decode"])
def test_programs_round_trip(name, phase):
    p = expand(name, phase, dtype="int8" if phase == "decode" else None)
    for printer in (text, unicode, latex):
        assert parse(printer(p)) == p
    assert p.roles.layers == "L" and (p.roles.kvcache == ("Kc", "Vc")) == (phase == "decode")


def test_fsdp_gathers_weights_and_megatron_does_not():
    fsdp = shard(expand("llama-3-8b"), "D=X", "B=X", mesh="X=16")
    gathers = [s for s in fsdp.statements if isinstance(s, Arrow) and isinstance(s.expr, Collective)]
    assert [g.expr.arg.name for g in gathers] == [
        "W_q",
        "W_k",
        "W_v",
        "W_o",
        "W_gate",
        "W_in",
        "W_out",
        "W_unemb",
    ]
    assert all(g.expr.op is Op.ALL_GATHER and g.expr.axes == ("X",) for g in gathers)
    megatron = shard(expand("llama-3-8b", functions=False), "F=Y,K=Y", "F=Y,K=Y", mesh="Y=8")
    assert not any(isinstance(s, Arrow) and isinstance(s.expr, Collective) for s in megatron.statements)
    assert text(megatron).count("F_Y") == 6  # W_gate and Gt, W_in and U, M and W_out


def test_dim_maps_are_read_without_evaluation():
    assert parse_dim_map("D=X,S=XY,B=data+model") == {"D": ("X",), "S": ("X", "Y"), "B": ("data", "model")}
    for bad in ("D", "D=", "D=X,D=Y", "__import__=X", "D=os.system"):
        with pytest.raises(Exception, match="dim map|axes|mapped twice"):
            parse_dim_map(bad)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(Exception, match="llama-3-70b"):
        presets.get("gpt-5")
