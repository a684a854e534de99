"""The runner's entry into the executor: one judge per run, its traces in the run folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from bench.executor.backends import ReferenceBackends
from bench.executor.backends.base import Handler
from bench.executor.judge import ExecutionJudge
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor
from bench.executor.traces import TRACES, TraceWriter


class RunExecution:
    """Executes every row's answer of one run and adds the execution metrics.

    Args:
        run_dir: the run folder (``traces.jsonl`` is appended there).
        run_id: the run's id (copied into traces).
        allow_writes / allow_sensitive: what write and sensitive tools may do.
        mcp_command: execute on this MCP server instead of the reference backends: the
            server's argv (``[program, *args]``), started over stdio; its tools serve every
            toolset (read-only unless the server marks a tool otherwise, see
            :class:`~bench.executor.backends.mcp.McpBackend`).

    Raises:
        BenchError: the MCP server cannot be started.
    """

    def __init__(self, run_dir: Path, run_id: str, *, allow_writes: bool = False,
                 allow_sensitive: bool = False, mcp_command: Sequence[str] | None = None) -> None:
        self.run_id = run_id
        self.allow_writes = allow_writes
        self.allow_sensitive = allow_sensitive
        self._mcp = None
        self.mcp_handlers: dict[str, Handler] | None = None  # an MCP server's handlers (episodes run on them too)
        if mcp_command:
            from bench.executor.backends.mcp import McpBackend
            self._mcp = McpBackend(mcp_command[0], list(mcp_command[1:]))
            mcp_handlers = self.mcp_handlers = self._mcp.handlers()
            source: Any = lambda _toolset: mcp_handlers  # noqa: E731 - one server, every toolset
        else:
            source = ReferenceBackends()
        self.traces = TraceWriter(Path(run_dir) / TRACES)
        self.executor = Executor(source, traces=self.traces)
        self.judge = ExecutionJudge(self.executor)

    def row_metrics(self, case: Any, tools: Any, toolset: str, parsed: Any,
                    trial: int) -> dict[str, Any]:
        """Execution metrics for one row (see :mod:`bench.executor.judge`).

        Args:
            case: the :class:`~bench.models.Case`.
            tools: the variant's tools.
            toolset: the case's toolset.
            parsed: the :class:`~bench.parse.ParsedAnswer` (``error`` set: undecodable).
            trial: the trial number.
        """
        calls = None if parsed.error is not None else parsed.calls
        return self.judge.metrics(case.expected, calls, tools, toolset,
                                  self._context(case, trial))

    def prepare(self, case: Any, tools: Any, toolset: str) -> None:
        """Compute (and memoise) the reference results of ``case``'s label under ``tools``
        ahead of its rows; the runner calls it while it waits for answers.

        Raises:
            Whatever the executor raises; the row's own :meth:`row_metrics` will raise it again.
        """
        self.judge.prepare(case.expected, tools, toolset, self._context(case, 0))

    def _context(self, case: Any, trial: int) -> RunContext:
        return RunContext(run_id=self.run_id, case_id=case.id, trial=trial,
                          allow_writes=self.allow_writes, allow_sensitive=self.allow_sensitive)

    def close(self) -> None:
        """Stop the executor's threads and close the trace file."""
        self.executor.close()
        self.traces.close()
        if self._mcp is not None:
            self._mcp.close()
