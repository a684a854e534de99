"""``bench synth``'s report: counts by verdict and kind, skipped checks and every candidate,
as JSON (``synth-report.json``) and Markdown (``synth-report.md``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from bench.synth.candidates import REASONS, Candidate


@dataclass
class SynthReport:
    """The synthesis report: settings, run ids, counts by verdict, every candidate."""

    settings: dict[str, Any]
    generator_run: str | None
    verify_run: str | None
    requests: int
    candidates: list[Candidate]
    dataset_path: str

    def counts(self) -> dict[str, int]:
        """``kept`` and each rejection reason -> candidates (every reason listed, 0 too)."""
        found = Counter(c.reason or "kept" for c in self.candidates)
        return {"kept": found["kept"], **{r: found[r] for r in REASONS}}

    def by_kind(self) -> dict[str, dict[str, int]]:
        """Kind -> :meth:`counts` of its candidates."""
        out: dict[str, dict[str, int]] = {}
        for kind in dict.fromkeys(c.kind for c in self.candidates):
            found = Counter(c.reason or "kept" for c in self.candidates if c.kind == kind)
            out[kind] = {"candidates": sum(found.values()), "kept": found["kept"],
                         **{r: found[r] for r in REASONS}}
        return out

    def skipped(self) -> dict[str, int]:
        """``check: why`` -> candidates for every check that was skipped."""
        return dict(Counter(f"{check}: {value.split(': ', 1)[1]}"
                            for c in self.candidates for check, value in c.verdicts.items()
                            if value.startswith("skipped: ")))

    def to_json(self) -> dict[str, Any]:
        """The report as JSON data (``synth-report.json``)."""
        return {"settings": self.settings, "generator_run": self.generator_run,
                "verify_run": self.verify_run, "dataset": self.dataset_path,
                "requests": self.requests, "candidates": len(self.candidates),
                "counts": self.counts(), "by_kind": self.by_kind(),
                "skipped_checks": self.skipped(),
                "detail": [{"id": c.id, "kind": c.kind, "lang": c.lang, "request": c.request,
                            "query": c.query, "verdict": c.reason or "kept",
                            "verdicts": c.verdicts} for c in self.candidates]}

    def markdown(self) -> str:
        """The report as Markdown (``synth-report.md``): counts by verdict and kind, skipped
        checks, and every rejected candidate's reason."""
        counts = self.counts()
        kinds = self.by_kind()
        s = self.settings
        lines = [f"# Synthesis report: {s['toolset']}", "",
                 f"Generator `{s['generator']}`, solvers "
                 f"{', '.join(f'`{x}`' for x in s['solvers'])} "
                 f"({s['solver_trials']} answer(s) each, {s['min_agree']} must agree), "
                 f"variant `{s['variant']}`; generator run `{self.generator_run}`, verification "
                 f"run `{self.verify_run}`. {self.requests} requests, "
                 f"{len(self.candidates)} candidates, {counts['kept']} kept (split dev, "
                 f"unreviewed) in `{self.dataset_path}`.", "",
                 "| verdict | " + " | ".join(kinds) + " | total |",
                 "|---|" + "---:|" * (len(kinds) + 1)]
        for verdict in ("kept", *REASONS):
            lines.append(f"| {verdict} | " + " | ".join(str(k[verdict]) for k in kinds.values())
                         + f" | {counts[verdict]} |")
        lines.append("| **candidates** | " + " | ".join(str(k["candidates"])
                                                       for k in kinds.values())
                     + f" | {len(self.candidates)} |")
        skipped = self.skipped()
        if skipped:
            lines += ["", "Checks skipped (not failed):", ""]
            lines += [f"- {k}: {v}" for k, v in sorted(skipped.items())]
        rejected = [c for c in self.candidates if c.reason]
        if rejected:
            lines += ["", "## Rejected", "", "| id | kind | lang | reason | why | query |",
                      "|---|---|---|---|---|---|"]
            for c in rejected:
                why = c.verdicts.get(c.reason or "", "").removeprefix("fail: ")
                lines.append(f"| {c.id} | {c.kind} | {c.lang} | {c.reason} | "
                             f"{_cell(why)} | {_cell(c.query or '')} |")
        return "\n".join(lines) + "\n"


def _cell(text: str, limit: int = 120) -> str:
    """``text`` fit for one Markdown table cell: one line, pipes escaped, cut."""
    one = " ".join(text.split()).replace("|", "\\|")
    return one if len(one) <= limit else one[:limit - 1] + "…"
