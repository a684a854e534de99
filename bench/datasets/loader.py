"""Load labeled datasets and check them against a toolset.

Every source goes through the Hugging Face ``datasets`` library (BRIEF §9):

- ``datasets/<name>/cases.jsonl`` or any ``.jsonl`` path: read with its ``text`` builder in
  streaming mode (one row per line, no Arrow files), each line parsed as JSON here so that an
  error names the file and the 1-based line. The builder still takes a lock file in its cache
  folder (``datasets`` 5.2, ``load_dataset_builder``); that folder is bench's own cache
  (:func:`bench.paths.cache_dir`), so nothing lands in ``~/.cache/huggingface``;
- ``hf:<spec>[:<split>]``: anything ``datasets.load_dataset`` accepts (a Hub id such as
  ``owner/name``, or a local folder of parquet/JSON files), one case per row. Columns may hold
  nested objects or JSON strings; an error names the spec and the 1-based row.
"""

from __future__ import annotations

import hashlib
import importlib
import math
import re
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

import regex
from pydantic import ValidationError

from bench.errors import BenchError, pydantic_error_field
from bench.models import Case, ExpectedCall, ForbiddenCall
from bench.paths import datasets_dir

MATCHER_KEYS = ("$regex", "$any")
# A $regex matcher may carry one value it accepts: what the oracle sends (a SQL label's
# example query), checked against the pattern at load.
EXAMPLE_KEY = "$example"


def label_literal(value: object) -> tuple[bool, object]:
    """The value one acceptable value of a label's argument gives to send: ``(True, value)``
    for a literal, ``(True, its "$example")`` for a ``$regex`` matcher carrying one (a value
    the pattern accepts, checked when the dataset loads: docs/datasets-and-labels.md), else
    ``(False, None)``: ``null`` (may be omitted) and a matcher without an example (``$any``,
    a bare ``$regex``) name no value. Shared by the expected call the executor builds
    (:func:`bench.executor.judge.build_expected_call`, which ``bench labels record`` runs)
    and the ``oracle`` provider's answer."""
    if value is None:
        return False, None
    if not (isinstance(value, dict) and any(str(k).startswith("$") for k in value)):
        return True, value
    if "$regex" in value and isinstance(value.get(EXAMPLE_KEY), str):
        return True, value[EXAMPLE_KEY]
    return False, None
HF_PREFIX = "hf:"
# Case fields that a Hub dataset may store as JSON text instead of nested columns.
_JSON_FIELDS = ("messages", "expected", "tags")


@dataclass(frozen=True)
class Dataset:
    """A loaded dataset.

    Attributes:
        name: folder name under ``datasets/`` (or the file stem, or the ``hf:`` spec).
        path: the ``cases.jsonl`` file, or the ``hf:`` spec string for ``load_dataset`` specs.
        cases: cases in file (row) order.
        sha256: hash of the file's bytes, or of the rows' canonical JSON for ``hf:`` specs
            (recorded in the manifest; a resumed run checks it).
        lines: 1-based line (row) number of each case id (for error messages).
    """

    name: str
    path: Path | str
    cases: tuple[Case, ...]
    sha256: str
    lines: dict[str, int]

    @property
    def toolsets(self) -> list[str]:
        """The toolsets the cases use, sorted."""
        return sorted({c.toolset for c in self.cases})


def available_datasets(root: Path | None = None) -> list[str]:
    """Names of the folders under ``datasets/`` that hold a ``cases.jsonl``."""
    root = root or datasets_dir()
    return sorted(p.parent.name for p in root.glob("*/cases.jsonl"))


def check_dataset_name(name: str) -> str:
    """Return ``name``, a dataset's folder name under ``datasets/``, when it is one folder
    name. Paths have their own forms (docs/datasets-and-labels.md): a ``.jsonl`` path, or
    ``hf:<spec>`` for anything ``datasets.load_dataset`` reads; neither comes here.

    Raises:
        BenchError: an empty name, ``.`` or ``..``, or one holding ``/``, ``\\`` or NUL
            (it would read a ``cases.jsonl`` outside ``datasets/``).
    """
    if name in ("", ".", "..") or any(c in name for c in "/\\\0"):
        raise BenchError(f"invalid dataset name '{name}': a folder name under datasets/ (no "
                         "'/', '\\' or '..'); give a file as a .jsonl path, a Hub or local "
                         f"parquet dataset as {HF_PREFIX}owner/name[:split]")
    return name


