"""Adopting an optimization whose start variant changed since it ran: rebase its edits onto
the variant as it is now, or refuse.

An optimization edits text only: a tool's description and its top-level parameters'
descriptions (:func:`bench.optimize.proposals.apply_proposal`). Its edits are the
differences between the start as the run saw it (the copy in ``work/``, whose hash
``result.json`` records as ``start_sha256``) and the final variant. They apply cleanly to the
current start when every text they change is, in the current start, still what the run
started from (or already what the optimization wrote): the edit is then made there, and
everything else of the current start (tools and parameters added since, schema changes) is
kept. This is a three-way merge per field, as ``git merge`` does per line. Any other case is
a conflict: the edited tool or parameter is gone, or its text changed since.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

from bench.descriptions.diff import ToolDiff, diff_variants
from bench.models import Tool


@dataclass(frozen=True)
class Edit:
    """One text an optimization changed.

    Attributes:
        tool: the tool.
        param: a top-level parameter whose description changed; None: the tool's description.
        before / after: the text in the run's start (None: no description) and in the final.
    """

    tool: str
    param: str | None
    before: str | None
    after: str | None

    @property
    def where(self) -> str:
        """``tool`` or ``tool.param``."""
        return self.tool if self.param is None else f"{self.tool}.{self.param}"


class Unsupported(ValueError):
    """The final variant differs from the start in more than text (the search never does
    that: a hand-edited work folder); the message says where."""


def _properties(tool: Tool) -> dict[str, Any]:
    props = tool.input_schema.get("properties")
    return props if isinstance(props, dict) else {}


def _without_descriptions(tool: Tool) -> dict[str, Any]:
    """``tool`` as data with its description and its top-level parameters' descriptions
    dropped: what an optimization must leave alone."""
    data: dict[str, Any] = json.loads(json.dumps(tool.model_dump()))
    data.pop("description", None)
    for sub in (data["input_schema"].get("properties") or {}).values():
        if isinstance(sub, dict):
            sub.pop("description", None)
    return data


def optimization_edits(start: Sequence[Tool], final: Sequence[Tool]) -> list[Edit]:
    """The texts ``final`` changed from ``start``, in ``final``'s tool order.

    Raises:
        Unsupported: a tool added, removed or reordered, or a change besides descriptions.
    """
    by_name = {t.name: t for t in start}
    if [t.name for t in final] != [t.name for t in start]:
        raise Unsupported("the final variant's tools are not the start's")
    edits: list[Edit] = []
    for tool in final:
        base = by_name[tool.name]
        if _without_descriptions(base) != _without_descriptions(tool):
            raise Unsupported(f"'{tool.name}' changed in more than its descriptions")
        if base.description != tool.description:
            edits.append(Edit(tool.name, None, base.description, tool.description))
        before, after = _properties(base), _properties(tool)
        for param, sub in after.items():
            old = before[param].get("description") if isinstance(before[param], dict) else None
            new = sub.get("description") if isinstance(sub, dict) else None
            if old != new:
                edits.append(Edit(tool.name, param, old, new))
    return edits


def rebase(edits: Sequence[Edit], current: Sequence[Tool]) -> tuple[list[Tool], list[str]]:
    """``current`` with ``edits`` applied where they apply cleanly (see the module docstring).

    Returns:
        (the rebased tools in ``current``'s order, copies; the conflicts, one phrase each
        such as ``track_shipment's description changed since``: empty when all applied).
    """
    tools = {t.name: json.loads(json.dumps(t.model_dump())) for t in current}
    conflicts: list[str] = []
    for edit in edits:
        data = tools.get(edit.tool)
        if data is None:
            conflicts.append(f"tool {edit.tool} is gone")
            continue
        holder: dict[str, Any] = data
        what = f"{edit.tool}'s description"
        if edit.param is not None:
            sub = (data["input_schema"].get("properties") or {}).get(edit.param)
            if not isinstance(sub, dict):
                conflicts.append(f"parameter {edit.where} is gone")
                continue
            holder, what = sub, f"parameter {edit.where}'s description"
        now = holder.get("description")
        if now == edit.after:
            continue  # already what the optimization wrote
        if now != edit.before:
            conflicts.append(f"{what} changed since")
        elif edit.after is None:
            holder.pop("description", None)
        else:
            holder["description"] = edit.after
    return [Tool.model_validate(tools[t.name]) for t in current], conflicts


def _phrase(diff: ToolDiff) -> list[str]:
    """``diff``'s changes as short phrases naming the tool (and parameter)."""
    out: list[str] = []
    for change in diff.changes:
        if change.kind == "tool_added":
            out.append(f"tool {diff.name} added")
        elif change.kind == "tool_removed":
            out.append(f"tool {diff.name} removed")
        elif change.kind == "tool_renamed":
            out.append(f"tool {change.before} renamed {change.after}")
        elif change.kind == "description":
            out.append(f"{diff.name}'s description changed")
        elif change.kind == "param_added":
            out.append(f"{change.detail} parameter {diff.name}.{change.param} added")
        elif change.kind == "param_removed":
            out.append(f"parameter {diff.name}.{change.param} removed")
        elif change.kind == "param_renamed":
            out.append(f"parameter {diff.name}.{change.before} renamed {change.after}")
        elif change.kind == "required":
            out.append(f"{diff.name}.{change.param} {change.detail}")
        elif change.kind == "param_description":
            out.append(f"parameter {diff.name}.{change.param}'s description changed")
        else:  # type, enum, bounds, format...: bench variants diff's own wording
            where = f"{diff.name}.{change.param}" if change.param else diff.name
            out.append(f"{where} {change.detail or change.kind}")
    return out


def describe_changes(before: Sequence[Tool], after: Sequence[Tool]) -> str:
    """What changed from ``before`` to ``after`` in one line (``tool cancel_order added;
    required parameter track_shipment.order_id added``), ``bench variants diff``'s pairing
    (:func:`bench.descriptions.diff.diff_variants`)."""
    return "; ".join(p for diff in diff_variants(before, after) for p in _phrase(diff))
