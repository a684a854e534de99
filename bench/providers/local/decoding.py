"""Staged greedy grammar-constrained decoding of one answer of the embedded model, in the
worker process (llama_cpp already imported by :mod:`bench.providers.local.engine`).

An answer has the fixed shape ``{"tool_calls": [{"name": N, "arguments": A}, ...]}``. Rather
than sampling the whole answer under one grammar of every tool (which llama.cpp applies to the
whole 49k-token vocabulary at every step, and which made a row take seconds), the engine
(:class:`Decoding`):

1. writes the fixed JSON punctuation itself (its tokens are evaluated in one batch with
   the token before them: an evaluation is made only when logits are read, so a row
   costs one evaluation per chosen token, plus one for the case's prompt);
2. decodes the tool name under a grammar of the tool names only;
3. decodes the arguments under that one tool's JSON-Schema grammar;
4. decodes ``]}`` or ``, `` (another call, up to :data:`MAX_PARALLEL_CALLS`).

Each step is greedy (:class:`GreedyPicker`): it takes the most likely token and asks the
grammar about that token alone; only when the grammar rejects it is the grammar applied to the
whole vocabulary (the ``grammar_first=false`` path of llama.cpp's ``common_sampler_sample``,
ggml-org/llama.cpp ``common/sampling.cpp``). The most likely allowed token is the same either
way, so this changes speed, not answers.

Prompt-lookup speculation (optional, ``draft_tokens > 0``): tool names and argument values are
mostly copied from the prompt, so after each chosen token :func:`propose_draft` guesses the next
few tokens by finding the answer's last n-gram earlier in the context (prompt-lookup decoding,
Saxena 2023, github.com/apoorvumang/prompt-lookup-decoding; llama-cpp-python's
``LlamaPromptLookupDecoding``). The chosen token and the guesses are evaluated in one llama.cpp
batch with logits at every position; each guess is kept only while it is the token the greedy,
grammar-constrained step would choose there anyway, and the KV cache of the rest is removed
(``llama_memory_seq_rm``). This is exact greedy verification (Leviathan et al. 2023, "Fast
Inference from Transformers via Speculative Decoding", section 2.3 at temperature 0): answers
are the same as long as llama.cpp computes a token's logits the same in a batch as alone
(``benchmarks/speculative_decoding.py`` counts the rows that differ: 1 of 12 did, so it is off).

What an answer comes to (:class:`EngineAnswer`) and the prefix the KV cache shares
(:func:`common_prefix`) are here, below both the engine (:mod:`bench.providers.local.engine`)
and the batch decoder (:mod:`bench.providers.local.batching`), which answer with them: the
engine builds the batch decoder, which imports nothing of the engine.
"""

from __future__ import annotations

import ctypes
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Generator, Sequence

import numpy as np

from bench.providers.local.lookup import propose_draft
from bench.providers.local.prompt import MAX_PARALLEL_CALLS

if TYPE_CHECKING:  # imported in the worker with the model (the `local` extra)
    from llama_cpp import Llama
    from llama_cpp.llama_cpp import llama_sampler_p

# Candidates the grammar checks before the whole vocabulary when it rejects the top token.
TOP_K = 64
@dataclass
class PreparedVariant:
    """What one variant needs: its prompt prefix and grammars (built once per variant)."""
    system: str
    tool_tokens: int
    prefix: list[int]
    names: list[str]
    name_sampler: llama_sampler_p
    arg_samplers: dict[str, llama_sampler_p | None] = field(default_factory=dict)  # None: no arguments, "{}"
    state_file: Path | None = None
    label: str = "variant"
    transient: bool = False  # a per-case tool list, never saved (LocalEngine.prepare)


