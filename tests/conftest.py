"""Settings for the whole suite.

Hypothesis' default 200 ms deadline per example is a timing assertion, which unit tests here
never make (the developers' guide: timings live in ``benchmarks/``). ``make test`` runs the
unit tests on a worker per CPU, where an example can take longer than on an idle machine
without anything being wrong, so the suite's profile has no deadline. A test that sets its
own ``@settings`` keeps what it sets.
"""

from hypothesis import settings

settings.register_profile("iogauge", deadline=None)
settings.load_profile("iogauge")
