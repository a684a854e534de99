"""What the providers that keep their model or callable in a child process share: the embedded
model's worker (:mod:`bench.providers.local.worker`) and a ``function:<module>:<callable>``'s
(:mod:`bench.providers.function_worker`).

A worker dies with the run (:func:`die_with_parent`), and the run names how a worker died
(:func:`signal_name`).
"""

from __future__ import annotations

import os
import signal


def die_with_parent(parent: int) -> None:
    """Have the kernel SIGKILL this process when ``parent`` dies (``prctl(PR_SET_PDEATHSIG)``,
    Linux; a no-op elsewhere), so a killed run leaves no model process spinning on the cores.
    Exits at once when ``parent`` is already gone."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os._exit(0)


def signal_name(exitcode: int | None) -> str:
    """``SIGSEGV`` for a process killed by signal 11 (exit code -11), else ``exit code N``."""
    if exitcode is not None and exitcode < 0:
        try:
            return signal.Signals(-exitcode).name
        except ValueError:
            return f"signal {-exitcode}"
    return f"exit code {exitcode}"