@dataclass
class EngineAnswer:
    """One decoded answer.

    Attributes:
        text: the answer's JSON text.
        finish_reason: ``stop``, ``length`` (the budget ran out) or ``error``.
        prompt_tokens / completion_tokens / cached_tokens: token counts (completion counts
            every answer token, the engine's punctuation included).
        sampled_tokens: tokens the model chose (the rest were written by the engine).
        full_grammar_passes: steps where the grammar rejected the most likely token.
        tool_tokens: tokens of the variant's tools block.
        error: why decoding stopped early (``finish_reason == "error"``), else None.
        drafted_tokens / accepted_tokens: tokens guessed by prompt-lookup speculation, and
            guesses kept (0 when it is off).
    """

    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    sampled_tokens: int
    full_grammar_passes: int
    tool_tokens: int = 0
    error: str | None = None
    drafted_tokens: int = 0
    accepted_tokens: int = 0


def common_prefix(first: Sequence[int] | np.ndarray, second: Sequence[int] | np.ndarray
                  ) -> int:
    """Length of the common start of two token sequences (lists or 1-d integer arrays)."""
    size = min(len(first), len(second))
    if not size:
        return 0
    a = np.asarray(first[:size], dtype=np.int64)
    b = np.asarray(second[:size], dtype=np.int64)
    different = np.flatnonzero(a != b)
    return int(different[0]) if different.size else size


class GreedyPicker:
    """The most likely token a grammar allows, read from the model's logits with llama.cpp's
    grammar sampler on candidate arrays reused every step.

    Args:
        llm: the loaded model (the logits of its context's last token are read).
        top_first: ask the grammar about the most likely tokens before the whole vocabulary
            (same answers, faster); False applies it to the whole vocabulary at every step.
    """

    def __init__(self, llm: Llama, top_first: bool = True) -> None:
        import llama_cpp  # the worker has imported it with the model
        self.lib = llama_cpp
        self._ctx = llm._ctx.ctx
        self.vocab = llm._model.vocab
        self.n_vocab = llm.n_vocab()
        self.top_first = top_first
        # one candidate (the most likely token) and the whole vocabulary, reused every step
        self._one = llama_cpp.llama_token_data()
        self._one_array = llama_cpp.llama_token_data_array(
            data=ctypes.pointer(self._one), size=1, selected=-1, sorted=False)
        self._all = (llama_cpp.llama_token_data * self.n_vocab)()
        self._all_np = np.ctypeslib.as_array(self._all)
        self._all_np["id"] = np.arange(self.n_vocab, dtype=np.int32)
        self._all_array = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._all, ctypes.POINTER(llama_cpp.llama_token_data)),
            size=self.n_vocab, selected=-1, sorted=False)

    def logits(self, index: int = -1) -> np.ndarray:
        """Logits after the token at ``index`` of the last evaluated batch (-1: its last
        token): ``n_vocab`` floats (a view of llama.cpp's buffer, valid until the next
        evaluation). The batch must have asked for that token's logits."""
        pointer = self.lib.llama_get_logits_ith(self._ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(self.n_vocab,))

    def pick(self, sampler: llama_sampler_p, logits: np.ndarray) -> tuple[int | None, bool]:
        """Greedy token allowed by the grammar ``sampler`` over ``logits``, and whether the grammar
        was applied beyond the top token: (token, full pass); (None, True) when it allows none."""
        if not self.top_first:
            return self._pick_whole(sampler, logits)
        token = int(np.argmax(logits))
        # ctypes converts an int and a pointer to the fields' C types (llama_cpp annotates the
        # fields with those types, c_int32 and an array, for the checker)
        self._one.id = token  # type: ignore[assignment]
        self._one.logit, self._one.p = float(logits[token]), 0.0
        self._one_array.data = ctypes.pointer(self._one)  # type: ignore[assignment]
        self._one_array.size, self._one_array.selected = 1, -1
        self.lib.llama_sampler_apply(sampler, ctypes.byref(self._one_array))
        if self._one.logit != float("-inf"):
            return token, False
        # The best allowed token among the TOP_K most likely is the best allowed overall
        # whenever one of them is allowed: check those before the whole vocabulary.
        top = np.argpartition(logits, -TOP_K)[-TOP_K:]
        top = top[np.lexsort((top, -logits[top]))]  # by logit, ties by id as argmax breaks them
        few = self._all_np[:TOP_K]
        few["id"], few["logit"] = top, logits[top]
        self._all_array.size, self._all_array.selected = TOP_K, -1
        self.lib.llama_sampler_apply(sampler, ctypes.byref(self._all_array))
        allowed = np.flatnonzero(few["logit"] != float("-inf"))
        self._all_np["id"][:TOP_K] = np.arange(TOP_K, dtype=np.int32)
        # (a tie with the weakest candidate might hide an equal token outside the TOP_K)
        if allowed.size and logits[top[allowed[0]]] > logits[top[-1]]:
            return int(top[allowed[0]]), True
        return self._pick_whole(sampler, logits)

    def _pick_whole(self, sampler: llama_sampler_p, logits: np.ndarray) -> tuple[int | None, bool]:
        """The grammar applied to the whole vocabulary; the best allowed token."""
        self._all_np["logit"] = logits
        self._all_array.size, self._all_array.selected = self.n_vocab, -1
        self.lib.llama_sampler_apply(sampler, ctypes.byref(self._all_array))
        masked = self._all_np["logit"]
        token = int(np.argmax(masked))
        return (None if masked[token] == float("-inf") else token), True


