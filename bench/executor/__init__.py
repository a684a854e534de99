"""The reference executor: validate and run predicted tool calls on real local backends with
production safeguards, and judge them (BRIEF §7). Entry points: :class:`Executor`,
:func:`execute_answer`, :class:`ExecutionJudge`, :class:`ReferenceBackends`."""

from bench.executor.backends import ReferenceBackends
from bench.executor.judge import ExecutionJudge, execute_answer
from bench.executor.outcome import ExecutionOutcome, RunContext, ToolError
from bench.executor.pipeline import Executor, ExecutorConfig

__all__ = ["ExecutionJudge", "ExecutionOutcome", "Executor", "ExecutorConfig",
           "ReferenceBackends", "RunContext", "ToolError", "execute_answer"]
