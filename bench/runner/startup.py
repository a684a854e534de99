"""Starting a run's providers: build each from the registry, skip those that cannot run here
(no key, no SDK), refuse a resumed run whose model changed, and prepare every variant."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from bench.errors import BenchError
from bench.providers import HTTPProvider, Provider, ProviderUnavailable, make_provider
from bench.providers.batch import BatchLedger, batch_kind
from bench.providers.batcher import Batcher
from bench.providers.cache import ResponseCache
from bench.providers.pipeline import LayerFactory, Pipeline, build_pipeline
from bench.providers.pricing import Pricing
from bench.providers.registry import is_priced, provider_spec
from bench.runner.config import RunConfig, identity_mismatch
from bench.runner.errors import ExecutorNotStarted
from bench.runner.session import RunSession
from bench.runner.plan import PlanItem

if TYPE_CHECKING:
    from bench.executor.runhook import RunExecution

#: ``(provider id, run config) -> Provider``: how a run builds its providers.
ProviderFactory = Callable[[str, RunConfig], Provider]


def default_factory(provider_id: str, config: RunConfig) -> Provider:
    """Build ``provider_id`` with the run settings its kind declares it takes
    (:data:`bench.providers.registry.OptionSet`).

    Raises:
        BenchError: an unknown kind, or what its builder raises.
        ProviderUnavailable: it cannot run on this machine (no key, SDK missing).
    """
    spec = provider_spec(provider_id)
    kind = spec.options if spec is not None else "http"
    options: dict[str, Any] = {}
    if kind == "dataset":  # it answers from the labels
        options = {"dataset": config.dataset}
    elif kind == "timeout":  # e.g. the user's function
        options = {"timeout_s": config.request_timeout_s}
    elif kind == "local":
        options = {"model_path": config.model_path, "model": config.model, "seed": config.seed,
                   "max_tokens": config.max_tokens, "threads": config.threads}
        if config.no_call_layout:
            options["no_call_layout"] = config.no_call_layout
    elif kind == "http":
        options = {"seed": config.seed, "max_tokens": config.max_tokens,
                   "tool_choice": config.tool_choice,
                   "parallel_tool_calls": config.parallel_tool_calls,
                   "strict": config.openai_strict, "stream": config.stream,
                   "timeout_s": config.request_timeout_s}
    return make_provider(provider_id, **options)


class StartedProviders:
    """The providers of one run, started once and closed at its end.

    Args:
        session: the run.
        factory: how to build a provider (default :func:`default_factory`).
        pricing: the run's prices (``--max-usd`` needs one per priced provider).

    Attributes:
        providers: provider id -> started provider, in the config's order.
        skipped: provider id -> why it cannot run here (no API key, SDK missing).
    """

    def __init__(self, session: RunSession, factory: ProviderFactory | None,
                 pricing: Pricing) -> None:
        self.session, self.pricing = session, pricing
        self.factory = factory or default_factory
        self.providers: dict[str, Provider] = {}
        self.skipped: dict[str, str] = {}

    def open(self) -> None:
        """Start every provider of the run (loads models; fails early on missing ones).

        A provider that raises :class:`ProviderUnavailable` (no API key, optional SDK missing)
        is recorded in :attr:`skipped` with its reason; the others run.

        Raises:
            BenchError: a provider cannot start (those already started are stopped),
                ``--max-usd`` is set and a provider has no price, or (resuming) a provider's
                model differs from the run's (:func:`identity_mismatch`).
        """
        config = self.session.config
        for provider_id in config.providers:
            if provider_id in self.providers or provider_id in self.skipped:
                continue
            if config.max_usd is not None and is_priced(provider_id) and \
                    self.pricing.price(provider_id) is None:
                raise BenchError(f"--max-usd needs a price for '{provider_id}': add its model "
                                 "to a pricing file and pass --pricing FILE")
            try:
                provider = self.factory(provider_id, config)
            except ProviderUnavailable as exc:
                self.skipped[provider_id] = exc.reason
                continue
            self.providers[provider_id] = provider
            self._check_identity(provider_id, provider)
            for note in provider.start_notes():
                print(note, file=sys.stderr, flush=True)
            if not self.session.spaces.spaces:
                for variant in self.session.variants:
                    provider.prepare(variant.tools, variant_key=variant.sha256,
                                     label=f"variant '{variant.name}' of '{variant.toolset}'")
                continue
            # grown catalogs sent whole (no retriever): each once; retrieved lists differ per
            # case and are not prepared
            whole: dict[str, PlanItem] = {}
            for item in self.session.plan:
                if item.provider_id == provider_id and item.space is not None and \
                        item.space.retriever == "none":
                    whole.setdefault(item.tools_sha256, item)
            for key, item in whole.items():
                provider.prepare(item.tools, variant_key=key,
                                 label=f"condition '{item.condition}' of '{item.variant.toolset}'")

    def _check_identity(self, provider_id: str, provider: Provider) -> None:
        """Refuse a resumed run's provider whose model differs (mixing two models' rows in one
        table would measure nothing).

        Raises:
            BenchError: names the run, the field and both values.
        """
        stored = self.session.manifest
        mismatch = identity_mismatch((stored.providers if stored is not None else None) or [],
                                     {provider_id: provider.describe()})
        if mismatch:
            self.close()
            raise BenchError(f"cannot resume '{self.session.store.run_id}': {mismatch}; "
                             "resume with that model, or start a new run")

    def close(self) -> None:
        """Close every started provider (stops local model workers) and forget them."""
        for provider in self.providers.values():
            provider.close()
        self.providers.clear()

    def concurrency(self, provider_id: str) -> int:
        """Requests in flight for a provider: ``--concurrency`` capped by the provider's own
        ``max_concurrency``, else its kind's (1 for ``local``, whose model runs one request
        at a time); a local model that decodes in batches gets its batch size whatever
        ``--concurrency`` says (``decodes_in_batches``)."""
        provider = self.providers.get(provider_id)
        cap = getattr(provider, "max_concurrency", None)
        if getattr(provider, "decodes_in_batches", False) and cap:
            return int(cap)  # the embedded model's batch is filled (BENCH_LOCAL_BATCH)
        if cap is None:
            spec = provider_spec(provider_id)
            cap = spec.max_concurrency if spec is not None else None
        wanted = self.session.config.concurrency
        return max(1, min(wanted, cap or wanted))


    def pipelines(self, *, cache: ResponseCache | None, batches: BatchLedger | None,
                  layers: Sequence[LayerFactory],
                  sleep: Callable[[float], Awaitable[None]]
                  ) -> tuple[dict[str, Pipeline], dict[str, Batcher]]:
        """Each started provider's request pipeline (:func:`build_pipeline`), and the
        batchers of batch-capable providers when ``batches`` (the run's ``batches.json``)
        is given (batch mode).

        Args:
            cache: the run's response cache, or None when off.
            batches: the run's batch ledger in batch mode, else None.
            layers: user layers for every pipeline.
            sleep: how batch polling waits (seconds).
        """
        config = self.session.config
        pipelines: dict[str, Pipeline] = {}
        batchers: dict[str, Batcher] = {}
        for pid, provider in self.providers.items():
            kind = batch_kind(provider) if batches is not None else None
            if batches is not None and kind is not None and isinstance(provider, HTTPProvider):
                batchers[pid] = Batcher(provider, kind, batches, poll_s=config.batch_poll_s,
                                        sleep=sleep)
            pipelines[pid] = build_pipeline(
                pid, provider, concurrency=self.concurrency(pid), attempts=config.attempts,
                cache=cache, batcher=batchers.get(pid), extra=layers)
        return pipelines, batchers


def start_execution(session: RunSession) -> RunExecution | None:
    """The run's executor hook, or None with ``--no-execute``.

    Raises:
        ExecutorNotStarted: its MCP server cannot be started, or a project toolset's declared
            backend cannot (:class:`bench.executor.runhook.RunExecution`).
    """
    config = session.config
    if not config.execute:
        return None
    from bench.executor.runhook import RunExecution
    try:
        return RunExecution(session.store.dir, session.store.run_id,
                            allow_writes=config.allow_writes,
                            allow_sensitive=config.allow_sensitive,
                            mcp_command=config.mcp_server,
                            mcp_error_pattern=config.error_pattern,
                            project_root=session.project.root,
                            toolsets=[v.toolset for v in session.variants])
    except BenchError as exc:
        raise ExecutorNotStarted(exc.message, file=exc.file, line=exc.line,
                                 field=exc.field) from None
