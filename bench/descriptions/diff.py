"""What changed between two variants of a toolset, and which labels it breaks.

``diff_variants`` compares tools by name (a removed and an added tool with the same schema are
reported as a rename) and, inside each tool, the description text and every parameter, nested
ones included (paths like ``address.city`` and ``items[]``): added, removed or renamed
parameters (a removed and an added parameter of one parent with the same schema), type, enum
values, required flag, bounds, format, pattern and default.

``label_breaks`` re-validates every case's literal acceptable values against both variants'
schemas (``bench.datasets.iter_label_problems``) and returns the problems that B has and A has
not: the "ASC" -> "asc" enum story shows up here as a case whose expected ``"ASC"`` is no
longer one of the enum values.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from bench.datasets import Dataset
from bench.datasets.labels import LabelProblem, iter_label_problems
from bench.models import Tool
from bench.plural import count

# Keywords compared one by one (the rest of a parameter's schema is compared as a whole).
BOUND_KEYWORDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                  "minLength", "maxLength", "minItems", "maxItems", "uniqueItems",
                  "minProperties", "maxProperties")
OTHER_KEYWORDS = ("type", "format", "pattern", "default", "const")


@dataclass
class Change:
    """One difference. ``kind`` is one of: description, tool_added, tool_removed, tool_renamed,
    param_added, param_removed, param_renamed, type, enum_added, enum_removed, required,
    bound, format, pattern, default, const, param_description, schema (anything else)."""

    kind: str
    param: str | None = None
    before: Any = None
    after: Any = None
    detail: str = ""


@dataclass
class ToolDiff:
    """The changes of one tool (``name`` is its name in B, or in A if removed)."""

    name: str
    changes: list[Change] = field(default_factory=list)
    description_diff: list[str] = field(default_factory=list)


def _params(schema: dict[str, Any], prefix: str = ""
            ) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """(path, schema, required) of every parameter, nested objects and array items included."""
    required = set(schema.get("required", []))
    for name, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        path = f"{prefix}{name}"
        yield path, sub, name in required
        yield from _nested(sub, path)


def _nested(sub: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any], bool]]:
    if isinstance(sub.get("properties"), dict):
        yield from _params(sub, f"{path}.")
    items = sub.get("items")
    if isinstance(items, dict):
        if isinstance(items.get("properties"), dict):
            yield from _params(items, f"{path}[].")


def _shape(schema: dict[str, Any]) -> str:
    """A parameter's schema without prose, as canonical JSON (for rename detection)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("description", "title")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value
    return json.dumps(strip(schema), sort_keys=True)


def _param_changes(path: str, a: dict[str, Any], b: dict[str, Any], req_a: bool,
                   req_b: bool) -> list[Change]:
    changes: list[Change] = []
    if req_a != req_b:
        changes.append(Change("required", path, req_a, req_b,
                              "now required" if req_b else "now optional"))
    enum_a, enum_b = a.get("enum"), b.get("enum")
    if enum_a != enum_b:
        list_a, list_b = list(enum_a or []), list(enum_b or [])
        removed = [v for v in list_a if v not in list_b]
        added = [v for v in list_b if v not in list_a]
        if enum_a is None or enum_b is None:
            changes.append(Change("enum_added" if enum_a is None else "enum_removed", path,
                                  enum_a, enum_b, "enum " + ("added" if enum_a is None
                                                             else "removed")))
        else:
            if removed:
                folded = {str(v).casefold(): v for v in added}
                recased = [f"{v!r} -> {folded[str(v).casefold()]!r}" for v in removed
                           if str(v).casefold() in folded]
                changes.append(Change("enum_removed", path, removed, None,
                                      f"values removed: {', '.join(map(repr, removed))}"
                                      + (f" (only the case changed: {', '.join(recased)})"
                                         if recased else "")))
            if added:
                changes.append(Change("enum_added", path, None, added,
                                      f"values added: {', '.join(map(repr, added))}"))
    for key in BOUND_KEYWORDS + OTHER_KEYWORDS:
        if a.get(key) != b.get(key):
            kind = "bound" if key in BOUND_KEYWORDS else key
            changes.append(Change(kind, path, a.get(key), b.get(key),
                                  f"{key}: {a.get(key)!r} -> {b.get(key)!r}"))
    if a.get("description") != b.get("description"):
        changes.append(Change("param_description", path, a.get("description"),
                              b.get("description")))
    compared = set(BOUND_KEYWORDS + OTHER_KEYWORDS) | {"enum", "description", "title",
                                                       "properties", "required", "items"}
    rest_a = {k: v for k, v in a.items() if k not in compared}
    rest_b = {k: v for k, v in b.items() if k not in compared}
    if rest_a != rest_b:
        changes.append(Change("schema", path, rest_a, rest_b, "other schema keywords changed"))
    return changes


