"""The pytest regression gate (issue 8): config, run, baseline, decision and plugin.

- :mod:`bench.gate.config`: the ``[tool.bench.gate]`` settings.
- :mod:`bench.gate.core`: run the gate, write/read the baseline, decide per metric.
- :mod:`bench.gate.plugin`: the pytest plugin (entry point ``pytest11``).
- :mod:`bench.cli.gate`: ``bench baseline update``.
"""
