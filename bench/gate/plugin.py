"""pytest plugin (entry point ``pytest11``): the regression gate as ordinary test items.

A ``pyproject.toml`` that pytest collects (plain ``pytest`` in a project without
``testpaths``, or ``pytest pyproject.toml``) and that has a ``[tool.bench.gate]`` table yields
one item per (variant, provider, metric), named ``<metric>[<variant>|<provider>]``. Every other
file, and a ``pyproject.toml`` without the table, is left alone, so the plugin is inert in
projects that do not configure a gate. The gate runs once per session, when its first item (or
a fixture below) needs it.

Fixtures (for a team's own assertions in Python):

- ``bench_results``: the gate run's results as a pandas DataFrame
  (:func:`bench.stats.frame.results_frame`; ``.attrs["run_id"]`` names the stored run).
- ``bench_compare``: ``bench_compare(metrics=None, margin=None, alpha=None)`` returns the
  :class:`bench.compare.core.Comparison` of the baseline with the current run (None without a
  baseline).

After the results, the terminal summary prints each gated metric's power (the smallest
drop its paired test detects at its size, whether the per-case rule is on) and a warning when
that drop is larger than the regression the gate is meant to catch, pass or fail.

Both fixtures read the gate of ``--bench-gate-config`` (default:
``<rootdir>/pyproject.toml``) and skip the test when there is none. JUnit (``--junitxml``)
carries each item's figures as ``<properties>``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pytest

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr  # pytest exports no public name for it

from bench.errors import BenchError

_STATE: pytest.StashKey[dict[str, GateState]] = pytest.StashKey()


class GateState:
    """One gate's lazily computed run and verdicts (shared by its items and the fixtures)."""

    def __init__(self, path: Path) -> None:
        """Read the gate of ``path`` (a ``pyproject.toml``; the run waits for first use).

        Raises:
            BenchError: the gate table is invalid, or missing (callers check it first).
        """
        from bench.gate.config import load_gate_config
        self.path = path
        config = load_gate_config(path)
        if config is None:
            raise BenchError("no [tool.bench.gate] table", file=path)
        self.config = config
        self._run: Any = None
        self._verdicts: dict[str, Any] | None = None
        self._error: BenchError | None = None

    def run(self) -> Any:
        """The :class:`bench.gate.run.GateRun` (run on first use; errors are re-raised)."""
        from bench.gate.run import run_gate
        if self._error is not None:
            raise self._error
        if self._run is None:
            try:
                self._run = run_gate(self.config)
            except BenchError as exc:
                self._error = exc
                raise
        return self._run

    def baseline(self) -> dict[str, Any] | None:
        """The baseline document, or None when the file does not exist yet."""
        from bench.gate.baseline import load_baseline
        return load_baseline(self.config.baseline_path)

    def verdicts(self) -> dict[str, Any]:
        """``{test name: Verdict}`` of the gate."""
        from bench.datasets.splits import run_split
        from bench.gate.core import evaluate
        if self._verdicts is None:
            run = self.run()
            self._verdicts = {v.test_name: v for v in
                              evaluate(self.config, run.rows, self.baseline(),
                                       run.call_errors, split=run_split(run.manifest.config),
                                       fail_without_reference=True)}
        return self._verdicts

    def computed_verdicts(self) -> dict[str, Any] | None:
        """The verdicts when an item has already computed them, else None (no run here)."""
        return self._verdicts


def _state(config: pytest.Config, path: Path) -> GateState:
    states = config.stash.setdefault(_STATE, {})
    key = str(path.resolve())
    if key not in states:
        states[key] = GateState(path.resolve())
    return states[key]


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--bench-gate-config PATH``: the TOML file whose gate the fixtures use."""
    group = parser.getgroup("bench-gate", "bench regression gate")
    group.addoption("--bench-gate-config", default=None, metavar="PATH",
                    help="TOML file with [tool.bench.gate] for the bench_results / "
                         "bench_compare fixtures (default: <rootdir>/pyproject.toml)")


def _has_gate(path: Path) -> bool:
    from bench.gate.config import read_gate_table
    try:
        return read_gate_table(path) is not None
    except BenchError:
        return False  # pytest reports a broken pyproject.toml itself


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect a ``pyproject.toml`` that declares ``[tool.bench.gate]``; ignore everything else."""
    if file_path.name == "pyproject.toml" and _has_gate(file_path):
        return GateFile.from_parent(parent, path=file_path)
    return None


