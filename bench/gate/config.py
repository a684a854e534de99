"""The gate's settings: the ``[tool.bench.gate]`` table of a project's ``pyproject.toml``.

Example::

    [tool.bench.gate]
    dataset = "analytics"                       # name under datasets/, or a .jsonl path
    variants = ["l10"]
    providers = ["replay:gate/responses.sqlite"]  # or "local"
    trials = 1
    metrics = ["selection_correct", "execution_success"]
    floors = {execution_success = 0.2}          # absolute minimum rates (fractions)
    margin = 0.02                               # tolerated drop vs the baseline (fraction)
    alpha = 0.05                                # family-wise level, Holm across the metrics
    baseline = "gate/baseline.json"
    cases = ["ana-0001", "ana-0002"]            # optional subset; limit = 30 also works
    require_reevaluation = true                 # changed tools (description lock) need cases
    fail_on_flips = true                        # deterministic answers: any right->wrong case fails
    allow_flips = ["ana-0003"]                  # cases allowed to flip (e.g. a label being fixed)
    execute = true                              # default: only when a gated metric needs it

Relative paths are relative to the ``pyproject.toml``'s folder, which is also the project
root where ``datasets/`` and ``descriptions/`` are looked up (``$BENCH_HOME`` semantics).
"""

from __future__ import annotations

import os
import tomllib
from typing import Any, Literal
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bench.errors import BenchError, pydantic_error_field
from bench.toolset_config import read_tool_table
from bench.scoring.registry import gate_metrics, primary_metrics


#: The gate's metrics scored from the answer alone (bench.scoring.metrics): a gate of only
#: these needs no execution. Any other metric (execution_success, execution_match, an
#: episode's task_success, a custom metric) makes the gate execute.
ANSWER_ONLY_METRICS = frozenset({
    "selection_correct", "arguments_correct", "arguments_correct_lenient", "schema_valid",
    "schema_valid_lenient", "no_call_correct", "ask_correct", "ask_no_call", "bfcl_valid",
    "retrieved_all"})


class GateConfig(BaseModel):
    """One gate: what to run and how to decide.

    Attributes:
        dataset: dataset name or ``.jsonl`` path (relative to ``root``).
        variants: description variants to gate, e.g. ``["l10"]``.
        providers: provider ids (``local``, ``replay:<cache.sqlite>``...).
        trials: repetitions per case.
        metrics: binary metrics gated (rates of :func:`bench.scoring.registry.gate_metrics`);
            default: the metrics with a floor, else the registry's primary metrics (tool
            selection and arguments).
        floors: absolute minimum rate per metric (fraction 0..1).
        margin: a drop vs the baseline no larger than this (fraction) never fails.
        alpha: family-wise significance level, Holm-corrected across the gate's tests.
        baseline: the baseline JSON file (relative to ``root``).
        split: the dataset split (``bench run --split``; None: ``test`` when the dataset has
            splits, else ``all``); the baseline must have been recorded on the same split.
        cases / limit: optional case subset (ids) and/or N of them, sampled as ``bench run
            --limit`` does (stratified by expected tool, seed 1234).
        execute: run the answers' calls on the toolset's backend: True or False, or None
            (the default) to run them unless every gated metric is scored from the answer
            alone (:attr:`executes`; a dataset of episodes always runs them): a gate of
            selection and arguments never calls a user's tools, so replayed answers need no
            server and make no write in CI.
        require_reevaluation: fail when a tool whose description or schema changed since
            the description lock (``descriptions/<toolset>/descriptions.lock.json``,
            :mod:`bench.descriptions.lock`) was not re-evaluated: no case of the gate run
            expects it (a change no gated case exercises), or the toolset has no lock yet.
            Off: such changes are only noted. ``bench baseline update`` (or ``bench check
            --update``) refreshes the lock once the change is accepted.
        fail_on_flips: the per-case rule: with a deterministic provider (its registration's
            ``deterministic``: ``local``, ``oracle``, ``function:``, ``replay:``), a case right
            in the baseline and wrong now fails the metric on its own, whatever the paired
            test says. Off: only the floors and the paired test decide. Providers that are not
            deterministic (hosted APIs) never use it: one flip there can be sampling noise.
        allow_flips: case ids the per-case rule lets flip (they still count in the paired
            test), e.g. a case whose label is being corrected.
        flips_shown: flipped cases quoted in a failure message (the per-case rule lists
            every flipped case, one line each).
        root: the project folder (set by :func:`load_gate_config`, not in the TOML).
        source: the TOML file the settings came from.
    """

    dataset: str
    variants: list[str] = Field(min_length=1)
    providers: list[str] = Field(default_factory=lambda: ["local"], min_length=1)
    trials: int = Field(default=1, ge=1)
    metrics: list[str] | None = None
    floors: dict[str, float] = Field(default_factory=dict)
    margin: float = Field(default=0.0, ge=0.0, le=1.0)
    alpha: float = Field(default=0.05, gt=0.0, lt=1.0)
    baseline: str = "bench-baseline.json"
    cases: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)
    split: Literal["dev", "test", "all"] | None = None
    execute: bool | None = None
    require_reevaluation: bool = False
    fail_on_flips: bool = True
    allow_flips: list[str] = Field(default_factory=list)
    flips_shown: int = Field(default=5, ge=0)
    root: Path = Path(".")
    source: Path = Path("pyproject.toml")

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str] | None) -> list[str] | None:
        known = gate_metrics()
        for name in value or ():
            if name not in known:
                raise ValueError(f"unknown metric '{name}' (choose from {', '.join(known)})")
        return value

    @field_validator("floors")
    @classmethod
    def _known_floors(cls, value: dict[str, float]) -> dict[str, float]:
        known = gate_metrics()
        for name, floor in value.items():
            if name not in known:
                raise ValueError(f"unknown metric '{name}' (choose from {', '.join(known)})")
            if not 0.0 <= floor <= 1.0:
                raise ValueError(f"floor of '{name}' must be a fraction in [0, 1], got {floor}")
        return value

    @property
    def gated_metrics(self) -> list[str]:
        """The metrics tested: ``metrics``, else the floors' metrics, else the default pair."""
        if self.metrics:
            return list(self.metrics)
        return list(self.floors) or primary_metrics()

    @property
    def executes(self) -> bool:
        """Whether the gate's run executes the answers' calls: ``execute`` when set, else
        False only when every gated metric is scored from the answer alone
        (:data:`ANSWER_ONLY_METRICS`). A dataset of episodes executes whatever its metrics
        (:func:`bench.gate.run.gate_executes`: an episode runs on the executor)."""
        if self.execute is not None:
            return self.execute
        return not all(m in ANSWER_ONLY_METRICS for m in self.gated_metrics)

    @property
    def baseline_path(self) -> Path:
        """The baseline file, resolved against ``root``."""
        return (self.root / self.baseline).resolve()


