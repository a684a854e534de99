"""Provider-native tool search: Anthropic's tool search tool with deferred tool loading.

The request sends the whole catalog; every tool but the always-loaded ones carries
``"defer_loading": true`` and stays out of the model's context, and one server tool is added
(never deferred itself). The model searches; the server answers with ``tool_reference``
blocks and expands each referenced tool into the context; the model then calls one.

Wire format (what bench sends and reads), checked against the ``anthropic`` Python SDK 2.15.0
as installed (generated from Anthropic's OpenAPI spec; repository
``anthropics/anthropic-sdk-python``, paths under ``src/anthropic/types/``):

- request tool entries: ``ToolParam.defer_loading: bool`` ("If true, tool will not be
  included in initial system prompt. Only loaded when returned via tool_reference from tool
  search", ``tool_param.py``); the search tools ``{"type": "tool_search_tool_regex_20251119",
  "name": "tool_search_tool_regex"}`` (``tool_search_tool_regex_20251119_param.py``, commit
  067c142c74b4a0a2e6a2e8d1d1487c0f625bda03) and ``{"type":
  "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}``
  (``tool_search_tool_bm25_20251119_param.py``), both members of ``ToolUnionParam``
  (``tool_union_param.py``) of the non-beta ``messages.create``;
- answer blocks: ``server_tool_use`` ``{id, name: "tool_search_tool_regex" |
  "tool_search_tool_bm25", input: object}`` (``server_tool_use_block.py``), then
  ``tool_search_tool_result`` ``{tool_use_id, content}`` (``tool_search_tool_result_block.py``,
  commit 73cd49ab8fbd70c8668c6af17f1ee032ee75b1ac) whose ``content`` is either
  ``{"type": "tool_search_tool_search_result", "tool_references": [{"type":
  "tool_reference", "tool_name"}]}`` (``tool_search_tool_search_result_block.py``,
  ``tool_reference_block.py``) or ``{"type": "tool_search_tool_result_error", "error_code":
  "invalid_tool_input" | "unavailable" | "too_many_requests" | "execution_time_exceeded",
  "error_message"}`` (``tool_search_tool_result_error_object.py``,
  ``tool_search_tool_result_error_code.py``); then the model's ``tool_use``.

Anthropic's tool search page (as copied in ``vercel/ai``,
``packages/anthropic/src/tool/tool-search-tool.md``, commit
8f8d721cfc4743aa3480f9b0c5dbf2ec1fcd7b83) adds what the SDK types do not say: the regex
variant's input is a Python ``re.search`` pattern of at most 200 characters, the BM25
variant's a natural-language query; a search returns 3-5 references; the tool search tool
must not be deferred; at least one tool must be non-deferred (the search tool counts); and
the catalog may hold up to 10,000 tools. That page's examples show the result as a
``tool_result`` block with a list of ``tool_reference`` blocks as content; the SDK 2.15.0
types have ``tool_search_tool_result`` instead. bench reads both (:func:`read_tool_search`).
The page asked for the beta header ``anthropic-beta: advanced-tool-use-2025-11-20``; SDK
2.15.0 types the search tools in the generally available Messages API and its list of beta
names (``anthropic_beta_param.py``) has no tool-search entry, so bench sends no beta header.
The input key of a search (``pattern`` / ``query``, per ``vercel/ai``'s
``tool-search-regex_20251119.ts`` / ``tool-search-bm25_20251119.ts``) is not typed by the SDK
(``input: Dict[str, object]``): bench records the input as sent back, whatever its keys.

Where the page and the SDK 2.15.0 types differ, or the SDK says nothing: the page's error
codes ``invalid_pattern`` and ``pattern_too_long`` are not in the SDK's
``ToolSearchToolResultErrorCode`` (bench records any ``error_code`` string); the page's usage
counter ``usage.server_tool_use.tool_search_requests`` is not in the SDK's ``ServerToolUsage``
(which has only ``web_search_requests`` and ``web_fetch_requests``; bench does not read it);
the 3-5 results per search, the 200-character pattern limit, the 10,000-tool catalog limit
and the at-least-one-non-deferred-tool rule are the page's, not the SDK's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

from pydantic import BaseModel, Field

from bench.providers.replies import MalformedReply, ReplyModel, at, json_type, read_reply

SEARCH_TOOLS: dict[str, tuple[str, str]] = {
    "regex": ("tool_search_tool_regex_20251119", "tool_search_tool_regex"),
    "bm25": ("tool_search_tool_bm25_20251119", "tool_search_tool_bm25"),
}
"""Search variant -> (tool ``type``, tool ``name``) as ``ToolSearchToolRegex20251119Param`` /
``ToolSearchToolBm25_20251119Param`` of the ``anthropic`` SDK 2.15.0 type them."""

SEARCH_TOOL_NAMES = frozenset(name for _, name in SEARCH_TOOLS.values())
"""The ``name`` of a ``server_tool_use`` block that is a tool search."""


@dataclass(frozen=True)
class ToolSearch:
    """A request's native tool search settings.

    Attributes:
        variant: ``regex`` (the model writes a Python regular expression) or ``bm25`` (the
            model writes a natural-language query), see :data:`SEARCH_TOOLS`.
        always_loaded: names of the tools sent without ``defer_loading`` (in the model's
            context from the start); every other tool is deferred.
    """

    variant: Literal["regex", "bm25"] = "regex"
    always_loaded: tuple[str, ...] = ()

    def search_tool(self) -> dict[str, str]:
        """The server tool entry, e.g. ``{"type": "tool_search_tool_regex_20251119", "name":
        "tool_search_tool_regex"}`` (never deferred)."""
        kind, name = SEARCH_TOOLS[self.variant]
        return {"type": kind, "name": name}

    def tool_entries(self, entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The request's ``tools``: the search tool first, then ``entries`` (converted tools,
        each with a ``name``), each deferred unless it is always loaded. ``entries`` are
        copied, not changed."""
        keep = set(self.always_loaded)
        out: list[dict[str, Any]] = [self.search_tool()]
        for entry in entries:
            copy = dict(entry)
            if copy.get("name") not in keep:
                copy["defer_loading"] = True
            out.append(copy)
        return out

    def describe(self) -> dict[str, Any]:
        """As stored in a request summary and a row's ``retrieval``."""
        return {"variant": self.variant, "tool": SEARCH_TOOLS[self.variant][0],
                "always_loaded": list(self.always_loaded)}