def load_dataset(name: str, root: Path | None = None) -> Dataset:
    """Load ``datasets/<name>/cases.jsonl``, a path to a ``.jsonl`` file, or ``hf:<spec>[:split]``.

    Raises:
        BenchError: a ``.jsonl`` path that is not a file (names the path), a dataset name
            that is a path (``..``, ``/``, ``\\``: :func:`check_dataset_name`), an unknown
            dataset name (lists the known ones), a line that is not UTF-8 or not
            JSON, a case that does not fit the format, a duplicate id, an ``hf:`` spec that
            ``datasets`` cannot load (no network, unknown name or split); each names the file
            (or spec), the line (or row) and the field where known.
    """
    if name.startswith(HF_PREFIX):
        return _load_hf(name)
    root = root or datasets_dir()
    if not name.endswith(".jsonl"):
        check_dataset_name(name)
    path = Path(name) if name.endswith(".jsonl") else root / name / "cases.jsonl"
    if name.endswith(".jsonl") and not path.is_file():  # a path, not a name: say which file
        raise BenchError("dataset file not found" if not path.exists()
                         else "dataset path is not a file", file=path)
    if not path.is_file():
        known = ", ".join(available_datasets(root)) or "none"
        raise BenchError(f"unknown dataset '{name}' (known: {known}; or a .jsonl path, "
                         f"or {HF_PREFIX}owner/name[:split])")
    raw = path.read_bytes()
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason} at byte {exc.start})", file=path,
                         line=raw[:exc.start].count(b"\n") + 1) from None
    rows = ({"line": text} for text in _jsonl_lines(path))
    return _build(rows, path=path, source=path, sha256=hashlib.sha256(raw).hexdigest(),
                  name=path.parent.name if path.name == "cases.jsonl" else path.stem)


def _hf() -> ModuleType:
    """Import ``datasets`` quietly (no progress bars or info logs on the user's terminal)."""
    # by name: to mypy, run from the project root, `import datasets` is the datasets/ folder
    datasets = importlib.import_module("datasets")
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    return datasets


_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def _jsonl_lines(path: Path) -> list[str]:
    """The file's lines, split as Hugging Face ``datasets``' ``text`` builder splits them (on
    ``\r\n``, ``\r`` and ``\n`` only, never inside a JSON string at U+2028 or U+0085 as
    ``str.splitlines`` would; no last empty line after a final newline; ``utf-8-sig`` drops a
    BOM). Read directly: importing ``datasets`` cost about 1.3 s of every command's start-up,
    for a file that needs no Arrow (``benchmarks/dataset_loading.py``)."""
    lines = _LINE_BREAK.split(path.read_bytes().decode("utf-8-sig"))
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _split_spec(spec: str) -> tuple[str, str | None]:
    rest = spec[len(HF_PREFIX):]
    source, sep, split = rest.rpartition(":")
    if not sep or not split or "/" in split:
        return rest, None
    return source, split


