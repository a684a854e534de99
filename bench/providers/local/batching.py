"""Continuous batching of the embedded model's answers over one shared tools block.

Every case of a variant starts with the same tools block, so its KV cells are computed (or
loaded from a saved state) once, in sequence 0 of a unified KV cache, and given to each case's
own sequence 1..B with ``llama_memory_seq_cp`` (a cell may belong to several sequences: the
copy costs no computation and no memory). Each :meth:`BatchDecoder.step` then evaluates the
pending tokens of every sequence in flight in ONE ``llama_decode`` (a ``llama_batch`` whose
tokens carry their own sequence id and position, logits wanted only after a sequence's last
token), so the weights and the shared prefix are read once for B answers. Each answer keeps
its own staged grammar decoding (:meth:`bench.providers.local.decoding.Decoding.steps`, with
its own copies of the grammar samplers: a grammar sampler holds its parse state); a finished
sequence's cells are removed (``llama_memory_seq_rm``) and its slot takes the next case
(continuous batching, as vLLM and llama.cpp's server do).

Followed: llama.cpp ``examples/batched/batched.cpp`` (commit 0650ea8c05bc6e31273182470197e9b2e50253e0:
one batch of one token per sequence, ``i_batch`` of each sequence's logits) and the slots of
``tools/server/server.cpp`` (commit aa6192d38defc9a5d9fb2987413f71b18f214270, ``update_slots``:
tokens of sequences that are answering go first, prompt tokens fill the batch up to
``n_batch``; a released slot's cells are removed).

Answers are greedy, so a batched answer differs from the one decoded alone only where
llama.cpp's float sums differ with the batch's shape and the cells' places (near-ties):
``benchmarks/local_batching.py`` measures the share of identical answers.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Generator, Hashable, Protocol, Sequence

import numpy as np

from bench.models import Message, Tool
from bench.providers.local.decoding import (Decoding, EngineAnswer, GreedyPicker,
                                            PreparedVariant, common_prefix)
from bench.providers.local.prompt import NoCallLayout

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_cpp import llama_context_p, llama_sampler_p

# Cells reserved per answer beyond its token budget: the engine's JSON punctuation and the
# rest of tool names it writes (tens of tokens for three calls).
PUNCTUATION_ROOM = 128


class BatchEngine(Protocol):
    """The engine as a :class:`BatchDecoder` uses it (read only): a loaded
    :class:`~bench.providers.local.engine.LocalEngine`, which builds its decoder
    (``LocalEngine(batch=size)``). Named here so that this module imports nothing of the
    engine, which imports it."""

    @property
    def llm(self) -> Llama:
        """The loaded model (``n_batch``: tokens per ``llama_decode``)."""

    @property
    def n_ctx(self) -> int:
        """The context window of one answer, tokens."""

    @property
    def layout(self) -> NoCallLayout:
        """How the prompt offers "no tool fits" (its ``decline_tool``)."""

    @property
    def _lib(self) -> ModuleType:
        """``llama_cpp``, imported by the engine."""

    @property
    def _ctx(self) -> llama_context_p:
        """The model's llama.cpp context."""

    @property
    def _picker(self) -> GreedyPicker:
        """The greedy token picker reading the context's logits."""

    @property
    def _first(self) -> llama_sampler_p:
        """The grammar before an answer's first call."""

    @property
    def _more(self) -> llama_sampler_p:
        """The grammar after a call."""

    def variant_for(self, tools: Sequence[Tool], variant_key: str) -> PreparedVariant:
        """The prepared variant of ``variant_key`` (prepared now if new)."""

    def render(self, variant: PreparedVariant, messages: Sequence[Message]) -> list[int]:
        """The whole prompt of a case, tokens."""

    def hold_prefix(self, variant: PreparedVariant) -> None:
        """Make sequence 0 hold exactly the variant's prefix."""


@dataclass
class _Slot:
    """One answer in flight in its own sequence of the context."""
    key: Hashable
    seq: int
    decoding: Decoding
    steps: Generator[list[int], np.ndarray, str | None]
    pos: int  # position of the next token evaluated
    pending: list[int]  # tokens to evaluate (the logits after the last are wanted)
    prompt_tokens: int
    cached: int  # prompt tokens shared with sequence 0
    tool_tokens: int
    reserved: int  # KV cells it may use at most


