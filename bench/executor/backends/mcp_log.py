"""An MCP server's log (:mod:`bench.executor.backends.mcp`): a stdio server's stderr copied to
its log file one line at a time, redacted (:class:`RedactedLog`), the ``mcp`` SDK's own log
records about a server appended there instead of bench's terminal (:data:`TO_SERVER_LOG`),
and the last line of the log quoted in an error (:func:`log_tail`).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

#: Bytes read from the end of a server's stderr log to quote its last line in an error.
_TAIL_BYTES = 4096


def log_tail(errlog: Path | None) -> str:
    """``"; its stderr ends with: <last line> (all of it: <errlog>)"`` when a stdio server
    wrote to its log ``errlog``, else ``""``: a server that exits at once usually says why
    on stderr."""
    if errlog is None:
        return ""
    try:
        with open(errlog, "rb") as log:
            log.seek(0, 2)
            log.seek(max(0, log.tell() - _TAIL_BYTES))
            lines = log.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    last = next((line.strip() for line in reversed(lines) if line.strip()), "")
    if not last:
        return ""
    from bench.errors import terminal_safe
    return f"; its stderr ends with: {terminal_safe(last)[:200]} (all of it: {errlog})"


#: The ``mcp`` SDK's client-side loggers. The stdio client logs each line a server prints on
#: its stdout that is not JSON-RPC (a stray ``print``, a traceback) with ``logger.exception``:
#: a traceback per line on bench's terminal, between its progress lines.
_SDK_LOGGERS = ("mcp.client.stdio", "mcp.client.client", "mcp.client.streamable_http",
                "mcp.shared.jsonrpc_dispatcher", "mcp.shared.dispatcher",
                "mcp.os.posix.utilities", "client", "bench.mcp_stdio")


class ToServerLog(logging.Filter):
    """A filter on the SDK's loggers: a record logged on a backend's own thread (its event
    loop's) goes to that backend's server log as one line and is dropped, so it never reaches
    bench's terminal; other records pass."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: dict[int, Path] = {}  # thread ident -> the server's log file

    def filter(self, record: logging.LogRecord) -> bool:
        path = self.logs.get(record.thread or 0)
        if path is None:
            return True
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            text += f": {type(error).__name__}: {error}"
        from bench.redact import one_line
        try:
            with open(path, "a", encoding="utf-8") as log:
                log.write("bench: " + one_line(text, 2000) + "\n")
        except OSError:
            pass
        return False


TO_SERVER_LOG = ToServerLog()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(TO_SERVER_LOG)


#: Seconds to wait for a server's last stderr lines to reach its log (a child of the server
#: that keeps stderr open must not hold bench up).
_LOG_DRAIN_S = 5.0


class RedactedLog:
    """A stdio server's stderr: the write end of a pipe (:attr:`writer`, handed to the SDK);
    a thread appends each line read from the other end to ``path``, redacted, so a secret
    the server prints never reaches the file.

    Args:
        path: the log file (appended; its folder is created).
    """

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w", encoding="utf-8")  # only its fd is used
        self._reader = os.fdopen(read_fd, "rb")
        self._path = path
        self._thread = threading.Thread(target=self._copy, name="mcp-stderr", daemon=True)
        self._thread.start()

    def _copy(self) -> None:
        from bench.redact import redact_bytes
        with self._reader, open(self._path, "ab") as log:
            for line in self._reader:  # ends when every copy of the write end is closed
                log.write(redact_bytes(line))
                log.flush()

    def close_writer(self) -> None:
        """Close bench's copy of the write end (the server holds its own until it exits)."""
        self.writer.close()

    def drain(self, timeout_s: float = _LOG_DRAIN_S) -> None:
        """Wait up to ``timeout_s`` seconds for the lines still in the pipe."""
        self._thread.join(timeout_s)
