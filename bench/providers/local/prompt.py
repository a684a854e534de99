"""The embedded model's prompt and grammars: the tools block, the answer schema, the GBNF.

Pure functions (no llama.cpp state); :mod:`bench.providers.local.engine` decodes with them and
:mod:`bench.providers.local` counts tokens with them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool

if TYPE_CHECKING:  # llama.cpp's chat message shapes (the `local` extra)
    from llama_cpp.llama_types import ChatCompletionRequestMessage

MAX_PARALLEL_CALLS = 3
# Free strings in the decoding grammar are capped (characters) so that a degenerate greedy loop
# inside a string ("1.1.1.1...") ends; the schema shown to the model is unchanged.
GRAMMAR_MAX_STRING = 160
# Arrays with a larger maxItems are left unbounded in the grammar: llama.cpp's converter expands
# maxItems into that many nested optional rules, which made the logistics grammar 4x larger and
# its sampling far slower. The bound still applies in the schema the model sees and in scoring.
GRAMMAR_MAX_ITEMS = 8


@dataclass(frozen=True)
class NoCallLayout:
    """How the prompt and grammar offer the answer "no tool fits".

    Attributes:
        name: layout id (``--no-call-layout``).
        decline_tool: name of a pseudo-tool meaning "no tool fits", or None for the
            empty-list answer ``{"tool_calls": []}``.
        decline_description: the pseudo-tool's description (its wording).
        position: ``first`` or ``last``: where the pseudo-tool sits among the tools.
        instruction: the sentence after the answer format that tells how to decline.
        decline_schema: the pseudo-tool's arguments (JSON Schema); a ``message`` string is
            the answer's text for the user (:func:`bench.parse.parse_json_tool_calls`).
    """

    name: str
    decline_tool: str | None
    decline_description: str
    position: str
    instruction: str
    decline_schema: dict[str, Any] = field(default_factory=lambda: {
        "type": "object", "properties": {}, "additionalProperties": False})


NO_CALL_LAYOUTS: dict[str, NoCallLayout] = {layout.name: layout for layout in (
    NoCallLayout("empty-list", None, "", "last",
                 'If none of the tools fits the request, answer {"tool_calls": []}.'),
    NoCallLayout("none-tool-first", "no_tool_fits",
                 "Call this when none of the other tools can serve the request.", "first",
                 "If none of the tools fits the request, call no_tool_fits."),
    NoCallLayout("none-tool-last", "no_tool_fits",
                 "Call this when none of the other tools can serve the request.", "last",
                 "If none of the tools fits the request, call no_tool_fits."),
    NoCallLayout("reply-tool-last", "reply_without_tool",
                 "Answer the user in plain words without using a tool: small talk, policy "
                 "questions, or requests that no tool can do.", "last",
                 "If the request needs no tool or no tool can do it, call reply_without_tool."),
    NoCallLayout("reply-tool-message", "reply_to_user",
                 "Answer the user in plain words, without another tool: give the results, ask "
                 "for what is missing, or say what cannot be done.", "last",
                 "To answer the user in words, call reply_to_user with your message.",
                 {"type": "object", "properties": {"message": {"type": "string"}},
                  "required": ["message"], "additionalProperties": False}),
)}
EPISODE_NO_CALL_LAYOUT = "reply-tool-message"
"""The layout of a run with agent episodes (unless ``--no-call-layout`` says otherwise): an
episode's final answer needs words (its answer facts), which the other layouts cannot carry."""
# Chosen by benchmarks/no_call_layout.py on the ecommerce dataset
# (docs/embedded-model.md#how-the-model-says-no-tool-fits).
DEFAULT_NO_CALL_LAYOUT = "reply-tool-last"