class Search(BaseModel):
    """One search the server ran for the model.

    Attributes:
        tool: the search tool's name (``tool_search_tool_regex`` / ``tool_search_tool_bm25``).
        id: the ``server_tool_use`` block's id (``srvtoolu_...``).
        input: the search's input as the model wrote it (``{"pattern": ...}`` /
            ``{"query": ...}``).
        tools: tool names the search returned (``tool_reference.tool_name``), in order.
        error: the result's ``error_code`` when the search failed, else None; None too when
            no result block answered the search (``answered`` False).
        answered: a result block with this search's id was in the reply.
    """

    tool: str
    id: str
    input: Any = None
    tools: list[str] = Field(default_factory=list)
    error: str | None = None
    answered: bool = False


class ToolSearchOutcome(BaseModel):
    """What the server's tool search did in one answer.

    Attributes:
        searches: every search, in reply order.
        loaded: the distinct tool names the searches returned, in first-returned order: the
            deferred tools the server expanded into the model's context.
    """

    searches: list[Search] = Field(default_factory=list)
    loaded: list[str] = Field(default_factory=list)


class _ServerToolUse(ReplyModel):
    id: str
    name: str
    input: Any = None


class _ToolReference(ReplyModel):
    type: str
    tool_name: str


class _SearchResult(ReplyModel):
    tool_use_id: str
    content: Any = None


def _references(value: object, path: str) -> list[str]:
    names = []
    for index, item in enumerate(at(value, path)):
        reference = read_reply(_ToolReference, item, f"{path}[{index}]")
        if reference.type == "tool_reference":
            names.append(reference.tool_name)
    return names


def read_tool_search(blocks: Sequence[Mapping[str, Any]]) -> ToolSearchOutcome:
    """The tool searches of a Messages answer's ``content`` blocks.

    A ``server_tool_use`` block named ``tool_search_tool_regex`` or ``tool_search_tool_bm25``
    opens a search; the ``tool_search_tool_result`` block with its id as ``tool_use_id``
    answers it, with ``tool_search_tool_search_result.tool_references`` or a
    ``tool_search_tool_result_error`` (SDK 2.15.0 types); a ``tool_result`` block answering a
    search's id with a list of ``tool_reference`` blocks (the shape in Anthropic's page) is
    read the same way. Other blocks (``text``, ``tool_use``, other server tools) are left to
    the caller. None of these blocks is a call of the model's.

    Raises:
        MalformedReply: a search block of unexpected shape (the message names the block).
    """
    searches: dict[str, Search] = {}
    for index, block in enumerate(blocks):
        kind, path = block.get("type"), f"content[{index}]"
        if kind == "server_tool_use" and block.get("name") in SEARCH_TOOL_NAMES:
            use = read_reply(_ServerToolUse, block, path)
            searches[use.id] = Search(tool=use.name, id=use.id, input=use.input)
        elif kind in ("tool_search_tool_result", "tool_result"):
            result = read_reply(_SearchResult, block, path)
            search = searches.get(result.tool_use_id)
            if search is None:
                if kind == "tool_search_tool_result":
                    raise MalformedReply(f"{path}.tool_use_id: '{result.tool_use_id}' answers "
                                         "no earlier tool search")
                continue  # a tool_result of something else: not a search
            content, where = result.content, f"{path}.content"
            search.answered = True
            if isinstance(content, list):  # the documented tool_result shape
                search.tools = _references(content, where)
            elif isinstance(content, dict) and \
                    content.get("type") == "tool_search_tool_search_result":
                search.tools = _references(content.get("tool_references"),
                                           f"{where}.tool_references")
            elif isinstance(content, dict) and \
                    content.get("type") == "tool_search_tool_result_error":
                code = content.get("error_code")
                search.error = code if isinstance(code, str) else "unknown_error"
            else:
                shown = f"type {content.get('type')!r}" if isinstance(content, dict) \
                    else json_type(content)
                raise MalformedReply(f"{where}: expected a tool_search_tool_search_result or "
                                     f"tool_search_tool_result_error, got {shown}")
    loaded = list(dict.fromkeys(name for s in searches.values() for name in s.tools))
    return ToolSearchOutcome(searches=list(searches.values()), loaded=loaded)


def search_tool_in(body: Mapping[str, Any]) -> str | None:
    """The tool search tool's ``type`` in a request body's ``tools``, or None."""
    types = {kind for kind, _ in SEARCH_TOOLS.values()}
    for entry in body.get("tools") or []:
        if isinstance(entry, Mapping) and entry.get("type") in types:
            return str(entry["type"])
    return None
