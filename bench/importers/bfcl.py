"""Import Berkeley Function Calling Leaderboard (BFCL) data into bench cases and a toolset.

BFCL ships, per test category, a question file (``BFCL_v4_<category>.json``) and for most
categories a possible-answer file (``possible_answer/BFCL_v4_<category>.json``); both are JSON
Lines despite the suffix. A question entry is ``{"id", "question": [[messages of turn 1], ...],
"function": [{name, description, parameters}]}``; an answer entry is ``{"id", "ground_truth":
[{tool_name: {argument: [acceptable values]}}]}`` where ``""`` among the acceptable values
means the argument may be omitted. Irrelevance categories have no answer file: nothing fits, so
the case expects no call.

Mapping to bench (BRIEF §5):

- ``""`` -> ``null`` (may be omitted). An object answer in BFCL's per-key form
  ``{"k": [v1, v2]}``, or a list of such objects (``[{"field": ["age"]}, ...]``, e.g.
  simple_python_96), is expanded into the literal values it accepts (at most
  :data:`MAX_NESTED_COMBINATIONS`, else ``{"$any": true}``). As in BFCL's ``dict_checker``,
  the per-key form holds one level deep: the values listed for a key are literals (an object
  there is compared whole, e.g. live_multiple_121).
- Conflicting labels: an acceptable value that the tool's own (converted) schema rejects, as
  ``bench run`` would judge it (:func:`bench.datasets.labels.value_problem`), e.g.
  ``[["Apple"], ["Microsoft"]]`` for an array of strings, ``true`` for a string, ``"GF"``
  outside an enum, ``"bronze"`` where the enum has ``"Bronze"``; an argument the tool does not
  have; ``[]`` (no acceptable value at all); a per-key value that is not a list; a literal
  ``null`` (for BFCL "the value must be None", unlike ``""``) where the schema forbids null
  (one it allows becomes bench's ``null``, "may be omitted"); ``""`` (may be omitted) for a
  parameter the function requires. Each is
  reported as a :class:`LabelConflict` (case, parameter, why) and kept out of scoring: the
  value is dropped when the argument keeps another acceptable value (``null`` counts: the
  argument may then only be omitted), and otherwise the whole case is left out of
  ``cases.jsonl`` (listed in ``excluded.jsonl``). An argument the tool lacks is dropped from
  the label when BFCL lets it be omitted (``""``), else the case is left out.
- The BFCL entry itself (function docs, possible answer, category, bench -> BFCL tool names)
  is kept per case in ``bfcl.jsonl`` beside ``cases.jsonl`` so that ``bench run`` can add
  BFCL's own verdict (:mod:`bench.scoring.bfcl`) to each row.
- BFCL's own parameter types (Python and Java/JavaScript names, :data:`BFCL_TYPES`) become JSON
  Schema types; ``any`` becomes an unconstrained schema; the non-standard ``optional`` keyword
  is dropped (``required`` already says it).
- Tool names are made valid (``math.hcf`` -> ``math_hcf``, the substitution BFCL itself uses
  for OpenAI models); two different definitions under one name become ``name`` and
  ``name_2``.
- Every case of a bench toolset sees the whole toolset, so the imported toolset is the union
  of the functions of all entries; each case's ``notes`` names the functions BFCL offered it.
- Multi-turn categories (more than one turn in ``question``) are rejected: they need BFCL's
  stateful executor. So are ``simple_java`` and ``simple_javascript`` (their answers are Java
  or JavaScript source text that BFCL parses with its own type converters) and
  ``live_relevance`` (no possible answers: BFCL only checks that some call is made).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.datasets.labels import value_problem, value_validator
from pydantic import ValidationError

from bench.errors import BenchError, json_line, pydantic_error_field, read_text_file
from bench.importers.common import ImportedToolset, make_tool, tool_name
from bench.scoring.bfcl import SOURCES_FILE
from bench.models import Case, Tool

SOURCE_FILE = SOURCES_FILE  # the file `bench import bfcl` writes the sources to

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
# Categories whose entries bench cannot score (see the module docstring), and why.
UNSUPPORTED = {
    "simple_java": "its answers are Java source text checked after BFCL's Java type converter",
    "simple_javascript": "its answers are JavaScript source text checked after BFCL's "
                         "JavaScript type converter",
    "live_relevance": "it has no possible answers (BFCL only checks that some call is made)",
}
EXCLUDED_FILE = "excluded.jsonl"


@dataclass(frozen=True)
class LabelConflict:
    """A BFCL label that contradicts its own function doc (see the module docstring).

    Attributes:
        case_id: the BFCL entry id.
        where: ``file:line`` of the possible answer.
        parameter: ``tool.argument`` (BFCL's tool name).
        why: what is wrong, e.g. ``acceptable value 'GF' breaks the tool's schema: ...``.
        action: ``value dropped``, ``argument dropped`` or ``case excluded``.
    """

    case_id: str
    where: str
    parameter: str
    why: str
    action: str

    def line(self) -> str:
        """One report line: case, parameter, why, and what the import did."""
        return f"{self.where}: {self.case_id}: {self.parameter}: {self.why} ({self.action})"


@dataclass
class BfclImport:
    """What :func:`import_bfcl` read.

    Attributes:
        toolset: the tools (union of every entry's functions).
        cases: scorable cases as dicts in :class:`bench.models.Case` shape, file order.
        conflicts: every conflicting label, in file order.
        excluded: ``{"id", "category", "conflicts": [why...]}`` per case left out.
        sources: per kept case ``{"id", "category", "function", "ground_truth",
            "tool_names"}``: the BFCL entry as BFCL checks it; ``tool_names`` maps the
            bench tool names offered to BFCL's.
    """

    toolset: ImportedToolset
    cases: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[LabelConflict] = field(default_factory=list)
    excluded: list[dict[str, Any]] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)


# BFCL's literal null ("the value must be None"), distinct from "" ("may be omitted"): bench's
# null means "may be omitted", so a null answer is checked against the schema first.
_NULL = {"$bfcl_null": True}


class _Conflict(Exception):
    """A label problem found while expanding a possible answer (the case is excluded)."""


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
    """The entries of a BFCL JSON Lines file, with their 1-based line numbers.

    Raises:
        BenchError: a line that is not JSON, is nested past the decoder's limit, holds a lone
            UTF-16 surrogate escape (``"\\udfff"``: not text, it cannot be written back as
            UTF-8), or is not an object with a string ``id`` (names file and line).
    """
    text = read_text_file(path)
    entries = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        obj = json_line(line, file=path, line=number)
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:
            raise BenchError(f"a string holds a lone UTF-16 surrogate escape "
                             f"({exc.object[exc.start:exc.end].encode('unicode_escape').decode()}"
                             "), which is not text", file=path, line=number) from None
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
    """A parameter's BFCL acceptable values -> bench literal values.

    Raises:
        BenchError: ``values`` is not a list (a malformed file).
        _Conflict: the list is empty (nothing is acceptable), or a per-key value is no list.
    """
    if not isinstance(values, list):
        raise BenchError(f"{where}: acceptable values must be a list")
    if not values:
        raise _Conflict("no acceptable value ([])")
    return _unique([mapped for value in values for mapped in _expand(value, where, notes)])


def _per_key(value: dict[str, Any], where: str) -> list[dict[str, Any]]:
    """The literal objects one per-key object accepts (``""`` for a key: it may be left out;
    listed values are literals, as BFCL's ``dict_checker`` compares them)."""
    _per_key_count(value, where)  # raises on a malformed per-key object
    keys = list(value)
    options = [_unique(value[key]) for key in keys]
    return [{k: v for k, v in zip(keys, combo) if v != ""}
            for combo in itertools.product(*options)]


def _unique(values: list[Any]) -> list[Any]:
    """``values`` without repeats, by JSON text (so ``true``, ``1`` and ``1.0`` stay apart)."""
    seen: dict[str, Any] = {}
    for value in values:
        seen.setdefault(json.dumps(value, sort_keys=True), value)
    return list(seen.values())


def _expand(value: Any, where: str, notes: list[str]) -> list[Any]:
    """One BFCL acceptable value -> bench literal values: ``""`` -> None; an object in per-key
    form, or a list of them, -> every literal it accepts (capped, see the module docstring)."""
    if value == "":
        return [None]
    if value is None:
        return [_NULL]
    if isinstance(value, dict):
        shapes = [_per_key_count(value, where)]
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        shapes = [_per_key_count(item, where) for item in value]
    else:
        return [value]
    total = 1
    for size in shapes:
        total *= size
    if total > MAX_NESTED_COMBINATIONS:
        notes.append(f"{where}: {total} nested combinations, label relaxed to $any")
        return [{"$any": True}]
    if isinstance(value, dict):
        return _per_key(value, where)
    return [list(combo) for combo in itertools.product(*(_per_key(v, where) for v in value))]


def _per_key_count(value: dict[str, Any], where: str) -> int:
    """How many literal objects one per-key object accepts.

    Raises:
        _Conflict: a key whose acceptable values are not a list, or an empty list.
    """
    total = 1
    for key, listed in value.items():
        if not isinstance(listed, list):
            raise _Conflict(f"the acceptable values of key '{key}' are not a list "
                            f"({json.dumps(listed)[:60]})")
        if not listed:
            raise _Conflict(f"no acceptable value for key '{key}' ([])")
        total *= len(listed)
    return total


def _why(value: Any, why: str) -> str:
    """A conflict's reason: which acceptable value, and what is wrong with it."""
    if value is None:
        return f'"" (may be omitted): {why}'
    shown = "null" if value == _NULL else json.dumps(value)
    return f"acceptable value {shown} breaks the tool's schema: {why}"


def _null_problem(validator: Any) -> str | None:
    """Why ``null`` breaks a schema (None when it fits)."""
    error = next(iter(validator.iter_errors(None)), None)
    return None if error is None else error.message


def import_bfcl(questions: list[Path], answers: list[Path] | None = None, *,
                toolset: str) -> BfclImport:
    """Read BFCL question files (and their answers) into a toolset and bench cases.

    Args:
        questions: BFCL question files (JSON Lines).
        answers: possible-answer files; default: for each question file its
            :func:`default_answers_path` when it exists. Irrelevance categories need none.
        toolset: the toolset name the cases refer to.

    Returns:
        A :class:`BfclImport`: the toolset, the scorable cases (question-file order), the
        conflicting labels and the cases they excluded, and each kept case's BFCL entry.

    Raises:
        BenchError: malformed files, a duplicate id, a multi-turn entry, an entry of an
            unsupported category (:data:`UNSUPPORTED`), an unknown BFCL type, or an entry of a
            category that needs an answer but has none (names file, line and id).
    """
    answer_files = list(answers or [])
    if answers is None:
        answer_files = [p for p in map(default_answers_path, questions) if p.is_file()]
    truth: dict[str, tuple[Path, int, Any]] = {}
    for path in answer_files:
        for number, entry in _read_jsonl(path):
            if entry["id"] in truth:  # the later answer would silently replace the first
                first = truth[entry["id"]]
                raise BenchError(f"duplicate id '{entry['id']}' (first at {first[0]}:{first[1]})",
                                 file=path, line=number, field="id")
            truth[entry["id"]] = (path, number, entry.get("ground_truth"))

    result = BfclImport(ImportedToolset())
    imported = result.toolset
    by_definition: dict[tuple[str, str], str] = {}
    tools: dict[str, Tool] = {}
    seen_ids: set[str] = set()
    for path in questions:
        for number, entry in _read_jsonl(path):
            case_id = entry["id"]
            where = f"{path}:{number}: {case_id}"
            if case_id in seen_ids:
                raise BenchError(f"duplicate id '{case_id}'", file=path, line=number, field="id")
            seen_ids.add(case_id)
            category = category_of(case_id)
            if category in UNSUPPORTED:
                raise BenchError(f"BFCL category '{category}' is not supported: "
                                 f"{UNSUPPORTED[category]}", file=path, line=number, field="id")
            offered = _entry_tools(entry, where, imported, by_definition)
            for tool in imported.tools[len(tools):]:
                tools[tool.name] = tool
            case = _entry_case(entry, path, number, toolset, offered, truth, imported)
            conflicts = _check_labels(case, offered, tools, truth.get(case_id))
            result.conflicts.extend(conflicts)
            if any(c.action == "case excluded" for c in conflicts):
                result.excluded.append({"id": case_id, "category": category,
                                        "conflicts": [f"{c.parameter}: {c.why}"
                                                      for c in conflicts]})
                continue
            _check_case(case, path, number)
            result.cases.append(case)
            ground_truth = truth[case_id][2] if case_id in truth else None
            result.sources.append({"id": case_id, "category": category,
                                   "function": entry["function"],
                                   "ground_truth": ground_truth,
                                   "tool_names": {bench: bfcl for bfcl, bench in
                                                  offered.items()}})
    return result


def _check_labels(case: dict[str, Any], offered: dict[str, str], tools: dict[str, Tool],
                  answer: tuple[Path, int, Any] | None) -> list[LabelConflict]:
    """Drop the acceptable values of ``case`` that break their tool's schema, in place, and
    return the conflicts (see the module docstring for what is dropped or excluded)."""
    pending: list[LabelConflict] = case.pop("_conflicts", [])  # as _entry_case stores them
    if answer is None:
        return pending
    where = f"{answer[0]}:{answer[1]}"
    bfcl_name = {bench: bfcl for bfcl, bench in offered.items()}
    conflicts = list(pending)
    calls = case.get("expected", {}).get("calls", [])
    for index, call in enumerate(calls):
        properties = tools[call["name"]].input_schema.get("properties", {})
        required = tools[call["name"]].input_schema.get("required", [])
        for arg in list(call["arguments"]):
            parameter = f"{bfcl_name[call['name']]}.{arg}" + \
                (f" (call {index + 1})" if len(calls) > 1 else "")
            acceptable = call["arguments"][arg]
            if arg not in properties:
                omissible = None in acceptable
                conflicts.append(LabelConflict(
                    case["id"], where, parameter, "the function has no such parameter",
                    "argument dropped" if omissible else "case excluded"))
                del call["arguments"][arg]
                continue
            validator = value_validator(properties[arg], tools[call["name"]].input_schema)
            problems = [(value, _null_problem(validator) if value == _NULL else
                         value_problem(validator, value)) for value in acceptable]
            # a null the schema allows can only be sent as null or left out: "may be omitted"
            kept = _unique([None if value == _NULL else value
                            for value, why in problems if why is None])
            if None in kept and arg in required:  # "" for a parameter the tool requires
                kept.remove(None)
                problems.append((None, "the parameter is required, so it cannot be omitted"))
            action = "value dropped" if kept else "case excluded"  # nothing would be right
            conflicts.extend(LabelConflict(case["id"], where, parameter,
                                           _why(value, why), action)
                             for value, why in problems if why is not None)
            call["arguments"][arg] = kept
    return conflicts


def _check_case(case: dict[str, Any], path: Path, number: int) -> None:
    """Validate an imported case as :class:`~bench.models.Case`, blaming the question file's
    line and BFCL's field (``messages.0.role`` is ``question.0.0.role`` there).

    Raises:
        BenchError: the case breaks bench's format.
    """
    try:
        Case.model_validate(case)
    except ValidationError as exc:
        field_name, message = pydantic_error_field(exc)
        if field_name and field_name.split(".")[0] == "messages":
            field_name = "question.0" + field_name[len("messages"):]
        raise BenchError(f"{case['id']}: {message}", file=path, line=number,
                         field=field_name) from None


def _entry_tools(entry: dict[str, Any], where: str, imported: ImportedToolset,
                 by_definition: dict[tuple[str, str], str]) -> dict[str, str]:
    functions = entry.get("function")
    if not isinstance(functions, list):
        raise BenchError(f"{where}: 'function' must be a list of function definitions")
    offered: dict[str, str] = {}
    for i, fn in enumerate(functions):
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BenchError(f"{where}: function {i} needs a non-empty string 'name'")
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
    conflicts: list[LabelConflict] = []
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
        expanded: dict[str, list[Any]] = {}
        for arg, values in arguments.items():
            try:
                expanded[arg] = _acceptable(values, f"{where}.{arg}", imported.notes)
            except _Conflict as conflict:  # reported and excluded by _check_labels
                conflicts.append(LabelConflict(case_id, f"{answer_path}:{answer_line}",
                                               f"{fn_name}.{arg}", str(conflict),
                                               "case excluded"))
                expanded[arg] = [None]
        calls.append({"name": offered[fn_name], "arguments": expanded})
    case["expected"] = {"calls": calls}
    if conflicts:
        case["_conflicts"] = conflicts
    return case
