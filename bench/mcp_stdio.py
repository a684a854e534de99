"""bench's own stdio transport for a user's MCP server: the server is bench's child process,
so its exit status is read from the process object bench holds.

The ``mcp`` SDK's ``stdio_client`` starts the server itself and exposes no handle on it (its
process is a local of the generator); the SDK's supported extension point is a ``Transport``
(``mcp.client._transport.Transport``, accepted by ``mcp.Client``): an async context manager
yielding a read stream of ``SessionMessage | Exception`` and a write stream of
``SessionMessage``. :func:`stdio_transport` is one, built on ``anyio.open_process`` and the
SDK's public pieces: ``get_default_environment`` (the variables a server inherits),
``mcp_types.jsonrpc_message_adapter`` (one JSON-RPC message per line, the stdio transport of
the MCP specification: "Messages are delimited by newlines"), and ``terminate_posix_process_tree``.

It follows the SDK's ``stdio_client`` (mcp 2.3) where the specification leaves a choice: the
server runs in its own session (process group), so stopping it reaches its children; shutdown
closes its stdin, waits :data:`EXIT_WAIT_S`, then terminates the group (SIGTERM, SIGKILL after
:data:`KILL_AFTER_S`), as the specification's lifecycle section says ("the client SHOULD
initiate shutdown by first closing the input stream to the child process ... sending SIGTERM
if the server does not exit within a reasonable time ... SIGKILL if the server does not exit
within a reasonable time after SIGTERM"). A line the server prints on stdout that is not
JSON-RPC is logged (logger ``bench.mcp_stdio``, which
:mod:`bench.executor.backends.mcp` writes to the server's log) and handed to the session as
an exception, as the SDK does.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from pathlib import Path
from typing import IO, Any, AsyncIterator, Callable

import anyio
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

logger = logging.getLogger(__name__)

#: Seconds a server has to exit after its stdin closes (the SDK's
#: ``PROCESS_TERMINATION_TIMEOUT``).
EXIT_WAIT_S = 2.0
#: Seconds between SIGTERM and SIGKILL to the server's process group (the SDK's
#: ``FORCE_KILL_TIMEOUT``).
KILL_AFTER_S = 2.0
#: Seconds to wait for the process to be reaped after the kill.
_REAP_WAIT_S = 2.0
#: How often the exit is polled (``process.wait()`` would also wait for pipes a child of
#: the server may hold open).
_POLL_S = 0.01


async def _exited(process: Process, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` seconds for ``process`` to exit; True when it did."""
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(_POLL_S)
    return process.returncode is not None


async def _stop(process: Process) -> None:
    """Close the server's stdin, wait :data:`EXIT_WAIT_S` for it to exit, then end its
    process group (module docstring); never raises for a process already gone."""
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    if await _exited(process, EXIT_WAIT_S):
        return
    if sys.platform == "win32":  # pragma: no cover - no process groups
        with contextlib.suppress(OSError):
            process.kill()
    else:
        from mcp.os.posix.utilities import terminate_posix_process_tree
        await terminate_posix_process_tree(process, KILL_AFTER_S)
    if not await _exited(process, _REAP_WAIT_S):
        logger.warning("the MCP server process %d is still alive after SIGKILL", process.pid)


@contextlib.asynccontextmanager
async def stdio_transport(command: str, args: list[str], *, env: dict[str, str] | None,
                          cwd: Path | str | None, errlog: IO[Any],
                          started: Callable[[Process], None]) -> AsyncIterator[Any]:
    """Start ``command`` with ``args`` and speak MCP to it over its stdin and stdout.

    Args:
        command: the server's program.
        args: its arguments.
        env: variables added to the SDK's default environment
            (``mcp.client.stdio.get_default_environment``).
        cwd: the folder it starts in (None: this process's).
        errlog: a file object receiving the server's stderr (its ``fileno`` is handed on).
        started: called with the server's process as soon as it runs, before any message:
            the caller reads its ``returncode`` (None while it runs; negative: the signal
            that ended it).

    Yields:
        ``(read_stream, write_stream)`` as ``mcp.Client`` takes them from a ``Transport``.

    Raises:
        OSError: the program cannot be started.
    """
    import mcp_types
    from mcp.client.stdio import get_default_environment
    from mcp.shared.message import SessionMessage

    process = await anyio.open_process([command, *args], stderr=errlog, cwd=cwd,
                                       env=get_default_environment() | (env or {}),
                                       start_new_session=True)
    started(process)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    def decode(line: bytes) -> SessionMessage:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(
            line.decode("utf-8", "replace"), by_name=False))

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_read_stdout, process, read_writer, decode)
        tasks.start_soon(_write_stdin, process, write_reader, read_writer)
        try:
            yield read_stream, write_stream
        finally:
            # the server must stop even when the caller is cancelled; every wait is bounded
            with anyio.CancelScope(shield=True):
                write_stream.close()
                read_stream.close()
                await _stop(process)
                with contextlib.suppress(OSError, anyio.BrokenResourceError,
                                         anyio.ClosedResourceError):
                    if process.stdout is not None:
                        await process.stdout.aclose()
            tasks.cancel_scope.cancel()  # a pipe a child of the server still holds


async def _read_stdout(process: Process, read_writer: MemoryObjectSendStream[Any],
                       decode: Callable[[bytes], Any]) -> None:
    """Hand each line the server prints on stdout to the session (``read_writer``) as a
    message (``decode``: one JSON-RPC message of a line), or as the parser's error with the
    line logged; once the session is gone, read on and drop the rest (a server blocked on a
    full stdout pipe could not exit)."""
    assert process.stdout is not None
    buffer = b""
    listening = True  # until the session is gone; then the rest is read and dropped
    try:
        async with read_writer:
            async for chunk in process.stdout:
                lines = (buffer + chunk).split(b"\n")
                buffer = lines.pop()
                for line in lines:
                    if not listening or not line.strip():
                        continue
                    item: Any
                    try:
                        item = decode(line)
                    except ValueError as exc:  # its text and the parser's error
                        logger.warning("a line the server printed on stdout is not "
                                       "JSON-RPC (a stdio server writes only protocol "
                                       "messages there)", exc_info=exc)
                        item = exc
                    try:
                        await read_writer.send(item)
                    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                        listening = False  # keep reading: a server blocked on a full
                        # stdout pipe could not exit
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        pass  # the pipe was closed under the read: the connection is over


async def _write_stdin(process: Process, write_reader: MemoryObjectReceiveStream[Any],
                       read_writer: MemoryObjectSendStream[Any]) -> None:
    """Write each message of the session (``write_reader``) to the server's stdin as one
    line of JSON; when the server closed its stdin (it exited), close the session's read
    side (``read_writer``) so the session sees the end."""
    assert process.stdin is not None
    try:
        async with write_reader:
            async for message in write_reader:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send((text + "\n").encode("utf-8"))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # the server closed its stdin (it exited): the session must see the end
        await read_writer.aclose()
