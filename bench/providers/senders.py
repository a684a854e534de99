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
over pipes. The calling thread writes its request into the pipe itself and a free thread of the
child reads it itself: each hand-off between threads costs a wait for a process's GIL, and
removing two of them per request raised throughput by 1-9% (median 3.8%, six interleaved pairs
of 3,000 requests, ``benchmarks/provider_throughput.py``). A :class:`ProviderError` raised in a
child is raised again here with the same class, status, ``retry_after_s`` and request id, so
retries and rate limits work as in one process. Children are plain
``python -P -m bench.providers.senders`` subprocesses (not ``multiprocessing``, whose ``spawn``
re-imports the caller's main script) with this process's import path, in their own session
and ignoring SIGINT (the run stops them: they exit when their request pipe closes, and on Linux
the kernel kills them if the run is killed); their stderr is kept for error messages. Requests
go to the least busy child.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Any, Mapping

try:
    import fcntl
except ImportError:  # Windows, where the pool does not run
    fcntl = None  # type: ignore[assignment]

from bench.errors import BenchError
from bench.limits import AUTO_SENDER_MIN_CONCURRENCY, AUTO_SENDER_PROCESSES
from bench.providers.base import HTTPProvider
from bench.providers.errors import ProviderError
from bench.providers.ratelimit import GateClosed

JOIN_TIMEOUT_S = 10.0
ABANDONED_JOIN_S = 1.0  # after abandon(): children still running then are killed
ANSWER_MARGIN_S = 30.0
START_TIMEOUT_S = 120.0  # a cold start imports the SDK (~1 s here; slow disks take longer)


def default_sender_processes(concurrency: int) -> int:
    """Worker processes used when the user does not choose:
    :data:`~bench.limits.AUTO_SENDER_PROCESSES` at ``concurrency`` >=
    :data:`~bench.limits.AUTO_SENDER_MIN_CONCURRENCY`, else 0 (threads in the run's process)."""
    if sys.platform == "win32":  # the children's pipes are passed as inherited descriptors
        return 0
    return AUTO_SENDER_PROCESSES if concurrency >= AUTO_SENDER_MIN_CONCURRENCY else 0


# Where a request's outcome arrives: (answer, headers) or the ProviderError. A C-level queue,
# not a concurrent.futures.Future: a KeyboardInterrupt in a main-thread caller waiting on a
# Future's Condition can leave its lock held, and the reader thread would then block forever
# handing that request its answer.
Slot = queue.SimpleQueue

_FRAME = struct.Struct("!qQ")  # a request's id (-1: the provider to build) and its size
PIPE_BYTES = 1 << 20  # asked-for request pipe size (Linux; the default 64 KiB holds ~7 bodies)


def _frame(request_id: int, message: Any) -> bytes:
    """``message`` pickled behind its request id and size (raises what pickling raises)."""
    payload = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(request_id, len(payload)) + payload


def _child(requests_fd: int, results: Connection) -> None:
    """A worker process: build the provider described by the first frame read from
    ``requests_fd``, then answer each request frame on ``results``. Each of its threads reads
    the next frame itself (no hand-off through a dispatching thread: one wake-up less per
    request)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run decides when its children stop
    requests = os.fdopen(requests_fd, "rb")
    read_lock, reply_lock = threading.Lock(), threading.Lock()

    def next_frame() -> tuple[int, bytes] | None:
        """The next (request id, pickled body), or None once the run has closed the pipe."""
        with read_lock:
            header = requests.read(_FRAME.size)
            if len(header) < _FRAME.size:
                return None
            request_id, size = _FRAME.unpack(header)
            payload = requests.read(size)
        return (request_id, payload) if len(payload) == size else None

    def reply(message: tuple[Any, ...]) -> None:
        with reply_lock:
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
        first = next_frame()
        if first is None:
            return
        provider_class, options, provider_id, threads = pickle.loads(first[1])
        provider = provider_class(options, provider_id=provider_id)
    except OSError:
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

    def serve() -> None:
        while True:
            try:
                frame = next_frame()
            except OSError:
                return
            if frame is None:  # the run closed the pool: the other threads finish theirs
                return
            try:
                body = pickle.loads(frame[1])
            except Exception as exc:  # noqa: BLE001 - this request fails, the others go on
                reply((frame[0], "failed", f"the request cannot be read ({type(exc).__name__}: "
                                           f"{exc})"))
                continue
            answer(frame[0], body)

    workers = [threading.Thread(target=serve, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    provider.close()


def _grow_pipe(fd: int) -> None:
    """Ask for a :data:`PIPE_BYTES` pipe buffer (Linux only; best effort: the writer thread
    takes over whatever does not fit)."""
    if fcntl is not None and hasattr(fcntl, "F_SETPIPE_SZ"):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above /proc/sys/fs/pipe-max-size
            pass


class _Worker:
    """One child process: its request pipe (written by the caller's own thread while the pipe
    has room, so a request costs no thread hand-off; a writer thread takes what does not fit,
    so that a stuck child blocks no caller), a reader thread resolving its answers, and the
    tail of its stderr."""

    def __init__(self, provider: HTTPProvider, threads: int, pending: dict[int, Slot],
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
                 str(child_results), str(_death_signal_parent())],
                pass_fds=(child_requests, child_results),
                stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                env={**os.environ, "PYTHONPATH": path})
        except BaseException:
            os.close(requests)
            os.close(results)
            raise
        finally:
            os.close(child_requests)
            os.close(child_results)
        _grow_pipe(requests)
        os.set_blocking(requests, False)
        self._requests_fd = requests
        self.results = Connection(results, writable=False)
        self.pending = pending
        self.mine: set[int] = set()
        self.alive = True  # False once the child is known gone: no new requests go to it
        self.ready = threading.Event()
        self.start_error: str | None = None
        self.stderr: deque[str] = deque(maxlen=20)
        self._lock = threading.Lock()  # the request pipe and the backlog
        self._backlog: deque[tuple[int, memoryview]] = deque()  # frames not yet written
        # Wakes the writer thread: None, or a main thread's frame. A C-level queue, no Python
        # lock: a KeyboardInterrupt in the main thread cannot leave it held (a
        # threading.Event or Lock taken by the main thread could stay locked forever).
        self._handoff: queue.SimpleQueue[tuple[int, memoryview] | None] = queue.SimpleQueue()
        self._closing = False
        try:
            self._enqueue(-1, _frame(-1, (type(provider), provider.options,
                                          provider.provider_id, threads)))
        except Exception as exc:  # noqa: BLE001 - e.g. a provider class defined in a function
            self.start_error = f"cannot pass the provider to it ({type(exc).__name__}: {exc})"
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

    def _enqueue(self, request_id: int, frame: bytes) -> None:
        """Write ``frame`` now if the pipe takes it, else leave the rest to the writer thread
        (frames keep their order). Never blocks on the child.

        The main thread hands the whole frame to the writer thread through a lock-free queue:
        a signal handler's exception (KeyboardInterrupt) can only land in the main thread, and
        one landing between a partial write and the backlog's append would leave half a frame
        in the pipe (the child would then misread every later frame), or one landing while it
        holds a lock would leave that lock held."""
        if threading.current_thread() is threading.main_thread():
            if self._closing:
                self.fail(request_id, ProviderError(f"{self.name} is closed",
                                                    error_class="permanent"))
            else:
                self._handoff.put((request_id, memoryview(frame)))
            return
        with self._lock:
            if self._closing:
                gone = "is closed"
            elif self._backlog:
                self._backlog.append((request_id, memoryview(frame)))
                self._handoff.put(None)
                return
            else:
                try:
                    written = os.write(self._requests_fd, frame)
                except BlockingIOError:  # the pipe is full
                    written = 0
                except OSError:  # the child is gone
                    written, gone = -1, "is gone"
                    self.alive = False
                if written == len(frame):
                    return
                if written >= 0:
                    self._backlog.append((request_id, memoryview(frame)[written:]))
                    self._handoff.put(None)
                    return
        self.fail(request_id, ProviderError(self.why(gone) if gone == "is gone" else
                                            f"{self.name} {gone}", error_class="permanent"))

    def _write(self) -> None:
        """The writer thread: write the backlog as the pipe drains (with the main thread's
        frames); close the pipe once the pool is closing and everything queued is written."""
        room = select.poll()
        room.register(self._requests_fd, select.POLLOUT)
        while True:
            with self._lock:
                idle = not self._backlog
            handed: list[tuple[int, memoryview] | None] = []
            if idle:  # wait for work; the timeout looks at the closing flag again
                try:
                    handed.append(self._handoff.get(timeout=1.0))
                except queue.Empty:
                    pass
            with self._lock:
                while True:
                    try:
                        handed.append(self._handoff.get_nowait())
                    except queue.Empty:
                        break
                self._backlog.extend(item for item in handed if item is not None)
                if not self._backlog:
                    if self._closing:
                        os.close(self._requests_fd)
                        return
                    continue
                request_id, rest = self._backlog[0]
                try:
                    written = os.write(self._requests_fd, rest)
                except BlockingIOError:
                    written = 0
                except OSError:  # the child is gone: fail what it was never sent
                    self.alive = False
                    failed = [request_id for request_id, _ in self._backlog]
                    self._backlog.clear()
                    written = -1
                if written == len(rest):
                    self._backlog.popleft()
                    continue
                if written > 0:
                    self._backlog[0] = (request_id, rest[written:])
            if written < 0:
                for request_id in failed:
                    self.fail(request_id, ProviderError(self.why("is gone"),
                                                        error_class="permanent"))
                continue
            room.poll(500)  # until the child reads (or half a second: look at the flags)

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
                self.resolve(request_id, (message[2], message[3]))
            elif kind == "error":  # the child's ProviderError, unpickled as it was
                self.fail(request_id, message[2])
            else:
                self.fail(request_id, ProviderError(f"{self.name}: {message[2]}",
                                                    error_class="permanent"))
        self.alive = False
        self.results.close()
        if not self.ready.is_set():
            self.start_error = self.why("exited while starting")
            self.ready.set()
        self._fail_all(self.why("exited before answering"))

    def resolve(self, request_id: int, outcome: tuple[Any, Any] | ProviderError) -> None:
        """Hand a request its outcome, (answer, headers) or the error, once (a late answer to
        a timed-out request is dropped)."""
        self.mine.discard(request_id)
        slot = self.pending.pop(request_id, None)
        if slot is not None:
            slot.put(outcome)

    def fail(self, request_id: int, error: ProviderError) -> None:
        """Fail one request with ``error``."""
        self.resolve(request_id, error)

    def _fail_all(self, why: str) -> None:
        for request_id in list(self.mine):
            self.fail(request_id, ProviderError(why, error_class="permanent"))

    def submit(self, request_id: int, body: dict[str, Any]) -> None:
        """Send a request to the child (never blocks on it); a body that cannot be pickled
        fails this request alone (class ``validation``)."""
        self.mine.add(request_id)
        try:
            frame = _frame(request_id, body)
        except Exception as exc:  # noqa: BLE001 - e.g. RecursionError: a deeply nested body
            self.fail(request_id, ProviderError(
                f"the request cannot be passed to {self.name} ({type(exc).__name__}: {exc})",
                error_class="validation"))
            return
        self._enqueue(request_id, frame)

    def close(self) -> None:
        """Close the request pipe once what is queued is written (the child then finishes
        what it has and exits). Takes no lock (see :meth:`_enqueue`)."""
        self._closing = True
        self._handoff.put(None)

    def join(self, timeout_s: float) -> None:
        """Wait for the child to exit (kill it after ``timeout_s``) and for the threads."""
        try:
            self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for thread in self._threads:  # they end once the child's pipes close
            thread.join(max(timeout_s, 1.0))


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
        self._pending: dict[int, Slot] = {}
        self._abandoned = False  # abandon() was called: close() does not wait for the children
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
        slot: Slot = queue.SimpleQueue()
        self._pending[request_id] = slot
        # the least busy child still alive (a dead one has nothing in flight, so it would
        # otherwise take every request); if none is, the first one fails it with its reason
        worker = min((w for w in self._workers if w.alive), key=lambda w: len(w.mine),
                     default=self._workers[0])
        worker.submit(request_id, body)
        try:
            outcome = slot.get(timeout=self.answer_timeout_s)
        except queue.Empty:
            worker.fail(request_id, ProviderError(
                f"{worker.name} gave no answer within {self.answer_timeout_s:.0f} s",
                error_class="timeout"))
            outcome = slot.get(timeout=1.0)  # the timeout, or the answer that just arrived
        if isinstance(outcome, (ProviderError, GateClosed)):
            raise outcome
        return outcome

    def abandon(self, why: str) -> int:
        """Stop waiting for the children: every request still waiting raises
        ``GateClosed(why)`` in its caller at once, and answers that arrive later are dropped.
        For a run that is stopping: a stopped or stuck child would otherwise hold it for up to
        :attr:`answer_timeout_s`; :meth:`close` then kills children still running after
        :data:`ABANDONED_JOIN_S`. Returns how many requests were abandoned."""
        self._abandoned = True
        count = 0
        for request_id in list(self._pending):
            slot = self._pending.pop(request_id, None)
            for worker in self._workers:
                worker.mine.discard(request_id)
            if slot is not None:
                slot.put(GateClosed(why))
                count += 1
        return count

    def close(self, timeout_s: float | None = None) -> None:
        """Close the pipes and wait for the children (they finish requests in flight), all
        of them within ``timeout_s`` seconds (default :data:`JOIN_TIMEOUT_S`, or
        :data:`ABANDONED_JOIN_S` after :meth:`abandon`); those still running then are
        killed."""
        if timeout_s is None:
            timeout_s = ABANDONED_JOIN_S if self._abandoned else JOIN_TIMEOUT_S
        for worker in self._workers:
            worker.close()
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))


def _death_signal_parent() -> int:
    """The pid a child should die with (see :func:`_die_with_parent`), or 0 for none: Linux's
    parent-death signal fires when the *thread* that started the child ends, so it is only
    asked for when the pool starts in the main thread, whose end is the process's."""
    if (sys.platform.startswith("linux")
            and threading.current_thread() is threading.main_thread()):
        return os.getpid()
    return 0


def _die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` dies (``prctl(PR_SET_PDEATHSIG)``,
    Linux): a child that is stopped or stuck never sees its request pipe close, and would
    outlive a run that was killed (SIGKILL) without it. Exits at once if ``parent`` is already
    gone. Best effort: without a usable libc nothing is set."""
    if not parent:
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before the signal was asked for
        os._exit(0)


def main(argv: list[str]) -> None:
    """The child's entry point:
    ``python -m bench.providers.senders REQUESTS_FD RESULTS_FD [PARENT_PID]``."""
    _die_with_parent(int(argv[2]) if len(argv) > 2 else 0)
    _child(int(argv[0]), Connection(int(argv[1]), readable=False))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip the interpreter's teardown: nothing is left to clean up, and it is slow


if __name__ == "__main__":
    main(sys.argv[1:])
