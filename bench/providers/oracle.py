"""The ``oracle`` provider: answers every case with its own label, to check a dataset.

Run ``bench run --provider oracle``: on a dataset whose labels agree with its tools, schemas and
scorer, tool selection, arguments, schema validity, no-call, ask and execution match are 100%;
a row below that points at a label to fix (a tool name the variant does not offer, a value its
schema refuses, an argument no literal value can satisfy). Execution success also depends on
the reference backend's data and on ``--allow-writes`` / ``--allow-sensitive``: a label's call
may be refused by a business rule (an order that cannot be cancelled) or name a record the
backend lacks, which the oracle's rows show.

How a label becomes an answer (:func:`label_answer`): a no-call or ask case answers without a
call (an ask case with words that name its ``ask_for`` items, :func:`ask_text`); otherwise
each expected call in label order, with each argument's first acceptable value the label
itself gives. An argument whose values are all ``null`` (may or must be omitted) is left out.
Matchers: a ``{"$regex": ...}`` argument gets its ``"$example"`` (a SQL label's example
query), else the case's query, verbatim, when the query matches it (free-text arguments: text
the user wrote, not made up), else the first literal alternative. The oracle never invents a
value: ``{"$any": true}``, and a ``$regex`` with no ``$example`` that the query does not match
(e.g. a SQL pattern), give none; the argument is left out when the label lets it be omitted
(``null`` among its values), else it cannot be produced: the answer holds
``"<no literal label>"`` there, the row's ``request.unlabeled`` lists it and
``request.unexecutable_calls`` the call's index, and that call is never executed: bench sends
no placeholder, nor any value no label gave, to a system (the runner's executor refuses it,
``no_literal_value``), and the row's argument scores are left empty
(:func:`bench.runner.rows.build_row`), since the oracle could not produce the label's value. A
table note counts such rows and calls (:mod:`bench.report.labels`). In an episode the oracle
does not make such a call (:func:`episode_step`).

The oracle finds a case by its conversation (the messages it is sent); two cases with the same
conversation are told apart by the tools offered, else the first one answers.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any, Sequence

import regex

from bench.errors import BenchError
from bench.models import Case, Message, Tool
from bench.providers.base import ProviderResponse
from bench.providers.function import FunctionProvider
from bench.providers.registry import Builder, provider

NO_LITERAL = "<no literal label>"


def _is_matcher(value: Any) -> bool:
    return isinstance(value, dict) and any(str(k).startswith("$") for k in value)


def _argument(values: list[Any], query: str) -> tuple[bool, Any, bool]:
    """(send it?, value, produced from a label?) for one argument's acceptable values: the
    first literal, ``$example`` or query text a ``$regex`` matches; else left out when it may
    be omitted; else the placeholder (``$any``, or a ``$regex`` with none of those: the
    module docstring)."""
    present = [v for v in values if v is not None]
    if not present:
        return False, None, True
    literal = next((v for v in present if not _is_matcher(v)), None)
    for value in present:
        if not _is_matcher(value):
            return True, value, True
        if "$regex" in value and isinstance(value.get("$example"), str):
            return True, value["$example"], True
        if "$regex" in value and query and regex.search(value["$regex"], query):
            return True, query, True
    if literal is not None:
        return True, literal, True
    if None in values:  # may be omitted: leaving it out is a correct answer
        return False, None, True
    return True, NO_LITERAL, False


def label_answer(case: Case, tools: Sequence[Tool]
                 ) -> tuple[list[dict[str, Any]], list[str], list[int]]:
    """The calls that answer ``case`` from its label, the arguments no label value could
    produce (``"<tool>.<argument>"``), and the indices (0-based, in the answer) of the calls
    holding such an argument, which must never be executed; see the module docstring."""
    if case.expected.no_call or case.expected.ask:
        return [], [], []
    calls: list[dict[str, Any]] = []
    unlabeled: list[str] = []
    unexecutable: list[int] = []
    for expected in case.expected.calls:
        arguments = {}
        for name, values in expected.arguments.items():
            send, value, labeled = _argument(values, case.query)
            if send:
                arguments[name] = value
            if not labeled:
                unlabeled.append(f"{expected.name}.{name}")
                if len(calls) not in unexecutable:
                    unexecutable.append(len(calls))
        calls.append({"name": expected.name, "arguments": arguments})
    return calls, unlabeled, unexecutable


def _canonical(name: str, arguments: Any) -> str:
    return json.dumps([name, arguments], sort_keys=True, ensure_ascii=False, default=str)


def _needs_confirmation(case: Case, name: str, arguments: dict[str, Any]) -> bool:
    """The call is one an ``until_confirmed`` forbidden call forbids before the user's reply
    (every argument that label lists holds one of its values, compared as JSON)."""
    for forbidden in case.forbidden_calls:
        if forbidden.until_confirmed and forbidden.name == name and all(
                any(_canonical("", arguments.get(k)) == _canonical("", v) for v in values)
                for k, values in forbidden.arguments.items()):
            return True
    return False


def _result_fields(history: Sequence[Message], failed: set[str | None]) -> dict[str, Any]:
    """Top-level fields of the successful tool results so far (a result's ``data`` object
    when it is an envelope), later results winning: where the oracle finds a ``result_id``."""
    fields: dict[str, Any] = {}
    for message in history:
        if message.role != "tool" or message.tool_call_id in failed or not message.content:
            continue
        try:
            value = json.loads(message.content)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("data"), dict):
            value = value["data"]
        if isinstance(value, dict):
            fields.update(value)
    return fields


def episode_step(case: Case, messages: Sequence[Message], tools: Sequence[Tool]
                 ) -> dict[str, Any]:
    """The oracle's next answer in episode ``case``, from the conversation so far: the label's
    ``required_calls`` in an order their ``after`` constraints allow (every call whose
    predecessors succeeded, together in one answer; a failed one again, as a retry), a
    question instead of a call that an ``until_confirmed`` forbidden call guards while the user
    has not replied, and then a final answer naming the first alternative of each answer fact.
    A ready call with an argument no label value can produce (``$any``, ``$regex`` without
    ``$example``, and not to be omitted) is not made: when no other call is ready, the answer
    ends the episode saying so (bench sends no placeholder to a system).

    Returns:
        ``{"tool_calls": [...], "text": ...}`` as :meth:`FunctionProvider.response` takes it.
    """
    history = messages[len(case.messages):]
    replies = sum(1 for m in history if m.role == "user")
    failed = {m.tool_call_id for m in history if m.role == "tool" and m.is_error}
    # a multiset: two identical required calls need two successful calls
    succeeded = Counter(_canonical(str(c.get("name")), c.get("arguments") or {})
                        for m in history if m.role == "assistant"
                        for c in m.tool_calls or [] if str(c.get("id")) not in failed)
    schemas = {t.name: t.input_schema for t in tools}
    fields = _result_fields(history, failed)
    planned = []
    for call in case.required_calls:
        schema = schemas.get(call.name) or {}
        arguments = dict(call.example or {})
        for name, values in call.arguments.items():
            if name in arguments:
                continue
            send, value, _ = _argument(values, case.query)
            if send:
                arguments[name] = value
        for name in schema.get("required") or []:  # free in the label: an earlier result's
            if name not in arguments and name in fields:
                arguments[name] = fields[name]
        planned.append((call.name, arguments))
    done = []
    for planned_call in planned:
        key = _canonical(*planned_call)
        done.append(succeeded[key] > 0)
        succeeded[key] -= 1
    ready = [i for i, call in enumerate(case.required_calls)
             if not done[i] and all(done[j] for j in call.after)]
    sendable = [i for i in ready if NO_LITERAL not in planned[i][1].values()]
    if sendable:
        ready = sendable
        if not replies and case.user_replies and any(
                _needs_confirmation(case, *planned[i]) for i in ready):
            names = ", ".join(planned[i][0] for i in ready)
            return {"tool_calls": [], "text": f"Shall I go ahead with {names}? Please confirm."}
        return {"tool_calls": [{"name": planned[i][0], "arguments": planned[i][1]}
                               for i in ready], "text": None}
    if ready:  # never a placeholder to a system: the label gives no value to send
        names = ", ".join(planned[i][0] for i in ready)
        return {"tool_calls": [], "text": f"I cannot make {names}: its label gives no value "
                "for an argument ($any, or a pattern without \"$example\"), and I send "
                "no placeholder."}
    facts = [alternatives[0] for alternatives in (case.success.answer_facts
                                                  if case.success else [])]
    return {"tool_calls": [], "text": " ".join(facts) if facts else "Done."}


def ask_text(case: Case) -> str:
    """The oracle's question on an ask case: the first alternative of each ``ask_for`` item
    (``"Could you tell me: order id?"``), or a bare question when the label names nothing."""
    wanted = [alternatives[0] for alternatives in case.expected.ask_for]
    return f"Could you tell me: {', '.join(wanted)}?" if wanted else \
        "Could you tell me what is missing?"


def _conversation_key(messages: Sequence[Message]) -> str:
    return json.dumps([m.model_dump(exclude_none=True) for m in messages], sort_keys=True,
                      ensure_ascii=False)


class OracleProvider(FunctionProvider):
    """Answers each case of ``cases`` with its label (see the module docstring).

    Args:
        cases: the dataset's cases.
        provider_id: the id rows carry (``oracle``).
        dataset: how the manifest names the dataset (name and hash).
    """

    def __init__(self, cases: Sequence[Case], *, provider_id: str = "oracle",
                 dataset: str = "") -> None:
        super().__init__(lambda messages, tools, trial: [], provider_id=provider_id,
                         model=f"oracle (labels of {dataset or 'the dataset'})")
        self._dataset = dataset
        self._cases: dict[str, list[Case]] = {}
        for case in cases:
            self._cases.setdefault(_conversation_key(case.messages), []).append(case)

    def find(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Case:
        """The case whose conversation is ``messages``, or for an episode step the episode
        whose conversation starts it (see the module docstring).

        Raises:
            BenchError: no case has this conversation.
        """
        found = self._cases.get(_conversation_key(messages))
        for end in range(len(messages) - 1, 0, -1):  # an episode's later step
            if found:
                break
            found = [c for c in self._cases.get(_conversation_key(messages[:end]), [])
                     if c.kind == "episode"]
        if not found:
            raise BenchError(f"provider '{self.provider_id}': a conversation that is not in "
                             f"the dataset {self._dataset} (the oracle answers only its "
                             "cases)")
        offered = {t.name for t in tools}
        return next((c for c in found if {e.name for e in c.expected.calls} <= offered),
                    found[0])

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """The case's label as an answer (computed on the loop: a dict lookup);
        ``request.unlabeled`` lists the arguments answered ``"<no literal label>"`` and
        ``request.unexecutable_calls`` the indices of their calls, never executed.

        Raises:
            BenchError: the conversation is not one of the dataset's cases.
        """
        started = time.perf_counter()
        case = self.find(messages, tools)
        if case.kind == "episode":
            return self.response(episode_step(case, messages, tools), tools, started)
        calls, unlabeled, unexecutable = label_answer(case, tools)
        # an ask case's reply names what is missing, as its label says
        response = self.response({"tool_calls": calls, "text": ask_text(case)}
                                 if case.expected.ask else calls, tools, started)
        if unlabeled:
            response.request["unlabeled"] = unlabeled
            response.request["unexecutable_calls"] = unexecutable
        return response

    def describe(self) -> dict[str, Any]:
        """The id and the dataset it answers from (name and SHA-256)."""
        return {"provider": self.provider_id, "model": self._model, "dataset": self._dataset}


def _build(provider_id: str, rest: str, options: dict[str, Any]) -> OracleProvider:
    from bench.datasets import load_dataset
    from bench.descriptions.aliases import apply_aliases

    if rest:
        raise BenchError(f"unknown provider '{provider_id}' (the oracle's id is 'oracle'; it "
                         "answers from the run's dataset)")
    name = options.get("dataset")
    if not name:
        raise BenchError(f"provider '{provider_id}' needs the run's dataset (option 'dataset')")
    # labels read through the toolsets' aliases, as the run reads them: a renamed tool is
    # called by its new name
    dataset, _ = apply_aliases(load_dataset(str(name)))
    return OracleProvider(dataset.cases, provider_id=provider_id,
                          dataset=f"{dataset.name} sha256:{dataset.sha256[:12]}")


@provider("oracle", id_form="oracle", options="dataset", deterministic=True)
def _oracle() -> Builder:
    return _build
