"""Fake batch endpoints for :class:`fakeserver.FakeServer`: OpenAI Files + Batch API and
Anthropic Message Batches, as the providers' API references describe them.

OpenAI: ``POST /v1/files`` (multipart, ``purpose=batch``), ``POST /v1/batches``,
``GET /v1/batches/{id}`` (``validating`` -> ``in_progress`` -> ``completed`` with
``output_file_id``), ``GET /v1/files/{id}/content`` (JSONL of ``{custom_id, response:
{status_code, request_id, body}, error}``). Anthropic: ``POST /v1/messages/batches``,
``GET /v1/messages/batches/{id}`` (``in_progress`` -> ``ended`` with ``results_url``),
``GET <results_url>`` (JSONL of ``{custom_id, result: {type, message}}``).

Each answer calls the first tool with ``{"echo": <last user text>}`` so tests can check that
every answer reached its own plan item. Results come back in reverse input order by default:
both APIs say the output order need not match the input order (OpenAI Batch guide: "the output
line order may not match the input line order"; Anthropic Message Batches: results "may be in
any order"), so a client must match them by ``custom_id``.
"""

from __future__ import annotations

import itertools
import json
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any

from tests.fakeserver import Recorded, Reply, anthropic_body, chat_body, default_reply, error_body

_ids = itertools.count(1)
TIME = "2026-11-29T00:00:00Z"


def _last_user_text(messages: list[dict[str, Any]]) -> str:
    content = [m for m in messages if m.get("role") == "user"][-1]["content"]
    if isinstance(content, list):
        return "".join(block.get("text", "") for block in content if isinstance(block, dict))
    return content


