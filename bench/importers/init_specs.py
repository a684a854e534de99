"""``bench init``'s specs: a spec's sections from an imported tool's description
(:func:`spec_sections`: the rules are in :mod:`bench.importers.scaffold`), and the text of
``descriptions/<toolset>/specs/<tool>.yaml``.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from bench.models import Tool

_USE = re.compile(r"^(?:use (?:it|this(?: tool| function)?)|call (?:it|this(?: tool)?)|use)\s+",
                  re.IGNORECASE)
_DONT = re.compile(r"^(?:do not|don't|never) (?:use|call)(?: it| this(?: tool| function)?)?\s*",
                   re.IGNORECASE)
_HEADER = re.compile(r"^(returns?|raises|errors?|examples?|notes?|when to use|when not to use|"
                     r"do not use|don't use)\s*:\s*(.*)$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


def _strip(pattern: re.Pattern[str], sentence: str) -> str:
    return pattern.sub("", sentence, count=1).strip()


def spec_sections(description: str) -> dict[str, Any]:
    """The spec sections of an imported description (see the module docstring).

    Returns:
        ``{"summary": str, "when_to_use": [...], "when_not_to_use": [...], "returns": str,
        "errors": [...], "edge_cases": [...], "business_context": [...]}`` (empty ones
        included).
    """
    sections: dict[str, Any] = {"summary": "", "when_to_use": [], "when_not_to_use": [],
                                "business_context": [], "returns": "", "errors": [],
                                "edge_cases": []}
    paragraphs: list[tuple[str | None, list[str]]] = []
    current: tuple[str | None, list[str]] = (None, [])
    for raw in description.splitlines():
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            if current[1]:
                paragraphs.append(current)
            current = (header.group(1).lower(), [header.group(2)] if header.group(2) else [])
        elif not line:
            if current[1]:
                paragraphs.append(current)
            current = (current[0], []) if current[0] else (None, [])
        else:
            current[1].append(line)
    if current[1]:
        paragraphs.append(current)

    def items(lines: list[str]) -> list[str]:
        found: list[str] = []
        for line in lines:
            if line.startswith(("- ", "* ", "• ")) or not found:
                found.append(line.lstrip("-*• ").strip())
            else:
                found[-1] += " " + line
        return [f for f in found if f]

    for kind, lines in paragraphs:
        if kind is None:
            text = " ".join(lines)
            sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()] \
                if not any(line.startswith(("- ", "* ")) for line in lines) else items(lines)
            for sentence in sentences:
                if _DONT.match(sentence):
                    sections["when_not_to_use"].append(_strip(_DONT, sentence))
                elif _USE.match(sentence) and not sentence.lower().startswith("user"):
                    sections["when_to_use"].append(_strip(_USE, sentence))
                elif not sections["summary"]:
                    sections["summary"] = sentence
                else:
                    sections["business_context"].append(sentence)
        elif kind.startswith("return"):
            sections["returns"] = " ".join(lines)
        elif kind in ("raises", "error", "errors"):
            sections["errors"] += items(lines)
        elif kind.startswith("example"):
            sections["edge_cases"] += [f"Example: {item}" for item in items(lines)]
        elif kind.startswith("note"):
            sections["business_context"] += items(lines)
        elif kind == "when to use":
            sections["when_to_use"] += [_strip(_USE, i) for i in items(lines)]
        else:
            sections["when_not_to_use"] += [_strip(_DONT, i) for i in items(lines)]
    return sections


def spec_data(tool: Tool) -> dict[str, Any]:
    """A spec (:class:`bench.descriptions.specs.ToolSpec` shape) of an imported tool."""
    sections = spec_sections(tool.description)
    data: dict[str, Any] = {"name": tool.name, "permission": tool.permission,
                            "summary": sections.pop("summary"),
                            "input_schema": tool.input_schema}
    data.update({key: value for key, value in sections.items() if value})
    return data


def spec_yaml(tool: Tool, source: str, toolset: str) -> str:
    """The text of ``descriptions/<toolset>/specs/<tool>.yaml`` for an imported tool."""
    from bench.descriptions.specs import ToolSpec
    data = spec_data(tool)
    ToolSpec.model_validate(data)  # what bench init writes, bench must read
    header = (f"# {tool.name}: made by `bench init` from {source}.\n"
              f"# The imported description, word for word, is the variant `current`\n"
              f"# (descriptions/{toolset}/variants/current.yaml); the variants l3, l10, l30 and\n"
              "# l50 render this spec with bench's built-in templates. Edit the sections (see\n"
              "# docs/descriptions-and-variants.md of bench); keys: summary, when_to_use,\n"
              "# when_not_to_use, constraints, business_context, returns, errors, examples\n"
              "# ({query, arguments} or {query, note}), edge_cases, permission (read, write or\n"
              "# sensitive), input_schema.\n")
    if not data["summary"]:
        header += "# TODO: the imported tool has no description: write its summary.\n"
    # without a stream safe_dump returns the document as str
    body: str = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)
    return header + body