class Decoding:
    """The state of one answer being decoded (text so far, token counts).

    Args:
        llm: the loaded model, its context holding the prompt (the answer is evaluated on).
        picker: chooses each token.
        max_tokens: budget of tokens the model chooses (the punctuation written is not
            counted).
        first: the grammar before the first call (``]}`` or ``{``: the empty list allowed).
        more: the grammar after a call (``]}`` or ``, ``: another call).
        draft_tokens: the most tokens guessed by prompt lookup and verified in one batch
            after each chosen token (see the module docstring); 0 evaluates one token at a
            time.
        pending: prompt tokens not yet evaluated (evaluated with the first punctuation).

    Attributes:
        drafted / accepted: tokens guessed, and guessed tokens kept (the chosen ones).
    """

    def __init__(self, llm: Llama, picker: GreedyPicker, max_tokens: int, *,
                 first: llama_sampler_p, more: llama_sampler_p, draft_tokens: int = 0,
                 pending: Sequence[int] = ()) -> None:
        self.llm = llm
        self.pending = list(pending)  # tokens of the answer's context not yet evaluated
        self.picker = picker
        self.first, self.more = first, more
        self.budget = max_tokens
        self.draft_tokens = max(0, draft_tokens)
        self.text = bytearray()
        self.forced = self.sampled = self.full_passes = 0
        self.drafted = self.accepted = 0
        self.error: str | None = None
        self.started = time.perf_counter()
        # the sampler actually used for a grammar: itself here; a batch gives each sequence
        # its own copies (a grammar sampler holds its parse state)
        self.own: Callable[[llama_sampler_p], llama_sampler_p] = lambda sampler: sampler

    def force(self, text: str) -> None:
        """Write ``text`` into the answer: none of its tokens is sampled; they are evaluated
        when logits are next read (:meth:`flush`)."""
        tokens = self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        self.pending += tokens
        self.text += text.encode("utf-8")
        self.forced += len(tokens)

    def flush(self) -> None:
        """Evaluate the pending tokens in one batch (the logits of the last are then read)."""
        if self.pending:
            self.llm.eval(self.pending)
            self.pending = []

    def decode(self, sampler: llama_sampler_p, done: Callable[[bytes | bytearray], bool]) -> str | None:
        """Sample under ``sampler`` until ``done(segment)``; None on success, else the finish
        reason (``length`` or ``error``). Evaluates with ``llm.eval`` (:meth:`drive`)."""
        return self.drive(self.decode_steps(sampler, done))

    def drive(self, steps: Generator[list[int], np.ndarray, str | None]) -> str | None:
        """Run a step generator (:meth:`decode_steps`, :meth:`steps`) on this process's
        context alone: each list of tokens it yields is evaluated with ``llm.eval`` (none when
        empty) and the logits after its last token are sent back; returns its value."""
        try:
            tokens = next(steps)
            while True:
                if tokens:
                    self.llm.eval(tokens)
                tokens = steps.send(self.picker.logits())
        except StopIteration as stop:
            value: str | None = stop.value
            return value

    def decode_steps(self, sampler: llama_sampler_p, done: Callable[[bytes | bytearray], bool]
                     ) -> Generator[list[int], np.ndarray, str | None]:
        """:meth:`decode` as a generator: yields the tokens to evaluate next (the logits after
        the last are wanted) and is sent those logits, so a caller can evaluate many answers'
        tokens in one batch (:mod:`bench.providers.local.batching`). With ``draft_tokens``
        it decodes on ``llm`` directly and yields nothing."""
        if self.draft_tokens:
            self.flush()
            return self._decode_drafted(sampler, done)
        llm, picker, lib = self.llm, self.picker, self.picker.lib
        sampler = self.own(sampler)
        lib.llama_sampler_reset(sampler)
        segment = bytearray()
        while True:
            if self.sampled >= self.budget:
                return "length"
            tokens, self.pending = self.pending, []
            logits = yield tokens
            token, full = picker.pick(sampler, logits)
            self.full_passes += full
            if token is None:
                self.error = "the grammar allows no token"
                return "error"
            if lib.llama_vocab_is_eog(picker.vocab, token):
                return None  # the grammar is complete
            lib.llama_sampler_accept(sampler, token)
            piece = llm.detokenize([token])
            segment += piece
            self.text += piece
            self.sampled += 1
            self.pending.append(token)  # evaluated with what follows, if anything does
            if done(segment):
                return None

    def _decode_drafted(self, sampler: llama_sampler_p,
                        done: Callable[[bytes | bytearray], bool]) -> str | None:
        """:meth:`decode` with prompt-lookup guesses verified in batches: the same tokens,
        the same grammar steps, the same stop, fewer llama.cpp evaluations when guesses hold.

        Each step picks the greedy allowed token from the logits at its position exactly as
        :meth:`decode` does. When the token was guessed and is already in the KV cache, its
        logits are read from the batch; otherwise the guesses still ahead are dropped from the
        cache and the token is evaluated with new guesses after it.
        """
        llm, picker, lib = self.llm, self.picker, self.picker.lib
        lib.llama_sampler_reset(sampler)
        segment = bytearray()
        logits = picker.logits()
        ahead: list[tuple[int, int]] = []  # (guessed token, its index in the last batch)
        try:
            while True:
                if self.sampled >= self.budget:
                    return "length"
                token, full = picker.pick(sampler, logits)
                self.full_passes += full
                if token is None:
                    self.error = "the grammar allows no token"
                    return "error"
                if lib.llama_vocab_is_eog(picker.vocab, token):
                    return None  # the grammar is complete
                lib.llama_sampler_accept(sampler, token)
                piece = llm.detokenize([token])
                segment += piece
                self.text += piece
                self.sampled += 1
                finished = done(segment)
                if ahead and ahead[0][0] == token:  # guessed right: already evaluated
                    index = ahead.pop(0)[1]
                    llm.n_tokens += 1
                    self.accepted += 1
                    logits = picker.logits(index)
                else:
                    ahead.clear()
                    draft: list[int] = []
                    if not finished and self.sampled < self.budget:
                        history = np.empty(llm.n_tokens + 1, dtype=np.int64)
                        history[:-1] = llm.input_ids[:llm.n_tokens]
                        history[-1] = token
                        draft = propose_draft(history, min(self.draft_tokens,
                                                           self.budget - self.sampled,
                                                           llm.n_batch - 1))
                    self._evaluate([token, *draft])
                    self.drafted += len(draft)
                    ahead = [(guess, i + 1) for i, guess in enumerate(draft)]
                    logits = picker.logits(0)
                if finished:
                    return None
        finally:
            self._drop_ahead()

    def _evaluate(self, tokens: list[int]) -> None:
        """Evaluate ``tokens`` after the accepted ones in one batch with logits at every
        position; the first counts as accepted (``llm.n_tokens`` grows by one), the rest stay
        in the KV cache until accepted or dropped (:meth:`_drop_ahead`).

        Raises:
            RuntimeError: llama.cpp's ``llama_decode`` fails (as ``Llama.eval`` raises).
        """
        llm, lib = self.llm, self.picker.lib
        self._drop_ahead()
        batch, start = llm._batch.batch, llm.n_tokens  # room for n_batch tokens
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = start + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = True
        code = lib.llama_decode(self.picker._ctx, batch)
        if code != 0:
            raise RuntimeError(f"llama_decode returned {code}")
        llm.input_ids[start:start + len(tokens)] = tokens
        llm.n_tokens = start + 1

    def _drop_ahead(self) -> None:
        """Remove from the KV cache every position past the accepted tokens."""
        lib = self.picker.lib
        lib.llama_memory_seq_rm(lib.llama_get_memory(self.picker._ctx), 0, self.llm.n_tokens, -1)

    def answer(self, variant: PreparedVariant, empty_allowed: bool) -> str:
        """Decode a whole answer on this process's context alone; return its finish reason."""
        reason = self.drive(self.steps(variant, empty_allowed))
        assert reason is not None  # steps() always ends with a finish reason
        return reason

    def steps(self, variant: PreparedVariant, empty_allowed: bool
              ) -> Generator[list[int], np.ndarray, str | None]:
        """:meth:`answer` as a step generator (see :meth:`decode_steps`); returns the finish
        reason (``stop``, ``length`` or ``error``)."""
        self.force('{"tool_calls": [')
        if empty_allowed:
            reason = yield from self.decode_steps(self.first, lambda seg: seg in (b"]}", b"{"))
            if reason:
                return reason
            if self.text.endswith(b"]}"):
                return "stop"
            self.force('"name": "')
        else:
            self.force('{"name": "')
        names = [n.encode("utf-8") + b'"' for n in variant.names]
        for index in range(MAX_PARALLEL_CALLS):
            start = len(self.text)
            reason = yield from self.decode_steps(variant.name_sampler,
                                                  lambda seg: _one_name_left(seg, names))
            if reason:
                return reason
            chosen = bytes(self.text[start:])
            if not chosen.endswith(b'"'):  # one name fits what was decoded: write the rest
                rest = next(n for n in names if n.startswith(chosen))[len(chosen):]
                self.force(rest.decode("utf-8"))
            name = self.text[start:-1].decode("utf-8", errors="replace")
            self.force(', "arguments": ')
            sampler = variant.arg_samplers.get(name)
            if sampler is None:
                self.force("{}")
            else:
                reason = yield from self.decode_steps(sampler, _closes_object)
                if reason:
                    return reason
            self.force("}")
            if index == MAX_PARALLEL_CALLS - 1:
                break
            before = len(self.text)
            reason = yield from self.decode_steps(self.more, lambda seg: seg in (b"]}", b", "))
            if reason:
                return reason
            if self.text[before:] == b"]}":
                return "stop"
            self.force('{"name": "')
        self.force("]}")
        return "stop"


def _one_name_left(segment: bytes | bytearray, names: list[bytes]) -> bool:
    """True once the decoded part of a tool name (``segment``) fits only one name."""
    return segment.endswith(b'"') or sum(n.startswith(segment) for n in names) == 1


def _closes_object(segment: bytes | bytearray) -> bool:
    """True once ``segment`` (JSON text starting at ``{``) has closed its outer object."""
    depth, in_string, escaped = 0, False, False
    for byte in segment:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x7B, 0x5B):
            depth += 1
        elif byte in (0x7D, 0x5D):
            depth -= 1
            if depth == 0:
                return True
    return False
