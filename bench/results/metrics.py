"""A result row's scores (:class:`RowMetrics`)."""

from __future__ import annotations

from pydantic import Field

from bench.results.base import _Record


class RowMetrics(_Record):
    """Per-row scores (:class:`bench.scoring.metrics.CaseScore`, the executor's
    ``execution_*`` and BFCL's ``bfcl_*``); None where a metric does not apply, absent on rows
    written before it existed. Binary metrics are booleans, fractions are in [0, 1]."""

    selection_correct: bool | None = Field(
        default=None, description="expected tool names equal the "
                                  "called ones (multiset)")
    selection_precision: float | None = Field(
        default=None, ge=0, le=1, description="fraction; None on no-call/ask")
    selection_recall: float | None = Field(
        default=None, ge=0, le=1, description="fraction; None on no-call/ask")
    selection_f1: float | None = Field(
        default=None, ge=0, le=1, description="fraction; None on no-call/ask")
    arguments_correct: bool | None = None
    task_success: bool | None = Field(
        default=None, description="episodes: state checks and answer "
                                  "facts hold (bench.scoring.episodes)")
    trajectory_recall: float | None = Field(
        default=None, ge=0, le=1, description="episodes: fraction")
    trajectory_precision: float | None = Field(default=None, ge=0, le=1,
                                                       description="episodes: fraction")
    recovery: float | None = Field(
        default=None, ge=0, le=1, description="episodes: fraction of error "
                                              "results recovered from")
    steps: int | None = Field(default=None, ge=0, description="episodes: model answers")
    tool_calls: int | None = Field(default=None, ge=0, description="episodes: calls made")
    repeated_calls: int | None = Field(
        default=None, ge=0, description="episodes: identical repeats")
    forbidden_attempted: bool | None = Field(
        default=None, description="episodes: a forbidden call "
                                  "was made")
    forbidden_calls: int | None = Field(
        default=None, ge=0, description="episodes: forbidden calls "
                                        "made")
    state_checks_passed: float | None = Field(default=None, ge=0, le=1, description=(
        "episodes: fraction of the state checks that hold; None without any, or when they "
        "could not run"))
    answer_facts_found: float | None = Field(default=None, ge=0, le=1, description=(
        "episodes: fraction of the label's answer facts the final answer states; None "
        "without any"))
    order_violations: int | None = Field(default=None, ge=0, description=(
        "episodes: 'after' constraints the matched required calls break"))
    errors_seen: int | None = Field(
        default=None, ge=0, description="episodes: calls that returned "
                                        "an error")
    stopped_by_guard: bool | None = Field(default=None, description="episodes: the loop guard "
                                                                    "stopped the episode")
    arguments_correct_lenient: bool | None = None
    argument_results: dict[str, bool] | None = Field(default=None, description=(
        "'<call index>.<argument>' -> acceptable"))
    schema_valid: bool | None = None
    schema_valid_lenient: bool | None = None
    no_call_correct: bool | None = None
    ask_correct: bool | None = Field(default=None, description=(
        "ask cases: no call and the reply names what is missing (before ask_for labels: no "
        "call)"))
    ask_no_call: bool | None = Field(default=None, description="ask cases: no call was made")
    hallucinated_tool: bool | None = None
    hallucinated_argument: bool | None = None
    missing_required: bool | None = None
    enum_case_error: bool | None = None
    type_error: bool | None = None
    lenient_repairs: list[str] | None = None
    error_codes: list[str] | None = Field(default=None, description="sorted distinct error codes")
    argument_errors: list[str] | None = Field(default=None, description=(
        "'tool.argument: expected -> got' for wrong values"))
    execution_success: bool | None = Field(default=None, description=(
        "every call the run allowed ran without error (executor; refused calls left out, "
        "None when all were refused)"))
    write_refused: bool | None = Field(default=None, description=(
        "the executor refused a call for want of a permission (permission_denied: a write "
        "or sensitive tool the run does not allow)"))
    execution_match: bool | None = Field(default=None, description="the calls' results equal the "
                                                                   "label's (executor)")
    execution_errors: dict[str, int] | None = Field(default=None, description=(
        "error class -> failed calls among those allowed to run (executor)"))
    retrieval_recall: float | None = Field(default=None, ge=0, le=1, description=(
        "tool retrieval: fraction of the expected tools the model was sent (recall@k); None "
        "on no-call/ask"))
    retrieved_all: bool | None = Field(default=None, description=(
        "tool retrieval: every expected tool was sent; None on no-call/ask"))
    error_not_retrieved: bool | None = Field(default=None, description=(
        "tool retrieval: wrong selection and an expected tool was not sent"))
    error_confused: bool | None = Field(default=None, description=(
        "tool retrieval: wrong selection although every expected tool was sent"))
    bfcl_valid: bool | None = Field(
        default=None, description="BFCL's own checker verdict (imported "
                                  "BFCL datasets)")
    bfcl_error_type: str | None = Field(
        default=None, description="BFCL's error type, None when valid")
    execution_match_skipped: str | None = Field(default=None, description=(
        "why execution_match is None for the label's sake (bench.executor.judge.SKIP_REASONS: "
        "label_failed, label_refused, label_unbuildable, not_recorded, recording_stale, "
        "not_compared, label_not_executable)"))
