"""An episode row's trajectory (:class:`RowEpisode`): one :class:`EpisodeStep` per model
answer, as :mod:`bench.episodes.loop` writes it."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from bench.results.answer import RowParsed, RowUsage
from bench.results.base import _Record


class StepCall(_Record):
    """One call of a step, under the id the loop gave it (what it went on with)."""

    id: str | None = Field(default=None, description="the call's id in the episode (unique)")
    name: str | None = Field(default=None, description="the tool name as received")
    arguments: Any = Field(
        default=None, description="decoded arguments (an object), or their JSON "
                                  "text cut when over 64 KB")
    arguments_chars: int | None = Field(
        default=None, description="characters of the arguments' JSON "
                                  "text, when stored cut")
    valid: bool = Field(default=True, description="False when the arguments could not be decoded")
    raw_arguments: Any = Field(
        default=None, description="the arguments as received (invalid calls "
                                  "only)")
    raw_arguments_chars: int | None = Field(
        default=None, description="characters of raw_arguments, "
                                  "when stored cut")


class StepResult(_Record):
    """One executed call's result, exactly as it was sent back to the model."""

    call_id: str | None = Field(default=None, description="the id of the call it answers")
    tool: str | None = Field(default=None, description="the tool that ran")
    content: str | None = Field(
        default=None, description="the text sent back (cut when over 64 KB)")
    content_chars: int | None = Field(
        default=None, description="characters of content, when stored "
                                  "cut")
    is_error: bool = Field(default=False, description="sent back as an error")
    success: bool | None = Field(
        default=None, description="the executor ran it and it returned data")
    error_code: str | None = Field(default=None, description="the executor's error code")
    truncated: bool = Field(default=False, description="cut to the condition's result budget")


class EpisodeStep(_Record):
    """One model answer of an episode and what the loop did with it
    (:mod:`bench.episodes.loop`). Every step has ``step`` to ``finish_reason``;
    ``messages_sha256`` and ``parsed`` are absent on rows written before replay of episodes,
    ``user_reply`` only follows an answer the scripted user replied to, ``stored_cut`` and the
    ``*_chars`` lengths only mark values stored cut."""

    step: int = Field(ge=0, description="0-based step number")
    text: str = Field(description="the answer's prose (cut when over 64 KB)")
    text_chars: int | None = Field(default=None, description="characters of text, when stored cut")
    calls: list[StepCall] = Field(description="the calls the loop went on with")
    results: list[StepResult] = Field(description="the calls' results, as sent back")
    error: str | None = Field(description="why the answer could not be decoded")
    usage: RowUsage | None = Field(description="tokens of the step's request")
    latency_s: float | None = Field(description="seconds, wall time of the step's request")
    cache: str | None = Field(description="hit, miss, or None (cache off)")
    finish_reason: str | None = Field(description="as the provider said")
    messages_sha256: str | None = Field(default=None, description=(
        "digest of the conversation the step was asked with "
        "(bench.providers.cache.messages_digest)"))
    parsed: RowParsed | None = Field(default=None, description=(
        "the answer as bench.parse.ParsedAnswer dumped, less what text and calls hold cut "
        "(replay:<run> answers the step from it)"))
    user_reply: str | None = Field(
        default=None, description="the scripted user's reply to the answer")
    stored_cut: bool = Field(default=False, description="a value of the answer is stored cut: the "
                                                        "step is not replayed")


class RowEpisode(_Record):
    """An episode row's trajectory and ending (:mod:`bench.episodes.loop`).

    ``steps``: one object per model answer: ``step`` (0-based), ``text`` (the answer's prose),
    ``calls`` (``{id, name, arguments, valid}``, and ``raw_arguments`` as received when
    not valid), ``results`` (``{call_id, tool, content,
    is_error, error_code, success}``: exactly what was sent back), ``error`` (the answer
    could not be decoded), ``usage`` (tokens), ``latency_s`` (seconds), ``cache``,
    ``finish_reason``, ``messages_sha256`` (the digest of the conversation the step was
    asked with, :func:`bench.providers.cache.messages_digest`) and ``parsed`` (the answer as
    :class:`bench.parse.ParsedAnswer` dumped: ``replay:<run>`` answers the step from it); a
    scripted user reply adds ``user_reply``.

    A text over 64 KB (a result's ``content``, ``text``, ``final_answer``, a call's
    ``arguments`` or ``raw_arguments`` as JSON text, a state check's ``got``, ``sql`` or
    ``expect``) is stored as its head and tail with ``<field>_chars``, its full length
    (``got_rows`` too: the rows returned), once: ``parsed`` leaves out what ``text`` and
    ``calls`` hold cut, and such a step has ``stored_cut: true`` and is not replayed
    (:mod:`bench.episodes.stored`, docs/episodes.md).
    """

    stop_reason: str = Field(description="final_answer, step_limit, loop_guard or unparseable")
    final_answer: str | None = None
    steps: list[EpisodeStep] = Field(default_factory=list)
    state_checks: list[dict[str, Any]] | None = Field(
        default=None, description="{sql, expect, got, ok} per check; None when not run")
    # after state_checks: written last, as when it was an extra field
    final_answer_chars: int | None = Field(default=None, description=(
        "characters of final_answer, when stored cut"))

    def trajectory_text(self, limit: int = 300) -> str:
        """The trajectory in one line, cut to ``limit`` characters (with "…"):
        ``get_order_status({"order_id": "ORD1"}) -> error http_503; ... ; final answer:
        "..."`` (``-> ok`` for a result sent back without ``is_error``, ``-> not run``
        for a call without a result) or the stop reason when it is not a final answer."""
        parts = []
        for step in self.steps:
            results = {r.call_id: r for r in step.results}
            for call in step.calls:
                result = results.get(call.id)
                shown = ("not run" if result is None else
                         f"error {result.error_code or ''}".rstrip()
                         if result.is_error else "ok")
                arguments = json.dumps(call.arguments, ensure_ascii=False, default=str)
                parts.append(f"{call.name}({arguments}) -> {shown}")
            if step.error:
                parts.append(f"(unparseable: {step.error})")
        if self.stop_reason == "final_answer":
            parts.append("final answer: "
                         + json.dumps(self.final_answer or "", ensure_ascii=False))
        else:
            parts.append(f"stopped: {self.stop_reason}")
        text = " ".join("; ".join(parts).split())
        return text if len(text) <= limit else text[:limit - 1] + "…"
