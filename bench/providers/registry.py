"""The provider registry: provider kinds, how to build them, and what they can do.

A provider id is ``<kind>`` or ``<kind>:<rest>`` (``local``, ``openai:gpt-4o``,
``replay:<run>``). Each kind is registered once with :func:`provider`, a decorator on a
*loader*: a function that imports the adapter's module only when the kind is used (optional
SDKs stay optional) and returns a :data:`Builder`. The pattern is inspect_ai's lazy
``@modelapi`` registration (``src/inspect_ai/model/_providers/providers.py``).

Capabilities travel with the registration (:class:`ProviderSpec`): ``priced`` (answers cost
USD at a list price, so ``--max-usd`` needs a pricing entry), ``streams`` (``--stream``),
``batch`` (a batch API for ``--batch``), ``max_concurrency`` (requests in flight at most).

Adding a provider kind ``foo`` is one module, ``bench/providers/foo.py`` (``-`` in the kind
becomes ``_``), that registers it::

    @provider("foo", id_form="foo:<model>", priced=True)
    def _foo() -> Builder:
        return lambda provider_id, rest, options: FooProvider(rest, provider_id=provider_id)

plus, when ``priced``, its models in ``bench/data/pricing.yaml``. :func:`provider_spec` imports
``bench.providers.<kind>`` the first time an unregistered kind is asked for. The shipped HTTP
adapters, ``local`` and ``replay`` are registered at the end of this module (their modules
predate the naming rule).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from bench.errors import BenchError

if TYPE_CHECKING:
    from bench.providers.base import Provider

# builder(provider_id, rest of the id after "<kind>:" ("" for a bare kind), options) -> Provider
Builder = Callable[[str, str, dict[str, Any]], "Provider"]
# Which run settings the runner passes as options: the embedded model's, the HTTP adapters'
# (:class:`bench.providers.base.HTTPOptions`), the run's dataset (``dataset=<name or path>``,
# for providers that answer from the labels), the run's request timeout (``timeout_s``,
# seconds), or none.
OptionSet = Literal["local", "http", "dataset", "timeout", "none"]
_KIND = re.compile(r"^[a-z][a-z0-9-]*$")


@dataclass(frozen=True)
class ProviderSpec:
    """One registered provider kind.

    Attributes:
        kind: the id's prefix (``openai``, ``local``...).
        id_form: how its ids are written, for messages (``openai:<model>``).
        load: the lazy loader: imports the adapter and returns its :data:`Builder`.
        options: which run settings the builder takes (:data:`OptionSet`).
        priced: answers cost USD at a list price (``bench/data/pricing.yaml``).
        streams: it can receive answers as server-sent events (``--stream``).
        batch: it has a batch API (``--batch``).
        max_concurrency: requests in flight at most (None: ``--concurrency`` decides).
        recorded: its answers come from a recording (``replay``): they are never cached again,
            bill nothing, and are priced as the recorded provider
            (``response.request["replayed_from"]``).
        deterministic: the same request gets the same answer every time (greedy decoding, a
            recording, a function of the labels); the regression gate then fails on any case
            that flips from right to wrong (:mod:`bench.gate.core`). A hosted API is not, even
            at temperature 0: its answers can differ from one request to the next.
    """

    kind: str
    id_form: str
    load: Callable[[], Builder]
    options: OptionSet = "none"
    priced: bool = False
    streams: bool = False
    batch: bool = False
    max_concurrency: int | None = None
    recorded: bool = False
    deterministic: bool = False


_REGISTRY: dict[str, ProviderSpec] = {}


def provider(kind: str, *, id_form: str | None = None, options: OptionSet = "none",
             priced: bool = False, streams: bool = False, batch: bool = False,
             max_concurrency: int | None = None, recorded: bool = False,
             deterministic: bool = False
             ) -> Callable[[Callable[[], Builder]], Callable[[], Builder]]:
    """Decorator registering a lazy loader for provider ``kind`` (see the module docstring).

    Raises:
        ValueError: ``kind`` is not lower-case letters, digits and ``-``, or is registered
            already.
    """
    if not _KIND.match(kind):
        raise ValueError(f"provider kind '{kind}' must be lower-case letters, digits and '-'")

    def register(load: Callable[[], Builder]) -> Callable[[], Builder]:
        if kind in _REGISTRY:
            raise ValueError(f"provider kind '{kind}' is already registered")
        _REGISTRY[kind] = ProviderSpec(kind, id_form or kind, load, options, priced, streams,
                                       batch, max_concurrency, recorded, deterministic)
        return load

    return register


def unregister_provider(kind: str) -> None:
    """Remove a registered kind (no-op when unknown); mainly for tests."""
    _REGISTRY.pop(kind, None)


def kind_of(provider_id: str) -> str:
    """The kind of a provider id: the part before the first ``:`` (the whole id without one)."""
    return provider_id.partition(":")[0]


def runs_embedded_model(provider_id: str) -> bool:
    """True when ``provider_id``'s kind runs bench's embedded llama.cpp model (it declares the
    ``local`` option set): no key, no network, one model process at a time."""
    spec = provider_spec(provider_id)
    return spec is not None and spec.options == "local"


def answers_from_labels(provider_id: str) -> bool:
    """True when ``provider_id``'s kind answers from the dataset's labels (it declares the
    ``dataset`` option set, as ``oracle`` does): its answers confirm nothing about a label."""
    spec = provider_spec(provider_id)
    return spec is not None and spec.options == "dataset"


def is_recorded(provider_id: str) -> bool:
    """True when ``provider_id``'s answers come from a recording
    (:attr:`ProviderSpec.recorded`, e.g. ``replay:<run>``)."""
    spec = provider_spec(provider_id)
    return spec is not None and spec.recorded


def provider_spec(provider_id: str) -> ProviderSpec | None:
    """The spec of ``provider_id``'s kind; an unregistered kind's module
    ``bench.providers.<kind>`` is imported once to let it register. None: unknown kind."""
    kind = kind_of(provider_id)
    if kind not in _REGISTRY and _KIND.match(kind):
        module = "bench.providers." + kind.replace("-", "_")
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # the module exists but lacks a dependency: say so
                raise
    return _REGISTRY.get(kind)


def registered_kinds() -> list[ProviderSpec]:
    """The registered kinds, in registration order."""
    return list(_REGISTRY.values())


def _register_all() -> None:
    """Import every module of the ``bench.providers`` package that registers a kind (its source
    has ``@provider(``), so a message can list them all; only on that error path."""
    import pkgutil
    from pathlib import Path

    # this module's folder is the package's: no import of the package itself
    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        path = Path(getattr(info.module_finder, "path", "")) / f"{info.name}.py"
        try:
            registers = "@provider(" in path.read_text(encoding="utf-8")
        except OSError:
            continue
        if registers:
            try:
                importlib.import_module(f"bench.providers.{info.name}")
            except ImportError:  # its own missing dependency shows when it is asked for
                continue


def known_provider(provider_id: str) -> ProviderSpec:
    """The spec of ``provider_id``'s kind, checked before anything is built or written (a
    command that writes a folder checks its provider ids first).

    Raises:
        BenchError: an unknown kind (the message lists the registered id forms).
    """
    spec = provider_spec(provider_id)
    if spec is None:
        _register_all()
        forms = ", ".join(s.id_form for s in _REGISTRY.values())
        raise BenchError(f"unknown provider '{provider_id}' (use {forms})")
    return spec


def build_provider(provider_id: str, options: dict[str, Any]) -> "Provider":
    """Build the provider of ``provider_id`` through its kind's builder.

    The instance gets the spec's ``max_concurrency`` when its class sets none.

    Raises:
        BenchError: an unknown kind (the message lists the registered id forms), or what the
            builder raises.
    """
    spec = known_provider(provider_id)
    built = spec.load()(provider_id, provider_id.partition(":")[2], options)
    if spec.max_concurrency is not None and getattr(built, "max_concurrency", None) is None:
        built.max_concurrency = spec.max_concurrency
    return built


def is_priced(provider_id: str) -> bool:
    """Whether ``provider_id``'s answers cost USD (its kind's ``priced``; an unknown kind is
    taken as priced, so ``--max-usd`` asks for its price rather than ignoring it)."""
    spec = provider_spec(provider_id)
    return True if spec is None else spec.priced


# The shipped kinds; the loaders import nothing heavy until a kind is used.

def _http(module: str, name: str) -> Builder:
    """A builder of the HTTP adapter class ``module.name`` (id and options checked by
     :func:`bench.providers.http_build.make_http_provider`)."""
    cls = getattr(importlib.import_module(module), name)

    def build(provider_id: str, rest: str, options: dict[str, Any]) -> "Provider":
        from bench.providers.http_build import make_http_provider
        return make_http_provider(cls, provider_id, **options)
    return build


# greedy decoding (temperature 0) in one llama.cpp process: the same prompt, the same answer
@provider("local", id_form="local", options="local", max_concurrency=1, deterministic=True)
def _local() -> Builder:
    def build(provider_id: str, rest: str, options: dict[str, Any]) -> "Provider":
        if rest:
            raise BenchError(f"unknown provider '{provider_id}' (the embedded model's id is "
                             "'local'; choose its model with --model)")
        from bench.providers.local import LocalProvider
        return LocalProvider(**options)
    return build


for _kind, _form, _batch, _module, _class in (
        ("openai", "openai:<model>", True, "openai_chat", "OpenAIChatProvider"),
        ("openai-responses", "openai-responses:<model>", True, "openai_responses",
         "OpenAIResponsesProvider"),
        ("anthropic", "anthropic:<model>", True, "anthropic_messages", "AnthropicProvider"),
        ("gemini", "gemini:<model>", False, "gemini", "GeminiProvider"),
        ("openai-compat", "openai-compat:<model>@<base_url>", False, "openai_chat",
         "OpenAICompatProvider")):
    provider(_kind, id_form=_form, options="http", priced=True, streams=True, batch=_batch)(
        functools.partial(_http, f"bench.providers.{_module}", _class))


@provider("replay", id_form="replay:<run-or-cache>", recorded=True, deterministic=True)
def _replay() -> Builder:
    def build(provider_id: str, rest: str, options: dict[str, Any]) -> "Provider":
        from bench.providers.replay import ReplayProvider
        return ReplayProvider(provider_id)
    return build
