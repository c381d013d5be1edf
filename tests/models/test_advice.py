"""What would make a model fit: each change is priced by the memory count itself (the remat policy, the
largest tokens dim that fits, the smallest slice), and ``fit --check`` exits 1 when the model does not fit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import shardalg as sa
from shardalg.models.advice import smallest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def over() -> object:
    llama = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    return sa.memory(llama, mesh="X=64", sizes={"B": 1024, "T": 4096}, hw="tpu-v5p")


def test_each_remedy_is_the_memory_count_after_the_change(over):
    assert over.fits is False
    remedies = {r.change: r for r in sa.to_fit(over)}
    assert list(remedies) == ["--remat block", "--sizes T=170", "a 8x16x16 slice"]
    llama = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    block = sa.memory(llama, mesh="X=64", sizes={"B": 1024, "T": 4096}, hw="tpu-v5p", remat="block")
    assert remedies["--remat block"].bytes == float(block.total) and not remedies["--remat block"].fits
    shorter = sa.memory(llama, mesh="X=64", sizes={"B": 1024, "T": 170}, hw="tpu-v5p")
    longer = sa.memory(llama, mesh="X=64", sizes={"B": 1024, "T": 171}, hw="tpu-v5p")
    assert remedies["--sizes T=170"].bytes == float(shorter.total) and shorter.fits and not longer.fits
    assert remedies["a 8x16x16 slice"].bytes is None and "2048 devices" in remedies["a 8x16x16 slice"].what


def test_sharding_the_parameters_is_offered_and_is_the_smallest_change_when_it_fits():
    """Data parallelism with replicated weights: ZeRO-3 shards them over the data axis and fits, keeping the
    model, the batch and the devices, so it is the smallest change; it is priced by the count itself."""
    dp = sa.shard(sa.expand("llama-3-70b"), activations="B=X")
    on = {"mesh": "X=64", "sizes": {"B": 64, "T": 4096}, "hw": "tpu-v5p", "remat": "block"}
    report = sa.memory(dp, **on)
    remedies = {r.change: r for r in sa.to_fit(report)}
    zero3 = sa.memory(dp, zero=3, **on)
    assert remedies["--zero 3"].bytes == float(zero3.total) and zero3.fits and remedies["--zero 3"].fits
    assert remedies["--zero 3"].change_factor == 0
    assert smallest(list(remedies.values())) is remedies["--zero 3"]


def test_the_smallest_change_gives_up_least_of_the_run(over):
    remedies = sa.to_fit(over)  # no ZeRO remedy: the weights are sharded already, it would save nothing
    assert "--zero 3" not in [r.change for r in remedies]
    best = smallest(remedies)
    assert best is not None and best.change == "--sizes T=170"  # 1 - 170/4096 of T against 16x the devices
    assert best.change_factor == pytest.approx(1 - 170 / 4096)
    assert smallest([r for r in remedies if not r.fits]) is None


def test_a_model_that_fits_needs_no_remedy():
    llama = sa.shard(sa.expand("llama-3-70b"), params="D=X", activations="B=X")
    fits = sa.memory(llama, mesh="X=64", sizes={"B": 64, "T": 4096}, hw="tpu-v5p", remat="block")
    assert fits.fits and sa.to_fit(fits) == []


def _fit_check(*sizes: str) -> subprocess.CompletedProcess[str]:
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "shardalg",
            "model",
            "show",
            "llama-3-70b",
            "--params",
            "D=X",
            "--activations",
            "B=X",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "shardalg",
            "fit",
            "-",
            "--mesh",
            "X=64",
            "--hw",
            "tpu-v5p",
            "--check",
            *sizes,
        ],
        input=shown,
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )


def test_fit_check_exits_1_and_says_what_would_fit():
    done = _fit_check("--sizes", "B=1024,T=4096")
    assert done.returncode == 1, done.stderr
    assert "fits         NO" in done.stdout and "to fit (each change alone, priced):" in done.stdout
    assert (
        "  --sizes T=170 (the largest T that fits, from 4096): 95.6 GB (89 GiB) per device, fits"
        in done.stdout
    )
    assert "smallest change that fits: --sizes T=170 (it changes the run as asked by 96%" in done.stdout
    ok = _fit_check("--sizes", "B=64,T=4096", "--remat", "block")
    assert ok.returncode == 0 and "to fit" not in ok.stdout
    as_json = _fit_check("--sizes", "B=1024,T=4096", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["smallest_change"] == "--sizes T=170"
    assert [r["change"] for r in json.loads(as_json.stdout)["to_fit"]][:2] == [
        "--remat block",
        "--sizes T=170",
    ]


def test_fit_needs_check_or_solve_for():
    done = _fit_check("--sizes", "B=64,T=4096", "--solve-for", "B")
    assert done.returncode == 2 and "--check or --solve-for, not both" in done.stderr
