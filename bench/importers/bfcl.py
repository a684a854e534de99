"""Import Berkeley Function Calling Leaderboard (BFCL) data into bench cases and a toolset.

BFCL ships, per test category, a question file (``BFCL_v4_<category>.json``) and for most
categories a possible-answer file (``possible_answer/BFCL_v4_<category>.json``); both are JSON
Lines despite the suffix. A question entry is ``{"id", "question": [[messages of turn 1], ...],
"function": [{name, description, parameters}]}``; an answer entry is ``{"id", "ground_truth":
[{tool_name: {argument: [acceptable values]}}]}`` where ``""`` among the acceptable values
means the argument may be omitted. Irrelevance categories have no answer file: nothing fits, so
the case expects no call.

Mapping to bench (BRIEF §5):

- ``""`` -> ``null`` (may be omitted); a nested-object answer ``[{"k": [v1, v2]}]`` is expanded
  into the literal objects it accepts (at most :data:`MAX_NESTED_COMBINATIONS`, else
  ``{"$any": true}``).
- BFCL's own parameter types (Python and Java/JavaScript names, :data:`BFCL_TYPES`) become JSON
  Schema types; ``any`` becomes an unconstrained schema; the non-standard ``optional`` keyword
  is dropped (``required`` already says it).
- Tool names are made valid (``math.hcf`` -> ``math_hcf``, the substitution BFCL itself uses
  for OpenAI models); two different definitions under one name become ``name`` and
  ``name_2``.
- Every case of a bench toolset sees the whole toolset, so the imported toolset is the union
  of the functions of all entries; each case's ``notes`` names the functions BFCL offered it.
- Multi-turn categories (more than one turn in ``question``) are rejected: they need BFCL's
  stateful executor.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from bench.errors import BenchError, read_text_file
from bench.importers.common import ImportedToolset, make_tool, tool_name

# BFCL parameter type -> JSON Schema type (None: no type constraint). From the type table BFCL
# uses to build OpenAPI tools (bfcl_eval/constants/type_mappings.py, GORILLA_TO_OPENAPI), with
# "any" left unconstrained instead of "string".
BFCL_TYPES: dict[str, str | None] = {
    "integer": "integer", "int": "integer", "byte": "integer", "short": "integer",
    "long": "integer", "Bigint": "integer",
    "number": "number", "float": "number", "double": "number",
    "string": "string", "String": "string", "char": "string",
    "boolean": "boolean", "bool": "boolean",
    "array": "array", "list": "array", "tuple": "array", "ArrayList": "array",
    "Array": "array", "Queue": "array", "Stack": "array",
    "dict": "object", "object": "object", "HashMap": "object", "Hashtable": "object",
    "any": None, "Any": None,
}
MAX_NESTED_COMBINATIONS = 64
# BFCL category prefix -> bench category tag (longest prefix first).
_CATEGORY_TAGS = (("parallel_multiple", "parallel-multiple"), ("parallel", "parallel"),
                  ("multiple", "multiple"), ("simple", "simple"),
                  ("live_parallel_multiple", "parallel-multiple"),
                  ("live_parallel", "parallel"), ("live_multiple", "multiple"),
                  ("live_simple", "simple"), ("live_irrelevance", "no_call"),
                  ("irrelevance", "no_call"))


def bfcl_schema(schema: Any, where: str) -> Any:
    """Convert one BFCL parameter schema (recursively) to JSON Schema.

    Args:
        schema: a BFCL schema dict (``type`` may be ``dict``, ``float``, ``tuple``, ``any``...).
        where: location for error messages (``file: id: function.param``).

    Raises:
        BenchError: an unknown BFCL type.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":  # not JSON Schema; 'required' carries it
            continue
        if key == "type":
            if isinstance(value, str):
                if value not in BFCL_TYPES:
                    raise BenchError(f"{where}: unknown BFCL type '{value}' (known: "
                                     f"{', '.join(sorted(BFCL_TYPES))})")
                if BFCL_TYPES[value] is not None:
                    out["type"] = BFCL_TYPES[value]
            else:
                out["type"] = value
        elif key == "properties" and isinstance(value, dict):
            out[key] = {k: bfcl_schema(v, f"{where}.{k}") for k, v in value.items()}
        elif key == "items":
            out[key] = bfcl_schema(value, f"{where}[]")
        else:
            out[key] = value
    return out


