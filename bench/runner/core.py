"""Create or resume a run and execute its plan.

Data flow (BRIEF §3): dataset + variants + providers -> plan -> provider -> parse -> score ->
``results.jsonl``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import hashlib
import pickle
import platform
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Sequence

from pydantic import ValidationError

from bench.datasets import load_dataset
from bench.datasets.labels import LabelProblem
from bench.datasets.splits import resolve_split
from bench.episodes.factors import factor_grid
from bench.errors import BenchError, pydantic_error_field
from bench.models import Message, Tool
from bench.parse import PROVIDER_ERROR, UNREADABLE_REPLY, ParsedAnswer
from bench.project import Project, current_project
from bench.providers import (
    HTTPProvider,
    Provider,
    ProviderResponse,
    ProviderUnavailable,
    make_provider,
)
from bench.providers.cache import ResponseCache, request_key
from bench.providers.errors import ProviderError, request_id_from
from bench.providers.pricing import Pricing
from bench.providers.ratelimit import ProviderGate, call_with_retries
from bench.providers.replay import ReplayMiss
from bench.providers.replies import UnreadableReply
from bench.runner.batch import Batcher
from bench.runner.budget import ProgressHook, Spend
from bench.runner.config import (
    DEFAULT_CACHE_PATH,
    RESUME_OVERRIDES,
    RunConfig,
    changed_settings,
    given_mcp_secrets,
    identity_mismatch,
    shown_setting,
)
from bench.runner.loop import execute_plan
from bench.runner.plan import (
    PlanItem,
    load_variants,
    check_episodes,
    make_plan,
    select_cases,
    skip_invalid_cases,
)
from bench.runner.rows import (
    Outcome,
    _git_commit,
    _now,
    _versions,
)
from bench.runner.signals import StopSignals
from bench.runstore import RunStore, named_os_error, new_run_id, write_fix
from bench.scoring.bfcl import BfclSource, load_sources, sources_path
from bench.shard import parse_shard, shard_plan


class Runner:
    """Creates or resumes a run and executes its plan.

    Args:
        config: the run's configuration.
        run_id: a new run's id (default: generated).
        provider_factory: ``provider id -> Provider`` (default :func:`make_provider`).
        store: where the run is written (default: ``project.store(run_id)``).
        project: where datasets, descriptions, runs, the response cache and
            ``pricing.yaml`` are found (default: :func:`bench.project.current_project`). The
            run reads everything through it, never through the cwd or ``BENCH_HOME``, so runs
            of two projects may share a process.

    Raises:
        BenchError: bad dataset, variants, provider, or a resumed run whose inputs changed.
    """

    def __init__(self, config: RunConfig, *, run_id: str | None = None,
                 command: Sequence[str] | None = None,
                 provider_factory: Callable[[str, RunConfig], Provider] | None = None,
                 store: RunStore | None = None, project: Project | None = None) -> None:
        self.project = project or current_project()
        with self.project.activate():  # loaders below that take no root read it
            self._init(config, run_id, command, provider_factory, store)

    def _init(self, config: RunConfig, run_id: str | None, command: Sequence[str] | None,
              provider_factory: Callable[[str, RunConfig], Provider] | None,
              store: RunStore | None) -> None:
        self.config = config
        self.store = store or self.project.store(run_id or new_run_id())
        self.dataset = load_dataset(config.dataset)
        self.invalid_cases: list[LabelProblem] = []
        if config.skip_invalid_cases:
            self.dataset, self.invalid_cases = skip_invalid_cases(self.dataset,
                                                                  config.variants)
        bfcl_path = sources_path(self.dataset.path)
        # an imported BFCL dataset: every row also gets BFCL's own verdict
        self.bfcl_path = bfcl_path if bfcl_path is not None and bfcl_path.is_file() else None
        self.bfcl: dict[str, BfclSource] = load_sources(self.bfcl_path) \
            if self.bfcl_path else {}
        if config.split is None:  # stored resolved: a run says which split its figures are on
            # cases named by id are taken from every split unless a split is asked for
            split = "all" if config.case_ids else resolve_split(self.dataset.cases, None)
            config = self.config = config.model_copy(update={"split": split})
        self.cases = select_cases(self.dataset, config)
        self.variants = load_variants(self.dataset, config.variants)
        check_episodes(self.dataset, self.cases, config.execute)
        if config.no_call_layout is None and any(c.kind == "episode" or c.expected.ask
                                                 for c in self.cases):
            # an episode's final answer, and an ask case's question, need words: the embedded
            # model's layout that has them
            from bench.providers.local_prompt import EPISODE_NO_CALL_LAYOUT
            config = self.config = config.model_copy(
                update={"no_call_layout": EPISODE_NO_CALL_LAYOUT})
        self.plan = make_plan(self.cases, self.variants, config.providers, config.trials,
                              factor_grid(config.factors))
        if config.shard:  # this machine's slice of the plan
            self.plan = shard_plan(self.plan, *parse_shard(config.shard))
        self.command = list(command) if command is not None else list(sys.argv)
        self._factory = provider_factory or _default_factory
        self.providers: dict[str, Provider] = {}
        self.skipped: dict[str, str] = {}  # provider id -> why it cannot run (no key...)
        self.pricing = Pricing(config.pricing, project=self.project)
        self.cache_path = Path(config.cache_path) if config.cache_path else \
            self.project.reports_dir.joinpath(*DEFAULT_CACHE_PATH[1:])
        self.cache: ResponseCache | None = None
        self.gates: dict[str, ProviderGate] = {}
        self.batchers: dict[str, Batcher] = {}  # batch mode: provider id -> its batcher
        self.batch_errors: list[dict[str, Any]] = []
        # requests that failed after every retry (transient, rate-limited, timeout): not written,
        # a resume sends them again
        self.request_errors: list[dict[str, Any]] = []
        self.paused: dict[str, str] = {}  # provider id -> why its remaining items were not sent
        self._pickled_tools: dict[str, bytes] = {}  # variant hash -> its tools, pickled
        # how batch polling waits (s); tests replace it
        self._sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    @classmethod
    def resume(cls, run_id: str, overrides: dict[str, Any] | None = None, *,
               project: Project | None = None,
               setting_names: Mapping[str, str] | None = None, **kwargs: Any) -> "Runner":
        """Reopen run ``run_id`` with its stored config; finished rows are kept.

        Args:
            run_id: the run to finish.
            overrides: :class:`RunConfig` field -> value. :data:`RESUME_OVERRIDES` settings
                take the new value (e.g. a higher ``max_usd`` after the run stopped with
                ``budget_exhausted``); any other setting must equal the stored one
                (:func:`changed_settings`: ``factors`` holds the factors given). None values
                keep the stored ones.
            setting_names: how the refusal names a setting (e.g. ``{"trials": "--trials"}``,
                factors as ``factors.<name>``); default its field name.

        Raises:
            BenchError: no such run; a setting that is not a :data:`RESUME_OVERRIDES` one
                and differs from the stored value (one line naming each, with both
                values); or its dataset or variants changed since it started.
        """
        project = project or current_project()
        store = project.store(run_id)
        manifest = store.read_manifest()
        changes = {k: v for k, v in (overrides or {}).items() if v is not None}
        try:
            stored_config = manifest["config"]
            if not isinstance(stored_config, dict):
                raise BenchError("config must be an object", file=store.manifest_path,
                                 field="config")
            # a run from before --limit sampled took the first N cases: it keeps them
            stored_config = {"limit_sampling": "first", **stored_config}
            # a run from before splits ran every case
            stored_config = {"split": "all", **stored_config}
            # the sender processes of the previous release are gone (one event loop now)
            stored_config = {k: v for k, v in stored_config.items() if k != "sender_processes"}
            if "model" in changes or "model_path" in changes:  # one names the model: not both
                stored_config = {**stored_config, "model": None, "model_path": None}
            config = RunConfig.model_validate(
                {**stored_config, **{k: v for k, v in changes.items() if k in RESUME_OVERRIDES}})
        except ValidationError as exc:
            field, msg = pydantic_error_field(exc)
            raise BenchError(f"stored config is invalid: {msg}", file=store.manifest_path,
                             field=f"config.{field}") from None
        # the MCP server's command line comes back with its secrets (never stored)
        config = given_mcp_secrets(config, changes.get("mcp_server"), run_id)
        # the overrides differ from the stored config only in RESUME_OVERRIDES, never compared
        names = setting_names or {}
        changed = changed_settings(config, changes, names)
        if changed:  # the stored config decides what the run measures
            named = [names.get(field, field) for field, _, _ in changed]
            values = "; ".join(
                (f"{name} " if len(changed) > 1 else "")
                + f"stored {shown_setting(field, before)}, given {shown_setting(field, after)}"
                for name, (field, before, after) in zip(named, changed))
            raise BenchError(f"{', '.join(named)} cannot change when resuming '{run_id}': "
                             f"{values} (it would change what the run measures); start a new "
                             "run")
        runner = cls(config, store=store, project=project, **kwargs)
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
        manifest["config"] = runner.config.model_dump()
        runner._manifest = manifest
        return runner

    _manifest: dict[str, Any] | None = None

    def done_keys(self) -> set[str]:
        """Keys of the planned rows already in ``results.jsonl`` (a half-written row is cut).

        Raises:
            BenchError: a corrupt row, or a row the readers would not count (they leave it
                out: :meth:`RunStore.read_rows`): its key is not planned, or it names another
                run (rows of another run appended to the file), naming file and line; or the
                half-written row cannot be cut (the file is read-only), naming the file and
                what to do.
        """
        try:
            self.store.repair()
        except OSError as exc:  # an immutable or read-only file with a cut last line
            raise self._write_failure(named_os_error(exc, self.store.results_path)) from None
        planned = {item.key for item in self.plan}
        run_id = self.store.run_id

        def stray(row: dict[str, Any]) -> str | None:
            if row["key"] not in planned:
                return f"no planned row has key '{row['key']}'"
            if row.get("run_id") not in (None, run_id):
                return f"it belongs to run '{row['run_id']}'"
            return None

        return {row["key"] for row in self.store.rows(plan=stray)}

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
            "cases_skipped": [{"case": p.case_id, "line": p.line, "field": p.field,
                               "why": p.message} for p in self.invalid_cases],
            "bfcl": None if not self.bfcl_path else {
                "path": str(self.bfcl_path), "entries": len(self.bfcl),
                "sha256": hashlib.sha256(self.bfcl_path.read_bytes()).hexdigest()},
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
            BenchError: a provider cannot start (those already started are stopped), ``--max-usd`` is set and a provider has no price, or
                (resuming) a provider's model differs from the run's (:func:`identity_mismatch`).
        """
        for provider_id in self.config.providers:
            if provider_id not in self.providers and provider_id not in self.skipped:
                if self.config.max_usd is not None and self._price_id(provider_id) and \
                        self.pricing.price(provider_id) is None:
                    raise BenchError(f"--max-usd needs a price for '{provider_id}': add its model "
                                     "to a pricing file and pass --pricing FILE")
                try:
                    provider = self._factory(provider_id, self.config)
                except ProviderUnavailable as exc:
                    self.skipped[provider_id] = exc.reason
                    continue
                self.providers[provider_id] = provider
                mismatch = identity_mismatch((self._manifest or {}).get("providers") or [],
                                             {provider_id: provider.describe()})
                if mismatch:  # mixing two models' rows in one table would measure nothing
                    self.close_providers()
                    raise BenchError(f"cannot resume '{self.store.run_id}': {mismatch}; "
                                     "resume with that model, or start a new run")
                from bench.providers.local import LocalProvider
                if isinstance(provider, LocalProvider):  # bench doctor's quick part
                    from bench.doctor import quick_checks
                    for finding in quick_checks(provider):
                        if finding.level == "warn":
                            print(f"warning: {finding.text}; {finding.fix}", file=sys.stderr,
                                  flush=True)
                    print(f"local: model {provider.model_id}; the first row of a variant "
                          "reads its tools block (minutes, unless saved by an earlier run)",
                          file=sys.stderr, flush=True)
                for variant in self.variants:
                    provider.prepare(variant.tools, variant_key=variant.sha256,
                                     label=f"variant '{variant.name}' of '{variant.toolset}'")

    def close_providers(self) -> None:
        """Close every started provider (stops local model workers) and forget them."""
        for provider in self.providers.values():
            provider.close()
        self.providers.clear()

    @staticmethod
    def _price_id(provider_id: str) -> bool:
        """False for providers that cost no USD: kinds registered without ``priced``
        (:mod:`bench.providers.registry`: ``local`` runs in process, ``replay`` is priced by what
        it recorded and billed nothing, ``function`` and ``oracle`` call no model)."""
        from bench.providers.registry import is_priced
        return is_priced(provider_id)

    def concurrency(self, provider_id: str) -> int:
        """Requests in flight for a provider: ``--concurrency`` capped by the provider's own
        ``max_concurrency`` (1 for ``local``, whose model runs one request at a time)."""
        provider = self.providers.get(provider_id)
        cap = getattr(provider, "max_concurrency", None)
        if cap is None and provider_id == "local":
            cap = 1
        return max(1, min(self.config.concurrency, cap or self.config.concurrency))

    def _cost(self, item: PlanItem, outcome: Outcome) -> tuple[float | None, float | None]:
        """(list-price cost, billed cost) of one answer in USD."""
        response = outcome.response
        priced_as = response.request.get("replayed_from", item.provider_id) \
            if item.provider_id.startswith("replay:") else item.provider_id
        price = self.pricing.price(priced_as, batch=bool(response.request.get("batch")))
        if price is None:
            return None, None
        usage = response.usage
        cost = price.cost(usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens)
        fresh = outcome.cache != "hit" and not item.provider_id.startswith("replay:")
        return cost, cost if fresh else 0.0

    def _cache_identity(self, provider: Provider, item: PlanItem,
                        body: dict[str, Any] | None) -> dict[str, Any]:
        """What makes a provider's answer differ besides messages, tools and trial.

        HTTP adapters are keyed by the exact JSON body (model, tool_choice, sampling
        parameters, the dialect's tools) and base URL; other providers by what they
        :meth:`~Provider.describe` (model file hash, seed, layout), without machine paths.
        """
        if body is not None:
            base_url = provider.options.base_url if isinstance(provider, HTTPProvider) else None
            return {"body": body, "base_url": str(base_url or "")}
        described = dict(provider.describe())
        for machine_specific in ("model_path", "threads", "system_info"):
            described.pop(machine_specific, None)
        return described

    def _request_copies(self, item: PlanItem) -> tuple[list[Message], list[Tool]]:
        """Deep copies of the item's messages and its variant's tools, new for each request, so
        that nothing a provider does to its input (a scripted agent editing it in place) reaches
        the case, the variant, later requests or the stored rows. The tools are copied from
        their pickle, made once per variant: 2.5 to 4 times faster than ``copy.deepcopy`` of
        the shipped variants' nested schemas (0.2-0.4 ms against 0.8-1.1 ms a request)."""
        pickled = self._pickled_tools.get(item.variant.sha256)
        if pickled is None:
            pickled = self._pickled_tools[item.variant.sha256] = pickle.dumps(
                list(item.variant.tools), pickle.HIGHEST_PROTOCOL)
        return copy.deepcopy(list(item.case.messages)), pickle.loads(pickled)

    async def _ask(self, provider: Provider, item: PlanItem,
                   body: dict[str, Any] | None) -> ProviderResponse:
        """One request: HTTP adapters get ``send(body)`` + ``parse_body`` (so the body built
        for the cache key is built once, and the gate sees the response headers); other
        providers get ``complete``."""
        if body is None:
            messages, tools = self._request_copies(item)
            return await provider.complete(messages, tools, variant_key=item.variant.sha256,
                                           trial=item.trial)
        assert isinstance(provider, HTTPProvider)
        started = time.perf_counter()
        answer, headers = await provider.send(body)
        latency = time.perf_counter() - started
        self.gates[item.provider_id].observe(headers)
        response = provider.parse_reply(answer, latency_s=latency, request=body)
        response.request_id = request_id_from(headers) or response.request_id
        return response

    def _cache_key(self, provider: Provider, item: PlanItem,
                   body: dict[str, Any] | None) -> str | None:
        """The item's cache key, or None when the cache is off or the provider is replay."""
        if self.cache is None or item.provider_id.startswith("replay:"):
            return None
        return request_key(item.provider_id, self._cache_identity(provider, item, body),
                           item.case.messages, item.variant.tools, item.trial)

    def _cache_lookup(self, provider: Provider, item: PlanItem,
                      body: dict[str, Any] | None) -> ProviderResponse | None:
        """The cached answer (counts a hit or a miss), or None."""
        key = self._cache_key(provider, item, body)
        return self.cache.get(key) if key is not None and self.cache is not None else None

    def _cache_store(self, provider: Provider, item: PlanItem, body: dict[str, Any] | None,
                     response: ProviderResponse) -> None:
        """Store a fresh answer when the cache writes."""
        key = self._cache_key(provider, item, body)
        if key is not None and self.cache is not None:
            options = getattr(provider, "options", None)
            self.cache.put(key, response, provider_id=item.provider_id,
                           base_url=getattr(options, "base_url", None),
                           messages=item.case.messages, tools=item.variant.tools,
                           trial=item.trial)

    @staticmethod
    def _invalid(exc: ProviderError, attempts: int = 1) -> Outcome:
        """A ``validation`` error, or an unreadable 200 reply after the last attempt, as the
        item's answer: invalid, naming the error (code ``provider_error`` or
        ``unreadable_reply``)."""
        code = UNREADABLE_REPLY if isinstance(exc, UnreadableReply) else PROVIDER_ERROR
        return Outcome(ProviderResponse(
            raw=None, parsed=ParsedAnswer(error=f"provider error: {exc}", error_code=code),
            finish_reason="error", latency_s=0.0,
            request={"error_class": exc.error_class, "status": exc.status},
            request_id=exc.request_id), attempts, None)

    async def execute(self, item: PlanItem) -> Outcome:
        """Answer one plan item: from the cache when allowed, else from the provider (through
        its batcher in batch mode, else through its gate with retries); store fresh answers in
        the cache when allowed.

        A ``validation`` error (the provider rejects this one request, e.g. HTTP 400 for a
        prompt over the context window) becomes this item's answer: an invalid answer naming
        the error, as the local provider does for a context overflow. So does a 200 reply
        whose body is not JSON once its retries are spent (:class:`UnreadableReply`), and a
        reply the adapter cannot parse (:meth:`HTTPProvider.parse_reply`): neither ends the
        run.

        Raises:
            ProviderError: a permanent error (401/403/404...), a request the HTTP client
                refused to send (class ``client``), or retries exhausted.
            BatchFailed: the item's batch reported an error for it.
            GateClosed: the run is stopping.
        """
        provider = self.providers[item.provider_id]
        body = None
        try:
            if isinstance(provider, HTTPProvider):
                body = provider.build_request(item.case.messages, item.variant.tools,
                                              trial=item.trial)
            hit = self._cache_lookup(provider, item, body)
            if hit is not None:
                return Outcome(hit, 0, "hit")
            batcher = self.batchers.get(item.provider_id)
            if batcher is not None and body is not None:
                answer, batch_id = await batcher.answer(item.key, body)
                assert isinstance(provider, HTTPProvider)
                response = provider.parse_reply(answer, latency_s=0.0, request=body)
                response.request["batch"] = batch_id
                attempts = 1
            else:
                response, attempts = await call_with_retries(
                    lambda: self._ask(provider, item, body), self.gates[item.provider_id],
                    attempts=self.config.attempts)
        except UnreadableReply as exc:  # retried like a 5xx; the last one is the answer
            return self._invalid(exc, self.config.attempts)
        except ProviderError as exc:
            if exc.error_class != "validation":
                raise
            return self._invalid(exc)
        self._cache_store(provider, item, body, response)
        caching = self.cache is not None and not item.provider_id.startswith("replay:")
        return Outcome(response, attempts, "miss" if caching else None)

    def _spent(self) -> Spend:
        """What the rows already written were billed (a resumed run keeps its spend)."""
        planned = {item.key for item in self.plan}
        spend, seen = Spend(), set()
        for row in self.store.rows():
            if row["key"] in planned and row["key"] not in seen:
                seen.add(row["key"])
                if row.get("billed_usd") != 0.0 and row.get("cache") != "hit":
                    usage = row.get("usage") or {}
                    spend.add(row.get("billed_usd") or 0.0,
                              int(usage.get("prompt_tokens", 0))
                              + int(usage.get("completion_tokens", 0)))
        return spend

    def _budget(self, spend: Spend, in_flight: int) -> str:
        """``send``, ``wait`` or ``stop``: may one more request start now?

        ``stop`` once a limit is reached. ``wait`` while the requests in flight, at the mean
        cost so far, would reach it with one more, and while the first request is in flight
        (it gives the first estimate). A run overshoots a limit only by requests that cost
        more than the running mean.
        """
        decision = "send"
        for limit, used, mean in ((self.config.max_usd, spend.usd, spend.mean_usd),
                                  (self.config.max_total_tokens, spend.tokens,
                                   spend.mean_tokens)):
            if limit is None:
                continue
            if used >= limit:
                return "stop"
            if in_flight and (not spend.requests or used + (in_flight + 1) * mean > limit):
                decision = "wait"  # the first request alone gives the estimate
        return decision

    def _error(self, item: PlanItem, exc: BaseException) -> BaseException:
        """The user-facing error for a failed item (names case, variant, provider, trial)."""
        where = (f"case '{item.case.id}', variant '{item.condition}', trial {item.trial}")
        if isinstance(exc, ReplayMiss):
            recorded = ", ".join(exc.recorded_providers) or "none"
            return BenchError(
                f"{item.provider_id}: no recorded answer for {where} (the source holds answers "
                f"from: {recorded}); record it with: bench run --provider <provider> "
                f"--dataset {self.config.dataset} --variants {item.variant.name} "
                f"--cases {item.case.id} --trials {item.trial + 1}"
                + "".join(f" --{name.replace('_', '-')} {value}" for name, value in
                          (item.factors.changed() if item.factors else {}).items())
                + " --cache write "
                "(or replay a run that has it: replay:<run-id>)")
        if isinstance(exc, ProviderError) and exc.error_class == "client":
            # nothing was asked: a setting on this machine, not the provider nor the model
            return BenchError(
                f"{item.provider_id}: {where}: {exc.detail}; nothing was asked of the model "
                "and no row is scored for it: fix the provider's settings (base URL, API key, "
                "proxy), then continue with: bench run --resume "
                f"{self.store.run_id} (finished rows are kept)")
        if isinstance(exc, ProviderError):
            status = f" HTTP {exc.status}" if exc.status else ""
            request = f" (request id {exc.request_id})" if exc.request_id else ""
            tried = " after retries" if exc.retryable else ""
            return BenchError(
                f"{item.provider_id}: {exc.error_class}{status} error{tried} on {where}: "
                f"{exc}{request}; finished rows are kept, continue with: "
                f"bench run --resume {self.store.run_id}")
        return exc

    def _write_failure(self, exc: OSError) -> BenchError:
        """The one-line error for a run file that could not be written (a full disk, a
        file-size limit, a read-only or immutable file): names the file, says the finished
        rows are kept, what to do (:func:`bench.runstore.write_fix`) and how to resume."""
        where = f"{exc.filename}: " if exc.filename else ""
        return BenchError(f"{where}{exc.strerror or exc} while writing the run; finished rows "
                          f"are kept: {write_fix(exc)}, then: bench run --resume "
                          f"{self.store.run_id}")

    def run(self, progress: ProgressHook | None = None) -> dict[str, Any]:
        """Execute every planned item not yet done; return the final manifest.

        Runs one asyncio event loop (:func:`asyncio.run`) for the whole run, holding the run's
        write lock throughout (:meth:`bench.runstore.RunStore.writing`): a second process
        resuming the same run gets a one-line error instead of duplicate rows. See
        :meth:`_run` for what a run does and raises.

        Raises:
            BenchError: the run is being written by another process; or as :meth:`_run`.
            KeyboardInterrupt: the run was stopped (Ctrl-C, SIGTERM); finished rows are kept
                and the manifest says ``interrupted``.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(progress))
        # A loop already runs in this thread (a notebook, Playwright's sync API): the run gets
        # its own loop in a worker thread (stop signals then stay with the caller).
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-run") as pool:
            return pool.submit(asyncio.run, self.arun(progress)).result()

    async def arun(self, progress: ProgressHook | None = None) -> dict[str, Any]:
        """:meth:`run` on the caller's event loop (e.g. from async code or a notebook).

        Raises:
            BenchError, KeyboardInterrupt: as :meth:`run`.
        """
        with self.store.writing(), self.project.activate():
            if self._manifest is not None:  # resumed: another process may have run since
                self._manifest = {**self.store.read_manifest(),
                                  "config": self._manifest["config"]}  # with the overrides
            self.signals = StopSignals()
            return await self._run(progress, self.signals)

    signals: StopSignals | None = None  # the last run's stop signals (which one stopped it)

    async def _run(self, progress: ProgressHook | None, signals: StopSignals) -> dict[str, Any]:
        """The loop of :meth:`arun`: :func:`bench.runner.loop.execute_plan`."""
        return await execute_plan(self, progress, signals)


def _default_factory(provider_id: str, config: RunConfig) -> Provider:
    from bench.providers.registry import provider_spec
    spec = provider_spec(provider_id)
    options: dict[str, Any] = {}
    if spec is not None and spec.options == "none":  # the kind takes no run settings
        options = {}
    elif spec is not None and spec.options == "dataset":  # it answers from the labels
        options = {"dataset": config.dataset}
    elif spec is not None and spec.options == "timeout":  # e.g. the user's function
        options = {"timeout_s": config.request_timeout_s}
    elif provider_id == "local":
        options = {"model_path": config.model_path, "model": config.model, "seed": config.seed,
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


