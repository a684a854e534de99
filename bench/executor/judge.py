"""Execution metrics of one answer: run the predicted calls, and the expected calls they should
match (BRIEF §6: execution success, execution match).

- ``execution_success``: on a case expecting calls, at least one call was made and every
  predicted call validated and ran without error (a fallback's data counts as an error here).
  False for an unparseable answer. None on no-call and ask cases.
- ``execution_match``: the predicted calls return what the expected calls return, as
  multisets (in order when the case is ordered). Each expected call is built from the first
  non-null literal acceptable value of every argument; when an argument offers only matchers
  (``$regex``, ``$any``) the expected call cannot be built and the metric is None. Results
  compare by tool name and canonical JSON of the data (errors by code and message), so
  ``"Beijing"`` and ``"北京"`` match when the backend answers both alike.
- ``execution_errors``: counts of the predicted calls' final error classes.

A call of a tool that has no implementation in a backed toolset (``no_backend``: e.g. a
pydantic model imported as a schema-only tool) was not run: both metrics are None for that
answer, as for a toolset without any backend.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any, Sequence

from bench.executor.outcome import ERROR_CLASSES, ExecutionOutcome, RunContext
from bench.executor.pipeline import Executor
from bench.jsonl import canonical_bytes
from bench.models import Expected, ExpectedCall, Tool, ToolCall

_NOT_BUILDABLE = object()


def execute_answer(calls: Sequence[ToolCall], tools: Sequence[Tool], toolset: str,
                   executor: Executor, context: RunContext) -> list[ExecutionOutcome]:
    """Execute an answer's calls in order, each with its own context.

    Args:
        calls: the parsed calls.
        tools: the tools the model was shown.
        toolset: the backend toolset.
        executor: the executor (shared; thread-safe).
        context: run id, case id, trial, user and permissions.

    Returns:
        One :class:`ExecutionOutcome` per call, in the same order.
    """
    by_name = {t.name: t for t in tools}
    return [executor.execute(call, by_name, toolset, context) for call in calls]


def _literal(value: Any) -> bool:
    return not (isinstance(value, dict) and any(str(k).startswith("$") for k in value))


def build_expected_call(expected: ExpectedCall, index: int) -> ToolCall | None:
    """The call the label describes (first non-null literal per argument), or None when an
    argument has only matchers."""
    arguments: dict[str, Any] = {}
    for name, acceptable in expected.arguments.items():
        value = next((v for v in acceptable if v is not None and _literal(v)), _NOT_BUILDABLE)
        if value is _NOT_BUILDABLE:
            if None in acceptable:
                continue  # may be omitted
            return None
        arguments[name] = value
    return ToolCall(id=f"expected_{index}", name=expected.name, arguments=arguments)


def result_key(outcome: ExecutionOutcome) -> tuple[str, str]:
    """(tool, canonical result) used to compare a predicted and an expected result."""
    if outcome.success and not outcome.fallback_used:
        body = canonical_bytes(outcome.data).decode("utf-8")
    else:
        body = f"error:{outcome.error_code}:{outcome.error}"
    return outcome.tool, body


class ExecutionJudge:
    """Computes the execution metrics of answers; caches expected-call results.

    Args:
        executor: the executor that runs both predicted and expected calls.
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._expected_cache: dict[tuple[Any, ...], ExecutionOutcome] = {}
        # per (label, tool list) object pair: the reference result keys (see _reference_keys)
        self._reference_memo: dict[tuple[Any, ...], tuple[Any, Any, Any]] = {}

    def _expected_outcome(self, call: ToolCall, tools: dict[str, Tool], toolset: str,
                          context: RunContext) -> ExecutionOutcome:
        key = (toolset, call.name, canonical_bytes(call.arguments),
               canonical_bytes(tools[call.name].input_schema) if call.name in tools else None,
               context.user_id, context.allow_writes, context.allow_sensitive,
               context.write_tools)
        found = self._expected_cache.get(key)
        if found is None:
            # the reference side runs clean: no injected faults, no trace lines
            found = self.executor.execute(call, tools, toolset,
                                          replace(context, inject_faults=False, trace=False))
            self._expected_cache[key] = found  # same key -> same value; a race only repeats
        return found

    def _reference_keys(self, expected: Expected, tools: Sequence[Tool], toolset: str,
                        context: RunContext) -> list[tuple[str, str]] | None:
        """:func:`result_key` of each call the label describes, run on the reference side;
        None when a call cannot be built from the label, or when the run does not allow one
        of its writes (nothing to compare).

        Memoised on the identity of ``expected`` and ``tools`` (every trial, provider and
        row of a variant shares them) and the permissions; an entry keeps both objects alive,
        so an id is never reused while cached.
        """
        memo_key = (id(expected), id(tools), toolset, context.user_id, context.allow_writes,
                    context.allow_sensitive, context.write_tools)
        memo = self._reference_memo.get(memo_key)
        if memo is not None and memo[0] is expected and memo[1] is tools:
            return memo[2]
        built = [build_expected_call(e, i) for i, e in enumerate(expected.calls)]
        calls = [b for b in built if b is not None]
        want: list[tuple[str, str]] | None = None
        if len(calls) == len(built):  # every expected call could be built
            by_name = {t.name: t for t in tools}
            reference = [self._expected_outcome(c, by_name, toolset, context) for c in calls]
            if not any(o.error_code == "permission_denied" for o in reference):
                want = [result_key(o) for o in reference]
        if len(self._reference_memo) >= 65_536:
            self._reference_memo.clear()
        self._reference_memo[memo_key] = (expected, tools, want)
        return want

    def prepare(self, expected: Expected, tools: Sequence[Tool], toolset: str,
                context: RunContext) -> None:
        """Memoise the label's reference results now (see :meth:`_reference_keys`), so that
        :meth:`metrics` finds them; nothing to do for no-call labels or unbacked toolsets."""
        if expected.calls and self.executor.handlers_for(toolset):
            self._reference_keys(expected, tools, toolset, context)

    def metrics(self, expected: Expected, calls: Sequence[ToolCall] | None,
                tools: Sequence[Tool], toolset: str, context: RunContext) -> dict[str, Any]:
        """``execution_success``, ``execution_match`` and ``execution_errors`` of one answer.

        Args:
            expected: the case's label.
            calls: the parsed calls, or None when the answer could not be decoded.
            tools: the tools the model was shown.
            toolset: the backend toolset.
            context: run id, case id, trial, user and permissions.

        Returns:
            A dict to merge into a result row's ``metrics`` (see the module docstring).
        """
        expects_calls = bool(expected.calls)
        if not self.executor.handlers_for(toolset):
            return {"execution_success": None, "execution_match": None, "execution_errors": {}}
        if calls is None:
            return {"execution_success": False if expects_calls else None,
                    "execution_match": False if expects_calls else None,
                    "execution_errors": {}}
        outcomes = execute_answer(calls, tools, toolset, self.executor, context)
        errors = Counter(o.error_class for o in outcomes if not o.success or o.fallback_used)
        result: dict[str, Any] = {
            "execution_errors": {c: errors[c] for c in ERROR_CLASSES if errors[c]},
            "execution_success": None, "execution_match": None}
        if not expects_calls:
            return result
        if any(o.error_code == "no_backend" for o in outcomes):
            return result  # a tool without an implementation (e.g. a schema-only one): not run
        result["execution_success"] = bool(outcomes) and all(
            o.success and not o.fallback_used for o in outcomes)
        want = self._reference_keys(expected, tools, toolset, context)
        if want is None:
            return result
        got = [result_key(o) for o in outcomes]
        result["execution_match"] = want == got if expected.ordered else \
            Counter(want) == Counter(got)
        return result
