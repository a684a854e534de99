"""The pytest regression gate (issue 8): config, run, baseline, decision and plugin.

- :mod:`bench.gate.config`: the ``[tool.bench.gate]`` settings.
- :mod:`bench.gate.run`: run the gate's plan in its project.
- :mod:`bench.gate.baseline`: write and read the baseline, floors from it, pair a run with it.
- :mod:`bench.gate.core`: decide pass or fail per (variant, provider, metric).
- :mod:`bench.gate.verdict`: a decision (:class:`~bench.gate.verdict.Verdict`) and its text.
- :mod:`bench.gate.power`: the drop the paired test detects, and the pairs it would need.
- :mod:`bench.gate.changes`: what the description lock says changed since it was written.
- :mod:`bench.gate.plugin`: the pytest plugin (entry point ``pytest11``).
- :mod:`bench.cli.gate`: ``bench baseline update``.
"""