def _read_jsonl(path: Path) -> list[tuple[int, dict[str, Any]]]:
    text = read_text_file(path)
    entries = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"malformed JSON: {exc.msg} (column {exc.colno})", file=path,
                             line=number) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str):
            raise BenchError("an entry must be a JSON object with a string 'id'", file=path,
                             line=number, field="id")
        entries.append((number, obj))
    return entries


def category_of(entry_id: str) -> str:
    """BFCL category of an entry id (``simple_python_10`` -> ``simple_python``)."""
    head, _, tail = entry_id.rpartition("_")
    return head if head and tail.replace("-", "").isdigit() else entry_id


def category_tag(category: str) -> str | None:
    """bench category tag of a BFCL category (``simple_python`` -> ``simple``), or None."""
    for prefix, tag in _CATEGORY_TAGS:
        if category.startswith(prefix):
            return tag
    return None


def default_answers_path(questions: Path) -> Path:
    """Where BFCL keeps the answers of ``questions``: ``possible_answer/<same name>`` beside it."""
    return questions.parent / "possible_answer" / questions.name


def _acceptable(values: Any, where: str, notes: list[str]) -> list[Any]:
    if not isinstance(values, list) or not values:
        raise BenchError(f"{where}: acceptable values must be a non-empty list")
    out: list[Any] = []
    for value in values:
        for mapped in _expand(value, where, notes):
            if mapped not in out:
                out.append(mapped)
    return out


def _expand(value: Any, where: str, notes: list[str]) -> list[Any]:
    """BFCL acceptable value -> bench literal values ('' -> None; nested dicts expanded)."""
    if value == "":
        return [None]
    if isinstance(value, dict):
        keys = list(value)
        options = [_acceptable(value[k], f"{where}.{k}", notes) for k in keys]
        total = 1
        for opt in options:
            total *= len(opt)
        if total > MAX_NESTED_COMBINATIONS:
            notes.append(f"{where}: {total} nested combinations, label relaxed to $any")
            return [{"$any": True}]
        return [{k: v for k, v in zip(keys, combo) if v is not None}
                for combo in itertools.product(*options)]
    return [value]


def import_bfcl(questions: list[Path], answers: list[Path] | None = None, *,
                toolset: str) -> tuple[ImportedToolset, list[dict[str, Any]]]:
    """Read BFCL question files (and their answers) into a toolset and bench cases.

    Args:
        questions: BFCL question files (JSON Lines).
        answers: possible-answer files; default: for each question file its
            :func:`default_answers_path` when it exists. Irrelevance categories need none.
        toolset: the toolset name the cases refer to.

    Returns:
        (toolset, cases as dicts in :class:`bench.models.Case` shape, question-file order).

    Raises:
        BenchError: malformed files, a multi-turn entry, an unknown BFCL type, or an entry of a
            category that needs an answer but has none (names file, line and id).
    """
    answer_files = list(answers or [])
    if answers is None:
        answer_files = [p for p in map(default_answers_path, questions) if p.is_file()]
    truth: dict[str, tuple[Path, int, Any]] = {}
    for path in answer_files:
        for number, entry in _read_jsonl(path):
            truth[entry["id"]] = (path, number, entry.get("ground_truth"))

    imported = ImportedToolset()
    by_definition: dict[tuple[str, str], str] = {}
    cases: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for path in questions:
        for number, entry in _read_jsonl(path):
            case_id = entry["id"]
            where = f"{path}:{number}: {case_id}"
            if case_id in seen_ids:
                raise BenchError(f"duplicate id '{case_id}'", file=path, line=number, field="id")
            seen_ids.add(case_id)
            offered = _entry_tools(entry, where, imported, by_definition)
            cases.append(_entry_case(entry, path, number, toolset, offered, truth, imported))
    return imported, cases


