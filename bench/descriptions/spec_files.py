"""The text of a tool's spec file (``descriptions/<toolset>/specs/<tool>.yaml``) read and
edited as text, so that a rewrite keeps what YAML would lose: :func:`replace_variants_block`
changes only the top-level ``variants:`` block, comments and line endings stay as they were
(``bench variants draft``/``accept``, :mod:`bench.drafting`; ``bench init --force``,
:mod:`bench.importers.init_files`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from bench.errors import BenchError


def replace_variants_block(text: str, variants: dict[str, Any]) -> str:
    """``text`` (a spec's YAML) with its top-level ``variants:`` block replaced by
    ``variants`` (appended at the end when absent; removed when empty). Every other line,
    comments included, is kept as it was, line ending included; the new block's lines end
    as ``text``'s first line does (``\r\n`` in a file written on Windows: YAML 1.2, 5.4,
    reads either as a line break, and the file keeps one kind of line ending)."""
    newline = "\r\n" if text.split("\n", 1)[0].endswith("\r") else "\n"
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if re.match(r"^variants\s*:", line):
            skipping = True
            continue
        if skipping and line.strip() and not line[0].isspace() and not line.startswith("#"):
            skipping = False
        if not skipping:
            out.append(line)
    body = "".join(out).rstrip("\r\n") + newline
    if variants:
        body += yaml.safe_dump({"variants": variants}, allow_unicode=True, sort_keys=False,
                               width=100).replace("\n", newline)
    return body


def read_spec_text(path: Path) -> str:
    """The text of the spec at ``path`` with its line endings as they are (``read_text``
    turns ``\r\n`` into ``\n``, so a rewrite changed every line of a Windows file).

    Raises:
        BenchError: the file is not UTF-8 (names it).
    """
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason})", file=path) from None
