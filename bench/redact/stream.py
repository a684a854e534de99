"""The stream every message bench prints goes through (:class:`RedactingStream`), and the exit
code when its reader has gone (:data:`BROKEN_PIPE_EXIT`).
"""

from __future__ import annotations

import contextlib
import io
import os
from typing import TextIO

from bench.redact.text import redact

#: Exit code when stdout's reader went away: 128 + SIGPIPE, what a shell reports for a
#: program that a closed pipe stopped (``yes | head``).
BROKEN_PIPE_EXIT = 141


class RedactingStream(io.TextIOBase):
    """A text stream that writes :func:`redact` of each write to ``stream`` (stdout or
    stderr): every message bench prints goes through it. A secret split across two writes
    would pass; bench's messages are written whole (rich renders a message in one write).
    It has no ``buffer``, so that click writes text through it instead of going around it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write the redacted ``text``; returns ``len(text)`` as callers expect.

        Raises:
            SystemExit: code :data:`BROKEN_PIPE_EXIT` when the reader has gone
                (``bench compare ... | head``), see :meth:`_reader_gone`.
        """
        try:
            self._stream.write(redact(text))
        except BrokenPipeError:
            self._reader_gone()
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream (SystemExit :data:`BROKEN_PIPE_EXIT` as :meth:`write`)."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """The pipe's reader closed it: point the descriptor at ``os.devnull`` (what is
        still buffered goes nowhere instead of failing again at exit) and exit with
        :data:`BROKEN_PIPE_EXIT`, never with a code of bench's own (1: a regression), and
        before rich or click turn the error into exit 1. Python's advice:
        https://docs.python.org/3/library/signal.html#note-on-sigpipe"""
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        raise SystemExit(BROKEN_PIPE_EXIT)

    def isatty(self) -> bool:
        """The wrapped stream's answer (rich decides on colours and widths by it)."""
        return self._stream.isatty()

    def fileno(self) -> int:
        """The wrapped stream's descriptor."""
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase's is an attribute
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", "utf-8")