def _entry_tools(entry: dict[str, Any], where: str, imported: ImportedToolset,
                 by_definition: dict[tuple[str, str], str]) -> dict[str, str]:
    functions = entry.get("function")
    if not isinstance(functions, list):
        raise BenchError(f"{where}: 'function' must be a list of function definitions")
    offered: dict[str, str] = {}
    for i, fn in enumerate(functions):
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise BenchError(f"{where}: function {i} needs a string 'name'")
        key = (fn["name"], json.dumps(fn, sort_keys=True))
        if key not in by_definition:
            name = tool_name(fn["name"], (t.name for t in imported.tools))
            schema = bfcl_schema(fn.get("parameters"), f"{where}: {fn['name']}")
            imported.tools.append(make_tool(name, fn.get("description"), schema,
                                            source=where))
            if tool_name(fn["name"]) != fn["name"]:
                imported.renamed.setdefault(fn["name"], tool_name(fn["name"]))
            if name != tool_name(fn["name"]):
                imported.notes.append(f"{where}: a second definition of '{fn['name']}' "
                                      f"is named '{name}'")
            by_definition[key] = name
        offered[fn["name"]] = by_definition[key]
    return offered


def _entry_case(entry: dict[str, Any], path: Path, number: int, toolset: str,
                offered: dict[str, str], truth: dict[str, tuple[Path, int, Any]],
                imported: ImportedToolset) -> dict[str, Any]:
    case_id = entry["id"]
    question = entry.get("question")
    if not isinstance(question, list) or not question:
        raise BenchError("'question' must be a non-empty list of turns", file=path, line=number,
                         field="question")
    if len(question) > 1:
        raise BenchError(f"'{case_id}' has {len(question)} turns; multi-turn BFCL categories "
                         "need BFCL's stateful executor and are not imported", file=path,
                         line=number, field="question")
    category = category_of(case_id)
    tag = category_tag(category)
    tags = [t for t in (tag, "bfcl", f"bfcl:{category}") if t]
    case: dict[str, Any] = {"id": case_id, "toolset": toolset, "lang": "en",
                            "messages": question[0], "tags": tags,
                            "notes": f"BFCL {category}; BFCL offered only: "
                                     f"{', '.join(offered.values())}"}
    if case_id not in truth:
        if tag != "no_call":
            raise BenchError(f"no possible answer for '{case_id}' (pass --answers, or put it in "
                             f"{default_answers_path(path)})", file=path, line=number,
                             field="id")
        case["expected"] = {"no_call": True}
        return case
    answer_path, answer_line, ground_truth = truth[case_id]
    if not isinstance(ground_truth, list) or not ground_truth:
        raise BenchError("'ground_truth' must be a non-empty list", file=answer_path,
                         line=answer_line, field="ground_truth")
    calls = []
    for i, call in enumerate(ground_truth):
        if not isinstance(call, dict) or len(call) != 1:
            raise BenchError("each ground-truth call must be {tool_name: {argument: [...]}}",
                             file=answer_path, line=answer_line, field=f"ground_truth.{i}")
        (fn_name, arguments), = call.items()
        if fn_name not in offered:
            raise BenchError(f"tool '{fn_name}' is not among the entry's functions",
                             file=answer_path, line=answer_line, field=f"ground_truth.{i}")
        if not isinstance(arguments, dict):
            raise BenchError("arguments must be an object", file=answer_path,
                             line=answer_line, field=f"ground_truth.{i}.{fn_name}")
        where = f"{answer_path}:{answer_line}: {case_id}: {fn_name}"
        calls.append({"name": offered[fn_name],
                      "arguments": {arg: _acceptable(values, f"{where}.{arg}", imported.notes)
                                    for arg, values in arguments.items()}})
    case["expected"] = {"calls": calls}
    return case
