"""Plan and execute a run: case x variant x provider x trial -> one scored row each.

Data flow (BRIEF §3): dataset + variants + providers -> plan -> provider -> parse -> score ->
``results.jsonl``. The plan is ordered provider, variant, trial, case so that each provider sees
one variant's cases back to back (the embedded model then reuses the cached tools prefix).
"""

from __future__ import annotations

import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from importlib import metadata
from typing import Any, Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench.datasets import Dataset, check_against_tools, load_dataset
from bench.descriptions import DEFAULT_VARIANTS, Variant, load_variant
from bench.errors import BenchError, pydantic_error_field
from bench.models import Case
from bench.paths import PACKAGE_PARENT, runs_dir
from bench.providers import Provider, ProviderUnavailable, make_provider
from bench.runstore import RunStore, new_run_id
from bench.scoring import score_case

PACKAGES = ("bench", "llama_cpp_python", "pydantic", "jinja2", "jsonschema", "scipy", "numpy",
            "pandas", "rich", "typer", "bpe-openai", "PyYAML", "openai", "anthropic",
            "google-genai")


class RunConfig(BaseModel):
    """Everything that defines a run (stored in the manifest; ``--resume`` reuses it).

    Attributes:
        dataset: dataset name or path to a ``.jsonl`` file.
        variants: variant names, e.g. ``["l3", "l10", "l30", "l50"]``.
        providers: provider ids, e.g. ``["local"]``.
        trials: repetitions per case (>= 1).
        limit: only the first N cases (None: all).
        case_ids: only these cases (None: all).
        model_path: GGUF for the local provider (None: default).
        seed: base sampling seed.
        max_tokens: completion cap in tokens.
        no_call_layout: the local provider's "no tool fits" layout (None: its default).
        threads: CPU threads of the local model (None: ``$BENCH_THREADS`` or min(4, cores)).
        tool_choice: HTTP providers: ``auto``, ``required``, ``none`` or a tool name.
        parallel_tool_calls: HTTP providers: allow several calls per answer (None: default).
        openai_strict: OpenAI strict mode for tool schemas.
        stream: HTTP providers: receive answers as server-sent events.
        request_timeout_s: HTTP providers: per-request timeout in seconds.
        execute: run each answer's calls on the reference backends (execution metrics).
        allow_writes / allow_sensitive: let write / sensitive tools run when executing.
    """

    dataset: str = "ecommerce"
    variants: list[str] = Field(default_factory=lambda: list(DEFAULT_VARIANTS))
    providers: list[str] = Field(default_factory=lambda: ["local"])
    trials: int = Field(default=1, ge=1, le=1000)
    limit: int | None = Field(default=None, ge=1)
    case_ids: list[str] | None = None
    model_path: str | None = None
    seed: int = 1234
    max_tokens: int = Field(default=512, ge=16)
    no_call_layout: str | None = None
    # provider settings (bench.providers; issue 5)
    threads: int | None = Field(default=None, ge=1)
    tool_choice: str = "auto"
    parallel_tool_calls: bool | None = None
    openai_strict: bool = False
    stream: bool = False
    request_timeout_s: float = Field(default=60.0, gt=0)
    execute: bool = True
    allow_writes: bool = False
    allow_sensitive: bool = False

    model_config = ConfigDict(extra="forbid")

    @field_validator("variants", "providers")
    @classmethod
    def _unique(cls, values: list[str]) -> list[str]:
        if not values:
            raise ValueError("needs at least one name")
        return list(dict.fromkeys(values))  # a name given twice runs once

    @field_validator("dataset")
    @classmethod
    def _absolute_path(cls, value: str) -> str:
        # a .jsonl path is stored absolute so that --resume works from any folder
        return str(Path(value).resolve()) if value.endswith(".jsonl") else value


@dataclass(frozen=True)
class PlanItem:
    """One planned request: a case under a variant for a provider, one trial."""

    case: Case
    variant: Variant
    provider_id: str
    trial: int

    @property
    def key(self) -> str:
        """Unique row key ``case|variant|provider|trial`` (resume skips done keys)."""
        return f"{self.case.id}|{self.variant.name}|{self.provider_id}|{self.trial}"


def select_cases(dataset: Dataset, config: RunConfig) -> list[Case]:
    """The cases a config selects, in file order.

    Raises:
        BenchError: ``case_ids`` names a case the dataset does not have.
    """
    cases = list(dataset.cases)
    if config.case_ids:
        known = {c.id for c in cases}
        missing = [i for i in config.case_ids if i not in known]
        if missing:
            raise BenchError(f"unknown case id(s): {', '.join(missing)}", file=dataset.path)
        wanted = set(config.case_ids)
        cases = [c for c in cases if c.id in wanted]
    if config.limit:
        cases = cases[:config.limit]
    return cases


def load_variants(dataset: Dataset, names: Sequence[str]) -> list[Variant]:
    """Render each named variant for every toolset the dataset uses, and check the labels.

    Raises:
        BenchError: an unknown variant, a bad spec, or a case naming an unknown tool/argument.
    """
    variants = []
    for toolset in dataset.toolsets:
        for name in names:
            variant = load_variant(toolset, name)
            check_against_tools(dataset, toolset, variant.tools)
            variants.append(variant)
    return variants


