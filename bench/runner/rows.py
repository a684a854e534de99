"""Result rows: one scored row per plan item (BRIEF §5), and reading a stored run's rows."""

from __future__ import annotations

import platform
from collections import deque
import subprocess
from datetime import datetime, timezone
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypedDict

from bench.models import Case
from bench.paths import PACKAGE_PARENT
from bench.providers.base import ProviderResponse
from bench.providers.cache import messages_digest
from bench.parse import row_parsed
from bench.results import Row, RowEpisode, RowExpected, RowMetrics, RowRequest, RowResponse
from bench.runner.plan import PlanItem
from bench.scoring import score_case
from bench.scoring.bfcl import BfclSource, run_verdict
from bench.toolspace.setup import Retrieved

if TYPE_CHECKING:
    from bench.episodes.loop import EpisodeOutcome
    from bench.executor.judge import ExecutionMetrics
    from bench.executor.runhook import RunExecution

PACKAGES = ("bench", "llama_cpp_python", "pydantic", "jinja2", "jsonschema", "scipy", "numpy",

            "pandas", "rich", "typer", "bpe-openai", "PyYAML", "openai", "anthropic",
            "google-genai", "tenacity")


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_PARENT, text=True,
                             capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=PACKAGE_PARENT, text=True, capture_output=True, timeout=5,
                           check=False).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class CaseSummaries:
    """Each case's :func:`summarize_case`, computed once per run (the same for every variant,
    provider and trial)."""

    def __init__(self) -> None:
        self._summaries: dict[str, tuple[str, RowExpected]] = {}
        self._prepared: set[tuple[str, str]] = set()

    def of(self, case: Case) -> tuple[str, RowExpected]:
        """``(messages digest, expected label as rows store it)`` of ``case``."""
        summary = self._summaries.get(case.id)
        if summary is None:
            summary = self._summaries[case.id] = summarize_case(case)
        return summary

    def warm_up(self, sent: deque[PlanItem], execution: RunExecution | None) -> bool:
        """For one dispatched (case, variant) of ``sent``: the row's case summary and the
        label's reference results, computed while the loop would otherwise wait for an
        answer. Only for requests already sent (a label's reference calls may run on a
        user's MCP server: none for rows that a budget stop or failure never records).
        Returns False when there is nothing to do."""
        while sent:
            item = sent.popleft()
            if (item.case.id, item.variant.name) in self._prepared:
                continue
            self._prepared.add((item.case.id, item.variant.name))
            self.of(item.case)
            if execution is not None and item.case.kind != "episode":
                try:
                    execution.prepare(item.case, item.variant.tools, item.case.toolset)
                except Exception:  # noqa: BLE001 - the row's own scoring reports it
                    pass
            return True
        return False


def summarize_case(case: Case) -> tuple[str, RowExpected]:
    """``(messages digest, expected label as rows store it)`` of a case: the label's fields
    but its recorded results (``bench labels record``: they stay with the case, not in every
    row), and ``not_executable`` only when set (as in rows written before it existed). One
    :class:`bench.results.RowExpected` serves every row of the case (never changed)."""
    label = case.expected
    expected = RowExpected(calls=[c.model_dump() for c in label.calls], no_call=label.no_call,
                           ask=label.ask, ordered=label.ordered, ask_for=label.ask_for)
    if label.not_executable is not None:
        expected.not_executable = label.not_executable
    return messages_digest(case.messages), expected


class RowIdentity(TypedDict):
    """The fields that say which planned item a row is (:func:`_identity`)."""

    key: str
    run_id: str
    case_id: str
    toolset: str
    variant: str
    provider: str
    trial: int
    lang: str
    tags: list[str]
    info: str | None
    query: str
    expected: RowExpected


class RowSpace(TypedDict, total=False):
    """A row's optional fields of the tool space and the description
    (:func:`space_fields`, the nearest description unit)."""

    tool_count: int
    retrieval: dict[str, Any]
    nearest_description: dict[str, object]


class RetrievalMetrics(TypedDict, total=False):
    """A tool-space row's retrieval metrics (:func:`retrieval_metrics`): fields of
    :class:`bench.results.RowMetrics`, of their types."""

    retrieval_recall: float | None
    retrieved_all: bool | None
    error_not_retrieved: bool | None
    error_confused: bool | None


class BfclMetrics(TypedDict, total=False):
    """BFCL's own verdict on a row of an imported BFCL dataset (:func:`build_row`)."""

    bfcl_valid: bool | None
    bfcl_error_type: str | None


def _identity(item: PlanItem, run_id: str, expected: RowExpected) -> RowIdentity:
    """The fields that say which planned item a row is (its key first); ``variant`` is the
    item's condition (the variant's name unless episode factors changed a setting)."""
    return RowIdentity(key=item.key, run_id=run_id, case_id=item.case.id,
                       toolset=item.case.toolset, variant=item.condition,
                       provider=item.provider_id, trial=item.trial, lang=item.case.lang,
                       tags=item.case.tags, info=item.case.info, query=item.case.query,
                       expected=expected)


