"""Execution metrics of one answer: run the predicted calls, and the expected calls they should
match (BRIEF §6: execution success, execution match).

- ``execution_success``: on a case expecting calls, at least one call was made and every
  predicted call the run allowed to run validated and ran without error (a fallback's data
  counts as an error here). A call the executor refused because the run does not allow it
  (``permission_denied``: a write or sensitive tool without ``--allow-writes``, ``writes =
  [...]`` or ``--allow-sensitive``) is the run's policy, not the model's failure: it is left
  out, and the metric is None when every call of the answer was refused (nothing ran to
  judge). False for an unparseable answer or no call at all. None on no-call and ask cases.
  An error is what the backend reports: on a user's own tools an MCP result's ``isError``, a
  Python function's exception, or a text result matching the toolset's ``error_pattern``
  (:mod:`bench.toolset_config`; without it a server's error answered as text is a success).
- ``write_refused``: on a case expecting calls whose answer was decoded and run on a backend,
  True when the executor refused at least one of its calls for want of a permission
  (``permission_denied``), else False; None where nothing ran (no backend, an unparseable
  answer, a no-call or ask case).
- ``execution_match``: the predicted calls return what the expected calls return, as
  multisets (in order when the case is ordered). Each expected call is built from the first
  acceptable value of every argument that is a literal or a ``$regex``'s ``"$example"``;
  when an argument offers only matchers without one (``$any``, a bare ``$regex``) the
  expected call cannot be built and the metric is None. Results
  compare by tool name and canonical JSON of the data (errors by code and message), so
  ``"Beijing"`` and ``"北京"`` match when the backend answers both alike.
- ``execution_errors``: counts of the final error classes of the predicted calls that
  were allowed to run (refusals are ``write_refused``'s, not errors of the answer).

A call of a tool that has no implementation in a backed toolset (``no_backend``: e.g. a
pydantic model imported as a schema-only tool) was not run: both metrics are None for that
answer, as for a toolset without any backend. So is a call the answer marks unexecutable
(``no_literal_value``: the ``oracle`` provider's call of a label whose argument is only a
pattern, answered with a placeholder, :mod:`bench.providers.oracle`): it is refused before
the pipeline starts, so no placeholder ever reaches a system; the answer's other calls run.

Where the expected results come from (docs/executor.md, "Where expected results come from"):
a label's calls run only on a system bench may run them on
(:attr:`~bench.executor.backends.base.Backend.runs_labels`): bench's own reference
backends, or a user's toolset with a declared ``reset`` (reset before the label's calls and
again before each row's calls, one case at a time). On any other user system the results
``bench labels record`` stored with the case (``expected.recorded``) are compared, while the
label's calls and each called tool's input schema are the ones recorded
(:func:`recording_current`); without them ``execution_match`` is None. Never a match: a predicted call that failed (any error,
a fallback's data included), whatever the label's result. A label whose own call fails (run
or recorded) is the label's problem: ``execution_match`` is None. Every None set for the
label's sake names why in ``execution_match_skipped`` (:data:`SKIP_REASONS`). Results of a
tool compare as its toolset's ``compare`` says (:func:`compared_body`). A single-answer case
with ``state`` runs its label's and its answers' calls on a copy with that state
(``RunContext.state``, :mod:`bench.executor.backends.states`); a label that declares
``expected.not_executable`` is never run (``label_not_executable``), and its answers'
``execution_success`` is None too: the right call cannot succeed alone either.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import replace
from typing import Any, Sequence, TypedDict

from bench.datasets.loader import label_literal
from bench.executor.outcome import ERROR_CLASSES, ExecutionOutcome, RunContext, ToolError
from bench.executor.pipeline import Executor
from bench.jsonl import canonical_bytes
from bench.models import Expected, ExpectedCall, RecordedResult, Tool, ToolCall
from bench.redact import redact_data
from bench.toolset_config import Comparison

_NOT_BUILDABLE = object()
#: The error code of a call the run's permissions refused (bench.executor.pipeline).
REFUSED = "permission_denied"
#: The error code of a call refused because it holds a placeholder, not a value
#: (:meth:`ExecutionJudge.metrics`' ``unexecutable``).
NO_LITERAL_VALUE = "no_literal_value"
#: Error codes of calls that were not run for reasons not the answer's: the run's policy
#: (``permission_denied``) or a placeholder (``no_literal_value``).
_NOT_RUN = frozenset({REFUSED, NO_LITERAL_VALUE})


def execute_answer(calls: Sequence[ToolCall], tools: Sequence[Tool], toolset: str,
                   executor: Executor, context: RunContext,
                   unexecutable: Collection[int] = ()) -> list[ExecutionOutcome]:
    """Execute an answer's calls in order, each with its own context.

    Args:
        calls: the parsed calls.
        tools: the tools the model was shown.
        toolset: the backend toolset.
        executor: the executor (shared; thread-safe).
        context: run id, case id, trial, user and permissions.
        unexecutable: indices of calls never to run (they hold a placeholder, not a value):
            each is refused with :data:`NO_LITERAL_VALUE` (:meth:`Executor.refuse`).

    Returns:
        One :class:`ExecutionOutcome` per call, in the same order.
    """
    by_name = {t.name: t for t in tools}
    return [executor.refuse(call, ToolError(
                "permanent", NO_LITERAL_VALUE, f"'{call.name}' was not executed: an argument "
                "holds a placeholder, not a value (its label gives only a pattern: $any, or a "
                "$regex without \"$example\")"), context)
            if index in unexecutable else executor.execute(call, by_name, toolset, context)
            for index, call in enumerate(calls)]


def build_expected_call(expected: ExpectedCall, index: int) -> ToolCall | None:
    """The call the label describes: per argument its first acceptable value that is a
    literal or a ``$regex``'s ``"$example"`` (:func:`bench.datasets.loader.label_literal`),
    an argument that may be omitted (``null``) and has none left out; None when an argument
    that must be sent has only matchers without an example (``$any``, a bare ``$regex``)."""
    arguments: dict[str, Any] = {}
    for name, acceptable in expected.arguments.items():
        value = next((v for ok, v in map(label_literal, acceptable) if ok), _NOT_BUILDABLE)
        if value is _NOT_BUILDABLE:
            if None in acceptable:
                continue  # may be omitted
            return None
        arguments[name] = value
    return ToolCall(id=f"expected_{index}", name=expected.name, arguments=arguments)


#: Why ``execution_match`` is None for the label's sake (``execution_match_skipped``):
#: ``label_failed`` (the label's own call fails, run or recorded: fix the label),
#: ``label_refused`` (the run does not allow one of the label's writes),
#: ``label_unbuildable`` (an argument offers only matchers), ``not_recorded`` (a user's
#: system without a reset: nothing recorded, see ``bench labels record``),
#: ``recording_stale`` (the label, or a called tool's input schema, changed since its
#: results were recorded, or they were recorded without the schema's hash),
#: ``not_compared`` (every called tool has ``compare = "none"``), ``label_not_executable``
#: (the label declares why its calls cannot run on their own: ``expected.not_executable``).
SKIP_REASONS = ("label_failed", "label_refused", "label_unbuildable", "not_recorded",
                "recording_stale", "not_compared", "label_not_executable")


def _shape(value: Any) -> Any:
    """The JSON types of ``value``: objects keep their keys, arrays the distinct shapes of
    their items (sorted), scalars become their type's name (``"string"``, ``"number"``...)."""
    if isinstance(value, dict):
        return {str(k): _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes = {canonical_bytes(_shape(v)): _shape(v) for v in value}
        return [shapes[k] for k in sorted(shapes)]
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else type(value).__name__


def _without(value: Any, fields: frozenset[str]) -> Any:
    """``value`` with every object key in ``fields`` removed, at any depth."""
    if isinstance(value, dict):
        return {k: _without(v, fields) for k, v in value.items() if k not in fields}
    if isinstance(value, list):
        return [_without(v, fields) for v in value]
    return value


def compared_body(data: Any, how: Comparison = "exact") -> str:
    """The text two results of a tool must share to match: canonical JSON of ``data``
    (``exact``), of its JSON types (``shape``), of it without the named fields (a tuple of
    field names, dropped at any depth), or a constant (``none``: any successful result
    matches)."""
    if how == "none":
        return "-"
    if how == "shape":
        data = _shape(data)
    elif isinstance(how, tuple):
        data = _without(data, frozenset(how))
    return canonical_bytes(data).decode("utf-8")


def result_key(outcome: ExecutionOutcome, how: Comparison = "exact", *,
               redacted: bool = False) -> tuple[str, str]:
    """(tool, compared result) used to compare a predicted and an expected result
    (:func:`compared_body`; a failure keys on its code and message). ``redacted``: the data
    as :func:`bench.redact.redact_data` leaves it, as ``bench labels record`` stores it, so
    that a result holding a secret still equals its recording."""
    if outcome.success and not outcome.fallback_used:
        body = compared_body(redact_data(outcome.data) if redacted else outcome.data, how)
    else:
        body = f"error:{outcome.error_code}:{outcome.error}"
    return outcome.tool, body


def failed(outcome: ExecutionOutcome) -> bool:
    """The call did not return its own data: any error, or a fallback's data."""
    return not outcome.success or outcome.fallback_used


#: JSON Schema annotation keywords: they explain a value but never change which values are
#: valid (JSON Schema 2020-12 Validation, section 9 "Basic Meta-Data Annotations"; ``$comment``
#: from Core, section 8.3), so variants may reword them without changing the tool.
_ANNOTATIONS = frozenset({"title", "description", "examples", "$comment", "deprecated",
                          "readOnly", "writeOnly"})
#: Keywords whose value maps names to subschemas (JSON Schema 2020-12 Core, section 10).
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions",
                          "dependentSchemas"})
