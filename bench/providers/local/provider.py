"""The embedded ``local`` provider: a small GGUF model through llama-cpp-python, no key, no network.

The model runs in a worker process (:mod:`bench.providers.local.worker`) so that a native crash
or hang in llama.cpp becomes one line naming the case and the signal, with every finished row
kept, instead of the end of the run. Decoding (:mod:`bench.providers.local.engine`) is greedy
and constrained by grammars built from the tools' JSON Schemas, so every answer parses into
tool calls of existing tools with schema-shaped arguments.

Prefix reuse: the system message starts with the tools block, which is byte-identical for every
case of a variant, and the runner processes cases grouped by variant, so llama.cpp keeps the
tools block in its KV cache and only evaluates each case's own tokens.

Batching (``batch`` > 1, :func:`~bench.providers.local.settings.resolve_batch`): the run sends
``batch`` requests at once (:attr:`LocalProvider.max_concurrency`); one thread of the provider
(:meth:`LocalProvider._pump`) writes them to the worker with ids and hands each answer back as
it comes, and the worker decodes the ones of one variant together over the shared tools block
(:mod:`bench.providers.local.batching`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import importlib.util
import multiprocessing
import os
import sys
import threading
import time
from multiprocessing.connection import wait as wait_for
from typing import Any, Sequence

from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import PROVIDER_ERROR, ParsedAnswer, parse_json_tool_calls
from bench.providers.base import Provider, ProviderResponse, Usage
from bench.providers.errors import ProviderError
from bench.providers.local.prompt import DEFAULT_NO_CALL_LAYOUT, NO_CALL_LAYOUTS
from bench.providers.local.settings import (ANSWER_TIMEOUT_S, DEFAULT_MAX_TOKENS, DEFAULT_N_CTX,
                                            DEFAULT_SEED, LOAD_TIMEOUT_S, resolve_batch,
                                            resolve_draft_tokens, resolve_model_path,
                                            resolve_threads)
from bench.providers.worker_process import signal_name


def likely_cause(reason: str) -> str:
    """What a worker death most likely means, from how it died (:func:`signal_name`).

    SIGKILL comes from outside (the kernel's out-of-memory killer, a container limit, a
    user), not from llama.cpp; a hang is ours to detect; the rest are faults in native code.
    """
    if reason.startswith("SIGKILL"):
        return "it was killed from outside (often the out-of-memory killer: see dmesg)"
    if reason.startswith("no answer"):
        return "a hang in llama.cpp's native code or a machine far too loaded"
    return "a crash in llama.cpp's native code"


class WorkerDied(Exception):
    """The model's worker process died or hung; ``reason`` says how (e.g. ``SIGSEGV``)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class LocalProvider(Provider):
    """A GGUF model (default: Qwen2.5-Coder-0.5B-Instruct) in a worker process, greedy, fixed seed.

    Args:
        model_path: a GGUF file (see :func:`resolve_model_path`).
        seed: sampling seed (decoding is greedy at temperature 0, the seed makes it explicit).
        max_tokens: budget of tokens the model chooses per answer; an answer that exhausts it
            is cut and invalid.
        n_ctx: context window in tokens (default :data:`DEFAULT_N_CTX`).
        no_call_layout: key of :data:`NO_CALL_LAYOUTS`.
        threads: CPU threads (see :func:`resolve_threads`).
        model: a preset of :data:`bench.providers.local.models.MODEL_PRESETS`.
        answer_timeout_s: seconds one answer may take before the worker counts as hung.
        speculative: prompt-lookup speculative decoding (same answers, fewer model
            evaluations): True/False or the count of tokens guessed per step; None reads
            ``$BENCH_LOCAL_SPECULATIVE`` (see :func:`resolve_draft_tokens`).
        batch: answers decoded at once (1: one at a time); None reads ``$BENCH_LOCAL_BATCH``,
            else :data:`~bench.providers.local.settings.DEFAULT_BATCH` (see
            :func:`resolve_batch`). It is also the provider's :attr:`max_concurrency`, so the
            run keeps that many requests in flight. Speculation applies only to answers
            decoded alone (batch 1).

    When the worker dies (a signal such as SIGSEGV, or no answer within ``answer_timeout_s``)
    the provider starts a new one and asks again, once per provider; a second death raises.

    Raises:
        BenchError: llama-cpp-python is missing, the model file is missing or fails to load.
        ProviderError: (class ``permanent``, from :meth:`complete`) the worker died twice.
    """

    provider_id = "local"

    def __init__(self, model_path: str | None = None, *, seed: int = DEFAULT_SEED,
                 max_tokens: int = DEFAULT_MAX_TOKENS, n_ctx: int = DEFAULT_N_CTX,
                 no_call_layout: str = DEFAULT_NO_CALL_LAYOUT,
                 threads: int | None = None, model: str | None = None,
                 answer_timeout_s: float = ANSWER_TIMEOUT_S,
                 speculative: bool | int | None = None, batch: int | None = None) -> None:
        if no_call_layout not in NO_CALL_LAYOUTS:
            raise BenchError(f"unknown no-call layout '{no_call_layout}' "
                             f"(known: {', '.join(NO_CALL_LAYOUTS)})")
        self.model_path = resolve_model_path(model_path, model)
        self.preset = model
        if importlib.util.find_spec("llama_cpp") is None:
            raise BenchError("the local provider needs llama-cpp-python: "
                             "pip install -e '.[local]'")
        self.seed = seed
        self.max_tokens = max_tokens
        self.layout = NO_CALL_LAYOUTS[no_call_layout]
        self.n_ctx = n_ctx
        self.threads = resolve_threads(threads)
        self.draft_tokens = resolve_draft_tokens(speculative)
        self.batch = resolve_batch(batch)
        # the run keeps this many requests in flight, whatever --concurrency says (which
        # never applied to the embedded model): the worker's batch is filled
        self.max_concurrency = self.batch
        self.decodes_in_batches = self.batch > 1
        self.answer_timeout_s = answer_timeout_s
        self.restarts = 0
        self.system_info: dict[str, Any] = {}
        self._process: Any = None
        self._conn: Any = None
        self._sha256: str | None = None
        # complete() waits in this one thread, which lives as long as the provider: a worker
        # restarted from it dies with it (PR_SET_PDEATHSIG fires when the thread that started
        # the worker ends, and asyncio.to_thread's threads end with their event loop)
        self._owner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bench-local")
        # batch > 1: requests by id, not yet sent (outbox) or not yet answered (jobs)
        self._lock = threading.Lock()
        self._jobs: dict[int, tuple[tuple[Any, ...], concurrent.futures.Future[Any]]] = {}
        self._outbox: list[int] = []
        self._next_id = 0
        self._pumping = False
        self._wake_r, self._wake_w = multiprocessing.Pipe(duplex=False)
        self._start()

    @property
    def model_id(self) -> str:
        """The GGUF file name without its extension."""
        return self.model_path.stem

    # -- the worker ----------------------------------------------------------------------

    def _start(self, restart: bool = False) -> None:
        """Start the worker and wait until it has loaded the model.

        Raises:
            BenchError: the model fails to load, or the worker dies or hangs while loading.
            WorkerDied: (``restart``) the worker died or hung while loading.
        """
        from bench.providers.local.worker import serve
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        options = {"model_path": self.model_path, "n_ctx": self.n_ctx,
                   "threads": self.threads, "seed": self.seed, "layout": self.layout,
                   "speculative": self.draft_tokens, "batch": self.batch}
        process = context.Process(target=serve, args=(theirs, options, os.getpid()),
                                  name="bench-local-model", daemon=True)
        process.start()
        theirs.close()
        self._process, self._conn = process, ours
        try:
            reply = self._receive(LOAD_TIMEOUT_S)
        except KeyboardInterrupt:  # else the interpreter's exit would wait for it for good
            self._kill()
            raise
        except WorkerDied as died:
            self._stop()
            if restart:
                raise
            raise BenchError(f"the model process died while loading the model ({died.reason}); "
                             "run bench doctor", file=self.model_path) from None
        if reply[0] == "error":
            self._stop()
            raise BenchError(reply[1])
        self.system_info = reply[1]

    def _receive(self, timeout_s: float) -> tuple[Any, ...]:
        """The worker's next message.

        Raises:
            WorkerDied: it died (its signal or exit code) or sent nothing within ``timeout_s``.
        """
        ready = wait_for([self._conn, self._process.sentinel], timeout=timeout_s)
        if self._conn in ready:
            try:
                message: tuple[Any, ...] = self._conn.recv()
                return message
            except (EOFError, OSError):
                pass  # it closed the pipe: it is exiting; its exit code says why
        if not ready:
            self._process.kill()
            self._process.join(5)
            raise WorkerDied(f"no answer within {timeout_s:.0f} s (hung; killed)")
        self._process.join(5)
        raise WorkerDied(signal_name(self._process.exitcode))

    #: A stopping run waits no longer than its grace period (``STOP_GRACE_S`` in
    #: bench/runner/config.py) for an answer in flight, then kills the worker: a first row reads
    #: its tools block for minutes (docs/running.md); a resume redoes the row.
    stop_wait_s = 0.0
    _abandoned: str | None = None

    def abandon(self, why: str) -> None:
        """Kill the worker now; the request in flight and any later one raise
        :class:`~bench.providers.ratelimit.GateClosed` (their rows are not written)."""
        self._abandoned = why
        process = self._process
        if process is not None and process.is_alive():
            process.kill()

    def _kill(self) -> None:
        """Stop the worker at once (it ignores SIGINT and SIGTERM: see local_worker)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if process is not None:
            process.kill()
            process.join(5)
        if conn is not None:
            conn.close()

    def _after_death(self, died: WorkerDied) -> None:
        """The worker died: stop what is left of it and allow one restart per provider.

        Raises:
            GateClosed: it was killed by :meth:`abandon` (the run is stopping).
            ProviderError: it died again after its one restart (``permanent``).
        """
        from bench.providers.ratelimit import GateClosed

        self._stop()
        if self._abandoned:  # killed by abandon(): the run is stopping
            raise GateClosed(self._abandoned) from None
        if self.restarts >= 1:
            raise ProviderError(
                f"the model process died ({died.reason}) again after a restart: "
                f"{likely_cause(died.reason)}; run bench doctor",
                error_class="permanent") from None
        self.restarts += 1
        print(f"warning: the model process died ({died.reason}); restarting it once",
              file=sys.stderr, flush=True)

    def _stop(self) -> None:
        process, conn = self._process, self._conn
        self._process = self._conn = None
        if conn is not None:
            try:
                conn.send(("close",))
            except (OSError, ValueError):
                pass
            conn.close()
        if process is not None:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(5)

    def _request(self, *message: Any) -> Any:
        """Send a request to the worker and return its value; restart a dead worker once.

        Raises:
            BenchError: the worker reports bad input (e.g. a schema the grammar converter
                rejects).
            ProviderError: class ``permanent``: the worker died again after its restart.
        """
        from bench.providers.ratelimit import GateClosed
        if self.batch > 1:
            return self._call(*message).result()
        while True:
            if self._abandoned:
                raise GateClosed(self._abandoned)
            try:
                if self._process is None:
                    self._start(restart=True)
                try:
                    self._conn.send(message)
                except OSError:  # the pipe broke: the worker is gone; its exit code says why
                    self._process.join(5)
                    raise WorkerDied(signal_name(self._process.exitcode)) from None
                reply = self._receive(self.answer_timeout_s)
                while reply[0] == "note":  # slow work announced: say it, wait for the answer
                    print(f"local: {reply[1]}", file=sys.stderr, flush=True)
                    reply = self._receive(self.answer_timeout_s)
            except WorkerDied as died:
                self._after_death(died)
                continue
            if reply[0] == "error":
                raise BenchError(reply[1])
            return reply[1]

    def _call(self, op: str, *args: Any) -> concurrent.futures.Future[Any]:
        """(batch > 1) Queue a request for the worker; its future gets the value, or the
        error :meth:`_request` would raise. Starts :meth:`_pump` in the provider's thread
        when it is not running, else wakes it."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            self._next_id += 1
            self._jobs[self._next_id] = ((op, *args), future)
            self._outbox.append(self._next_id)
            start, self._pumping = not self._pumping, True
        if start:
            self._owner.submit(self._pump)
        else:
            self._wake_w.send_bytes(b"")
        return future

    def _pump(self) -> None:
        """(batch > 1) Send queued requests to the worker and settle each one's future as its
        answer comes, until none is left; restart a dead worker once and send it every
        unanswered request again (as :meth:`_request` does for one).

        A request fails with :class:`~bench.providers.ratelimit.GateClosed` after
        :meth:`abandon`, :class:`ProviderError` (class ``permanent``) when the worker died
        again after its restart, :class:`BenchError` when the worker reports bad input. The
        worker counts as hung when it sends nothing for ``answer_timeout_s`` while requests
        wait.
        """
        from bench.providers.ratelimit import GateClosed
        try:
            while True:
                with self._lock:
                    sending, self._outbox = self._outbox, []
                    if not self._jobs:
                        self._pumping = False
                        return
                if self._abandoned:
                    raise GateClosed(self._abandoned)
                try:
                    self._exchange(sending)
                except WorkerDied as died:
                    self._after_death(died)
                    with self._lock:
                        self._outbox = sorted(self._jobs)  # all again, to the new worker
        except BaseException as exc:  # every waiting request learns why, then the pump ends
            with self._lock:
                jobs, self._jobs, self._outbox = self._jobs, {}, []
                self._pumping = False
            for _, future in jobs.values():
                future.set_exception(exc)

    def _exchange(self, sending: list[int]) -> None:
        """Send the requests ``sending`` (ids), then wait for the worker's next message or a
        new request; settle the future a message answers.

        Raises:
            WorkerDied: the worker died, broke the pipe or sent nothing in time.
        """
        if self._process is None:
            self._start(restart=True)
        for request_id in sending:
            message = self._jobs[request_id][0]
            try:
                self._conn.send(("call", request_id, *message))
            except OSError:
                self._process.join(5)
                raise WorkerDied(signal_name(self._process.exitcode)) from None
        ready = wait_for([self._conn, self._process.sentinel, self._wake_r],
                         timeout=self.answer_timeout_s)
        if self._wake_r in ready:
            while self._wake_r.poll():
                self._wake_r.recv_bytes()
            if self._conn not in ready:
                return
        if self._conn not in ready:
            if not ready:
                self._process.kill()
                self._process.join(5)
                raise WorkerDied(f"no answer within {self.answer_timeout_s:.0f} s (hung; killed)")
            self._process.join(5)
            raise WorkerDied(signal_name(self._process.exitcode))
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(5)
            raise WorkerDied(signal_name(self._process.exitcode)) from None
        if reply[0] == "note":
            print(f"local: {reply[1]}", file=sys.stderr, flush=True)
            return
        with self._lock:
            job = self._jobs.pop(reply[1], None)
        if job is None:
            return
        if reply[0] == "error":
            job[1].set_exception(BenchError(reply[2]))
        else:
            job[1].set_result(reply[2])

    # -- the provider interface ----------------------------------------------------------

    def prepare(self, tools: Sequence[Tool], *, variant_key: str, label: str = "variant") -> None:
        """Build the variant's grammars in the worker; see :meth:`Provider.prepare`.

        Raises:
            BenchError: llama.cpp's converter rejects a tool's JSON Schema (e.g. an unanchored
                ``pattern``, a ``$ref`` it cannot resolve, ``not``), naming the tool.
        """
        self._request("prepare", list(tools), variant_key, label)

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                       variant_key: str, trial: int) -> ProviderResponse:
        """Generate one grammar-constrained answer; see :meth:`Provider.complete`.

        The worker process generates; this waits for its answer in the provider's own thread
        so that the run's event loop stays free.

        Raises:
            ProviderError: class ``permanent``: the model process died twice.
            GateClosed: the run stopped and :meth:`abandon` killed the worker.
        """
        if self.batch > 1:  # the worker batches it with the other requests in flight
            started = time.perf_counter()
            answer = await asyncio.wrap_future(self._call(
                "submit", list(messages), list(tools), variant_key, self.max_tokens))
            return self._response(answer, self._request_fields(messages, tools, trial),
                                  time.perf_counter() - started)
        return await asyncio.get_running_loop().run_in_executor(
            self._owner, functools.partial(self.complete_blocking, messages, tools,
                                           variant_key=variant_key, trial=trial))

    def complete_blocking(self, messages: Sequence[Message], tools: Sequence[Tool], *,
                          variant_key: str, trial: int) -> ProviderResponse:
        """:meth:`complete` in the calling thread (waits for the worker's answer).

        Raises:
            ProviderError: class ``permanent``: the model process died twice.
            GateClosed: :meth:`abandon` killed the worker.
        """
        request = self._request_fields(messages, tools, trial)
        started = time.perf_counter()
        answer = self._request("complete", list(messages), list(tools), variant_key,
                               self.max_tokens)
        return self._response(answer, request, time.perf_counter() - started)

    def _request_fields(self, messages: Sequence[Message], tools: Sequence[Tool], trial: int
                        ) -> dict[str, Any]:
        """The request as recorded in a response (model, tools, settings)."""
        return {"model": self.model_id, "tools": [t.name for t in tools],
                "tool_choice": "auto", "no_call_layout": self.layout.name,
                "n_messages": len(messages) + 1, "temperature": 0.0,
                "seed": self.seed + trial, "max_tokens": self.max_tokens}

    def _response(self, answer: Any, request: dict[str, Any], latency: float
                  ) -> ProviderResponse:
        """A :class:`ProviderResponse` from the engine's answer (an ``EngineAnswer``)."""
        tool_tokens = answer.tool_tokens
        if answer.finish_reason == "error":
            # One case's failure is that case's result (an invalid answer), not the run's end.
            return ProviderResponse(raw=None,
                                    parsed=ParsedAnswer(error=f"provider error: {answer.error}",
                                                        error_code=PROVIDER_ERROR),
                                    finish_reason="error", latency_s=latency,
                                    tool_definition_tokens=tool_tokens, request=request)
        return ProviderResponse(
            raw=answer.text,
            parsed=parse_json_tool_calls(answer.text, answer.finish_reason,
                                         self.layout.decline_tool),
            finish_reason=answer.finish_reason,
            usage=Usage(prompt_tokens=answer.prompt_tokens,
                        completion_tokens=answer.completion_tokens,
                        cached_tokens=min(answer.cached_tokens, answer.prompt_tokens)),
            latency_s=latency,
            tool_definition_tokens=tool_tokens,
            request=request,
        )

    def speed(self, prompt_tokens: int = 512, decode_tokens: int = 32) -> dict[str, float]:
        """Prompt reading and decoding speed in tokens/s, measured in the worker (see
        :meth:`bench.providers.local.engine.LocalEngine.speed`).

        Raises:
            ProviderError: the model process died twice.
        """
        measured: dict[str, float] = self._request("speed", prompt_tokens, decode_tokens)
        return measured

    def start_notes(self) -> list[str]:
        """``bench doctor``'s quick checks that warn (:func:`bench.providers.local.machine.
        quick_checks`) and what the first row of a variant costs.

        Raises:
            BenchError: a check that the run would crash or could not be trusted, with its fix.
        """
        from bench.providers.local.machine import quick_checks
        notes = [f"warning: {finding.text}; {finding.fix}" for finding in quick_checks(self)
                 if finding.level == "warn"]
        return [*notes, f"local: model {self.model_id}; the first row of a variant reads its "
                        "tools block (minutes, unless saved by an earlier run)"]

    def describe(self) -> dict[str, Any]:
        """Model id, file path and SHA-256, settings, llama.cpp build; see
        :meth:`Provider.describe`."""
        if self._sha256 is None:
            from bench.providers.local.files import file_sha256
            self._sha256 = file_sha256(self.model_path)
        return {"provider": self.provider_id, "model": self.model_id,
                "model_path": str(self.model_path), "model_sha256": self._sha256,
                "model_preset": self.preset,
                "seed": self.seed, "temperature": 0.0, "max_tokens": self.max_tokens,
                "n_ctx": self.n_ctx, "no_call_layout": self.layout.name,
                "threads": self.threads, "decode_batch": self.batch, **self.system_info,
                "decoding": "greedy, staged: tool name, then that tool's JSON-Schema grammar"}

    def close(self) -> None:
        """Stop the worker (it frees the model) and the provider's thread."""
        self._stop()
        self._owner.shutdown(wait=False)
        self._wake_r.close()
        self._wake_w.close()

