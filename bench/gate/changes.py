"""What the description lock says changed since it was written, for the gate's verdicts
(``require_reevaluation``: a changed tool that no case of the gate expects fails).
"""

from __future__ import annotations

from typing import Sequence

import pandas as pd

from bench.errors import BenchError
from bench.gate.config import GateConfig
from bench.results import Row


def unevaluated_changes(config: GateConfig, frame: pd.DataFrame, rows: Sequence[Row]
                        ) -> dict[str, list[tuple[str, bool]]]:
    """Per gated variant, what the description lock says changed, as ``(text, fails)``:
    the changed tools the run re-evaluated (a note), those no case of the run expects (a
    failure with ``require_reevaluation``, else a note), or a toolset without a lock (a
    failure with ``require_reevaluation``; nothing otherwise)."""
    from bench.descriptions.lock import changed_tools, lock_changes

    found: dict[str, list[tuple[str, bool]]] = {}
    strict = config.require_reevaluation
    toolsets = sorted({r.toolset for r in rows if r.toolset})
    root = config.root / "descriptions"
    for toolset in toolsets:
        wanted = [v for v in config.variants if (root / toolset).is_dir()]
        if not wanted:
            continue
        try:
            changes, path = lock_changes(toolset, wanted, root)
        except BenchError as exc:
            if strict:
                raise
            for variant in wanted:
                found.setdefault(variant, []).append((f"description lock not read: {exc}",
                                                      False))
            continue
        if changes is None:
            if strict:
                for variant in wanted:
                    found.setdefault(variant, []).append(
                        (f"toolset {toolset} has no description lock ({path}); write it "
                         "with: bench check --update (or bench baseline update)", True))
            continue
        for variant, tools in changed_tools(changes).items():
            part = frame[(frame["variant"] == variant) & (frame["toolset"] == toolset)] \
                if not frame.empty else frame
            covered = {name for names in part.get("expected_tools", []) for name in names}
            missed = sorted(tools - covered)
            done = sorted(tools & covered)
            if done:
                found.setdefault(variant, []).append(
                    (f"changed since the description lock and re-evaluated here: "
                     f"{', '.join(done)} (accept with: bench baseline update)", False))
            if missed:
                found.setdefault(variant, []).append(
                    (f"changed since the description lock but expected by no case of this "
                     f"gate: {', '.join(missed)}: add cases for "
                     f"{'it' if len(missed) == 1 else 'them'}"
                     + (" (require_reevaluation)" if strict else ""), strict))
    return found
