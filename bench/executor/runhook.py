"""The runner's entry into the executor: one judge per run, its traces in the run folder.

Which backend executes a toolset's calls (:func:`describe_execution` says it, and the run's
manifest keeps it under ``execution``, for the table and the report):

- ``--execute-mcp`` given: that MCP server, for every toolset;
- else the project's ``[tool.bench.toolsets.<name>]`` (:mod:`bench.toolset_config`): its MCP
  server (stdio or Streamable HTTP), its Python module's functions, or ``none`` (declared
  no-execute mode);
- else the reference backends of the shipped toolsets;
- else nothing: the toolset has no backend, its execution metrics are empty, and the table
  says so.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from bench.errors import BenchError
from bench.executor.backends import REFERENCE_TOOLSETS, ReferenceBackends
from bench.executor.backends.base import Backend, Handler, Owner
from bench.executor.judge import ExecutionJudge, ExecutionMetrics
from bench.executor.outcome import RunContext, compile_error_pattern, failing_on_text
from bench.executor.pipeline import Executor
from bench.executor.traces import TRACES, TraceWriter
from bench.models import Case, Tool
from bench.parse import ParsedAnswer
from bench.results import ManifestExecution
from bench.toolset_config import (PYPROJECT, ToolsetSettings, load_toolset_settings,
                                  server_label)


#: The log of the ``--execute-mcp`` server's stderr, in the run folder; a project toolset's
#: server logs to ``mcp-server-<toolset>.log`` (:meth:`RunExecution._open`).
MCP_LOG = "mcp-server.log"


def server_logs(run_dir: Path) -> list[Path]:
    """The MCP server logs of the run folder ``run_dir`` that are not empty (a server wrote
    to its stderr), sorted by name; a run's last line names them."""
    try:
        return sorted(path for path in Path(run_dir).glob("mcp-server*.log")
                      if path.is_file() and path.stat().st_size)
    except OSError:
        return []


def describe_execution(toolsets: Sequence[str], *, execute: bool,
                       mcp_command: Sequence[str] | None, allow_writes: bool,
                       settings: Mapping[str, ToolsetSettings]) -> dict[str, ManifestExecution]:
    """How each toolset's calls are executed in a run, for its manifest (``execution``).

    Returns:
        toolset -> its :class:`bench.results.ManifestExecution` (``mode``, ``detail``,
        ``labels``, ``writes``): ``mode`` is ``reference``,
        ``mcp``, ``python``, ``none`` (declared no-execute), ``off`` (``--no-execute``) or
        ``no_backend``; ``detail`` says where or why in a few words (never a command line: it
        may hold a token); ``writes`` is ``"all"`` (``--allow-writes``) or the write tools
        allowed to run; ``labels`` (executed toolsets only) says where the expected results
        come from: ``reference`` (bench's own copy runs the label), ``reset`` (the user's
        system runs it after the declared reset) or ``recorded`` (the results ``bench labels
        record`` stored; nothing of the label runs).
    """
    found: dict[str, ManifestExecution] = {}
    for toolset in dict.fromkeys(toolsets):
        own = settings.get(toolset)
        writes: str | list[str] = "all" if allow_writes else sorted(own.writes) if own else []
        if not execute:
            mode, detail = "off", "bench run --no-execute"
        elif mcp_command:
            mode, detail = "mcp", f"--execute-mcp {server_label(mcp_command)}"
        elif own is not None and own.execute == "none":
            mode, detail = "none", own.reason or \
                f"declared execute = \"none\" in [tool.bench.toolsets.{toolset}]"
        elif own is not None and own.execute == "mcp":
            assert own.server is not None
            mode, detail = "mcp", (f"MCP server {server_label(own.server)}, "
                                   f"{own.timeout_s:g} s per call")
        elif own is not None:
            mode, detail = "python", (f"Python module {own.module}, "
                                      f"{own.timeout_s:g} s per call")
        elif toolset in REFERENCE_TOOLSETS:
            mode, detail = "reference", "bench's reference backend"
        else:
            mode, detail = "no_backend", ("no backend: declare one under "
                                          f"[tool.bench.toolsets.{toolset}] in {PYPROJECT} "
                                          "(execute = \"mcp\", \"python\" or \"none\")")
        entry = ManifestExecution(mode=mode, detail=detail)
        if mode == "reference":
            entry.labels = "reference"
        elif mode in ("mcp", "python"):
            entry.labels = "reset" if own is not None and own.reset else "recorded"
        entry.writes = writes
        found[toolset] = entry
    return found