def make_plan(cases: Sequence[Case], variants: Sequence[Variant], provider_ids: Sequence[str],
              trials: int) -> list[PlanItem]:
    """All planned items, grouped by provider, then variant, then trial, then case."""
    return [PlanItem(case, variant, provider_id, trial)
            for provider_id in provider_ids
            for variant in variants
            for trial in range(trials)
            for case in cases if case.toolset == variant.toolset]


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PACKAGE_PARENT, text=True,
                             capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=PACKAGE_PARENT, text=True, capture_output=True, timeout=5,
                           check=False).stdout.strip()
    return out.stdout.strip() + ("-dirty" if dirty else "")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def build_row(item: PlanItem, run_id: str, response: Any,
              execution: Any = None) -> dict[str, Any]:
    """One ``results.jsonl`` row: request summary, raw response, parsed calls, metrics
    (with execution metrics when ``execution``, a :class:`bench.executor.runhook.RunExecution`,
    is given)."""
    score = score_case(item.case.expected, response.parsed, item.variant.tools)
    metrics = score.model_dump()
    if execution is not None:
        metrics.update(execution.row_metrics(item.case, item.variant.tools, item.case.toolset,
                                             response.parsed, item.trial))
    return {
        "key": item.key,
        "run_id": run_id,
        "case_id": item.case.id,
        "toolset": item.case.toolset,
        "variant": item.variant.name,
        "provider": item.provider_id,
        "trial": item.trial,
        "lang": item.case.lang,
        "tags": item.case.tags,
        "query": item.case.query,
        "expected": item.case.expected.model_dump(),
        "request": {**response.request, "variant_sha256": item.variant.sha256},
        "response": {"raw": response.raw, "finish_reason": response.finish_reason,
                     "request_id": getattr(response, "request_id", None)},
        "parsed": response.parsed.model_dump(),
        "metrics": metrics,
        "usage": response.usage.model_dump(),
        "tool_definition_tokens": response.tool_definition_tokens,
        "latency_s": round(response.latency_s, 6),
        "finished_at": _now(),
    }


ProgressHook = Callable[[int, int], None]