def diff_tool(a: Tool | None, b: Tool | None) -> ToolDiff:
    """Compare one tool across variants (``None``: absent from that variant)."""
    if a is None or b is None:
        present = b or a
        assert present is not None
        return ToolDiff(present.name, [Change("tool_added" if a is None else "tool_removed")])
    result = ToolDiff(b.name)
    if a.name != b.name:
        result.changes.append(Change("tool_renamed", None, a.name, b.name))
    if a.description != b.description:
        lines = list(difflib.unified_diff(a.description.splitlines(),
                                          b.description.splitlines(), lineterm="", n=0))
        result.description_diff = [ln for ln in lines[2:] if not ln.startswith("@@")]
        plus = sum(1 for ln in result.description_diff if ln.startswith("+"))
        minus = sum(1 for ln in result.description_diff if ln.startswith("-"))
        result.changes.append(Change("description", None, None, None,
                                     f"{count(minus, 'line')} removed, {plus} added"))
    params_a = {p: (s, r) for p, s, r in _params(a.input_schema)}
    params_b = {p: (s, r) for p, s, r in _params(b.input_schema)}
    removed = [p for p in params_a if p not in params_b]
    added = [p for p in params_b if p not in params_a]
    for old in list(removed):
        parent = old.rpartition(".")[0]
        twin = next((new for new in added if new.rpartition(".")[0] == parent and
                     _shape(params_b[new][0]) == _shape(params_a[old][0])), None)
        if twin is not None:
            result.changes.append(Change("param_renamed", twin, old, twin,
                                         f"renamed from '{old}'"))
            removed.remove(old)
            added.remove(twin)
    result.changes += [Change("param_removed", p) for p in removed]
    result.changes += [Change("param_added", p, None, None,
                              "required" if params_b[p][1] else "optional") for p in added]
    for path in params_a.keys() & params_b.keys():
        (sa, ra), (sb, rb) = params_a[path], params_b[path]
        result.changes += _param_changes(path, sa, sb, ra, rb)
    return result


def diff_variants(tools_a: Sequence[Tool], tools_b: Sequence[Tool],
                  renamed: Mapping[str, str] | None = None) -> list[ToolDiff]:
    """Per-tool differences from variant A to variant B, tools without changes left out.

    Tools are paired by name; then by ``renamed`` (the toolset's aliases, old name -> new
    name, :mod:`bench.descriptions.aliases`), in either direction: a tool only in A and one
    only in B that the aliases name as old and new are a rename whatever else changed; last,
    a tool only in A and one only in B with the same schema are a rename. Order: B's tool
    order, then tools removed from A.
    """
    by_a = {t.name: t for t in tools_a}
    by_b = {t.name: t for t in tools_b}
    only_a = [t for t in tools_a if t.name not in by_b]
    declared = {**{new: old for old, new in (renamed or {}).items()},
                **{old: new for old, new in (renamed or {}).items()}}
    pairs: list[tuple[Tool | None, Tool | None]] = []
    for tool in tools_b:
        if tool.name in by_a:
            pairs.append((by_a[tool.name], tool))
            continue
        twin = next((t for t in only_a if declared.get(tool.name) == t.name), None) or \
            next((t for t in only_a if _shape(t.input_schema) == _shape(tool.input_schema)
                  and t.name not in declared), None)
        if twin is not None:
            only_a.remove(twin)
        pairs.append((twin, tool))
    pairs += [(t, None) for t in only_a]
    diffs = [diff_tool(a, b) for a, b in pairs]
    for (a, b), found in zip(pairs, diffs):
        if a is not None and b is not None and declared.get(b.name) == a.name:
            for change in found.changes:
                if change.kind == "tool_renamed":
                    change.detail = "declared in aliases.yaml"
    return [d for d in diffs if d.changes]


def read_labels(dataset: Dataset, toolset: str, tools: Sequence[Tool],
                renamed: Mapping[str, str] | None) -> Dataset:
    """``dataset`` with the labels of ``toolset`` read through ``renamed`` (old name -> new
    name) as a run reads them (:func:`bench.descriptions.aliases.rename_case`), for the
    renames whose new name is a tool of ``tools`` and whose old name is not (a variant that
    still has the old name keeps its labels as written); the same object when none applies.
    """
    from dataclasses import replace

    from bench.descriptions.aliases import rename_case

    names = {t.name for t in tools}
    applies = {old: new for old, new in (renamed or {}).items()
               if new in names and old not in names}
    if not applies:
        return dataset
    return replace(dataset, cases=tuple(rename_case(c, applies) if c.toolset == toolset else c
                                        for c in dataset.cases))


def label_breaks(dataset: Dataset, toolset: str, tools_a: Sequence[Tool],
                 tools_b: Sequence[Tool], renamed: Mapping[str, str] | None = None
                 ) -> tuple[list[LabelProblem], list[LabelProblem]]:
    """Label problems of ``dataset``'s cases of ``toolset`` under B.

    Labels are read through ``renamed`` (the toolset's aliases, :func:`read_labels`) on each
    side, so a label naming a renamed tool's old name is valid under the variant that has
    the new name, as in a run.

    Returns:
        (new, still): problems B has and A has not (the change broke these labels), and
        problems both have (broken before the change).
    """
    def key(p: LabelProblem) -> tuple[str, str, str]:
        return p.case_id, p.field, p.message

    before = {key(p) for p in iter_label_problems(read_labels(dataset, toolset, tools_a,
                                                              renamed), toolset, tools_a)}
    after = list(iter_label_problems(read_labels(dataset, toolset, tools_b, renamed), toolset,
                                     tools_b))
    return [p for p in after if key(p) not in before], [p for p in after if key(p) in before]


def diff_to_json(diffs: list[ToolDiff]) -> list[dict[str, Any]]:
    """Plain-data form of :func:`diff_variants`' result (for ``--json``)."""
    return [asdict(d) for d in diffs]
