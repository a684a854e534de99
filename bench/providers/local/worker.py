"""The embedded model's worker process: a :class:`LocalEngine` behind a pipe.

llama.cpp is native code: a crash (a segmentation fault in a CPU kernel) or a hang in it would
take the whole run down, or stall it, with no row or manifest written. The run therefore keeps
the model in a child process started with :mod:`multiprocessing` (``spawn``), and
:class:`bench.providers.local.LocalProvider` restarts it once when it dies.

Messages are pickled tuples on a :func:`multiprocessing.Pipe`:

- to the worker: ``("prepare", tools, variant_key, label)``,
  ``("complete", messages, tools, variant_key, max_tokens)``,
  ``("speed", prompt_tokens, decode_tokens)``, ``("close",)``;
- back: ``("ready", info)`` once loaded, then ``("ok", value)`` or
  ``("error", message, file)`` (a :class:`bench.errors.BenchError`) per request, after any
  number of ``("note", text)`` lines announcing slow work (e.g. reading a tools block).

With ``batch`` > 1 in the options (:func:`serve_batched`) requests carry an id and may overlap:
``("call", id, op, ...)`` with the ops above, ``submit`` (arguments as ``complete``) queueing an
answer for the batch; back ``("ok", id, value)`` or ``("error", id, message, file)`` as each
finishes (in any order), notes as above.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections import deque
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any, Callable

from bench.errors import BenchError
from bench.providers.worker_process import die_with_parent

if TYPE_CHECKING:
    from bench.providers.local.engine import LocalEngine


def serve(conn: Connection, options: dict[str, Any], parent: int) -> None:
    """The worker's entry point: load the model, then answer requests until ``close`` or EOF.

    Args:
        conn: the worker's end of the pipe.
        options: :class:`bench.providers.local.engine.LocalEngine` keyword arguments plus
            ``model_path``.
        parent: the run's process id (the worker dies with it).
    """
    # Ctrl-C in a terminal reaches the whole process group; the run decides what stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a CI timeout signals the group: the run stops it
    os.environ.setdefault("GGML_NO_BACKTRACE", "1")  # an abort prints no gdb backtrace
    # llama-cpp-python's LlamaModel.__del__ raises AttributeError after a failed load; the
    # failure itself is reported as one line, so such noise is dropped, not printed.
    sys.unraisablehook = lambda unraisable: None
    die_with_parent(parent)
    from bench.providers.local.engine import LocalEngine  # imports llama_cpp
    try:
        engine = LocalEngine(**options)
    except BenchError as exc:
        conn.send(("error", str(exc), str(exc.file) if exc.file else None))
        return
    except Exception as exc:  # noqa: BLE001 - e.g. a chat template that raises: one line
        conn.send(("error", f"{options['model_path']}: cannot load the model: "
                            f"{type(exc).__name__}: {exc}", None))
        return
    engine.notify = lambda text: conn.send(("note", text))
    conn.send(("ready", engine.system_info()))
    if engine.batcher is not None:
        serve_batched(conn, engine, str(options["model_path"]))
        engine.close()
        return
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            break
        op = request[0]
        if op == "close":
            break
        try:
            if op == "prepare":
                value: Any = engine.prepare(request[1], request[2], request[3])
            elif op == "speed":
                value = engine.speed(request[1], request[2])
            elif op == "complete":
                value = engine.complete(request[1], request[2], variant_key=request[3],
                                        max_tokens=request[4])
            else:
                raise BenchError(f"unknown request {op!r}")
        except BenchError as exc:
            conn.send(("error", str(exc), str(exc.file) if exc.file else None))
            continue
        except Exception as exc:  # noqa: BLE001 - reported as one line, not as a dead worker
            conn.send(("error", f"{options['model_path']}: {type(exc).__name__}: {exc}", None))
            continue
        conn.send(("ok", value))
    engine.close()


def serve_batched(conn: Connection, engine: LocalEngine, model: str) -> None:
    """The request loop of a batching engine (``engine.batcher``): read every request that
    has come, admit queued answers into the batch (first come first served; cases of another
    variant wait until the batch is empty), make one batch step, send the answers finished;
    block for requests only when nothing is in flight. ``speed`` and ``complete`` (one answer
    alone) wait until the batch is empty; ``prepare`` runs at once. Returns at ``close`` or EOF.
    """
    batcher = engine.batcher
    assert batcher is not None
    queue: deque[tuple[Any, ...]] = deque()  # ("call", id, op, ...) not yet admitted or run

    def reply(request_id: int, call: Callable[[], Any]) -> None:
        try:
            value = call()
        except BenchError as exc:
            conn.send(("error", request_id, str(exc), str(exc.file) if exc.file else None))
        except Exception as exc:  # noqa: BLE001 - one line for this request, not a dead worker
            conn.send(("error", request_id, f"{model}: {type(exc).__name__}: {exc}", None))
        else:
            conn.send(("ok", request_id, value))

    while True:
        busy = bool(batcher.active or queue)
        try:
            while not busy or conn.poll(0):
                request = conn.recv()
                busy = True
                if request[0] == "close":
                    return
                if request[2] == "prepare":  # grammars only: the batch's KV cache is untouched
                    reply(request[1], functools.partial(engine.prepare, *request[3:6]))
                else:
                    queue.append(request)
        except (EOFError, OSError):
            return
        for request in list(queue):  # admit what fits, in order
            request_id, op = request[1], request[2]
            if op == "submit":
                try:
                    taken = batcher.admit(request_id, request[3], request[4],
                                          variant_key=request[5], max_tokens=request[6])
                except BenchError as exc:
                    conn.send(("error", request_id, str(exc),
                               str(exc.file) if exc.file else None))
                    taken = True
                if taken:
                    queue.remove(request)
            elif not batcher.active:  # one answer alone, or the speed test: an idle context
                queue.remove(request)
                if op == "complete":
                    reply(request_id, functools.partial(
                        engine.complete, request[3], request[4], variant_key=request[5],
                        max_tokens=request[6]))
                elif op == "speed":
                    reply(request_id, functools.partial(engine.speed, request[3], request[4]))
                else:
                    reply(request_id, functools.partial(_unknown, op))
            else:
                break  # keeps its place: later requests wait behind it
        for key, answer in batcher.step():
            conn.send(("ok", key, answer))


def _unknown(op: str) -> Any:
    raise BenchError(f"unknown request {op!r}")