#: Keywords whose value is a subschema or a list of subschemas (same section).
_SCHEMA_VALUES = frozenset({"items", "additionalItems", "prefixItems", "additionalProperties",
                            "unevaluatedItems", "unevaluatedProperties", "propertyNames",
                            "contains", "not", "if", "then", "else", "allOf", "anyOf",
                            "oneOf"})


def _without_annotations(schema: Any) -> Any:
    """``schema`` with every annotation keyword (:data:`_ANNOTATIONS`) removed at schema
    positions only (a property named ``description`` stays; ``enum``/``const`` data are
    left alone)."""
    if isinstance(schema, list):
        return [_without_annotations(s) for s in schema]
    if not isinstance(schema, dict):
        return schema  # a boolean schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _without_annotations(sub) for name, sub in value.items()}
        elif key in _SCHEMA_VALUES:
            out[key] = _without_annotations(value)
        else:
            out[key] = value
    return out


def schema_sha256(schema: dict[str, Any]) -> str:
    """SHA-256 (hex) of a tool's input schema as canonical JSON (:func:`bench.jsonl.
    canonical_bytes`) without its annotations (titles, descriptions, examples): the tool's
    identity a recording is tied to. Descriptions may change freely (variants reword them);
    an argument, type, enum, default or required list may not."""
    return hashlib.sha256(canonical_bytes(_without_annotations(schema))).hexdigest()


