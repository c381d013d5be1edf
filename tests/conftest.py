"""Hypothesis profiles: "ci" (the default) runs a bounded number of examples so the suite stays fast;
"fuzz" is the long profile, run on demand: ``HYPOTHESIS_PROFILE=fuzz python -m pytest tests``; "random" draws
new examples each run (docs/testing.md)."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "fuzz", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(  # the ci profile's examples drawn anew each run, 300 where a test sets no count
    "random", max_examples=300, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
