"""Defaults and caps of ``bench run``'s options, in one place: the command line (which shows
them in ``--help`` and refuses what is out of range before anything starts) and
:class:`bench.runner.RunConfig` (which checks configs built in code and stored ones) both
read them. No imports: the command line loads this without the runner.

The caps are sanity bounds, not provider limits: a mistyped ``--trials 20000`` or
``--concurrency 100000`` would otherwise plan or open that much before failing.
"""

DEFAULT_VARIANTS = ("l3", "l10", "l30", "l50")  # the classic description lengths (BRIEF)
DEFAULT_PROVIDERS = ("local",)  # the embedded model: no key, no network

MAX_TRIALS = 1000
DEFAULT_CONCURRENCY = 4  # requests in flight per HTTP provider (local always runs 1)
MAX_CONCURRENCY = 1024
DEFAULT_ATTEMPTS = 6  # per request: 429s, 5xx and timeouts are retried
MAX_ATTEMPTS = 100