def tools_block(tools: Sequence[Tool], layout: NoCallLayout) -> str:
    """The system message: the tools first, then the answer format (byte-identical per variant)."""
    entries = [(t.name, t.description, t.input_schema) for t in tools]
    if layout.decline_tool:
        pseudo = (layout.decline_tool, layout.decline_description, layout.decline_schema)
        entries = [pseudo, *entries] if layout.position == "first" else [*entries, pseudo]
    parts = ["# Tools", ""]
    for name, description, schema in entries:
        parts += [f"## {name}", description,
                  "Arguments (JSON Schema): " + json.dumps(schema, ensure_ascii=False), ""]
    parts += [
        "# Answer format",
        'Answer only with JSON: {"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}. '
        "Use several calls when the request needs several. Send only the arguments the user's "
        "words determine.",
        layout.instruction,
    ]
    return "\n".join(parts)


def grammar_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a tool's JSON Schema relaxed for grammar building (never shown to the model).

    Drops ``minLength``/``maxLength`` (free strings get :data:`GRAMMAR_MAX_STRING` instead) and
    ``maxItems`` above :data:`GRAMMAR_MAX_ITEMS`; both expand into nested optional rules in
    llama.cpp's converter. Scoring still checks the real schema.
    """
    relaxed = _relaxed(dict(schema))
    assert isinstance(relaxed, dict)  # a dict stays a dict
    relaxed = _safe_def_names(relaxed)
    if _refers_to(relaxed, "#"):
        # llama.cpp's converter resolves only "#/..." references ("Unsupported ref #"): a
        # reference to the whole schema (a tree: {"child": {"$ref": "#"}}) points to a copy
        # of it under $defs instead, which refers to itself the same way
        body = _rerooted({k: v for k, v in relaxed.items() if k != "$defs"})
        relaxed = _rerooted(relaxed)
        relaxed["$defs"] = {**(relaxed.get("$defs") or {}), ROOT_DEF: body}
    return relaxed


#: The ``$defs`` name :func:`grammar_schema` gives a copy of the root schema that ``"$ref":
#: "#"`` is rewritten to point to.
ROOT_DEF = "benchroot"


def _safe_def_names(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$defs`` / ``definitions`` names made of ``[A-Za-z0-9-]`` (and its
    ``$ref``s to them renamed): llama.cpp's converter names a recursive reference's rule by
    the raw name but defines it under the name with other characters as ``-`` (``my_node``
    referenced, ``my-node`` defined), which leaves the grammar with an undefined rule."""
    renames: dict[str, str] = {}
    out = dict(schema)
    taken: set[str] = set()
    for key in ("$defs", "definitions"):
        defs = out.get(key)
        if not isinstance(defs, dict):
            continue
        new: dict[str, Any] = {}
        for name, sub in defs.items():
            safe = _RULE_UNSAFE.sub("-", str(name)) or "def"
            base, n = safe, 1
            while safe in taken:
                n += 1
                safe = f"{base}-{n}"
            taken.add(safe)
            new[safe] = sub
            if safe != name:
                renames[f"#/{key}/{name}"] = f"#/{key}/{safe}"
        out[key] = new
    return _renamed_refs(out, renames) if renames else out


#: Characters llama.cpp's converter does not keep in a rule name (``INVALID_RULE_CHARS_RE``).
_RULE_UNSAFE = re.compile(r"[^a-zA-Z0-9-]+")


def _renamed_refs(schema: Any, renames: Mapping[str, str]) -> Any:
    if isinstance(schema, list):
        return [_renamed_refs(item, renames) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: (renames.get(v, v) if k == "$ref" and isinstance(v, str) else
                v if k in ("enum", "const", "default", "examples") else
                _renamed_refs(v, renames))
            for k, v in schema.items()}


def _refers_to(schema: object, ref: str) -> bool:
    if isinstance(schema, list):
        return any(_refers_to(item, ref) for item in schema)
    if not isinstance(schema, dict):
        return False
    return schema.get("$ref") == ref or any(_refers_to(v, ref) for k, v in schema.items()
                                            if k not in ("enum", "const", "default",
                                                         "examples"))


