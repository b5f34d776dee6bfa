"""The fuzz tier's two hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (docs/testing.md).

- ``fast`` (the default; what ``.ci/run`` runs): a few hundred examples over the whole tier,
  derandomised so that a run is repeatable, within a minute of CPU;
- ``long``: 25 times the examples of each test, fresh random seeds every run (a campaign:
  ``HYPOTHESIS_PROFILE=long .venv/bin/python -m pytest tests/unit/fuzz``).

``DESCHED_FUZZ_EXAMPLES=N`` sets every test's number of examples outright (either profile).
Each test states its fast budget with :func:`budget`; the profile scales it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fast")
#: The long profile runs this many times each test's fast budget.
LONG_FACTOR = 25
EXAMPLES = int(os.environ.get("DESCHED_FUZZ_EXAMPLES", "0")) or None

_QUIET = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
# (no deadline: bounded time is a property the tests check themselves, per example)
settings.register_profile(
    "fast", max_examples=100, derandomize=True, deadline=None, database=None, suppress_health_check=_QUIET
)
settings.register_profile(
    "long",
    max_examples=100 * LONG_FACTOR,
    derandomize=False,
    deadline=None,
    database=None,
    suppress_health_check=_QUIET,
)
if PROFILE not in ("fast", "long"):
    raise RuntimeError(f"HYPOTHESIS_PROFILE must be fast or long for tests/unit/fuzz, got {PROFILE!r}")

#: The fuzz tests' settings (the profile, not loaded globally: other property tests keep theirs).
FUZZ = settings.get_profile(PROFILE)
LONG = PROFILE == "long" or EXAMPLES is not None


def budget(fast: int) -> settings:
    """Settings of a test that runs ``fast`` examples in the fast profile."""
    return settings(FUZZ, max_examples=EXAMPLES or (fast if PROFILE == "fast" else fast * LONG_FACTOR))
