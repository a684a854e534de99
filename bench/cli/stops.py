"""How ``bench`` stops on a signal: SIGTERM stops like Ctrl-C (the run loop saves what is
finished), a stop's exit code (130 for SIGINT, 143 for SIGTERM: 128 + the signal's number, as
a shell reports it) is chosen once and kept by a late signal, and the interpreter's teardown
ignores both signals."""

from __future__ import annotations

import os
import signal
import sys

from bench.cli.output import fail

_terminated = False  # a SIGTERM came (else a stop is Ctrl-C's)
_stop_code: int | None = None  # the exit code a stop chose (130/143), kept by a late signal


def ignore_stop_signals() -> None:
    """atexit (after worker threads are joined): ignore SIGINT/SIGTERM for the rest of the
    interpreter's teardown (about 1 s here), which would otherwise put back the default
    handlers and let a late signal kill a finished command (Python keeps SIG_IGN as it is)."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)


def terminate(signum: int, frame: object) -> None:
    """SIGTERM handler: stop like Ctrl-C (the run loop saves what is finished).

    Raises:
        KeyboardInterrupt: always.
    """
    global _terminated
    _terminated = True
    raise KeyboardInterrupt


def was_terminated() -> bool:
    """True once SIGTERM came (:func:`terminate`)."""
    return _terminated


def stopped(code: int) -> int:
    """Note ``code`` as the exit code of this stop (the first one counts); return it."""
    global _stop_code
    if _stop_code is None:
        _stop_code = code
    return _stop_code


def stop_code() -> int | None:
    """The exit code a stop chose (130/143), or None before any stop."""
    return _stop_code


def exit_at_once(signum: int, frame: object) -> None:
    """Signal handler for after the command: exit now, with the code the stop already chose,
    else 143 (SIGTERM) or 130 (SIGINT)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_stop_code or (143 if signum == signal.SIGTERM else 130))


def fail_stopped() -> None:
    """Exit for a stop signal that no command reported: say which one, exit 143 or 130.

    Raises:
        SystemExit: always.
    """
    fail("terminated" if _terminated else "interrupted", stopped(143 if _terminated else 130))
