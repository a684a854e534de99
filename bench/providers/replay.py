"""The ``replay`` provider: answers only from recorded responses, never from a model.

``replay:<source>`` where ``<source>`` is a response cache file (``.sqlite``) or a run id
under ``reports/runs``; ``replay:<source>#<provider-id>`` picks one recorded provider when the
source holds several (e.g. ``replay:nightly#local``). An answer is found by the conversation's
digest, the tool list's digest and the trial index, so a changed description or query is a
miss, never a stale answer. In a run, an episode row answers each of its steps (keyed on the
conversation that step was asked with), never the episode as a whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Message, Tool
from bench.parse import ParsedAnswer
from bench.project import Project, active_project, current_project
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.providers.cache import ResponseCache, messages_digest, tools_digest
from bench.providers.errors import ProviderError
from bench.results import EpisodeStep, Row


class ReplayMiss(ProviderError):
    """No recorded answer for a request (a permanent error: replay never asks a model).

    Args:
        message: what was looked for.
        source: the replay source as given.
        recorded_providers: the providers the source holds answers from.
    """

    def __init__(self, message: str, *, source: str, recorded_providers: Sequence[str]) -> None:
        super().__init__(message, error_class="permanent")
        self.source = source
        self.recorded_providers = list(recorded_providers)


def response_from_step(row: Row, step: EpisodeStep,
                       source: Path | None = None) -> ProviderResponse:
    """Rebuild the :class:`ProviderResponse` one step of an episode row was answered with
    (the step's ``parsed``, ``usage``, ``finish_reason`` and ``latency_s``).

    Raises:
        BenchError: the step's ``parsed`` or ``usage`` is not of that shape (names
            ``source``, the row's key and the field).
    """
    where = f"episode.steps.{step.step}"
    parts: dict[str, Any] = {}
    for name, model in (("parsed", ParsedAnswer), ("usage", Usage)):
        stored = getattr(step, name)
        try:
            parts[name] = model.model_validate(
                stored.model_dump(exclude_unset=True) if stored is not None else {})
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(f"corrupt result row (key {row.key}): {message}", file=source,
                             field=f"{where}.{name}" + (f".{field}" if field else "")) \
                from None
    latency = step.latency_s
    return ProviderResponse(
        raw=None, parsed=parts["parsed"], finish_reason=step.finish_reason,
        usage=parts["usage"], latency_s=latency if latency is not None else 0.0,
        tool_definition_tokens=row.tool_definition_tokens, request={})


def replay_entries(row: Row) -> list[tuple[tuple[str | None, str | None, int],
                                           EpisodeStep | None]]:
    """What a stored row can answer in a replay: ``((messages_sha256, tools_sha256, trial),
    step)`` pairs. A single-answer row answers its case's conversation (step None); an
    episode row answers each step's conversation from that step, and nothing when its steps
    carry no ``messages_sha256`` (rows written before steps recorded it); a step stored cut
    (``stored_cut``: an answer value over 64 KB, :mod:`bench.episodes.stored`) answers
    nothing, its whole answer being no longer in the row."""
    request = row.request
    tools = request.tools_sha256 if request else None
    if row.episode is None:
        return [((request.messages_sha256 if request else None, tools, row.trial), None)]
    return [((step.messages_sha256, tools, row.trial), step)
            for step in row.episode.steps
            if step.messages_sha256 is not None and step.parsed is not None
            and not step.stored_cut]


def response_from_row(row: Row, source: Path | None = None) -> ProviderResponse:
    """Rebuild the :class:`ProviderResponse` a ``results.jsonl`` row was scored from.

    Raises:
        BenchError: the row's ``parsed``, ``usage``, ``response`` or ``latency_s`` is not of
            that shape (names ``source``, the row's key and the field).
    """
    parts: dict[str, Any] = {}
    for name, model in (("parsed", ParsedAnswer), ("usage", Usage)):
        stored = getattr(row, name)
        try:
            parts[name] = model.model_validate(
                stored.model_dump(exclude_unset=True) if stored is not None else {})
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(f"corrupt result row (key {row.key}): {message}",
                             file=source, field=f"{name}.{field}" if field else name) from None
    if row.latency_s is None:  # a hand-made row: the runner always writes it
        raise BenchError(f"corrupt result row (key {row.key}): latency_s is null", file=source,
                         field="latency_s")
    response = row.response
    try:
        return ProviderResponse(
            raw=response.raw if response is not None else None, parsed=parts["parsed"],
            finish_reason=response.finish_reason if response is not None else None,
            usage=parts["usage"], latency_s=row.latency_s,
            tool_definition_tokens=row.tool_definition_tokens,
            request=row.request.model_dump(exclude_unset=True) if row.request else {})
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(f"corrupt result row (key {row.key}): {message}", file=source,
                         field=field) from None


class ReplayProvider(Provider):
    """Answers from a response cache or a stored run.

    Args:
        provider_id: ``replay:<source>[#<provider-id>]``; a relative cache file is found in
            ``project``'s folder, a run id under its runs.
        project: the project (default: the active one, :func:`bench.project.active_project`,
            whose folder relative files are in; else :func:`bench.project.current_project`
            with relative files in the cwd, as the command line gives them).

    Raises:
        BenchError: the source is neither a cache file nor a stored run.
    """

    max_concurrency = 64  # lookups only

    def __init__(self, provider_id: str, project: Project | None = None) -> None:
        self.provider_id = provider_id
        spec = provider_id.partition(":")[2]
        self.source, _, self.only = spec.partition("#")
        if not self.source:
            raise BenchError(f"provider '{provider_id}': give a run id or a cache file, "
                             "e.g. replay:<run-id> or replay:reports/cache/responses.sqlite")
        self._cache: ResponseCache | None = None
        self._index: dict[tuple[str | None, str | None, int],
                          list[tuple[Row, EpisodeStep | None]]] = {}
        self._recorded: set[str] = set()
        path = Path(self.source)
        project = project or active_project()
        if project is not None:  # a caller's project (e.g. the gate's): its relative paths
            path = project.resolve(path)
        if path.is_file():
            self._cache = ResponseCache(path, "read")
            self.kind = "cache"
            self._recorded = {p for (p,) in self._cache._connection().execute(
                "SELECT DISTINCT provider FROM responses")}
        else:
            project = project or current_project()
            store = project.store(self.source)
            if not store.exists():
                raise BenchError(f"provider '{provider_id}': '{self.source}' is neither a "
                                 f"cache file nor a run under {project.runs_dir}")
            self.kind = "run"
            self._results = store.results_path
            for row in store.load_rows():
                for key, step in replay_entries(row):
                    self._index.setdefault(key, []).append((row, step))
                self._recorded.add(row.provider)
        if self.only and self.only not in self._recorded:
            raise BenchError(f"provider '{provider_id}': the source has no answers from "
                             f"'{self.only}' (it has: {', '.join(sorted(self._recorded)) or 'none'})")

    def _candidates(self, messages: Sequence[Message], tools: Sequence[Tool],
                    trial: int) -> list[tuple[str, ProviderResponse]]:
        key = (messages_digest(messages), tools_digest(tools), trial)
        if self._cache is not None:
            found = self._cache.find(*key)
        else:
            found = [(row.provider, response_from_row(row, self._results) if step is None
                      else response_from_step(row, step, self._results))
                     for row, step in self._index.get(key, [])]
        return [(p, r) for p, r in found if not self.only or p == self.only]

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """The recorded answer; see :meth:`Provider.complete`.

        Raises:
            ReplayMiss: nothing recorded for this conversation, tool list and trial.
            BenchError: answers from several providers match and no ``#<provider>`` was given.
        """
        found = self._candidates(messages, tools, trial)
        providers = sorted({p for p, _ in found})
        if len(providers) > 1:
            raise BenchError(f"provider '{self.provider_id}': answers from several providers "
                             f"match ({', '.join(providers)}); pick one with "
                             f"replay:{self.source}#<provider>")
        if not found:
            raise ReplayMiss(f"no recorded answer in {self.kind} '{self.source}' for trial "
                             f"{trial}", source=self.source,
                             recorded_providers=sorted(self._recorded))
        response = found[-1][1]
        return response.model_copy(update={"request": {**response.request,
                                                       "replayed_from": providers[0]}})

    def describe(self) -> dict[str, Any]:
        """Source kind and path; see :meth:`Provider.describe`."""
        return {"provider": self.provider_id, "source": self.source, "source_kind": self.kind,
                "recorded_providers": sorted(self._recorded), "only": self.only or None}

    def close(self) -> None:
        """Close the cache connection."""
        if self._cache is not None:
            self._cache.close()
