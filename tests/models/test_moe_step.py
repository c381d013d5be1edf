"""Mixtral with expert parallelism over one axis (issue 28 item 5): ``model show --functions`` writes its routing,
the sharding by dim puts the experts on the axis, and ``step`` prices each layer's two AllToAlls from the
tokens, k and the capacity factor: V/4 over the axis, V = cf·k·B·T·D bf16 values (the capacity C = cf·k·B·T/E
derived, said in a note), in inference; training adds their transposes, the same bytes back."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shardalg.algebra.ops.route import capacity
from shardalg.cli import main
from shardalg.costs.hardware import get as chip_named
from shardalg.models.expand import expand, shard
from shardalg.models.presets import get
from shardalg.models.step import step_time

SIZES = {"B": 16, "T": 4096}
MESH = "X=8"


def _mixtral(cf: Fraction = Fraction(5, 4)) -> object:
    return shard(expand("mixtral-8x7b", functions=True, capacity_factor=cf), "E=X", "B=X,E=X")


def _routing_ops(report: object) -> dict[str, float]:
    (layer, *_) = report.parts  # type: ignore[attr-defined]
    values = report.values  # type: ignore[attr-defined]
    return {
        op.name.split("_")[0]: float(op.comms.subs(values))
        for op in layer.ops
        if op.name.startswith(("dispatch", "combine"))
    }


@pytest.mark.parametrize("cf", [Fraction(5, 4), Fraction(2)])
def test_each_alltoall_is_priced_from_tokens_k_and_the_capacity_factor(cf: Fraction) -> None:
    config = get("mixtral-8x7b")
    k, e, d = config.top_k.value, config.experts.value, config.d_model.value  # type: ignore[union-attr]
    assert (e, k) == (8, 2)
    report = step_time(_mixtral(cf), MESH, SIZES, hw="tpu-v5p", mode="infer")
    tokens = SIZES["B"] * SIZES["T"]
    c = capacity(Fraction(tokens), e, k, cf)
    assert (
        "capacity",
        f"C = cf·k·B·T/E = {float(cf):g}·2·65536/8 = {c} slots an expert (derived from dispatch's k and cf)",
    ) in report.notes
    w_ici = chip_named("tpu-v5p").ici_bandwidth.value
    v = 2 * float(cf) * k * tokens * d  # bytes of the [E, C, D] buffer in bf16: E·C = cf·k·tokens slots
    assert _routing_ops(report) == pytest.approx(
        {"dispatch": v / 4 / w_ici, "combine": v / 4 / w_ici}, rel=1e-12
    )


def test_training_counts_the_routings_transposes() -> None:
    infer = step_time(_mixtral(), MESH, SIZES, hw="tpu-v5p", mode="infer")
    train = step_time(_mixtral(), MESH, SIZES, hw="tpu-v5p", mode="train")
    a = train.analysis
    assert [str(p) for _, p in a.routing_transposes] == [  # dispatch's cotangent back, then combine's out
        "AllToAll_{X,C}(dX[E_X, C, D]) -> dX[E, C_X, D]  # AllToAll: move X of dX from E to C",
        "AllToAll_{X,E}(dOut[E, C_X, D]) -> dOut[E_X, C, D]  # AllToAll: move X of dOut from C to E",
    ]
    assert infer.analysis.routing_transposes == []


def test_the_cli_shows_the_mixtral_step(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    assert (
        main(["model", "show", "mixtral-8x7b", "--functions", "--params", "E=X", "--activations", "B=X,E=X"])
        == 0
    )
    text = capsys.readouterr().out
    assert "capacity factor 1.25 (default, a choice: --capacity-factor sets it" in text
    path = tmp_path / "mixtral.sa"
    path.write_text(text)
    args = ["step", str(path), "--mesh", MESH, "--sizes", "B=16,T=4096", "--hw", "tpu-v5p", "--mode", "infer"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert (
        "-> X[E_X, C, D]: compute 83.93 us, comms 1.864 ms" in out
    )  # its tokens read and written, HBM-bound
    assert "note: capacity: C = cf·k·B·T/E = 1.25·2·65536/8 = 20480 slots an expert" in out
    assert main(["model", "show", "mixtral-8x7b", "--functions", "--capacity-factor", "-1"]) != 0


def test_a_smaller_batch_derives_the_capacity_again():
    """fit's remedies price the model again at another batch: the routing's capacity follows the tokens (the
    remedies of Mixtral's memory failed with 'C is 1280, not 10240' when the old capacity was kept)."""
    from shardalg.models.expand import expand
    from shardalg.models.program import model_program, resized

    m = model_program(expand("mixtral-8x7b"), "X=8", {"B": 8, "T": 4096})
    assert m.sizes["C"] == 10240  # 1.25·2·8·4096/8
    assert resized(m, {"B": 1}).sizes["C"] == 1280