def read_gate_table(path: Path) -> dict[str, object] | None:
    """The ``[tool.bench.gate]`` table of a TOML file, or None when it has none.

    Raises:
        BenchError: the file is not valid TOML (names file and TOML's line/column message).
    """
    return read_tool_table(path, "gate")


def load_gate_config(path: Path) -> GateConfig | None:
    """Read the gate settings of ``path`` (a ``pyproject.toml``); None without a gate table.

    Raises:
        BenchError: invalid TOML or an invalid field (names the file and ``tool.bench.gate.<field>``).
    """
    path = Path(path).resolve()
    table = read_gate_table(path)
    if table is None:
        return None
    try:
        return GateConfig.model_validate({**table, "root": path.parent, "source": path})
    except ValidationError as exc:
        field, message = pydantic_error_field(exc)
        raise BenchError(message, file=path,
                         field="tool.bench.gate" + (f".{field}" if field else "")) from None


def write_floors(path: Path, floors: dict[str, float], comment: str) -> None:
    """Add ``floors = {metric = fraction, ...}`` to the ``[tool.bench.gate]`` table of
    ``path``, keeping every other byte of the file (comments, order, spacing: tomlkit's
    round trip), atomically. Used by ``bench baseline update`` when the table has no
    ``floors`` key.

    Args:
        path: the TOML file (a ``pyproject.toml``).
        floors: metric name -> floor (fraction 0..1).
        comment: a TOML comment put after the new key (without ``#``).

    The file keeps its line ends (CRLF stays CRLF) and its mode; a read-only file is not
    written.

    Raises:
        BenchError: the file cannot be read or written (or is read-only), is not valid TOML,
            has no gate table,
            or lays the table out in a way a key cannot be added to (names the floors to
            add by hand).
    """
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    from bench.store.files import atomic_write_text

    inline = "{" + ", ".join(f"{k} = {v:g}" for k, v in floors.items()) + "}"
    try:
        # bytes as they are: read_text would turn CRLF line ends into LF for the whole file
        text = Path(path).read_bytes().decode("utf-8")
        mode = Path(path).stat().st_mode & 0o7777
    except (OSError, UnicodeDecodeError) as exc:
        raise BenchError(f"cannot read: {exc}", file=path) from None
    # a replace would write a read-only file all the same (root's os.access says yes to all)
    if not os.access(path, os.W_OK) or not mode & 0o222:
        raise BenchError(f"read-only: add the floors by hand: floors = {inline}", file=path)
    try:
        document = tomlkit.parse(text)
        table: Any = document
        for key in ("tool", "bench", "gate"):
            table = table[key]
        value = tomlkit.inline_table()
        value.update(floors)
        if isinstance(table, tomlkit.items.InlineTable):  # gate = {...}: no room for a comment
            table["floors"] = value
        else:
            # after the table's last key, not after the blank lines and comments that lead to
            # the next table (where tomlkit's append puts it); _insert_after is tomlkit's own
            # primitive for that (no public one; the pin is exact)
            container = table.value
            keys = [key for key, item in container.body if key is not None
                    and not isinstance(item, (tomlkit.items.Table, tomlkit.items.AoT))]
            container._insert_after(keys[-1], "floors", value)
            item = container.item("floors")
            item.comment(comment)
            item.trivia.comment_ws = "  "
        updated = tomlkit.dumps(document)
        if "\r\n" in text and "\n" not in text.replace("\r\n", ""):  # a CRLF file stays one
            updated = updated.replace("\r\n", "\n").replace("\n", "\r\n")
        tomllib.loads(updated)  # what bench reads must still parse
    except (TOMLKitError, tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError,
            IndexError) as exc:
        raise BenchError(f"cannot add floors to [tool.bench.gate] ({exc}); add them by hand: "
                         f"floors = {inline}", file=path) from None
    try:
        atomic_write_text(Path(path), updated)
        os.chmod(path, mode)  # the file's own mode, not the fresh file's
    except OSError as exc:
        raise BenchError(f"cannot write floors = {inline}: {exc.strerror}", file=path) from None