def recording_current(recorded: Sequence[RecordedResult], expected: Expected,
                      tools: Mapping[str, Tool] | Sequence[Tool]) -> bool:
    """The recorded results were made for the label's calls as they are now (the same
    tools and arguments built by :func:`build_expected_call`, in order) and for the tools
    as they are now: each result's ``schema_sha256`` equals :func:`schema_sha256` of its
    tool's input schema in ``tools`` (name -> tool, or a list). A result without the hash
    (recorded before bench stored it) or of a tool ``tools`` lacks is not current: stale is
    the safe answer, since nothing says the tool is the one recorded."""
    by_name = tools if isinstance(tools, Mapping) else {t.name: t for t in tools}
    built = [build_expected_call(e, i) for i, e in enumerate(expected.calls)]
    return len(recorded) == len(built) and all(
        b is not None and r.name == b.name
        and canonical_bytes(r.arguments) == canonical_bytes(b.arguments)
        and r.schema_sha256 is not None and r.name in by_name
        and r.schema_sha256 == schema_sha256(by_name[r.name].input_schema)
        for r, b in zip(recorded, built))


Reference = tuple[list[tuple[str, str]] | None, str | None]
"""The label's result keys, or None and why (:data:`SKIP_REASONS`)."""


class ExecutionJudge:
    """Computes the execution metrics of answers; caches expected-call results.

    Args:
        executor: the executor that runs both predicted and expected calls.
    """

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._expected_cache: dict[tuple[Any, ...], ExecutionOutcome] = {}
        # per (label, tool list) object pair: the reference result keys (see _reference_keys)
        self._reference_memo: dict[tuple[Any, ...],
                                   tuple[Expected, Sequence[Tool], Reference]] = {}

    @staticmethod
    def _key(call: ToolCall, tools: dict[str, Tool], toolset: str,
             context: RunContext) -> tuple[Any, ...]:
        return (toolset, call.name, canonical_bytes(call.arguments),
                canonical_bytes(tools[call.name].input_schema) if call.name in tools else None,
                context.user_id, context.allow_writes, context.allow_sensitive,
                context.write_tools, context.state)

    def _expected_outcome(self, call: ToolCall, tools: dict[str, Tool], toolset: str,
                          context: RunContext) -> ExecutionOutcome:
        key = self._key(call, tools, toolset, context)
        found = self._expected_cache.get(key)
        if found is None:
            # the reference side runs clean: no injected faults, no trace lines
            found = self.executor.execute(call, tools, toolset,
                                          replace(context, inject_faults=False, trace=False,
                                                  label_side=True))
            self._expected_cache[key] = found  # same key -> same value; a race only repeats
        return found

    def _reference_keys(self, expected: Expected, tools: Sequence[Tool], toolset: str,
                        context: RunContext) -> Reference:
        """:func:`result_key` of each call the label describes, or None and why
        (:data:`SKIP_REASONS`). The calls run only where the toolset's backend
        :attr:`~bench.executor.backends.base.Backend.runs_labels` (after its reset, if it
        declares one: the caller holds the backend's lock); on any other system the results
        recorded with the case are used, and nothing runs.

        Memoised on the identity of ``expected`` and ``tools`` (every trial, provider and
        row of a variant shares them) and the permissions; an entry keeps both objects alive,
        so an id is never reused while cached.
        """
        backend = self.executor.handlers_for(toolset)
        compare = backend.compare
        if expected.not_executable is not None:
            return None, "label_not_executable"
        if not backend.runs_labels:
            return self._recorded_keys(expected, tools, compare)
        memo_key = (id(expected), id(tools), toolset, context.user_id, context.allow_writes,
                    context.allow_sensitive, context.write_tools, context.state)
        memo = self._reference_memo.get(memo_key)
        if memo is not None and memo[0] is expected and memo[1] is tools:
            return memo[2]
        built = [build_expected_call(e, i) for i, e in enumerate(expected.calls)]
        calls = [b for b in built if b is not None]
        found: Reference = (None, "label_unbuildable")
        if len(calls) == len(built):  # every expected call could be built
            by_name = {t.name: t for t in tools}
            if backend.reset is not None and not all(
                    self._cached(c, by_name, toolset, context) for c in calls):
                backend.reset()  # the label starts from the state every row starts from
            reference = [self._expected_outcome(c, by_name, toolset, context) for c in calls]
            if any(o.error_code == "permission_denied" for o in reference):
                found = (None, "label_refused")
            elif any(failed(o) for o in reference):
                found = (None, "label_failed")
            else:
                found = _compared([result_key(o, compare.get(o.tool, "exact"))
                                   for o in reference], compare)
        if len(self._reference_memo) >= 65_536:
            self._reference_memo.clear()
        self._reference_memo[memo_key] = (expected, tools, found)
        return found

    def _cached(self, call: ToolCall, tools: dict[str, Tool], toolset: str,
                context: RunContext) -> bool:
        """The expected call's outcome is cached (:meth:`_expected_outcome` will not run
        it)."""
        return self._key(call, tools, toolset, context) in self._expected_cache

    @staticmethod
    def _recorded_keys(expected: Expected, tools: Sequence[Tool],
                       compare: dict[str, Comparison]) -> Reference:
        """The label's result keys from its recorded results (``bench labels record``);
        ``recording_stale`` when the label or a tool's input schema changed since
        (:func:`recording_current`)."""
        recorded = expected.recorded
        if recorded is None:
            return None, "not_recorded"
        if not recording_current(recorded.results, expected, tools):
            return None, "recording_stale"
        if any(not r.ok for r in recorded.results):
            return None, "label_failed"
        return _compared([(r.name, compared_body(r.data, compare.get(r.name, "exact")))
                          for r in recorded.results], compare)

    def prepare(self, expected: Expected, tools: Sequence[Tool], toolset: str,
                context: RunContext) -> None:
        """Memoise the label's reference results now (see :meth:`_reference_keys`), so that
        :meth:`metrics` finds them; nothing to do for no-call labels, unbacked toolsets or
        a system where labels do not run."""
        backend = self.executor.handlers_for(toolset)
        if expected.calls and backend and backend.runs_labels:
            with backend.lock:
                self._reference_keys(expected, tools, toolset, context)

    def _unscored(self, expected: Expected, tools: Sequence[Tool], toolset: str,
                  context: RunContext) -> str | None:
        """Why the label of a case expecting calls gives nothing to compare with (None: it
        does, or the case expects no call)."""
        if not expected.calls:
            return None
        backend = self.executor.handlers_for(toolset)
        with backend.lock if backend.reset is not None else contextlib.nullcontext():
            return self._reference_keys(expected, tools, toolset, context)[1]

    def _run(self, expected: Expected, calls: Sequence[ToolCall], tools: Sequence[Tool],
             toolset: str, context: RunContext, unexecutable: Collection[int] = ()
             ) -> tuple[list[ExecutionOutcome], Reference]:
        """The answer's outcomes and the label's reference (:meth:`_reference_keys`; none
        for a label without calls). On a backend with a reset, one row at a time: the label
        runs first (from a reset), then the system is reset again for the answer's calls."""
        backend = self.executor.handlers_for(toolset)
        with backend.lock if backend.reset is not None else contextlib.nullcontext():
            reference: Reference = (None, None)
            if expected.calls:
                reference = self._reference_keys(expected, tools, toolset, context)
            if backend.reset is not None:
                backend.reset()
            return execute_answer(calls, tools, toolset, self.executor, context,
                                  unexecutable), reference

    def metrics(self, expected: Expected, calls: Sequence[ToolCall] | None,
                tools: Sequence[Tool], toolset: str, context: RunContext,
                unexecutable: Collection[int] = ()) -> ExecutionMetrics:
        """``execution_success``, ``execution_match``, ``execution_errors`` and
        ``write_refused`` of one answer (and ``execution_match_skipped``, when the label is
        why ``execution_match`` is None).

        Args:
            expected: the case's label.
            calls: the parsed calls, or None when the answer could not be decoded.
            tools: the tools the model was shown.
            toolset: the backend toolset.
            context: run id, case id, trial, user and permissions.
            unexecutable: indices of ``calls`` that hold a placeholder, never run (module
                docstring): both metrics are None for the answer.

        Returns:
            The metrics, for a result row's ``metrics`` (see the module docstring).
        """
        expects_calls = bool(expected.calls)
        if not self.executor.handlers_for(toolset):
            return ExecutionMetrics(execution_success=None, execution_match=None,
                                    execution_errors={}, write_refused=None)
        if calls is None:
            unscored = self._unscored(expected, tools, toolset, context)
            undecoded = ExecutionMetrics(
                execution_success=False if expects_calls else None,
                execution_match=False if expects_calls and not unscored else None,
                execution_errors={}, write_refused=None)
            if unscored:
                undecoded["execution_match_skipped"] = unscored
            return undecoded
        outcomes, (want, why) = self._run(expected, calls, tools, toolset, context,
                                          unexecutable)
        # refused by the run's permissions: the policy's outcome, not the answer's failure;
        # a placeholder never ran either
        ran = [o for o in outcomes if o.error_code not in _NOT_RUN]
        errors = Counter(o.error_class for o in ran if not o.success or o.fallback_used)
        result = ExecutionMetrics(
            execution_errors={c: errors[c] for c in ERROR_CLASSES if errors[c]},
            execution_success=None, execution_match=None, write_refused=None)
        if not expects_calls:
            return result
        result["write_refused"] = any(o.error_code == REFUSED for o in outcomes)
        if any(o.error_code in ("no_backend", NO_LITERAL_VALUE) for o in outcomes):
            # a tool without an implementation (e.g. a schema-only one), or a placeholder:
            # not run, nothing to judge
            return result
        if ran or not outcomes:  # every call refused: nothing ran to judge, success stays None
            result["execution_success"] = bool(ran) and all(
                o.success and not o.fallback_used for o in ran)
        if want is None:
            result["execution_match_skipped"] = why
            if why == "label_not_executable":
                # the right call cannot succeed on its own either: nothing to judge
                result["execution_success"] = None
            return result
        if any(failed(o) for o in outcomes):  # identical failures are never a match
            result["execution_match"] = False
            return result
        backend = self.executor.handlers_for(toolset)
        got = [result_key(o, backend.compare.get(o.tool, "exact"),
                          redacted=not backend.runs_labels)  # compared with a recording
               for o in outcomes]
        result["execution_match"] = want == got if expected.ordered else \
            Counter(want) == Counter(got)
        return result


class ExecutionMetrics(TypedDict, total=False):
    """The execution metrics of one answer (:meth:`ExecutionJudge.metrics`; the module
    docstring defines them): fields of :class:`bench.results.RowMetrics`, of their types.
    ``execution_match_skipped`` (one of :data:`SKIP_REASONS`) is there only when the label is
    why ``execution_match`` is None."""

    execution_success: bool | None
    execution_match: bool | None
    execution_errors: dict[str, int]
    write_refused: bool | None
    execution_match_skipped: str | None


def _compared(keys: list[tuple[str, str]], compare: dict[str, Comparison]) -> Reference:
    """``keys``, or None and ``not_compared`` when every call's tool is ``compare =
    "none"``."""
    if keys and all(compare.get(tool) == "none" for tool, _ in keys):
        return None, "not_compared"
    return keys, None