#: The request summary's fields a row sets itself (an adapter's own keys are kept as they are).
_ROW_HASHES = frozenset({"variant_sha256", "messages_sha256", "tools_sha256"})


def build_row(item: PlanItem, run_id: str, response: ProviderResponse, *,
              cost_usd: float | None = None, billed_usd: float | None = None,
              attempts: int = 1, cache: str | None = None,
              execution: RunExecution | None = None,
              case_summary: tuple[str, RowExpected] | None = None,
              bfcl: BfclSource | None = None) -> Row:
    """One ``results.jsonl`` row: request summary, raw response, parsed calls, metrics, cost,
    built through the results contract's constructors (:class:`bench.results.Row`: a row
    that does not fit it is a bench bug, caught here rather than by the next reader). An
    answer of the ``oracle`` holding a placeholder for a pattern-only argument
    (``request.unlabeled``) has no argument scores, and its calls listed in
    ``request.unexecutable_calls`` are never executed (:mod:`bench.providers.oracle`).

    Raises:
        pydantic.ValidationError: the row does not fit the contract (a bug in bench).

    Args:
        item: the plan item.
        run_id: the run's id.
        response: a :class:`~bench.providers.ProviderResponse`.
        cost_usd: what the request's tokens cost at list price (USD), None without a price.
        billed_usd: what this run paid for it (0 for cache hits and replays), USD.
        attempts: requests sent for it (retries included; 0 for a cache hit).
        cache: ``hit``, ``miss`` or None (cache off).
        execution: a :class:`bench.executor.runhook.RunExecution` adding execution metrics, or
            None (not executed).
        case_summary: ``(messages_sha256, expected)`` of ``item.case``
            (:func:`summarize_case`) when the caller keeps them (the same for every variant,
            provider and trial), else computed.
        bfcl: the case's BFCL entry (imported BFCL datasets): adds BFCL's own verdict as
            metrics ``bfcl_valid`` (bool; None when BFCL's checker cannot judge the entry)
            and ``bfcl_error_type`` (BFCL's error type, None when valid), see
            :func:`bench.scoring.bfcl.run_verdict`.
    """
    if case_summary is None:
        case_summary = summarize_case(item.case)
    messages_sha256, expected = case_summary
    score = score_case(item.case.expected, response.parsed, item.variant.tools)
    scores = score.as_dict()
    if response.request.get("unlabeled"):
        # the oracle answered a pattern-only argument with a placeholder: its argument
        # scores say nothing about the label (bench.providers.oracle; a table note counts it)
        scores["arguments_correct"] = scores["arguments_correct_lenient"] = None
    executed: ExecutionMetrics = {} if execution is None else execution.row_metrics(
        item.case, item.variant.tools, item.case.toolset, response.parsed, item.trial,
        unexecutable=response.request.get("unexecutable_calls") or ())
    retrieval = RetrievalMetrics()
    extra = RowSpace()
    if item.space is not None and item.retrieved is not None:
        # a native retriever's retrieval is what the answer's tool search loaded
        retrieved = item.retrieved.after_search(response.tool_search)
        retrieval = retrieval_metrics(retrieved, score.selection_correct)
        extra = space_fields(item, retrieved)
    nearest = _nearest_description(item)
    if nearest is not None:
        extra["nearest_description"] = nearest
    verdict = BfclMetrics()
    if bfcl is not None:
        checked = run_verdict(bfcl, response.parsed)
        verdict = BfclMetrics(
            bfcl_valid=None if checked.error_type == "bfcl_checker_error" else checked.valid,
            bfcl_error_type=checked.error_type)
    adapter = {k: v for k, v in response.request.items() if k not in _ROW_HASHES}
    return Row(
        **_identity(item, run_id, expected),
        request=RowRequest(**adapter, variant_sha256=item.variant.sha256,
                           messages_sha256=messages_sha256,
                           tools_sha256=item.tools_sha256),  # == tools_digest(tools sent)
        response=RowResponse(raw=response.raw, finish_reason=response.finish_reason,
                             request_id=getattr(response, "request_id", None)),
        parsed=row_parsed(response.parsed),
        metrics=RowMetrics(**scores, **executed, **retrieval, **verdict),
        usage=response.usage.as_row_usage(),
        cost_usd=None if cost_usd is None else round(cost_usd, 8),
        billed_usd=None if billed_usd is None else round(billed_usd, 8),
        attempts=attempts,
        cache=cache,
        tool_definition_tokens=response.tool_definition_tokens,
        latency_s=round(response.latency_s, 6),
        finished_at=_now(),
        **extra,
    )


