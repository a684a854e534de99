"""Where an optimization keeps its files: ``<project>/reports/optimize/<id>/``.

::

    config.json            the OptimizeConfig (a resume must give the same one)
    work/                  a bench project of its own, read by bench.evaluate:
      descriptions/<toolset>/variants/<name>.yaml   the start, every candidate
      descriptions/optimizer/variants/propose.yaml  the propose_edit tool
      proposals/r<k>.jsonl                         the proposer's requests, one case a tool
      reports/runs/<id>-...                        every run (dev, proposals, test)
    result.json            rounds, candidates, rejections, acceptance, costs
    variant/               the output: <name>.yaml, diff.md, provenance.json
    report.md, report.html the report (pareto.svg inside the HTML)

Runs read and write the main project's response cache (``reports/cache/responses.sqlite``
unless ``cache_path`` says otherwise), so a finished optimization replays offline and a
resumed one asks nothing twice. The work project's derived data (the executor's shop
database, the model's saved prefix states) is the main project's ``cache_dir``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from bench.descriptions.variants import Variant, load_variant
from bench.errors import BenchError, json_document, read_text_file
from bench.importers.common import variant_yaml
from bench.models import Tool
from bench.optimize.config import OptimizeConfig
from bench.optimize.proposals import PROPOSER_TOOLSET, propose_tool
from bench.project import Project
from bench.runner.config import DEFAULT_CACHE_PATH
from bench.store import check_run_id
from bench.store.files import atomic_write_json, atomic_write_text, remove_if_no_rows

PROPOSE_VARIANT = "propose"
#: Settings a resumed optimization may change: more rounds, a larger budget.
RESUMABLE = ("rounds", "max_usd", "max_total_tokens")


class Workspace:
    """The folder of optimization ``opt_id`` in ``project``.

    Raises:
        BenchError: an invalid id (as a run id: letters, digits, ``_``, ``-``, ``.``).
    """

    def __init__(self, project: Project, opt_id: str, toolset: str) -> None:
        check_run_id(opt_id)
        self.project, self.opt_id, self.toolset = project, opt_id, toolset
        self.root = project.reports_dir / "optimize" / opt_id
        self.work = Project(self.root / "work", project.cache_dir)

    @property
    def variants_dir(self) -> Path:
        """``work/descriptions/<toolset>/variants``."""
        return self.work.descriptions_dir / self.toolset / "variants"

    def cache_path(self, config: OptimizeConfig) -> str:
        """The response cache every run of the optimization uses (absolute path)."""
        given = config.settings.get("cache_path")
        return str(Path(given) if given else self.project.root.joinpath(*DEFAULT_CACHE_PATH))

    def prepare(self, config: OptimizeConfig) -> None:
        """Create the folder and store ``config``.

        Raises:
            BenchError: the folder holds an optimization with another config (resume it with
                the same settings, or pick another id); :data:`RESUMABLE` ones may change; or
                its ``config.json`` is not a JSON object (names the file).
        """
        stored = self.root / "config.json"
        wanted = json.loads(config.model_dump_json())
        if stored.is_file():
            found = json_document(read_text_file(stored), file=stored,
                                  what="the optimization's config")
            if not isinstance(found, dict):
                raise BenchError("the optimization's config must be a JSON object; pick "
                                 "another --id (or remove the folder)", file=stored)
            changed = sorted(k for k in set(found) | set(wanted)
                             if found.get(k) != wanted.get(k) and k not in RESUMABLE)
            if changed:
                raise BenchError(f"optimization '{self.opt_id}' exists with other settings "
                                 f"({', '.join(changed)}); use the same ones to resume it, "
                                 "or another --id", file=stored)
        self.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(stored, wanted)

    def discard_if_unstarted(self) -> bool:
        """Remove the optimization's folder when none of its runs wrote a row (a new
        optimization that failed at its start, e.g. a provider that does not start); return
        True when removed (:func:`bench.store.files.remove_if_no_rows`). Its runs' answers stay
        in the main project's response cache.
        """
        return remove_if_no_rows(self.root)

    def write_variant(self, name: str, tools: Sequence[Tool], header: str = "") -> Variant:
        """Write ``tools`` as the work project's variant ``name`` and load it back (an
        existing file with the same text is left alone, so a resumed run's variant keeps its
        hash)."""
        path = self.variants_dir / f"{name}.yaml"
        text = variant_yaml(tools, header)
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)
        return load_variant(self.toolset, name, self.work.descriptions_dir)

    def write_propose_tool(self, tool_names: Sequence[str]) -> None:
        """Write the proposer's one-tool variant (``propose_edit``)."""
        path = self.work.descriptions_dir / PROPOSER_TOOLSET / "variants" / \
            f"{PROPOSE_VARIANT}.yaml"
        text = variant_yaml([propose_tool(tool_names)], "the optimizer's proposer tool")
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            atomic_write_text(path, text)

    def write_proposal_cases(self, round_no: int, prompts: dict[str, str]) -> Path:
        """The proposer's requests of round ``round_no`` as a dataset: one case per tool
        (id ``r<k>-<tool>``), the prompt its user message. Returns the file."""
        path = self.root / "work" / "proposals" / f"r{round_no}.jsonl"
        lines = [json.dumps({
            "id": f"r{round_no}-{tool}", "toolset": PROPOSER_TOOLSET, "lang": "en",
            "messages": [{"role": "user", "content": prompt}],
            "expected": {"calls": [{"name": "propose_edit", "arguments": {}}]}},
            ensure_ascii=False) for tool, prompt in prompts.items()]
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        return path

    def run_id(self, what: str) -> str:
        """The id of one of the optimization's runs: ``<opt id>-<what>``."""
        return f"{self.opt_id}-{what}"

    def write_result(self, result: dict[str, Any]) -> Path:
        """Store ``result.json`` atomically; returns its path."""
        path = self.root / "result.json"
        atomic_write_json(path, result)
        return path
