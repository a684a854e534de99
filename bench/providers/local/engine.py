"""The embedded model's engine: llama.cpp in this process, answering with staged greedy
grammar-constrained decoding (:mod:`bench.providers.local.decoding`).

Prefix reuse: the tools block opens the prompt and is identical for every case of a variant;
llama.cpp keeps it in the KV cache between cases, and the engine saves that prefix's state to
disk (``<cache>/local-state/``) so a later run starts from it instead of reading the tools
block again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.providers.local.decoding import EngineAnswer as EngineAnswer  # what it answers
from bench.providers.local.decoding import (Decoding, GreedyPicker, PreparedVariant,
                                           common_prefix)
from bench.providers.local.logs import (capture_native_errors, last_native_error,
                                        quiet_native_stderr)
from bench.providers.local.prompt import (NoCallLayout, chat_messages, grammar_schema,
                                          json_schema_grammar, tools_block)
from bench.providers.local.settings import resolve_draft_tokens
from bench.providers.local.states import load_state, save_state, state_dir

if TYPE_CHECKING:  # imported when the engine starts (the `local` extra)
    from llama_cpp.llama_types import ChatCompletionRequestMessage

    from bench.providers.local.batching import BatchDecoder

# Decoding budget for the model's own tokens (the engine's punctuation is not counted).
STATE_CACHE_ENV = "BENCH_LOCAL_STATE_CACHE"
# A prefix is saved only when reading it cost at least this many tokens: shorter ones are
# read again faster than their file (23 KB per token for SmolLM2) is written and read.
MIN_SAVED_PREFIX_TOKENS = 2048
# Tool lists first met in an answer rather than prepared: the first this many are kept like
# prepared ones (a benchmark's or test's few variants); past them, a list (a retriever's
# per-case list, which seldom comes back) is transient: its KV state is never saved, and only
# this many transient lists keep their grammars (one per tool, in llama.cpp's memory).
TRANSIENT_KEPT = 8
# Reading more prefix tokens than this takes long enough (seconds to minutes) to announce.
ANNOUNCED_PREFIX_TOKENS = 1024
# KV cells added per batched sequence (batch > 1): a case's own prompt and answer beside the
# shared tools block. A case is admitted to the batch only when the cells it may use (its
# prompt tail, its token budget and the engine's punctuation) are free, so the cache never
# fills. 12 KiB of f16 K and V per cell for Qwen2.5-0.5B (24 layers x 2 KV heads x 64 x 2 x 2
# bytes): 12 MiB per sequence.
BATCH_ROOM_TOKENS = 1024


class LocalEngine:
    """A GGUF model loaded with llama-cpp-python, answering with staged greedy decoding.

    Args:
        model_path: the GGUF file.
        n_ctx: context window in tokens.
        threads: CPU threads for decoding and prompt reading.
        seed: llama.cpp's seed (decoding is greedy; it is recorded, not used).
        layout: how the prompt offers "no tool fits".
        flash_attn: llama.cpp's flash attention (off: on 2 CPU cores it read prompts 30% slower
            and decoded 40% slower, benchmarks/RESULTS.md).
        n_batch: tokens per prompt-reading batch.
        save_states: keep each variant's prefix state on disk between runs (default: on
            unless ``$BENCH_LOCAL_STATE_CACHE`` is ``0``/``off``/``no``/``false``).
        top_first: ask the grammar about the most likely tokens before the whole vocabulary
            (same answers, faster); False applies it to the whole vocabulary at every step
            (the reference the tests compare with).
        speculative: prompt-lookup speculative decoding (:mod:`~bench.providers.local.decoding`):
            True/False, or the count of tokens guessed per step; None reads
            ``$BENCH_LOCAL_SPECULATIVE`` (:func:`~bench.providers.local.settings.resolve_draft_tokens`).
            The count is :attr:`draft_tokens`, which may be changed between answers.
        batch: answers decoded at once (:mod:`~bench.providers.local.batching`): above 1 the
            context holds ``batch + 1`` sequences in one unified KV cache of
            ``n_ctx + batch * BATCH_ROOM_TOKENS`` cells (sequence 0 the tools block, shared),
            and :attr:`batcher` decodes; :meth:`complete` still decodes one answer alone.
            Speculation is off in a batch.

    Raises:
        BenchError: llama-cpp-python is missing or the model fails to load.
    """

    def __init__(self, model_path: Path, *, n_ctx: int, threads: int, seed: int,
                 layout: NoCallLayout, flash_attn: bool = False, n_batch: int = 512,
                 save_states: bool | None = None, top_first: bool = True,
                 speculative: bool | int | None = None, batch: int = 1) -> None:
        try:
            import llama_cpp
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter
        except ImportError:
            raise BenchError("the local provider needs llama-cpp-python: "
                             "pip install -e '.[local]'") from None
        self._lib = llama_cpp
        # called with one line before work that takes long (the worker relays it to the run)
        self.notify: Callable[[str], None] | None = None
        capture_native_errors(llama_cpp)
        self.model_path = Path(model_path)
        self.layout = layout
        self.n_ctx = n_ctx
        self.threads = threads
        self.flash_attn = flash_attn
        self.n_batch = n_batch
        self.top_first = top_first
        self.draft_tokens = resolve_draft_tokens(speculative)
        if save_states is None:
            save_states = os.environ.get(STATE_CACHE_ENV, "1").strip().lower() not in \
                ("0", "off", "no", "false")
        self.save_states = save_states
        self.batch = max(1, batch)
        cells = n_ctx + (self.batch * BATCH_ROOM_TOKENS if self.batch > 1 else 0)
        try:
            with quiet_native_stderr(), _context_params(
                    llama_cpp.llama_cpp, **({"n_seq_max": self.batch + 1, "kv_unified": True}
                                            if self.batch > 1 else {})):
                self.llm = Llama(model_path=str(model_path), n_ctx=cells, n_batch=n_batch,
                                 n_ubatch=n_batch, n_threads=threads, n_threads_batch=threads,
                                 flash_attn=flash_attn, seed=seed, verbose=False)
        except (ValueError, RuntimeError) as exc:
            reason = last_native_error()
            raise BenchError(f"cannot load the model: {exc}"
                             + (f" (llama.cpp: {reason[:300]})" if reason else ""),
                             file=model_path) from None
        llm = self.llm
        self.n_vocab = llm.n_vocab()
        self._vocab = llm._model.vocab
        self._ctx = llm._ctx.ctx
        template = llm.metadata.get("tokenizer.chat_template")
        if template:
            eos, bos = llm.token_eos(), llm.token_bos()
            text = llm._model.token_get_text
            self._formatter = Jinja2ChatFormatter(
                template=template, eos_token=text(eos) if eos >= 0 else "",
                bos_token=text(bos) if bos >= 0 else "")
        else:
            from llama_cpp.llama_chat_format import format_chatml
            self._formatter = format_chatml
        self._picker = GreedyPicker(llm, top_first)
        self._variants: dict[str, PreparedVariant] = {}
        self._transient: list[str] = []  # keys of transient variants, oldest first
        self._met = 0  # tool lists first met in an answer (not prepared)
        self._model_digest: str | None = None
        # after a call: end the list or add a call; before the first (empty-list layout only)
        self._more = self._sampler('root ::= "]}" | ", "')
        self._first = self._sampler('root ::= "]}" | "{"')
        self.batcher: BatchDecoder | None = None
        if self.batch > 1:
            from bench.providers.local.batching import BatchDecoder
            self.batcher = BatchDecoder(self, self.batch, cells)

    # -- prompts -------------------------------------------------------------------------

    def _render(self, chat: list[ChatCompletionRequestMessage]) -> list[int]:
        result = self._formatter(messages=chat)
        return self.llm.tokenize(result.prompt.encode("utf-8"),
                                 add_bos=not result.added_special, special=True)

    def _tokens(self, text: str) -> list[int]:
        return self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)

    def _sampler(self, gbnf: str) -> Any:
        sampler = self._lib.llama_sampler_init_grammar(self._vocab, gbnf.encode("utf-8"),
                                                       b"root")
        if not sampler:
            raise BenchError("llama.cpp could not parse a decoding grammar")
        return sampler

    def prepare(self, tools: Sequence[Tool], variant_key: str, label: str = "variant", *,
                transient: bool = False) -> int:
        """Build a variant's grammars and prompt prefix; return its tools block's tokens.

        ``transient``: a tool list met first in an answer after :data:`TRANSIENT_KEPT`
        others (a retriever's per-case list): its KV state is never saved to disk (tens of MB
        each, for a list that seldom comes back) and at most :data:`TRANSIENT_KEPT` such
        lists keep their grammars.

        Raises:
            BenchError: llama.cpp's JSON-Schema-to-grammar converter rejects a tool's schema
                (e.g. an unanchored ``pattern``, ``not``), naming the tool.
        """
        known = self._variants.get(variant_key)
        if known is not None:
            return known.tool_tokens
        system = tools_block(tools, self.layout)
        names = [t.name for t in tools]
        if self.layout.decline_tool:
            names = ([self.layout.decline_tool, *names] if self.layout.position == "first"
                     else [*names, self.layout.decline_tool])
        alternatives = " | ".join(json.dumps(n) for n in names)  # JSON escaping suits GBNF
        variant = PreparedVariant(system=system,
                           tool_tokens=len(self._tokens(system)),
                           prefix=self._prefix(system), names=names, label=label,
                           name_sampler=self._sampler(f'root ::= ({alternatives}) "\\""'))
        for tool in tools:
            schema = grammar_schema(tool.input_schema)
            if not (schema.get("properties") or schema.get("additionalProperties")):
                variant.arg_samplers[tool.name] = None
                continue
            try:
                gbnf = json_schema_grammar(json.dumps(schema))
            except Exception as exc:  # noqa: BLE001 - the converter raises many kinds
                raise BenchError(
                    f"{label}: the local model's JSON-Schema-to-grammar converter rejects tool "
                    f"'{tool.name}': {type(exc).__name__}: {exc}") from None
            variant.arg_samplers[tool.name] = self._sampler(gbnf)
        if self.layout.decline_tool:  # a sampler only when the pseudo-tool takes arguments
            variant.arg_samplers[self.layout.decline_tool] = \
                self._sampler(json_schema_grammar(json.dumps(self.layout.decline_schema))) \
                if self.layout.decline_schema.get("properties") else None
        variant.transient = transient
        if self.save_states and not transient and len(variant.prefix) >= MIN_SAVED_PREFIX_TOKENS:
            variant.state_file = state_dir() / f"{self._state_key(variant.prefix)}.state"
        self._variants[variant_key] = variant
        if transient:
            self._transient.append(variant_key)
            if len(self._transient) > TRANSIENT_KEPT:
                busy = self.batcher.variant_key if self.batcher and self.batcher.active else None
                oldest = next(k for k in self._transient if k != busy)  # not one in use
                self._transient.remove(oldest)
                self._free(self._variants.pop(oldest))
        return variant.tool_tokens

    def _prefix(self, system: str) -> list[int]:
        """Tokens every case of the variant starts with: the rendered system message up to
        the first user message (found as the common start of two different prompts)."""
        first = self._render([{"role": "system", "content": system},
                              {"role": "user", "content": "A"}])
        second = self._render([{"role": "system", "content": system},
                               {"role": "user", "content": "B"}])
        same = common_prefix(first, second)
        return first[:max(0, same - 1)]

    def _state_key(self, prefix: list[int]) -> str:
        if self._model_digest is None:
            from bench.providers.local.files import file_sha256
            self._model_digest = file_sha256(self.model_path)
        digest = hashlib.sha256()
        for part in (self._model_digest, self._lib.__version__, str(self.n_ctx),
                     str(self.flash_attn), str(self.n_batch), str(self.threads)):
            digest.update(part.encode() + b"\0")
        digest.update(np.asarray(prefix, dtype=np.int32).tobytes())
        return digest.hexdigest()[:32]

    # -- the KV cache --------------------------------------------------------------------

    def _feed(self, tokens: list[int], variant: PreparedVariant) -> tuple[int, list[int]]:
        """Make the context hold ``tokens`` but their tail: return how many were already there,
        and the tail, which the answer evaluates with its first punctuation (one batch).

        The variant's prefix is always evaluated on its own, before the case's tokens, so its
        KV state is the same whether it was computed now or loaded from disk.
        """
        llm = self.llm
        reuse = common_prefix(llm.input_ids[:llm.n_tokens], tokens)
        prefix = variant.prefix
        if reuse < len(prefix) and tokens[:len(prefix)] == prefix:
            self._load_prefix(variant, reuse)
            reuse = len(prefix)
        cached = reuse
        if reuse >= len(tokens):
            reuse = len(tokens) - 1  # evaluate the last token again for its logits
        llm.n_tokens = reuse
        return cached, tokens[reuse:]

    def _load_prefix(self, variant: PreparedVariant, reuse: int) -> None:
        """Make sequence 0 of the context hold the variant's prefix, of which its first
        ``reuse`` tokens are there already: load its saved state, else evaluate the rest (and
        save it when the variant keeps states)."""
        llm, prefix, state = self.llm, variant.prefix, variant.state_file
        if state is None or not load_state(self.llm, self._lib, self._ctx, state, prefix):
            llm.n_tokens = min(reuse, llm.n_tokens)
            if len(prefix) - llm.n_tokens >= ANNOUNCED_PREFIX_TOKENS and self.notify:
                self.notify(f"reading the tools block of {variant.label} "
                            f"({len(prefix) - llm.n_tokens:,} tokens"
                            + ("; read again for each case's list)" if variant.transient
                               else "; once per variant"
                               + (", then saved)" if state is not None else ")")))
            llm.eval(prefix[llm.n_tokens:])
            if state is not None:
                save_state(self.llm, self._lib, self._ctx, state)

    def hold_prefix(self, variant: PreparedVariant) -> None:
        """Make sequence 0 hold exactly the variant's prefix (reused, loaded or evaluated),
        nothing after it: the cells that batched sequences share
        (:class:`~bench.providers.local.batching.BatchDecoder`)."""
        llm, prefix = self.llm, variant.prefix
        reuse = common_prefix(llm.input_ids[:llm.n_tokens], prefix)
        if reuse < len(prefix):
            self._load_prefix(variant, reuse)
        llm.n_tokens = len(prefix)
        self._lib.llama_memory_seq_rm(self._lib.llama_get_memory(self._ctx), 0, len(prefix), -1)

    def variant_for(self, tools: Sequence[Tool], variant_key: str) -> PreparedVariant:
        """The prepared variant of ``variant_key`` (prepared now if new; past
        :data:`TRANSIENT_KEPT` unprepared lists, as a transient one).

        Raises:
            BenchError: as :meth:`prepare`.
        """
        if variant_key not in self._variants:  # not prepared: the first few are kept
            self._met += 1
            if self._met > TRANSIENT_KEPT:
                self.prepare(tools, variant_key, "this case's tool list", transient=True)
        self.prepare(tools, variant_key)
        return self._variants[variant_key]

    def render(self, variant: PreparedVariant, messages: Sequence[Message]) -> list[int]:
        """The whole prompt of a case (tokens): the variant's system message, then
        ``messages``, in the model's chat template."""
        return self._render(chat_messages(variant.system, messages))

    # -- decoding ------------------------------------------------------------------------

    def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                 variant_key: str, max_tokens: int) -> EngineAnswer:
        """Decode one answer for a conversation (greedy; the same input gives the same text).

        Args:
            messages: the case's conversation.
            tools: the variant's tools (grammars are built on first use of ``variant_key``).
            variant_key: identifies the tools (one prompt prefix and grammar set per key).
            max_tokens: budget of tokens the model chooses; past it the answer is cut
                (``finish_reason == "length"``).

        Raises:
            BenchError: as :meth:`prepare`.
        """
        if self.batcher is not None and self.batcher.active:
            raise BenchError("a single answer was asked while a batch is decoding")
        variant = self.variant_for(tools, variant_key)
        prompt = self.render(variant, messages)
        if len(prompt) + 64 > self.n_ctx:
            return EngineAnswer("", "error", len(prompt), 0, 0, 0, 0, variant.tool_tokens,
                                error=f"Requested tokens ({len(prompt)}) exceed context "
                                      f"window of {self.n_ctx}")
        cached, tail = self._feed(prompt, variant)
        state = Decoding(self.llm, self._picker, max_tokens, first=self._first,
                         more=self._more, draft_tokens=self.draft_tokens, pending=tail)
        finish = state.answer(variant, self.layout.decline_tool is None)
        return EngineAnswer(state.text.decode("utf-8", errors="replace"), finish, len(prompt),
                            state.forced + state.sampled, cached, state.sampled,
                            state.full_passes, variant.tool_tokens, error=state.error,
                            drafted_tokens=state.drafted, accepted_tokens=state.accepted)

    def _free(self, variant: PreparedVariant) -> None:
        """Free a variant's grammar samplers (llama.cpp memory)."""
        if self.batcher is not None:
            self.batcher.forget(variant)
        for sampler in (variant.name_sampler, *variant.arg_samplers.values()):
            if sampler:
                self._lib.llama_sampler_free(sampler)
        variant.arg_samplers.clear()

    def forget_case(self) -> None:
        """Keep only the longest variant prefix in the KV cache, so that the next answer reads
        its case's own tokens again (benchmarks that answer one case twice use it to time both
        answers alike)."""
        held = self.llm.input_ids[:self.llm.n_tokens]
        known = [len(v.prefix) for v in self._variants.values()
                 if common_prefix(held, v.prefix) == len(v.prefix)]
        self.llm.n_tokens = min(self.llm.n_tokens, max(known, default=0))

    def speed(self, prompt_tokens: int = 512, decode_tokens: int = 32) -> dict[str, float]:
        """Measure prompt reading and decoding speed (tokens/s) on filler text.

        Reads ``prompt_tokens`` tokens in batches, then evaluates ``decode_tokens`` tokens one
        at a time (as decoding does, without sampling). Clears the KV cache before and after.
        """
        llm = self.llm
        filler = self._tokens("The quick brown fox jumps over the lazy dog. " * 64)
        tokens = (filler * (prompt_tokens // max(1, len(filler)) + 1))[:prompt_tokens]
        llm.n_tokens = 0
        started = time.perf_counter()
        llm.eval(tokens)
        prefill = time.perf_counter() - started
        started = time.perf_counter()
        for token in tokens[:decode_tokens]:
            llm.eval([token])
        decode = time.perf_counter() - started
        llm.n_tokens = 0
        return {"prefill_tokens_per_s": prompt_tokens / prefill,
                "decode_tokens_per_s": decode_tokens / decode,
                "prompt_tokens": float(prompt_tokens), "decode_tokens": float(decode_tokens)}

    def system_info(self) -> dict[str, Any]:
        """llama-cpp-python's version and its CPU features line (``llama_print_system_info``)."""
        return {"llama_cpp_python": self._lib.__version__,
                "system_info": self._lib.llama_print_system_info().decode(errors="replace")}

    def close(self) -> None:
        """Free the grammars, the batch and the model."""
        if self.batcher is not None:
            self.batcher.close()
        for variant in self._variants.values():
            self._free(variant)
        self.batcher = None
        for sampler in (self._more, self._first):
            if sampler:
                self._lib.llama_sampler_free(sampler)
        self._variants.clear()
        self._transient.clear()
        self._more = self._first = None
        llm = getattr(self, "llm", None)  # absent when the model failed to load
        if llm is not None:
            del self.llm  # the engine no longer holds the model
            llm.close()


@contextlib.contextmanager
def _context_params(low: Any, **fields: Any) -> Iterator[None]:
    """While open, llama.cpp's default context parameters (``low``: the ``llama_cpp.llama_cpp``
    module, which ``Llama`` asks for them) carry ``fields`` too (e.g. ``n_seq_max``,
    ``kv_unified``, which llama-cpp-python 0.3.16's ``Llama`` does not take as arguments)."""
    if not fields:
        yield
        return
    original = low.llama_context_default_params

    def params() -> Any:
        value = original()
        for name, field_value in fields.items():
            setattr(value, name, field_value)
        return value
    low.llama_context_default_params = params
    try:
        yield
    finally:
        low.llama_context_default_params = original
