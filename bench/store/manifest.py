"""A run's ``manifest.json``: read and checked against the contract
(:class:`bench.results.Manifest`), replaced atomically with its free text redacted, its
status rewritten in place when the disk is full, and the status to show (``crashed``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from bench.errors import BenchError, json_document, read_text_file
from bench.redact import MANIFEST_FREE_TEXT, redact_fields
from bench.results import Manifest
from bench.store.files import atomic_write_json, refuse_dangling
from bench.store.ids import CRASHED
from bench.store.records import stamped, stored_problem


def load_manifest(path: Path, run_id: str) -> Manifest:
    """The manifest ``path`` of run ``run_id`` as a :class:`bench.results.Manifest` (one
    without ``schema_version``, from the release before the contract, is migrated in
    memory).

    Raises:
        BenchError: no such run (a run folder that is a dangling symbolic link says so), the
            manifest is not UTF-8 JSON, not an object, lacks a field or has one of the wrong
            type (names file and field), or was written by a newer bench (one line: upgrade
            bench).
    """
    if not path.is_file():
        refuse_dangling(path.parent)
        raise BenchError(f"no run '{run_id}' (looked for {path})")
    data = json_document(read_text_file(path), file=path, what="manifest")
    if not isinstance(data, dict):
        raise BenchError("manifest must be a JSON object", file=path)
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        field, message = stored_problem(exc, "manifest")
        if message.endswith("missing field"):
            message = "manifest lacks this field"
        raise BenchError(message, file=path, field=field) from None


def shown_status(manifest: Manifest, is_being_written: Callable[[], bool]) -> str:
    """The status to show for ``manifest``: ``crashed`` (:data:`bench.store.ids.CRASHED`)
    when it says ``running`` but ``is_being_written()`` (asked only then) says no process
    holds the run's write lock, else the stored status."""
    status = manifest.status
    if status == "running" and not is_being_written():
        return CRASHED
    return status


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Replace the manifest ``path`` atomically (:meth:`Manifest.to_json_dict`). Secrets in
    its free text (command line, errors, reasons) are redacted; identifiers and the config
    are written as they are (:data:`bench.redact.MANIFEST_FREE_TEXT`).

    Raises:
        OSError: the manifest cannot be written; names ``manifest.json`` itself.
        TypeError: ``manifest`` is not a :class:`Manifest` (a dict is built into one first).
    """
    if not isinstance(manifest, Manifest):
        raise TypeError(f"a manifest is a bench.results.Manifest, not "
                        f"{type(manifest).__name__}")
    atomic_write_json(path, redact_fields(stamped(manifest), MANIFEST_FREE_TEXT))


def set_status_in_place(path: Path, status: str) -> bool:
    """Rewrite the manifest ``path``'s ``"status": "running"`` as ``status`` in place, at
    the same size (padded with JSON whitespace), so that it needs no new disk space: the
    last resort when :func:`write_manifest` fails because the disk is full. Returns True
    when done; False when the stored status is not ``running``, ``status`` is longer than
    it, or the file cannot be written."""
    old = b'"status": "running"'
    new = f'"status": "{status}"'.encode("utf-8")
    if len(new) > len(old):
        return False
    try:
        with path.open("r+b") as handle:
            data = handle.read()
            at = data.find(old)
            if at < 0:
                return False
            handle.seek(at)
            handle.write(new + b" " * (len(old) - len(new)))
            handle.flush()
            os.fsync(handle.fileno())
    except OSError:
        return False
    return True
