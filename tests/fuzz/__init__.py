"""Fuzzing every stage: grammar strings on every start rule, edits of the README's and the seeds' expressions,
printed random ASTs and random text, each run through parse, print, check, shape, plans, run_plan, cost and
backward in process (:mod:`.stages`, inputs in :mod:`.inputs`).

In the test suite (``tests/fuzz/test_stages.py``) the bounded hypothesis profile runs a few dozen inputs; under
``HYPOTHESIS_PROFILE=fuzz`` the test runs the long command below in a subprocess. On demand::

    python -m tests.fuzz --inputs 100000 --memory-mb 3072 --json fuzz.json

runs that many inputs under a memory cap (``RLIMIT_AS``) and exits 1 on any failure: a non-shardalg exception,
a stage over 2 s of CPU, check and plan disagreeing, a wrong plan, a print that does not read back.
"""
