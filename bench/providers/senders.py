"""SDK calls in worker processes: :class:`SenderPool` runs an HTTP provider's ``send`` in
``processes`` child processes of ``threads`` threads each.

Why: a Python process runs one thread at a time (the GIL). At concurrency 32 against a server
that answers in 100 ms, the SDK's own work (building the request with httpx, HTTP/1.1 parsing
with h11: 1.1 ms CPU per request on one thread, 1.5-2.7 ms with 32 threads sharing the lock)
and bench's scoring and execution of each answer compete for that one lock, and requests
queue for it: one process reached 75-93% of 320 requests/s depending on the machine's speed,
where sending from worker processes left bench's process with about 1.5 ms per request
(``benchmarks/provider_throughput.py``). The runner uses a pool when ``--sender-processes``
asks for one, by default at ``--concurrency`` 16 and more (:func:`default_sender_processes`).

Each child builds its own copy of the provider (same class, same :class:`HTTPOptions`; the API
key is read from the inherited environment, never passed or written anywhere) and calls its
``send``; bodies go to the child and (JSON answer, lower-cased headers) come back by pickle
over pipes. A :class:`ProviderError` raised in a child is raised again here with the same
class, status, ``retry_after_s`` and request id, so retries and rate limits work as in one
process. Children are plain ``python -P -m bench.providers.senders`` subprocesses (not
``multiprocessing``, whose ``spawn`` re-imports the caller's main script) with this process's
import path, in their own session and ignoring SIGINT (the run stops them: they exit when their
request pipe closes); their stderr is kept for error messages. Requests go to the least busy
child.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import signal
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from multiprocessing.connection import Connection
from typing import Any, Callable, Mapping

from bench.errors import BenchError
from bench.providers.base import HTTPProvider
from bench.providers.errors import ProviderError

AUTO_MIN_CONCURRENCY = 16  # below it one process keeps up (benchmarks/provider_throughput.py)
AUTO_PROCESSES = 2
JOIN_TIMEOUT_S = 10.0
ANSWER_MARGIN_S = 30.0
START_TIMEOUT_S = 120.0  # a cold start imports the SDK (~1 s here; slow disks take longer)


def default_sender_processes(concurrency: int) -> int:
    """Worker processes used when the user does not choose: :data:`AUTO_PROCESSES` at
    ``concurrency`` >= :data:`AUTO_MIN_CONCURRENCY`, else 0 (threads in the run's process)."""
    if sys.platform == "win32":  # the children's pipes are passed as inherited descriptors
        return 0
    return AUTO_PROCESSES if concurrency >= AUTO_MIN_CONCURRENCY else 0


def _child(requests: Connection, results: Connection) -> None:
    """A worker process: build the provider described by the first message, then answer each
    ``(id, body)`` read from ``requests`` on ``results``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run decides when its children stop
    lock = threading.Lock()

    def reply(message: tuple[Any, ...]) -> None:
        with lock:
            try:
                results.send(message)  # pickles first: a failure writes nothing
            except OSError:  # the run is gone; nobody waits for this answer
                pass
            except Exception as exc:  # noqa: BLE001 - e.g. RecursionError: a deeply nested answer
                try:
                    results.send((message[0], "failed", "the answer cannot be passed back "
                                  f"({type(exc).__name__}: {exc})"))
                except OSError:
                    pass

    try:
        provider_class, options, provider_id, threads = requests.recv()
        provider = provider_class(options, provider_id=provider_id)
    except (EOFError, OSError):
        return
    except Exception as exc:  # noqa: BLE001 - the pool reports it and stops
        reply((None, "not started", f"{type(exc).__name__}: {exc}"))
        return
    reply((None, "ready"))

    def answer(request_id: int, body: dict[str, Any]) -> None:
        try:
            data, headers = provider.send(body)
        except ProviderError as exc:
            reply((request_id, "error", exc))
        except Exception as exc:  # noqa: BLE001 - adapters classify; this is a bug report
            reply((request_id, "failed", f"{type(exc).__name__}: {exc}"))
        else:
            reply((request_id, "ok", data, {str(k).lower(): str(v)
                                            for k, v in dict(headers or {}).items()}))

    with ThreadPoolExecutor(max_workers=threads) as pool:
        while True:
            try:
                request_id, body = requests.recv()
            except (EOFError, OSError):  # the run closed the pool: finish what is in flight
                break
            pool.submit(answer, request_id, body)
    provider.close()


class _Worker:
    """One child process: a writer thread feeding its request pipe (so that a stuck child
    blocks no caller), a reader thread resolving its answers, and the tail of its stderr."""

    def __init__(self, provider: HTTPProvider, threads: int, pending: dict[int, Future],
                 index: int) -> None:
        self.name = f"sender process {index + 1}"
        child_requests, requests = os.pipe()
        results, child_results = os.pipe()
        # The child imports what this process imports: its path, not the working folder's
        # modules (-P), which could shadow the SDK or bench itself.
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-P", "-m", "bench.providers.senders", str(child_requests),
                 str(child_results)], pass_fds=(child_requests, child_results),
                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                env={**os.environ, "PYTHONPATH": path})
        finally:
            os.close(child_requests)
            os.close(child_results)
        self.requests = Connection(requests, readable=False)
        self.results = Connection(results, writable=False)
        self.pending = pending
        self.mine: set[int] = set()
        self.ready = threading.Event()
        self.start_error: str | None = None
        self.stderr: deque[str] = deque(maxlen=20)
        self._outbox: queue.SimpleQueue[tuple[int, dict[str, Any]] | None] = \
            queue.SimpleQueue()
        try:
            self.requests.send((type(provider), provider.options, provider.provider_id,
                                threads))
        except (OSError, pickle.PicklingError, AttributeError, TypeError) as exc:
            self.start_error = f"cannot pass the provider to it ({exc})"
            self.ready.set()
        self._threads = [threading.Thread(target=target, name=f"bench-{self.name}-{role}",
                                          daemon=True)
                         for role, target in (("reader", self._read), ("writer", self._write),
                                              ("stderr", self._drain_stderr))]
        for thread in self._threads:
            thread.start()

    def exit_code(self) -> int | None:
        """The child's exit code once it has exited (waits up to 2 s for it), else None."""
        try:
            return self.process.wait(2.0)
        except subprocess.TimeoutExpired:
            return None

    def why(self, what: str) -> str:
        """``what`` with the child's exit code and the last line it wrote to stderr."""
        code = self.exit_code()
        last = next((line for line in reversed(self.stderr) if line.strip()), "")
        return f"{self.name} {what} (exit code {code}{'; ' + last.strip() if last else ''})"

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line.decode("utf-8", "replace")[:500])
        self.process.stderr.close()

    def _write(self) -> None:
        while (item := self._outbox.get()) is not None:
            request_id, body = item
            try:
                self.requests.send(item)  # pickles first: a failure writes nothing
            except (OSError, ValueError):  # the child is gone: fail this and what follows
                self.fail(request_id, ProviderError(self.why("is gone"),
                                                    error_class="permanent"))
            except Exception as exc:  # noqa: BLE001 - e.g. RecursionError: a deeply nested body
                self.fail(request_id, ProviderError(
                    f"the request cannot be passed to {self.name} ({type(exc).__name__}: "
                    f"{exc})", error_class="validation"))
        self.requests.close()

    def _read(self) -> None:
        while True:
            try:
                message = self.results.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - whose answer it was is unknown
                self._fail_all(f"{self.name}: an answer could not be read "
                               f"({type(exc).__name__}: {exc})")
                continue
            request_id, kind = message[0], message[1]
            if request_id is None:  # the child's start: "ready" or "not started"
                self.start_error = message[2] if kind != "ready" else None
                self.ready.set()
            elif kind == "ok":
                self.resolve(request_id, lambda f: f.set_result((message[2], message[3])))
            elif kind == "error":  # the child's ProviderError, unpickled as it was
                self.fail(request_id, message[2])
            else:
                self.fail(request_id, ProviderError(f"{self.name}: {message[2]}",
                                                    error_class="permanent"))
        self.results.close()
        if not self.ready.is_set():
            self.start_error = self.why("exited while starting")
            self.ready.set()
        self._fail_all(self.why("exited before answering"))

    def resolve(self, request_id: int, settle: Callable[[Future], None]) -> None:
        """Settle a request's future once (a late answer to a timed-out request is dropped)."""
        self.mine.discard(request_id)
        future = self.pending.pop(request_id, None)
        if future is not None and not future.done():
            settle(future)

    def fail(self, request_id: int, error: ProviderError) -> None:
        """Fail one request with ``error``."""
        self.resolve(request_id, lambda f: f.set_exception(error))

    def _fail_all(self, why: str) -> None:
        for request_id in list(self.mine):
            self.fail(request_id, ProviderError(why, error_class="permanent"))

    def submit(self, request_id: int, body: dict[str, Any]) -> None:
        """Queue a request for the writer thread (never blocks)."""
        self.mine.add(request_id)
        self._outbox.put((request_id, body))

    def close(self) -> None:
        """Ask the writer to close the request pipe once the queue is written."""
        self._outbox.put(None)

    def join(self, timeout_s: float) -> None:
        """Wait for the child to exit (kill it after ``timeout_s``) and for the threads."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for thread in self._threads:
            thread.join(timeout_s)


class SenderPool:
    """``send`` for an :class:`HTTPProvider`, run in worker processes (module docstring).

    Args:
        provider: the run's provider; each child builds ``type(provider)(provider.options,
            provider_id=provider.provider_id)``.
        processes: worker processes (>= 1).
        threads: threads per process: requests each child can have in flight at once (the
            runner gives each child the provider's whole concurrency, so that requests never
            queue inside a busy child while another is idle).

    The constructor returns once every child has built its provider (a fresh interpreter
    importing the SDK: about 1 s each, in parallel).

    Raises:
        BenchError: a child could not build the provider or start within
            :data:`START_TIMEOUT_S` (the pool is closed first).
        ValueError: ``processes`` or ``threads`` below 1.
    """

    def __init__(self, provider: HTTPProvider, *, processes: int, threads: int) -> None:
        if processes < 1 or threads < 1:
            raise ValueError("a sender pool needs at least one process and one thread")
        self.provider_id = provider.provider_id
        # The SDK times out after options.timeout_s per attempt (streams: per read); a child
        # silent for much longer than that is stuck.
        self.answer_timeout_s = 3 * provider.options.timeout_s + ANSWER_MARGIN_S
        self._pending: dict[int, Future] = {}
        self._ids = itertools.count()
        self._workers: list[_Worker] = []
        if sys.platform == "win32":
            raise BenchError("--sender-processes needs Linux or macOS; use 0 on Windows")
        for index in range(processes):
            try:
                self._workers.append(_Worker(provider, threads, self._pending, index))
            except OSError as exc:  # e.g. out of processes or file descriptors
                self.close()
                raise BenchError(f"provider '{self.provider_id}': cannot start a sender "
                                 f"process: {exc}") from None
        for worker in self._workers:
            if not worker.ready.wait(START_TIMEOUT_S):
                worker.start_error = f"not ready after {START_TIMEOUT_S:.0f} s"
            if worker.start_error:
                self.close()
                raise BenchError(f"provider '{self.provider_id}': a sender process could not "
                                 f"start: {worker.start_error} (run with --sender-processes 0 "
                                 "to send from this process)")

    @property
    def pids(self) -> list[int]:
        """Process ids of the worker processes (for monitoring)."""
        return [worker.process.pid for worker in self._workers]

    def send(self, body: dict[str, Any]) -> tuple[dict[str, Any], Mapping[str, str]]:
        """POST ``body`` through the least busy child's provider; the same contract as
        :meth:`HTTPProvider.send` (headers come back as a dict with lower-case names).

        Raises:
            ProviderError: the child's provider raised it (same class, status, retry_after_s
                and request id); the child is gone (class ``permanent``); the body cannot be
                pickled (``validation``); no answer within :attr:`answer_timeout_s`
                (``timeout``: the child is stuck, since the SDK's own timeout did not fire).
        """
        request_id = next(self._ids)
        future: Future = Future()
        self._pending[request_id] = future
        worker = min(self._workers, key=lambda w: len(w.mine))
        worker.submit(request_id, body)
        try:
            return future.result(self.answer_timeout_s)
        except FutureTimeout:
            worker.fail(request_id, ProviderError(
                f"{worker.name} gave no answer within {self.answer_timeout_s:.0f} s",
                error_class="timeout"))
            return future.result(1.0)  # the timeout, or the answer that has just arrived

    def close(self) -> None:
        """Close the pipes and wait for the children (they finish requests in flight)."""
        for worker in self._workers:
            worker.close()
        for worker in self._workers:
            worker.join(JOIN_TIMEOUT_S)


def main(argv: list[str]) -> None:
    """The child's entry point: ``python -m bench.providers.senders REQUESTS_FD RESULTS_FD``."""
    _child(Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip the interpreter's teardown: nothing is left to clean up, and it is slow


if __name__ == "__main__":
    main(sys.argv[1:])
