"""The old name of :mod:`bench.providers.local.prompt`, kept for importers not yet moved to the
``bench.providers.local`` package (``bench/runner/core.py`` imports
:data:`EPISODE_NO_CALL_LAYOUT` from here). New code imports from :mod:`bench.providers.local`.
"""

from __future__ import annotations

from bench.providers.local.prompt import (  # noqa: F401 - re-exported under the old name
    DEFAULT_NO_CALL_LAYOUT,
    EPISODE_NO_CALL_LAYOUT,
    NO_CALL_LAYOUTS,
    NoCallLayout,
    answer_schema,
    tools_block,
)
