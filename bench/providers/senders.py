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
process. Children are plain ``python -m bench.providers.senders`` subprocesses (not
``multiprocessing``, whose ``spawn`` re-imports the caller's main script), in their own session
so that Ctrl-C reaches only the run, and they exit when their request pipe closes.
"""

from __future__ import annotations

import itertools
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any, Mapping

from bench.errors import BenchError
from bench.providers.base import HTTPProvider
from bench.providers.errors import ProviderError

AUTO_MIN_CONCURRENCY = 16  # below it one process keeps up (benchmarks/provider_throughput.py)
AUTO_PROCESSES = 2
JOIN_TIMEOUT_S = 10.0
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
            prefix = f"{exc.error_class}: "
            message = exc.message[len(prefix):] if exc.message.startswith(prefix) else \
                exc.message
            reply((request_id, "error", message, exc.error_class, exc.status,
                   exc.retry_after_s, exc.request_id))
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
    """One child process, its two pipe ends and a thread that resolves its answers."""

    def __init__(self, provider: HTTPProvider, threads: int, pending: dict[int, Future],
                 index: int) -> None:
        self.name = f"sender process {index + 1}"
        child_requests, requests = os.pipe()
        results, child_results = os.pipe()
        # The child sees this process's import path (a script may have extended it).
        path = os.pathsep.join(entry or os.getcwd() for entry in sys.path)
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "bench.providers.senders", str(child_requests),
                 str(child_results)], pass_fds=(child_requests, child_results),
                stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, "PYTHONPATH": path})
        finally:
            os.close(child_requests)
            os.close(child_results)
        self.requests = Connection(requests, readable=False)
        self.results = Connection(results, writable=False)
        self.lock = threading.Lock()
        self.pending = pending
        self.mine: set[int] = set()
        self.ready = threading.Event()
        self.start_error: str | None = None
        try:
            self.requests.send((type(provider), provider.options, provider.provider_id,
                                threads))
        except (OSError, pickle.PicklingError, AttributeError, TypeError) as exc:
            self.start_error = f"cannot pass the provider to it ({exc})"
            self.ready.set()
        self.reader = threading.Thread(target=self._read, name=f"bench-{self.name}",
                                       daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                message = self.results.recv()
            except (EOFError, OSError):
                break
            except Exception as exc:  # noqa: BLE001 - whose answer it was is unknown
                self._fail_pending(f"{self.name}: an answer could not be read "
                                   f"({type(exc).__name__}: {exc})")
                continue
            request_id, kind = message[0], message[1]
            if request_id is None:  # the child's start: "ready" or "not started"
                self.start_error = message[2] if kind != "ready" else None
                self.ready.set()
                continue
            self.mine.discard(request_id)
            future = self.pending.pop(request_id, None)
            if future is None:
                continue
            if kind == "ok":
                future.set_result((message[2], message[3]))
            elif kind == "error":
                _, _, text, error_class, status, retry_after_s, provider_request_id = message
                future.set_exception(ProviderError(
                    text, error_class=error_class, status=status, retry_after_s=retry_after_s,
                    request_id=provider_request_id))
            else:
                future.set_exception(ProviderError(f"{self.name}: {message[2]}",
                                                   error_class="permanent"))
        self.results.close()
        code = self.process.poll()
        if not self.ready.is_set():
            self.start_error = f"exited while starting (exit code {code})"
            self.ready.set()
        self._fail_pending(f"{self.name} exited (exit code {code}) before answering")

    def _fail_pending(self, why: str) -> None:
        for request_id in list(self.mine):
            self.mine.discard(request_id)
            future = self.pending.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(ProviderError(why, error_class="permanent"))

    def submit(self, request_id: int, body: dict[str, Any]) -> None:
        self.mine.add(request_id)
        try:
            with self.lock:
                self.requests.send((request_id, body))  # pickles first: a failure writes nothing
        except (OSError, ValueError):  # the child died, or the pool is closed
            self._fail_pending(f"{self.name} is gone (exit code {self.process.poll()})")
        except Exception as exc:  # noqa: BLE001 - e.g. RecursionError: a deeply nested body
            self.mine.discard(request_id)
            future = self.pending.pop(request_id, None)
            if future is not None:
                future.set_exception(ProviderError(
                    f"the request cannot be passed to {self.name} ({type(exc).__name__}: "
                    f"{exc})", error_class="validation"))

    def close(self) -> None:
        with self.lock:
            self.requests.close()

    def join(self, timeout_s: float) -> None:
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.reader.join(timeout_s)


class SenderPool:
    """``send`` for an :class:`HTTPProvider`, run in worker processes (module docstring).

    Args:
        provider: the run's provider; each child builds ``type(provider)(provider.options,
            provider_id=provider.provider_id)``.
        processes: worker processes (>= 1).
        threads: threads per process: requests each child has in flight at once.

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
        self._next = itertools.cycle(self._workers)
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
        """POST ``body`` through a child's provider; the same contract as
        :meth:`HTTPProvider.send` (headers come back as a dict with lower-case names).

        Raises:
            ProviderError: the child's provider raised it (same class, status, retry_after_s
                and request id), or the child is gone (class ``permanent``).
        """
        request_id = next(self._ids)
        future: Future = Future()
        self._pending[request_id] = future
        next(self._next).submit(request_id, body)
        return future.result()

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