class GateFile(pytest.File):
    """A ``pyproject.toml`` with a gate: one :class:`GateItem` per (variant, provider, metric)."""

    def collect(self) -> Iterator[GateItem]:
        """Yield the gate's items (config errors surface as a one-line collection error)."""
        try:
            state = _state(self.config, self.path)
        except BenchError as exc:
            raise self.CollectError(str(exc)) from None
        for variant in state.config.variants:
            for provider in state.config.providers:
                for metric in state.config.gated_metrics:
                    yield GateItem.from_parent(self, name=f"{metric}[{variant}|{provider}]",
                                               state=state)


class GateFailure(Exception):
    """A gated metric failed; the message is the verdict's full text."""


class GateItem(pytest.Item):
    """One gated (variant, provider, metric)."""

    def __init__(self, *, state: GateState, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.state = state

    def runtest(self) -> None:
        """Run the gate (once per session) and check this item's verdict.

        Raises:
            GateFailure: the metric is below its floor or regressed beyond the margin.
            BenchError: the run failed (e.g. a replay cache miss: names case and fix).
        """
        verdict = self.state.verdicts()[self.name]
        self.user_properties.extend(verdict.properties())
        if not verdict.passed:
            raise GateFailure(verdict.message())
        for note in verdict.notes:
            self.add_report_section("call", "bench gate", note)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | TerminalRepr:
        """The verdict text or the one-line bench error, never a traceback into bench."""
        if isinstance(excinfo.value, (GateFailure, BenchError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int, str]:
        """Location shown by pytest: the config file and the item name."""
        return self.path, 0, f"bench gate: {self.name}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    """After the results: each gate's power (the smallest drop its paired test detects,
    whether the per-case rule is on, and the warning when that drop is larger than the
    regression the gate is meant to catch), printed whether the gate passed or failed.
    A gate whose run failed (its items show why) prints nothing here."""
    for state in config.stash.get(_STATE, {}).values():
        verdicts = state.computed_verdicts()
        if not verdicts:
            continue
        terminalreporter.write_sep("-", f"bench gate power: {state.path}")
        for verdict in verdicts.values():
            for line in verdict.summary_lines():
                terminalreporter.write_line(line)


def _fixture_state(request: pytest.FixtureRequest) -> GateState:
    option = request.config.getoption("--bench-gate-config")
    path = Path(option) if option else request.config.rootpath / "pyproject.toml"
    if not path.is_file() or not _has_gate(path):
        pytest.skip(f"no [tool.bench.gate] in {path}")
    return _state(request.config, path)


@pytest.fixture(scope="session")
def bench_results(request: pytest.FixtureRequest) -> Any:
    """The gate run's results frame (:func:`bench.stats.frame.results_frame`), one row per
    case x variant x provider x trial; ``.attrs["run_id"]`` is the stored run's id."""
    run = _fixture_state(request).run()
    frame = run.frame
    frame.attrs["run_id"] = run.run_id
    return frame


@pytest.fixture(scope="session")
def bench_compare(request: pytest.FixtureRequest) -> Callable[..., Any]:
    """A callable ``(metrics=None, margin=None, alpha=None) -> Comparison | None`` comparing
    the baseline (A) with the current run (B) per (variant, provider); None without a
    baseline. Defaults come from the gate's settings."""
    from bench.gate.baseline import compare_with_baseline
    state = _fixture_state(request)

    def compare(metrics: list[str] | None = None, margin: float | None = None,
                alpha: float | None = None) -> Any:
        baseline = state.baseline()
        if baseline is None:
            return None
        return compare_with_baseline(state.config, state.run().frame, baseline,
                                     metrics=metrics, margin=margin, alpha=alpha)
    return compare