class Runner:
    """Creates or resumes a run and executes its plan.

    Args:
        config: the run's configuration.
        run_id: a new run's id (default: generated).
        provider_factory: ``provider id -> Provider`` (default :func:`make_provider`).

    Raises:
        BenchError: bad dataset, variants, provider, or a resumed run whose inputs changed.
    """

    def __init__(self, config: RunConfig, *, run_id: str | None = None,
                 command: Sequence[str] | None = None,
                 provider_factory: Callable[[str, RunConfig], Provider] | None = None,
                 store: RunStore | None = None) -> None:
        self.config = config
        self.store = store or RunStore(runs_dir(), run_id or new_run_id())
        self.dataset = load_dataset(config.dataset)
        self.cases = select_cases(self.dataset, config)
        self.variants = load_variants(self.dataset, config.variants)
        self.plan = make_plan(self.cases, self.variants, config.providers, config.trials)
        self.command = list(command) if command is not None else list(sys.argv)
        self._factory = provider_factory or _default_factory
        self.providers: dict[str, Provider] = {}
        self.skipped: dict[str, str] = {}  # provider id -> why it cannot run (no key...)

    @classmethod
    def resume(cls, run_id: str, **kwargs: Any) -> "Runner":
        """Reopen run ``run_id`` with its stored config; finished rows are kept.

        Raises:
            BenchError: no such run, or its dataset or variants changed since it started.
        """
        store = RunStore(runs_dir(), run_id)
        manifest = store.read_manifest()
        try:
            config = RunConfig.model_validate(manifest["config"])
        except ValidationError as exc:
            field, msg = pydantic_error_field(exc)
            raise BenchError(f"stored config is invalid: {msg}", file=store.manifest_path,
                             field=f"config.{field}") from None
        runner = cls(config, store=store, **kwargs)
        if not isinstance(manifest["dataset"], dict) or \
                manifest["dataset"].get("sha256") != runner.dataset.sha256:
            raise BenchError(f"cannot resume '{run_id}': dataset '{runner.config.dataset}' "
                             "changed since the run started", file=runner.dataset.path)
        stored = {(v.get("toolset"), v.get("name")): v.get("sha256")
                  for v in manifest["variants"] if isinstance(v, dict)}
        for variant in runner.variants:
            if stored.get((variant.toolset, variant.name)) != variant.sha256:
                raise BenchError(f"cannot resume '{run_id}': variant '{variant.name}' of "
                                 f"'{variant.toolset}' changed since the run started")
        runner._manifest = manifest
        return runner

    _manifest: dict[str, Any] | None = None

    def done_keys(self) -> set[str]:
        """Keys of the planned rows already in ``results.jsonl`` (a half-written row is cut)."""
        self.store.repair()
        planned = {item.key for item in self.plan}
        return {row["key"] for row in self.store.rows()} & planned

    def pending(self) -> list[PlanItem]:
        """Planned items without a finished row, in plan order."""
        done = self.done_keys()
        return [item for item in self.plan if item.key not in done]

    def _new_manifest(self) -> dict[str, Any]:
        return {
            "run_id": self.store.run_id,
            "status": "running",
            "command": self.command,
            "config": self.config.model_dump(),
            "dataset": {"name": self.dataset.name, "path": str(self.dataset.path),
                        "sha256": self.dataset.sha256, "cases": len(self.cases)},
            "variants": [{"name": v.name, "toolset": v.toolset, "sha256": v.sha256,
                          "source": v.source, "tools": len(v.tools),
                          "mean_lines_per_tool": round(v.mean_lines, 2),
                          "lines_per_tool": v.line_counts} for v in self.variants],
            "providers": [],
            "versions": _versions(),
            "git_commit": _git_commit(),
            "host": {"platform": platform.platform()},
            "rows_planned": len(self.plan),
            "rows_done": 0,
            "started_at": _now(),
            "ended_at": None,
        }

    def open_providers(self) -> None:
        """Start every provider of the run (loads models; fails early on missing ones).

        A provider that raises :class:`ProviderUnavailable` (no API key, optional SDK missing)
        is recorded in :attr:`skipped` with its reason; the others run.

        Raises:
            BenchError: a provider cannot start for another reason.
        """
        for provider_id in self.config.providers:
            if provider_id not in self.providers and provider_id not in self.skipped:
                try:
                    provider = self._factory(provider_id, self.config)
                except ProviderUnavailable as exc:
                    self.skipped[provider_id] = exc.reason
                    continue
                self.providers[provider_id] = provider
                for variant in self.variants:
                    provider.prepare(variant.tools, variant_key=variant.sha256,
                                     label=f"variant '{variant.name}' of '{variant.toolset}'")

    def run(self, progress: ProgressHook | None = None) -> dict[str, Any]:
        """Execute every planned item not yet done; return the final manifest.

        Rows are appended as they finish. On KeyboardInterrupt the manifest is marked
        ``interrupted`` (every finished row stays) and the interrupt is re-raised.
        """
        manifest = self._manifest or self._new_manifest()
        todo = self.pending()
        done = len(self.plan) - len(todo)
        if todo:
            self.open_providers()
            manifest["providers"] = [p.describe() for p in self.providers.values()]
            manifest["providers_skipped"] = [{"provider": k, "reason": v}
                                             for k, v in self.skipped.items()]
            todo = [item for item in todo if item.provider_id not in self.skipped]
        manifest.update(status="running", rows_done=done, ended_at=None)
        self.store.write_manifest(manifest)
        finished = done
        if progress:
            progress(finished, len(self.plan))
        execution = _execution(self.config, self.store) if todo else None
        try:
            for item in todo:
                provider = self.providers[item.provider_id]
                response = provider.complete(item.case.messages, item.variant.tools,
                                             variant_key=item.variant.sha256, trial=item.trial)
                self.store.append(build_row(item, self.store.run_id, response, execution))
                finished += 1
                if progress:
                    progress(finished, len(self.plan))
        except KeyboardInterrupt:
            manifest.update(status="interrupted", rows_done=finished, ended_at=_now())
            self.store.write_manifest(manifest)
            raise
        except BaseException as exc:
            manifest.update(status="failed", rows_done=finished, ended_at=_now(),
                            error=f"{type(exc).__name__}: {exc}")
            self.store.write_manifest(manifest)
            raise
        finally:
            for provider in self.providers.values():
                provider.close()
            self.providers.clear()
            if execution is not None:
                execution.close()
        # "partial": a skipped provider's rows are missing; --resume runs them once it can.
        manifest.update(status="partial" if self.skipped else "complete", rows_done=finished,
                        ended_at=_now())
        self.store.write_manifest(manifest)
        return manifest


def _execution(config: RunConfig, store: RunStore) -> Any:
    """The run's executor hook, or None with ``--no-execute``."""
    if not config.execute:
        return None
    from bench.executor.runhook import RunExecution
    return RunExecution(store.dir, store.run_id, allow_writes=config.allow_writes,
                        allow_sensitive=config.allow_sensitive)


def _default_factory(provider_id: str, config: RunConfig) -> Provider:
    options: dict[str, Any] = {}
    if provider_id == "local":
        options = {"model_path": config.model_path, "seed": config.seed,
                   "max_tokens": config.max_tokens, "threads": config.threads}
        if config.no_call_layout:
            options["no_call_layout"] = config.no_call_layout
    else:
        options = {"seed": config.seed, "max_tokens": config.max_tokens,
                   "tool_choice": config.tool_choice,
                   "parallel_tool_calls": config.parallel_tool_calls,
                   "strict": config.openai_strict, "stream": config.stream,
                   "timeout_s": config.request_timeout_s}
    return make_provider(provider_id, **options)


def iter_rows(run_id: str) -> Iterable[dict[str, Any]]:
    """Rows of a stored run (for tables and reports)."""
    return RunStore(runs_dir(), run_id).rows()
