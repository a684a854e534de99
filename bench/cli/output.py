"""What the ``bench`` commands print through: the shared consoles (``out`` for results on
stdout, ``err`` for messages on stderr), one-line messages and errors, and untrusted text
made safe for a terminal."""

from __future__ import annotations

import os
import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bench.errors import shorten_message, visible_text


def piped_console(width: int = 200, **options: Any) -> Console:
    """A stdout console (rich ``options``) that is ``width`` columns wide when stdout is not a
    terminal and ``COLUMNS`` is unset: logs and CI keep a table's rows on one line each."""
    console = Console(**options)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(width=width, **options)
    return console


out = piped_console()
err = Console(stderr=True, soft_wrap=True)  # messages unwrapped: commands stay copyable


def say(message: str) -> None:
    """Print one message line to stderr, cut by :func:`bench.errors.shorten_message` (it
    may hold a provider's or user code's text of any length) and as is: its brackets (an
    extra's name, a list) are not rich markup."""
    err.print(shorten_message(message), soft_wrap=True, markup=False)


def fail(message: str, code: int) -> None:
    """Print ``error: <message>`` (cut as :func:`say` cuts) and exit with ``code``.

    Raises:
        SystemExit: always, with ``code``.
    """
    err.print(Text.assemble(("error: ", "bold red"), shorten_message(message)), soft_wrap=True)
    sys.exit(code)


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def terminal_text(text: str) -> str:
    """Untrusted text (a model's tool name) safe in a rich table cell: control characters
    shown as ``\\x1b``-style escapes (an ESC sequence could clear or retitle the terminal,
    or write its clipboard) and ``[`` escaped, so that it is not read as rich markup (a name
    like ``[/x]`` raised MarkupError)."""
    return escape(_CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text))


def shown_text(text: str) -> str:
    """Model-written ``text`` for the terminal: control and bidirectional formatting
    characters escaped (:func:`bench.errors.visible_text`), rich markup escaped."""
    return escape(visible_text(text))


# The run ended incomplete and can be resumed: it stopped at --max-usd / --max-total-tokens
# (status budget_exhausted), or a provider was skipped, e.g. for a missing key (partial).
INCOMPLETE_EXIT_CODE = 3
BUDGET_EXIT_CODE = INCOMPLETE_EXIT_CODE