def _rerooted(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_rerooted(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    return {k: (f"#/$defs/{ROOT_DEF}" if k == "$ref" and v == "#" else
                v if k in ("enum", "const", "default", "examples") else _rerooted(v))
            for k, v in schema.items()}


def _relaxed(schema: object) -> object:
    if isinstance(schema, list):
        return [_relaxed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in ("minLength", "maxLength"):
            continue
        if key == "maxItems" and isinstance(value, int) and value > GRAMMAR_MAX_ITEMS:
            continue
        # "properties" maps names to schemas; recurse into the schemas, keep the names
        out[key] = ({k: _relaxed(v) for k, v in value.items()}
                    if key in ("properties", "$defs", "definitions") and isinstance(value, dict)
                    else _relaxed(value))
    return out


def answer_schema(tools: Sequence[Tool], layout: NoCallLayout) -> dict[str, Any]:
    """JSON Schema of a whole answer, from which the decoding grammar is built."""
    options = [{
        "type": "object",
        "properties": {"name": {"const": t.name},
                       "arguments": grammar_schema(t.input_schema)},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for t in tools]
    if layout.decline_tool:
        pseudo = {"type": "object",
                  "properties": {"name": {"const": layout.decline_tool},
                                 "arguments": grammar_schema(layout.decline_schema)},
                  "required": ["name", "arguments"], "additionalProperties": False}
        options = [pseudo, *options] if layout.position == "first" else [*options, pseudo]
    return {
        "type": "object",
        "properties": {"tool_calls": {
            "type": "array", "items": {"anyOf": options},
            "minItems": 1 if layout.decline_tool else 0, "maxItems": MAX_PARALLEL_CALLS}},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }


def json_schema_grammar(schema_json: str) -> str:
    """GBNF for a JSON Schema via llama.cpp's converter (``json_schema_to_gbnf``).

    The Python port's string ``char`` rule admits raw control characters (newlines), which
    JSON forbids; it is narrowed to the C++ converter's rule, which excludes U+0000-U+001F and
    U+007F. Free strings are capped at :data:`GRAMMAR_MAX_STRING` characters.

    Raises:
        BenchError: the converter's output no longer has the expected ``char`` rule.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(schema_json)
    loose = 'char ::= [^"\\\\]'
    if loose in gbnf:
        gbnf = gbnf.replace(loose, 'char ::= [^"\\\\\\x7F\\x00-\\x1F]')
    elif "char ::=" in gbnf and "x1F" not in gbnf:
        raise BenchError("unexpected JSON grammar from llama-cpp-python; cannot exclude control "
                         "characters from strings")
    # GBNF's bounded repetition; the converter's own maxLength expansion (nested optionals) makes
    # grammar sampling orders of magnitude slower.
    bounded: str = gbnf.replace('string ::= "\\"" char* "\\"" space',
                                f'string ::= "\\"" char{{0,{GRAMMAR_MAX_STRING}}} "\\"" space')
    return bounded


def chat_messages(system: str, messages: Sequence[Message]
                  ) -> list[ChatCompletionRequestMessage]:
    """The chat for the model (``{"role", "content"}`` dicts): the tools block as system
    message, then the case's turns (tool results as user turns, earlier tool calls as the
    assistant's JSON)."""
    out: list[ChatCompletionRequestMessage] = [{"role": "system", "content": system}]
    for message in messages:
        if message.role == "tool":
            kind = "Tool error" if message.is_error else "Tool result"
            out.append({"role": "user",
                        "content": f"{kind} ({message.tool_call_id}): {message.content}"})
        elif message.role == "assistant" and message.tool_calls:
            out.append({"role": "assistant",
                        "content": json.dumps({"tool_calls": message.tool_calls},
                                              ensure_ascii=False)})
        elif message.role == "assistant":
            out.append({"role": "assistant", "content": message.content or ""})
        elif message.role == "user":
            out.append({"role": "user", "content": message.content or ""})
    return out
