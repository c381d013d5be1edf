"""Every stage on fuzz inputs: no exception but shardalg's own, check and plan agree, plans are right on
numbers. The bounded profile runs a few dozen inputs in process; under ``HYPOTHESIS_PROFILE=fuzz`` the long
run (``python -m tests.fuzz``) goes in a subprocess with a memory cap and also holds every stage under 2 s."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fuzz.inputs import settings as mesh_and_sizes
from tests.fuzz.inputs import sources
from tests.fuzz.stages import Tally, run_stages
from tests.shared import ROOT

LONG = os.environ.get("HYPOTHESIS_PROFILE") == "fuzz"


@pytest.mark.skipif(LONG, reason="the fuzz profile runs the long command instead")
@given(st.data())
def test_every_stage_refuses_with_its_own_errors_only(data: st.DataObject) -> None:
    tally = Tally()
    kind, source = data.draw(sources())
    # no time limit here: a loaded CI machine is not unbounded work (the long run asserts it)
    run_stages(source, kind, lambda program: data.draw(mesh_and_sizes(program)), tally, limit=float("inf"))
    assert not tally.failures, "\n".join(str(f) for f in tally.failures)


@pytest.mark.skipif(not LONG, reason="the long stage fuzz runs under HYPOTHESIS_PROFILE=fuzz")
def test_the_long_fuzz_run() -> None:
    n = settings.default.max_examples
    done = subprocess.run(
        [sys.executable, "-m", "tests.fuzz", "--inputs", str(n), "--progress", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    figures = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    assert done.returncode == 0, (figures.get("failure_examples"), done.stderr[-3000:])
    assert figures["inputs"] >= n and figures["complete"]


def test_the_harness_finds_what_it_looks_for(monkeypatch) -> None:
    import tests.fuzz.stages as stages
    from shardalg.algebra.mesh import Mesh

    def setting(program):
        return Mesh(X=2), {}

    tally = Tally()
    run_stages("A[I_X, J] · B[J, K] -> C[I_X, K]", "program", setting, tally)
    assert not tally.failure_kinds and tally.runs["run_plan"] >= 1 and tally.runs["backward"] == 1

    assert tally.runs["verify"] == 1  # the derived backward verified clean

    # a derived backward that drops a gradient's plan is found wrong by the verify stage
    real = stages.backward
    monkeypatch.setattr(
        stages, "backward", lambda *a, **k: dataclasses.replace(bw := real(*a, **k), grads=bw.grads[:-1])
    )
    tally = Tally()
    run_stages("A[I_X, J] · B[J, K] -> C[I_X, K]", "program", setting, tally)
    assert tally.failure_kinds == {"wrong": 1} and tally.failures[0].stage == "verify"
    assert "missing-gradient" in tally.failures[0].detail
    monkeypatch.setattr(stages, "backward", real)

    tally = Tally()
    run_stages(
        "A[I_X]", "program", setting, tally, limit=-1.0
    )  # every stage is "slow" against a negative limit
    assert tally.failure_kinds["slow"] == tally.runs.total()

    def broken(*args, **kwargs):
        raise KeyError("a bug")

    monkeypatch.setattr(stages, "plans", broken)
    tally = Tally()
    run_stages("A[I_X] -> A[I]", "program", setting, tally)
    assert tally.failure_kinds == {"exception": 1}
    assert tally.failures[0].stage == "plans" and "KeyError: 'a bug'" in tally.failures[0].detail

    # a non-shardalg exception in check is recorded, and the run goes on (fuzzing found one that stopped it:
    # the per-statement check ran outside a stage)
    monkeypatch.setattr(stages, "check", broken)
    tally = Tally()
    run_stages("A[I_X] -> A[I]", "program", setting, tally)
    assert tally.failure_kinds == {"exception": 1} and tally.failures[0].stage == "check"


def test_the_long_run_collects_garbage_between_chunks_outside_the_stages(monkeypatch, tmp_path) -> None:
    """A chunk's hypothesis record is collected between chunks, not in the next input's first stage (a long run
    billed a 3 s collection to a parse of 0.03 s)."""
    import gc
    import signal

    from tests.fuzz.__main__ import main

    calls: list[int] = []
    real = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setattr("resource.setrlimit", lambda *a: None)  # no address-space cap on the test process
    out = tmp_path / "f.json"
    handler = signal.getsignal(signal.SIGTERM)
    main(["--inputs", "6", "--chunk", "2", "--progress", "0", "--json", str(out)])
    assert len(calls) >= 3 and json.loads(out.read_text())["inputs"] >= 6
    # the run puts back what it changed in the process: the collector is on and SIGTERM is the worker's own
    # (left to raise KeyboardInterrupt, it did so in pytest's worker at its end)
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert signal.getsignal(signal.SIGTERM) is handler