def case_context(case: Case, context: RunContext) -> RunContext:
    """``context`` (run id, trial, permissions) for ``case``'s calls: its ``case_id``, and a
    single-answer case's ``state`` sets ``state`` (its overrides, run on a private copy of
    bench's reference database) and ``user_id`` (its signed-in customer). An episode's state
    is its own database's (:mod:`bench.episodes.state`), not set here."""
    state = case.state
    if state is not None and case.kind != "episode":
        return dataclasses.replace(context, case_id=case.id, state=tuple(state.overrides),
                                   user_id=state.user_id)
    return dataclasses.replace(context, case_id=case.id)


class ResetCommand:
    """A toolset's declared ``reset`` command as a callable: runs it in the project folder,
    its output appended to ``log``.

    Args:
        toolset: the toolset's name (for messages).
        settings: its settings (``reset``, ``reset_timeout_s``; ``${NAME}`` expanded when
            run, so a token never has to be written down).
        cwd: the project folder.
        log: the file that receives the command's stdout and stderr.

    Raises (when called):
        BenchError: the command cannot start, exits non-zero or takes longer than
            ``reset_timeout_s``: labels must not run on a system that was not reset.
    """

    def __init__(self, toolset: str, settings: ToolsetSettings, cwd: Path, log: Path) -> None:
        self.toolset = toolset
        self.settings = settings
        self.cwd = cwd
        self.log = log
        self.runs = 0

    def __call__(self) -> None:
        import subprocess

        from bench.toolset_config import expand

        from bench.redact import register_command_secrets

        assert self.settings.reset
        argv = [expand(part) for part in self.settings.reset]
        register_command_secrets(argv)  # its output may echo them (--password X)
        where = f"[tool.bench.toolsets.{self.toolset}] reset"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(argv, cwd=self.cwd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  timeout=self.settings.reset_timeout_s, check=False)
        except subprocess.TimeoutExpired as exc:
            self._keep(exc.output)
            raise BenchError(f"{where} did not finish within "
                             f"{self.settings.reset_timeout_s:g} s (reset_timeout_s); "
                             f"its output: {self.log}") from None
        except OSError as exc:
            raise BenchError(f"{where} could not start {argv[0]!r}: "
                             f"{exc.strerror or exc}") from None
        self._keep(done.stdout)
        self.runs += 1
        if done.returncode != 0:
            raise BenchError(f"{where} failed (exit {done.returncode}); its output: "
                             f"{self.log}")

    def _keep(self, output: bytes | None) -> None:
        """Append the command's output to the log, redacted: its argv and output may hold
        the values of ``${NAME}`` references, which never reach disk."""
        from bench.redact import redact_bytes

        with open(self.log, "ab") as log:
            log.write(redact_bytes(output or b""))


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
        mcp_error_pattern: with ``mcp_command`` (``--error-pattern``): a Python regular
            expression whose match in a text result of the server's tools fails the call
            (:func:`~bench.executor.outcome.failing_on_text`; searched with a time limit,
            :data:`~bench.executor.outcome.ERROR_PATTERN_TIMEOUT_S`), as a toolset's
            ``error_pattern`` does; None: only ``isError`` fails a call.
        project_root: the project folder whose ``pyproject.toml`` may declare how its own
            toolsets execute (:mod:`bench.toolset_config`); None: none declared.
        toolsets: the run's toolsets: their declared backends start now, so a server that
            cannot start fails the run before any row.

    A stdio server's stderr goes to ``mcp-server-<toolset>.log`` in the run folder
    (``--execute-mcp``'s: :data:`MCP_LOG`), never to the terminal.

    Raises:
        BenchError: an MCP server cannot be started or reached, a Python module of tools
            cannot be imported, or the project's toolset settings are invalid.
    """

    def __init__(self, run_dir: Path, run_id: str, *, allow_writes: bool = False,
                 allow_sensitive: bool = False, mcp_command: Sequence[str] | None = None,
                 mcp_error_pattern: str | None = None,
                 project_root: Path | None = None, toolsets: Sequence[str] = ()) -> None:
        self.run_id = run_id
        self.allow_writes = allow_writes
        self.allow_sensitive = allow_sensitive
        self._mcp = None
        self._closers: list[Any] = []
        self.mcp_handlers: dict[str, Handler] | None = None  # an MCP server's handlers (episodes run on them too)
        self.settings = load_toolset_settings(project_root) \
            if project_root is not None and not mcp_command else {}
        self._project_root = project_root
        self._run_dir = Path(run_dir)
        self._own: dict[str, Backend] = {}
        if mcp_command:
            from bench.executor.backends.mcp import McpBackend
            self._mcp = McpBackend(mcp_command[0], list(mcp_command[1:]),
                                   errlog=self._run_dir / MCP_LOG, name="--execute-mcp")
            mcp_handlers = self._mcp.handlers()
            if mcp_error_pattern:  # errors the server answers as text, without isError
                pattern = compile_error_pattern(mcp_error_pattern)
                mcp_handlers = {name: dataclasses.replace(handler, run=failing_on_text(
                    handler.run, pattern)) for name, handler in mcp_handlers.items()}
            self.mcp_handlers = mcp_handlers
            source: Any = lambda _toolset: mcp_handlers  # noqa: E731 - one server, every toolset
        else:
            reference = ReferenceBackends()
            try:
                for toolset in dict.fromkeys(toolsets):
                    if toolset in self.settings:
                        self._own[toolset] = self._open(toolset, self.settings[toolset])
            except BaseException:
                self._close_backends()
                raise

            def source(toolset: str) -> Mapping[str, Handler]:
                if toolset in self.settings:
                    if toolset not in self._own:
                        self._own[toolset] = self._open(toolset, self.settings[toolset])
                    return self._own[toolset]
                return reference(toolset)
        self.traces = TraceWriter(Path(run_dir) / TRACES)
        self.executor = Executor(source, traces=self.traces)
        self.judge = ExecutionJudge(self.executor)

    def _open(self, toolset: str, settings: ToolsetSettings) -> Backend:
        """Start the declared backend of ``toolset``; its handlers carry its timeout.

        A tool in ``read_only`` gets the handler tag ``read`` (an MCP server's tool without
        ``readOnlyHint`` is otherwise a write); an MCP server's tools renamed at import are
        called by the names ``server_names`` keeps.

        Raises:
            BenchError: the backend does not start, or ``writes``, ``compare``,
                ``read_only`` or ``server_names`` (its keys, bench names) names a tool the
                backend does not have (a misspelt name would leave its tool refused,
                compared exactly or called by another name, without a word; names the file
                and field).
        """
        if settings.execute == "none":
            return Backend({}, Owner.USER)
        if settings.execute == "mcp":
            from bench.executor.backends.mcp import McpBackend
            server = settings.expanded_server()
            if isinstance(server, str):
                backend = McpBackend(url=server, names=settings.server_names)
            else:
                if not server:
                    raise BenchError(f"toolset '{toolset}': empty server command")
                from bench.importers.mcp_server import server_target
                target = server_target(server)
                backend = McpBackend(target.command, target.args,
                                     env=settings.expanded_env(), cwd=self._project_root,
                                     errlog=self._run_dir / f"mcp-server-{toolset}.log",
                                     names=settings.server_names, name=f"toolset '{toolset}'",
                                     max_restarts=settings.max_restarts)
            self._closers.append(backend)
            handlers = backend.handlers()
        else:
            from bench.executor.backends.python import PythonBackend
            from bench.importers.python_module import import_python
            assert settings.module is not None
            try:
                _, tools = import_python(settings.module, base=self._project_root)
            except BenchError as exc:
                if exc.file is not None:  # names the module's file (and line) already
                    raise
                raise BenchError(exc.message, file=Path(self._project_root or ".") / PYPROJECT,
                                 field=f"tool.bench.toolsets.{toolset}.module") from None
            handlers = PythonBackend(tools).handlers()
        for field, names in (("writes", settings.writes), ("compare", list(settings.compare)),
                             ("read_only", settings.read_only),
                             ("server_names", list(settings.server_names))):
            unknown = [name for name in names if name not in handlers]
            if unknown:  # a misspelt name would leave its tool refused / compared exactly
                self._close_backends()
                raise BenchError(f"{field} names {', '.join(map(repr, unknown))}, not a tool "
                                 f"of this toolset (tools: {', '.join(sorted(handlers))})",
                                 file=Path(self._project_root or ".") / PYPROJECT,
                                 field=f"tool.bench.toolsets.{toolset}.{field}")
        # read_only: the user's word over a server's missing readOnlyHint
        timed = {name: dataclasses.replace(
            handler, timeout_s=settings.timeout_s,
            permission="read" if name in settings.read_only else handler.permission)
            for name, handler in handlers.items()}
        reset = None
        if settings.reset:
            reset = ResetCommand(toolset, settings, self._project_root or Path("."),
                                 self._run_dir / f"reset-{toolset}.log")
        pattern = settings.error_regex()
        if pattern is not None:  # errors the toolset answers as text, without isError
            timed = {name: dataclasses.replace(handler, run=failing_on_text(handler.run, pattern))
                     for name, handler in timed.items()}
        return Backend(timed, Owner.USER, reset=reset, compare=settings.comparisons(),
                       describe=f"{settings.execute} toolset '{toolset}'")

    def row_metrics(self, case: Case, tools: Sequence[Tool], toolset: str,
                    parsed: ParsedAnswer, trial: int,
                    unexecutable: Collection[int] = ()) -> ExecutionMetrics:
        """Execution metrics for one row (see :mod:`bench.executor.judge`).

        Args:
            case: the :class:`~bench.models.Case`.
            tools: the variant's tools.
            toolset: the case's toolset.
            parsed: the :class:`~bench.parse.ParsedAnswer` (``error`` set: undecodable).
            trial: the trial number.
            unexecutable: indices of the answer's calls that hold a placeholder, never run
                (the ``oracle``'s ``request.unexecutable_calls``).
        """
        calls = None if parsed.error is not None else parsed.calls
        return self.judge.metrics(case.expected, calls, tools, toolset,
                                  self._context(case, trial), unexecutable)

    def prepare(self, case: Case, tools: Sequence[Tool], toolset: str) -> None:
        """Compute (and memoise) the reference results of ``case``'s label under ``tools``
        ahead of its rows; the runner calls it while it waits for answers.

        Raises:
            Whatever the executor raises; the row's own :meth:`row_metrics` will raise it again.
        """
        self.judge.prepare(case.expected, tools, toolset, self._context(case, 0))

    def _context(self, case: Case, trial: int) -> RunContext:
        """The calls' context of one row of ``case``; a single-answer case's ``state`` (its
        overrides and signed-in customer) applies to its label's calls and its answers'
        alike (:func:`case_context`)."""
        own = self.settings.get(case.toolset or "")
        return case_context(case, RunContext(
            run_id=self.run_id, trial=trial, allow_writes=self.allow_writes,
            allow_sensitive=self.allow_sensitive,
            write_tools=frozenset(own.writes) if own else frozenset()))

    def _close_backends(self) -> None:
        while self._closers:
            self._closers.pop().close()

    def close(self) -> None:
        """Stop the executor's threads, close the trace file and stop the servers started."""
        self.executor.close()
        self.traces.close()
        if self._mcp is not None:
            self._mcp.close()
        self._close_backends()