class BatchBackend:
    """State of the fake batch APIs; use :meth:`handle` as the FakeServer handler.

    Args:
        polls_to_end: status requests a batch answers "in progress" before it ends.
        fail_custom_ids: custom ids answered with an error line instead of a body.
        reverse_results: write result lines in reverse input order (the APIs promise no
            order); False keeps the input order.
    """

    def __init__(self, polls_to_end: int = 2, fail_custom_ids: set[str] | None = None,
                 reverse_results: bool = True) -> None:
        self.url = ""
        self.reverse_results = reverse_results
        self.polls_to_end = polls_to_end
        self.fail = fail_custom_ids or set()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.created: list[str] = []  # batch ids, in creation order

    def handle(self, request: Recorded) -> Reply:
        """Answer one request (falls back to :func:`fakeserver.default_reply`)."""
        path = request.path
        if request.method == "POST" and path == "/v1/files":
            return self._upload(request)
        if request.method == "POST" and path == "/v1/batches":
            return self._openai_create(request.body)
        if request.method == "GET" and path.startswith("/v1/batches/"):
            return self._openai_retrieve(path.rsplit("/", 1)[1])
        if request.method == "GET" and path.startswith("/v1/files/") and \
                path.endswith("/content"):
            return Reply(raw=self.files[path.split("/")[3]])
        if request.method == "POST" and path == "/v1/messages/batches":
            return self._anthropic_create(request.body)
        if request.method == "GET" and path.startswith("/v1/messages/batches/"):
            parts = path.split("/")
            if parts[-1] == "results":
                return Reply(raw=self._anthropic_results(parts[-2]))
            return self._anthropic_retrieve(parts[-1])
        return default_reply(request)

    # --- OpenAI ---------------------------------------------------------------------------

    def _upload(self, request: Recorded) -> Reply:
        raw = request.body if isinstance(request.body, str) else json.dumps(request.body)
        message = BytesParser(policy=email_policy).parsebytes(
            f"content-type: {request.headers['content-type']}\r\n\r\n".encode() +
            raw.encode("utf-8"))
        content, purpose = b"", None
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "file":
                content = payload
            elif name == "purpose":
                purpose = payload.decode()
        if purpose != "batch":
            return Reply(400, error_body(400, f"purpose must be batch, got {purpose}"))
        file_id = f"file-{next(_ids)}"
        self.files[file_id] = content
        return Reply(body={"id": file_id, "object": "file", "bytes": len(content),
                           "created_at": 0, "filename": "input.jsonl", "purpose": "batch",
                           "status": "processed"})

    def _openai_batch(self, batch_id: str) -> dict[str, Any]:
        state = self.batches[batch_id]
        return {"id": batch_id, "object": "batch", "endpoint": state["endpoint"],
                "input_file_id": state["input_file_id"], "completion_window": "24h",
                "status": state["status"], "created_at": 0, "errors": None,
                "output_file_id": state.get("output_file_id"),
                "error_file_id": state.get("error_file_id"),
                "request_counts": {"total": state["total"], "completed": 0, "failed": 0}}

    def _openai_create(self, body: dict[str, Any]) -> Reply:
        lines = self.files[body["input_file_id"]].decode("utf-8").splitlines()
        batch_id = f"batch_{next(_ids)}"
        self.batches[batch_id] = {"kind": "openai", "endpoint": body["endpoint"],
                                  "input_file_id": body["input_file_id"], "status": "validating",
                                  "polls": 0, "total": len(lines),
                                  "requests": [json.loads(line) for line in lines]}
        self.created.append(batch_id)
        return Reply(body=self._openai_batch(batch_id))

    def _openai_retrieve(self, batch_id: str) -> Reply:
        state = self.batches[batch_id]
        state["polls"] += 1
        if state["status"] != "completed":
            state["status"] = "in_progress"
            if state["polls"] > self.polls_to_end:
                out, errors = [], []
                for line in state["requests"]:
                    cid = line["custom_id"]
                    if cid in self.fail:
                        errors.append({"id": f"batch_req_{next(_ids)}", "custom_id": cid,
                                       "response": {"status_code": 500, "request_id": "r",
                                                    "body": error_body(500, "boom")},
                                       "error": None})
                        continue
                    body = line["body"]
                    name = body["tools"][0]["function"]["name"]
                    out.append({"id": f"batch_req_{next(_ids)}", "custom_id": cid,
                                "response": {"status_code": 200, "request_id": f"req_{cid}",
                                             "body": chat_body(calls=[(name, {
                                                 "echo": _last_user_text(body["messages"])})])},
                                "error": None})
                if self.reverse_results:
                    out.reverse()
                for key, rows in (("output_file_id", out), ("error_file_id", errors)):
                    if rows:
                        file_id = f"file-{next(_ids)}"
                        self.files[file_id] = "".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                      for r in rows).encode("utf-8")
                        state[key] = file_id
                state["status"] = "completed"
        return Reply(body=self._openai_batch(batch_id))

    # --- Anthropic ------------------------------------------------------------------------

    def _anthropic_batch(self, batch_id: str) -> dict[str, Any]:
        state = self.batches[batch_id]
        ended = state["status"] == "ended"
        return {"id": batch_id, "type": "message_batch", "processing_status": state["status"],
                "request_counts": {"processing": 0 if ended else state["total"],
                                   "succeeded": state["total"] if ended else 0, "errored": 0,
                                   "canceled": 0, "expired": 0},
                "created_at": TIME, "expires_at": TIME, "ended_at": TIME if ended else None,
                "archived_at": None, "cancel_initiated_at": None,
                "results_url": f"{self.url}/v1/messages/batches/{batch_id}/results"
                if ended else None}

    def _anthropic_create(self, body: dict[str, Any]) -> Reply:
        batch_id = f"msgbatch_{next(_ids)}"
        self.batches[batch_id] = {"kind": "anthropic", "status": "in_progress", "polls": 0,
                                  "total": len(body["requests"]), "requests": body["requests"]}
        self.created.append(batch_id)
        return Reply(body=self._anthropic_batch(batch_id))

    def _anthropic_retrieve(self, batch_id: str) -> Reply:
        state = self.batches[batch_id]
        state["polls"] += 1
        if state["polls"] > self.polls_to_end:
            state["status"] = "ended"
        return Reply(body=self._anthropic_batch(batch_id))

    def _anthropic_results(self, batch_id: str) -> bytes:
        lines = []
        for request in self.batches[batch_id]["requests"]:
            cid, params = request["custom_id"], request["params"]
            if cid in self.fail:
                result = {"type": "errored", "error": {"type": "error", "error": {
                    "type": "api_error", "message": "boom"}}}
            else:
                message = anthropic_body(calls=[(params["tools"][0]["name"], {
                    "echo": _last_user_text(params["messages"])})])
                result = {"type": "succeeded", "message": message}
            lines.append(json.dumps({"custom_id": cid, "result": result}, ensure_ascii=False))
        if self.reverse_results:
            lines.reverse()
        return ("\n".join(lines) + "\n").encode("utf-8")