@dataclass
class _Finished:
    key: Hashable
    answer: EngineAnswer


class BatchDecoder:
    """Answers of one variant decoded together, up to ``size`` at once (continuous
    batching; see the module docstring).

    Use: :meth:`admit` cases while it returns True, then :meth:`step` until :attr:`active`
    is 0, admitting more between steps (a finished sequence's slot takes the next case).
    Cases of another variant are admitted once the batch is empty (the tools block in
    sequence 0 changes then).

    Args:
        engine: the loaded engine; its context must hold ``size + 1`` sequences in a unified
            KV cache of ``cells`` cells (``LocalEngine(batch=size)`` builds it so).
        size: sequences decoded at once (B).
        cells: KV cells of the context: the tools block plus every admitted case's
            reservation (tail, token budget, :data:`PUNCTUATION_ROOM`) must fit.

    Attributes:
        steps / evaluated: ``llama_decode`` calls made and tokens they evaluated (for
            benchmarks).
    """

    def __init__(self, engine: BatchEngine, size: int, cells: int) -> None:
        self.engine = engine
        self.lib = engine._lib
        self.size = size
        self.cells = cells
        self.capacity = engine.llm.n_batch  # tokens per llama_decode
        self._batch = self.lib.llama_batch_init(self.capacity, 0, 1)
        self._free_seqs = list(range(size, 0, -1))  # sequence 0 holds the tools block
        self._slots: list[_Slot] = []
        self._finished: list[_Finished] = []
        # per sequence: the original grammar sampler's address -> this sequence's copy
        self._copies: dict[int, dict[int, llama_sampler_p]] = {s: {} for s in range(1, size + 1)}
        self.variant_key: str | None = None
        self._variant: PreparedVariant | None = None
        self.steps = self.evaluated = 0

    @property
    def active(self) -> int:
        """Answers admitted and not yet returned by :meth:`step`."""
        return len(self._slots) + len(self._finished)

    def admit(self, key: Hashable, messages: Sequence[Message], tools: Sequence[Tool], *,
              variant_key: str, max_tokens: int) -> bool:
        """Start decoding one case in a free sequence; False (nothing done) when the batch is
        full, its KV cells could not hold the case, or it decodes another variant.

        A case whose prompt does not fit ``n_ctx`` finishes at once with an ``error`` answer
        (returned by the next :meth:`step`), as :meth:`LocalEngine.complete` answers it.

        Raises:
            BenchError: as :meth:`LocalEngine.prepare` (a schema the grammar converter
                rejects).
        """
        engine = self.engine
        if self.active and variant_key != self.variant_key:
            return False
        if not self._free_seqs:
            return False
        variant = engine.variant_for(tools, variant_key)
        prompt = engine.render(variant, messages)
        if len(prompt) + 64 > engine.n_ctx:
            self._finished.append(_Finished(key, EngineAnswer(
                "", "error", len(prompt), 0, 0, 0, 0, variant.tool_tokens,
                error=f"Requested tokens ({len(prompt)}) exceed context window of "
                      f"{engine.n_ctx}")))
            return True
        if not self._slots:  # sequence 0 may hold a single answer's tokens, or another list
            engine.hold_prefix(variant)  # may read the tools block (minutes) or load it
            self._variant, self.variant_key = variant, variant_key
        shared = min(len(variant.prefix), len(prompt) - 1,
                     common_prefix(variant.prefix, prompt))
        reserved = len(prompt) - shared + max_tokens + PUNCTUATION_ROOM
        if self._slots and (len(variant.prefix) + sum(s.reserved for s in self._slots)
                            + reserved > self.cells):
            return False
        seq = self._free_seqs.pop()
        memory = self.lib.llama_get_memory(engine._ctx)
        self.lib.llama_memory_seq_rm(memory, seq, -1, -1)
        self.lib.llama_memory_seq_cp(memory, 0, seq, 0, shared)
        decoding = Decoding(engine.llm, engine._picker, max_tokens, first=engine._first,
                            more=engine._more, draft_tokens=0, pending=prompt[shared:])
        copies = self._copies[seq]
        decoding.own = lambda sampler: self._copy(copies, sampler)
        steps = decoding.steps(variant, engine.layout.decline_tool is None)
        self._slots.append(_Slot(key, seq, decoding, steps, shared, next(steps), len(prompt),
                                 shared, variant.tool_tokens, reserved))
        return True

    def _copy(self, copies: dict[int, llama_sampler_p], sampler: llama_sampler_p
              ) -> llama_sampler_p:
        """This sequence's own copy of a grammar sampler (made on first use)."""
        address = ctypes.cast(sampler, ctypes.c_void_p).value or 0
        copy = copies.get(address)
        if copy is None:
            copy = copies[address] = self.lib.llama_sampler_clone(sampler)
        return copy

    def step(self) -> list[tuple[Hashable, EngineAnswer]]:
        """Evaluate the pending tokens of the sequences in flight in one ``llama_decode``
        (answering sequences first, then prompt tails up to ``n_batch`` tokens), advance
        each sequence whose logits came, and return the answers finished: (key, answer).

        A failed ``llama_decode`` finishes every sequence in flight with an ``error``
        answer naming llama.cpp's return code.
        """
        finished = [(f.key, f.answer) for f in self._finished]
        self._finished.clear()
        if not self._slots:
            return finished
        batch, count = self._batch, 0
        wanted: list[tuple[_Slot, int]] = []
        for slot in sorted(self._slots, key=lambda s: len(s.pending)):
            take = slot.pending[:self.capacity - count]
            if not take:
                continue
            for offset, token in enumerate(take):
                batch.token[count] = token
                batch.pos[count] = slot.pos + offset
                batch.n_seq_id[count] = 1
                batch.seq_id[count][0] = slot.seq
                batch.logits[count] = False
                count += 1
            slot.pos += len(take)
            slot.pending = slot.pending[len(take):]
            if not slot.pending:
                batch.logits[count - 1] = True
                wanted.append((slot, count - 1))
        batch.n_tokens = count
        code = self.lib.llama_decode(self.engine._ctx, batch)
        self.steps += 1
        self.evaluated += count
        if code != 0:
            for slot in list(self._slots):
                slot.decoding.error = f"llama_decode returned {code}"
                finished.append((slot.key, self._retire(slot, "error")))
            return finished
        picker = self.engine._picker
        for slot, index in wanted:
            logits = picker.logits(index)
            try:
                tokens = slot.steps.send(logits)
                while not tokens:  # logits wanted again at the same place
                    tokens = slot.steps.send(logits)
            except StopIteration as stop:
                finished.append((slot.key, self._retire(slot, stop.value or "stop")))
                continue
            slot.pending = tokens
        return finished

    def _retire(self, slot: _Slot, finish: str) -> EngineAnswer:
        """Remove a finished sequence's cells, free its slot; its answer."""
        self._slots.remove(slot)
        self.lib.llama_memory_seq_rm(self.lib.llama_get_memory(self.engine._ctx), slot.seq,
                                     -1, -1)
        self._free_seqs.append(slot.seq)
        state = slot.decoding
        return EngineAnswer(state.text.decode("utf-8", errors="replace"), finish,
                            slot.prompt_tokens, state.forced + state.sampled, slot.cached,
                            state.sampled, state.full_passes, slot.tool_tokens,
                            error=state.error)

    def forget(self, variant: PreparedVariant) -> None:
        """Free every sequence's copies of a variant's grammar samplers (before the variant's
        own are freed: a later sampler at the same address must not find a stale copy)."""
        for sampler in (variant.name_sampler, *variant.arg_samplers.values()):
            if not sampler:
                continue
            address = ctypes.cast(sampler, ctypes.c_void_p).value or 0
            for copies in self._copies.values():
                copy = copies.pop(address, None)
                if copy is not None:
                    self.lib.llama_sampler_free(copy)
        if self._variant is variant:
            self._variant = self.variant_key = None

    def close(self) -> None:
        """Free the sampler copies and the batch (the engine frees the rest)."""
        for copies in self._copies.values():
            for copy in copies.values():
                self.lib.llama_sampler_free(copy)
            copies.clear()
        if self._batch is not None:
            self.lib.llama_batch_free(self._batch)
            self._batch = None
        self._slots.clear()