def _load_hf(spec: str) -> Dataset:
    source, split = _split_spec(spec)
    if not source:
        raise BenchError(f"empty dataset spec '{spec}' (use {HF_PREFIX}owner/name[:split])")
    hf = _hf()
    try:
        loaded = hf.load_dataset(source, split=split)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types (network, 404, split)
        raise BenchError(f"cannot load '{source}' with datasets.load_dataset"
                         f"{f' (split {split!r})' if split else ''}: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                         ) from None
    if isinstance(loaded, hf.DatasetDict):
        splits = sorted(loaded)
        if len(splits) != 1:
            raise BenchError(f"'{source}' has splits {', '.join(splits)}; name one: "
                             f"{HF_PREFIX}{source}:<split>")
        split = splits[0]
        loaded = loaded[split]
    label = f"{HF_PREFIX}{source}:{split}" if split else f"{HF_PREFIX}{source}"
    rows = [{"object": _from_arrow(row)} for row in loaded]
    digest = hashlib.sha256(json.dumps([r["object"] for r in rows], sort_keys=True,
                                       ensure_ascii=False, default=str).encode("utf-8"))
    return _build(rows, path=label, source=label, sha256=digest.hexdigest(), name=label)


def _from_arrow(row: dict[str, Any]) -> Any:
    """A Hub row as a case object: JSON-text fields decoded, Arrow's null fill removed.

    Arrow stores a list of objects as structs with the union of their keys, filling absent
    keys with null; a null *object value* is therefore dropped (null *list items*, which mean
    "may be omitted" in acceptable-value lists, are kept).
    """
    out = {}
    for key, value in row.items():
        if key in _JSON_FIELDS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass  # left as text; the case model reports the field
        else:
            value = _drop_null_keys(value)
        if value is not None:
            out[key] = value
    return out


def _drop_null_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_null_keys(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_null_keys(v) for v in value]
    return value


def _build(rows: Iterable[dict[str, Any]], *, path: Path | str, source: Path | str,
           sha256: str, name: str) -> Dataset:
    """Validate rows (``{"line": text}`` or ``{"object": obj}``) into a :class:`Dataset`."""
    cases: list[Case] = []
    lines: dict[str, int] = {}
    for number, row in enumerate(rows, start=1):
        if "line" in row:
            line = row["line"]
            if not line.strip():
                continue
            non_finite: list[str] = []  # NaN, Infinity, 1e400: Python's json takes them
            try:
                obj = json.loads(line, parse_constant=_constant_noting(non_finite),
                                 parse_float=_float_noting(non_finite))
            except json.JSONDecodeError as exc:
                raise BenchError(f"malformed JSON: {exc.msg} (column {exc.colno})",
                                 file=source, line=number) from None
            except ValueError as exc:  # an integer over Python's 4,300-digit limit
                raise BenchError(f"malformed JSON: {str(exc).split(';')[0]}", file=source,
                                 line=number) from None
            except RecursionError:  # e.g. [[[[... 100,000 deep
                raise BenchError("malformed case: JSON nested too deeply", file=source,
                                 line=number) from None
            if "\\ud" in line.lower():  # only a \uD800-\uDFFF escape makes a lone surrogate
                where = _lone_surrogate(obj)
                if where is not None:
                    raise BenchError("a lone UTF-16 surrogate escape (\\ud800-\\udfff without "
                                     "its pair) is not text", file=source, line=number,
                                     field=where or None)
        else:
            obj = row["object"]
            non_finite = ["?"]  # a Hub row's floats come from Arrow: always looked for
        if non_finite:
            _refuse_non_finite(obj, source, number)
        if not isinstance(obj, dict):
            raise BenchError("a case must be a JSON object", file=source, line=number)
        try:
            case = Case.model_validate(obj)
        except ValidationError as exc:
            field, msg = pydantic_error_field(exc)
            raise BenchError(msg, file=source, line=number, field=field) from None
        except RecursionError:
            raise BenchError("malformed case: nested too deeply", file=source,
                             line=number) from None
        if case.id in lines:
            raise BenchError(f"duplicate case id '{case.id}' (first on line {lines[case.id]})",
                             file=source, line=number, field="id")
        _check_matchers(case, source, number)
        _check_required_not_forbidden(case, source, number)
        lines[case.id] = number
        cases.append(case)
    if not cases:
        raise BenchError("dataset has no cases", file=source)
    return Dataset(name=name, path=path, cases=tuple(cases), sha256=sha256, lines=lines)


def _constant_noting(seen: list[str]) -> Callable[[str], float]:
    """A ``json.loads`` ``parse_constant`` hook: appends each constant (``NaN``,
    ``Infinity``, ``-Infinity``) to ``seen`` and returns its float."""
    def parse(text: str) -> float:
        seen.append(text)
        return float(text)
    return parse


def _float_noting(seen: list[str]) -> Callable[[str], float]:
    """A ``json.loads`` ``parse_float`` hook that appends to ``seen`` each literal that is not
    a finite double (``1e400`` is Infinity)."""
    def parse(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            seen.append(text)
        return value
    return parse


def _refuse_non_finite(value: Any, path: Path | str, line: int) -> None:
    """Refuse a case holding NaN or an infinite number anywhere (iterative walk).

    RFC 8259 JSON has neither (Python's ``json`` reads ``NaN``, ``Infinity`` and overflows
    ``1e400`` to Infinity); NaN equals nothing, so a state check expecting it, or an
    acceptable value of it, could never be met, and neither can be written back as JSON.

    Raises:
        BenchError: naming the file, line and the field holding the first such number.
    """
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else f"{'-' if item < 0 else ''}Infinity"
            raise BenchError(f"{shown} is not a JSON number (RFC 8259 has no NaN or Infinity; "
                             "a literal beyond ±1.8e308 overflows to Infinity); NaN never "
                             "equals anything, so the label could never be met", file=path,
                             line=line, field=where or None)
        if isinstance(item, dict):
            stack += [(f"{where}.{k}" if where else str(k), child)
                      for k, child in reversed(item.items())]
        elif isinstance(item, list):
            stack += [(f"{where}.{i}" if where else str(i), child)
                      for i, child in reversed(list(enumerate(item)))]


def _lone_surrogate(value: Any) -> str | None:
    """The dotted path (``""`` for the value itself) of the first string, key or value, that
    holds a lone UTF-16 surrogate, or None. Such a string cannot be sent as UTF-8 or stored
    by pyarrow (the run's tables), so a case holding one is refused. Iterative: ``value`` may
    be nested as deep as the JSON decoder allows."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return path
        elif isinstance(item, dict):
            for key, child in reversed(item.items()):
                shown = str(key).encode("utf-8", "backslashreplace").decode("utf-8")
                child_path = f"{path}.{shown}" if path else shown
                stack += [(child_path, child), (child_path, key)]
        elif isinstance(item, list):
            stack += [(f"{path}.{i}" if path else str(i), child)
                      for i, child in reversed(list(enumerate(item)))]
    return None


def _check_matchers(case: Case, path: Path | str, line: int) -> None:
    prefix = "required_calls" if case.kind == "episode" else "expected.calls"
    labelled: list[tuple[str, ExpectedCall | ForbiddenCall]] = [
        *((prefix, c) for c in case.expected.calls),
                *(("forbidden_calls", c) for c in case.forbidden_calls)]
    numbers = {"required_calls": 0, "expected.calls": 0, "forbidden_calls": 0}
    for where, call in labelled:
        i = numbers[where]
        numbers[where] += 1
        for arg, values in call.arguments.items():
            field = f"{where}.{i}.arguments.{arg}"
            if not values:
                raise BenchError("an acceptable-values list cannot be empty (use [null] for "
                                 "'must be omitted')", file=path, line=line, field=field)
            for value in values:
                if isinstance(value, dict) and any(k.startswith("$") for k in value):
                    unknown = [k for k in value if k not in (*MATCHER_KEYS, EXAMPLE_KEY)]
                    kinds = [k for k in value if k in MATCHER_KEYS]
                    if unknown or len(kinds) != 1 or value.get("$any", True) is not True \
                            or (EXAMPLE_KEY in value and "$regex" not in value):
                        raise BenchError(f"unknown matcher {value} (use one of "
                                         f"{', '.join(MATCHER_KEYS)}; {EXAMPLE_KEY} goes "
                                         "with $regex)", file=path, line=line, field=field)
                    if "$regex" in value:
                        try:
                            regex.compile(value["$regex"])  # what scoring runs
                        except (regex.error, TypeError) as exc:
                            raise BenchError(f"invalid $regex: {exc}", file=path, line=line,
                                             field=field) from None
                    if EXAMPLE_KEY in value:  # a live label: its own example must pass it
                        example = value[EXAMPLE_KEY]
                        try:
                            fits = isinstance(example, str) and \
                                regex.search(value["$regex"], example, timeout=1.0) is not None
                        except TimeoutError:
                            fits = False
                        if not fits:
                            raise BenchError(f"{EXAMPLE_KEY} {example!r} does not match its "
                                             "$regex", file=path, line=line,
                                             field=f"{field}.{EXAMPLE_KEY}")


def _check_required_not_forbidden(case: Case, path: Path | str, line: int) -> None:
    """Refuse an episode with a required call that can only be made as a forbidden one.

    A forbidden call ``until_confirmed`` is allowed after the first scripted user reply, so
    a required call may match it when the case has ``user_replies`` (ask first, then write);
    without any, it is forbidden for the whole episode.

    Raises:
        BenchError: naming the file, line and the forbidden call (``forbidden_calls.<j>``).
    """
    if case.kind != "episode":
        return
    for j, forbidden in enumerate(case.forbidden_calls):
        if forbidden.until_confirmed and case.user_replies:
            continue
        for i, required in enumerate(case.required_calls):
            if required.name != forbidden.name or not _covers(forbidden.arguments,
                                                              required.arguments):
                continue
            why = (" ('until_confirmed' without user_replies forbids it for the whole "
                   "episode: no reply ever confirms)" if forbidden.until_confirmed else
                   " (a write that needs the user's yes: set \"until_confirmed\": true and "
                   "script the reply in user_replies; or narrow the forbidden arguments)")
            raise BenchError(f"forbids every call that required_calls.{i} "
                             f"('{required.name}') accepts, so the label can never be met"
                             + why, file=path, line=line, field=f"forbidden_calls.{j}")


def _covers(forbidden: dict[str, list[Any]], required: dict[str, list[Any]]) -> bool:
    """Every call of the same tool that meets ``required``'s argument lists also meets
    ``forbidden``'s (matching as :func:`bench.scoring.episodes.label_matches`).

    Decided per argument the forbidden call lists: the required call must list it too (an
    argument it leaves free can take a value outside the forbidden list), and each of its
    entries must lie inside the forbidden list: a literal the list accepts, null ("may be
    omitted") only if the list holds null, a matcher only if the list holds ``$any`` or the
    same matcher. Conservative: a ``$regex`` inside another's language, or a required list
    split over several forbidden calls, is not proven (returns False).
    """
    for arg, banned in forbidden.items():
        for entry in required.get(arg, [{"$any": True}, None]):  # unlisted: free
            if entry is None:
                inside = None in banned
            elif isinstance(entry, dict) and any(k in MATCHER_KEYS for k in entry):
                inside = any(isinstance(b, dict) and ("$any" in b or b == entry)
                             for b in banned)
            else:
                from bench.scoring.metrics import value_acceptable  # numpy: only when needed

                inside = value_acceptable(entry, banned)
            if not inside:
                return False
    return True