def _nearest_description(item: PlanItem) -> dict[str, object] | None:
    """The case's nearest description unit in the item's variant, from the toolset folder's
    precomputed file (:func:`bench.descriptions.paraphrase.lookup_nearest`), or None."""
    from bench.descriptions.paraphrase import lookup_nearest
    from bench.paths import descriptions_dir

    return lookup_nearest(descriptions_dir() / item.case.toolset, item.variant.sha256,
                          item.case)


def retrieval_metrics(retrieved: Retrieved, selection_correct: bool | None
                      ) -> RetrievalMetrics:
    """The retrieval metrics of one row (:class:`bench.results.RowMetrics`):
    ``retrieval_recall`` (fraction of the expected tools the model was sent),
    ``retrieved_all`` (every expected tool was sent: recall@k = 1), and the split of a wrong
    selection into ``error_not_retrieved`` (an expected tool was not sent: the retriever's
    error) and ``error_confused`` (every expected tool was sent, or none was needed, and the
    model still chose wrong); the two are exclusive and together are the selection errors.
    ``retrieval_recall`` and ``retrieved_all`` are None when the label expects no call."""
    wrong = None if selection_correct is None else not selection_correct
    return RetrievalMetrics(
        retrieval_recall=retrieved.recall,
        retrieved_all=None if not retrieved.expected else not retrieved.missing,
        error_not_retrieved=None if wrong is None else wrong and bool(retrieved.missing),
        error_confused=None if wrong is None else wrong and not retrieved.missing)


def space_fields(item: PlanItem, retrieved: Retrieved | None = None) -> RowSpace:
    """A tool-space row's ``tool_count`` (tools in the catalog) and ``retrieval`` (settings,
    tools sent, their tool-definition tokens, expected tools not sent); ``retrieved``
    (default the item's) is the row's retrieval, a native one after its search
    (:meth:`bench.toolspace.setup.Retrieved.after_search`), which adds ``tool_search``
    (search variant, always-loaded tools, each search with its input and returned tools)."""
    retrieved = retrieved or item.retrieved
    assert item.space is not None and retrieved is not None
    fields: dict[str, Any] = {
        **item.space.describe(), "tools_offered": len(retrieved.offered),
        "tool_tokens": retrieved.tool_tokens,
        "offered": [t.name for t in retrieved.offered]
        if item.space.retriever != "none" else None,
        "expected": list(retrieved.expected), "missing": list(retrieved.missing)}
    if retrieved.tool_search is not None:
        fields["tool_search"] = {**retrieved.tool_search.describe(),
                                 "searches": list(retrieved.searches)}
    return RowSpace(tool_count=retrieved.catalog_size, retrieval=fields)


def build_episode_row(item: PlanItem, run_id: str, episode: EpisodeOutcome, *,
                      cost_usd: float | None = None, billed_usd: float | None = None,
                      case_summary: tuple[str, RowExpected] | None = None) -> Row:
    """One ``results.jsonl`` row for a finished episode (an
    :class:`bench.episodes.loop.EpisodeOutcome`): the episode metrics
    (:func:`bench.scoring.episodes.episode_metrics`), the trajectory, tokens and cost summed
    over the steps (tokens; USD), and the episode's wall time as ``latency_s`` (seconds).
    ``variant`` is the condition's name (:attr:`PlanItem.condition`); a final answer over
    64 KB is stored as its head and tail with ``final_answer_chars``
    (:func:`bench.episodes.stored.capped`)."""
    from bench.episodes.factors import describe
    from bench.episodes.stored import capped

    if case_summary is None:
        case_summary = summarize_case(item.case)
    messages_sha256, expected = case_summary
    last = episode.responses[-1] if episode.responses else None
    final_answer, final_chars = capped(episode.final_answer)
    trajectory = RowEpisode(stop_reason=episode.stop_reason, final_answer=final_answer,
                            steps=episode.steps, state_checks=episode.state_checks)
    if final_chars is not None:
        trajectory.final_answer_chars = final_chars
    return Row(
        **_identity(item, run_id, expected),
        request=RowRequest(variant_sha256=item.variant.sha256,
                           messages_sha256=messages_sha256,
                           tools_sha256=item.tools_sha256).model_copy(
            update={"kind": "episode"}),  # an extra field of the request summary
        response=RowResponse(raw=None, finish_reason=getattr(last, "finish_reason", None),
                             request_id=getattr(last, "request_id", None)),
        metrics=RowMetrics(**episode.metrics),
        usage=episode.usage,
        cost_usd=None if cost_usd is None else round(cost_usd, 8),
        billed_usd=None if billed_usd is None else round(billed_usd, 8),
        attempts=episode.attempts,
        cache=episode.cache,
        tool_definition_tokens=getattr(last, "tool_definition_tokens", None),
        latency_s=round(episode.wall_s, 6),
        finished_at=_now(),
        factors=describe(item.factors) if item.factors else None,
        **(space_fields(item) if item.space is not None else RowSpace()),
        episode=trajectory,
    )
