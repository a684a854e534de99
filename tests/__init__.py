"""bench's tests: one folder per bench package (``tests/<package>/``, e.g. ``tests/runner/``,
``tests/providers/local/``), whole-program checks (static checks, docs, extras, end to end) at
this level beside the shared helpers (``fakeserver``, ``fakebatch``, ``report_runs``,
``stored``, the ``mcp_*_server.py`` test servers, ``data/``), imported as ``tests.<module>``.
Fixtures shared by several folders live in ``tests/conftest.py``, a folder's own in its
``conftest.py``; the root ``conftest.py`` holds the project fixtures and the markers."""
