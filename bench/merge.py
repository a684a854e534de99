"""``bench merge``: join the runs of one plan's shards (``bench run --shard i/n``) into one run.

What a merge accepts (each refusal is one line naming the run and the field):

- **The same run, sharded.** Every config field must match the first run's, except
  ``shard`` and the settings a resume may also change, because they decide how, not what, is
  measured (:data:`bench.runner.RESUME_OVERRIDES`: concurrency, budgets, cache, pricing,
  attempts, batch, and where the model file is). The dataset's and every variant's SHA-256
  (and a BFCL import's sources) must match too, every grown catalog's (``--tools``: its
  distractors come from the toolsets under each machine's ``descriptions/``), and every
  provider's identity (``model``, ``model_sha256``).
- **Shards of one split.** Every run has a shard with the same ``n``; no shard is given twice.
- **Every row.** By default all ``n`` shards must be there and complete. With
  ``allow_partial`` a missing shard or an unfinished one (interrupted, over budget, a
  provider skipped, crashed) is accepted: the merged run's status is then ``partial`` and
  ``bench run --resume NEW`` runs the rows it lacks, as for any unfinished run.
- **The plan of this checkout.** The merge rebuilds the whole plan from the config, the
  dataset and the descriptions, as a resume does, so they must be those the shards ran with:
  each row is checked to belong to its shard's slice, and the merged run's planned rows are
  the whole plan's.

The merged run is an ordinary run under ``reports/runs/NEW`` (``bench show``, ``report``,
``compare``, ``traces`` and ``run --resume`` read it): its config is the first shard's with
``shard`` unset, its rows and traces are the shards' (``run_id`` set to NEW; a key repeated in
one run is kept once, the first, with a warning when the copies differ:
:meth:`bench.store.RunStore.read_rows`), and its manifest lists the shards under
``merged_from``. It is written in a hidden folder beside it and renamed into place only when
complete, so a failed or stopped merge leaves no run behind; the hidden folder of a merge
killed before its cleanup (kill -9) is removed by the next merge (:data:`MERGE_PREFIX`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import ValidationError

from bench.errors import BenchError
from bench.jsonl import loads
from bench.owner import claim, sweep_abandoned
from bench.paths import runs_dir
from bench.plural import count
from bench.replan import rebuild_plan
from bench.results import (JsonObject, Manifest, ManifestCatalog,
                           ManifestProviderNote, ManifestShard, ManifestSpent, TraceRecord,
                           validation_problem)
from bench.store import CRASHED, RowsRead, RunStore, check_run_id, new_run_id
from bench.runner.manifest import summed_cache
from bench.shard import format_shard, parse_shard, shard_plan

if TYPE_CHECKING:  # the runner is imported when a run is merged, not with this module
    from bench.runner.config import RunConfig

MERGE_PREFIX = ".merge-"
"""The hidden folder (in ``reports/runs``) a merge writes its run in, then renames it from:
``.merge-<8 hex digits>``, claimed by the merging process (:func:`bench.owner.claim`); the
next merge removes those of merges that died (:func:`bench.owner.sweep_abandoned`)."""


@dataclass
class Shard:
    """One run given to :func:`merge_runs`.

    Attributes:
        store: the run's folder.
        manifest: its manifest (:meth:`RunStore.load_manifest`).
        config: its :class:`~bench.runner.RunConfig`.
        index / total: its shard ``index`` of ``total``.
        status: its status as shown (``crashed`` for a dead writer).
    """

    store: RunStore
    manifest: Manifest
    config: RunConfig
    index: int
    total: int
    status: str

    @property
    def name(self) -> str:
        """``run 'ID' (shard i/n)`` for messages."""
        return f"run '{self.store.run_id}' (shard {format_shard(self.index, self.total)})"


@dataclass(frozen=True)
class MergeResult:
    """What :func:`merge_runs` wrote.

    Attributes:
        run_id: the merged run's id.
        manifest: its manifest as written.
        missing_shards: the shards not given (``"i/n"``; only with ``allow_partial``).
        unfinished: ``(run id, status, rows, planned)`` of each given shard that was not
            complete (only with ``allow_partial``).
        commits: the distinct ``git_commit`` values the shards ran at (more than one: the
            shards ran different bench code).
        warnings: what reading the shards' rows found (:meth:`bench.store.RowsRead.report`:
            copies of a key unlike its first row, which alone is merged; a last line cut
            mid-way), one line each.
    """

    run_id: str
    manifest: Manifest
    missing_shards: list[str]
    unfinished: list[tuple[str, str, int, int]]
    commits: list[str]
    warnings: list[str] = dataclasses.field(default_factory=list)


def _open(run_id: str) -> Shard:
    """Read run ``run_id``'s manifest and config and check that it is a shard.

    Raises:
        BenchError: no such run, a corrupt manifest or config, or a run without ``shard``.
    """
    from bench.runner.config import stored_run_config
    store = RunStore(runs_dir(), run_id)
    manifest = store.load_manifest()
    config = stored_run_config(manifest.config, file=store.manifest_path)
    if config.shard is None:
        raise BenchError(f"run '{run_id}' is not a shard (it ran without --shard); bench merge "
                         "joins the runs of one plan's shards", file=store.manifest_path,
                         field="config.shard")
    index, total = parse_shard(config.shard)
    return Shard(store, manifest, config, index, total, manifest.status)


def _differences(first: Shard, other: Shard) -> None:
    """Refuse ``other`` when it does not measure what ``first`` measures (see the module
    docstring).

    Raises:
        BenchError: the first field that differs, naming both runs and both values.
    """
    from bench.runner import RESUME_OVERRIDES
    from bench.toolspace.setup import catalog_digests, changed_catalog

    def refuse(field: str, mine: Any, theirs: Any) -> BenchError:
        return BenchError(f"{other.name} differs from run '{first.store.run_id}' in {field}: "
                          f"{theirs!r}, not {mine!r}; only shards of one run can be merged",
                          file=other.store.manifest_path, field=field)

    if other.total != first.total:
        raise refuse("config.shard", first.config.shard, other.config.shard)
    ignored = {"shard", *RESUME_OVERRIDES}
    mine, theirs = first.config.model_dump(), other.config.model_dump()
    for field in mine:
        if field not in ignored and mine[field] != theirs[field]:
            raise refuse(f"config.{field}", mine[field], theirs[field])
    for field in ("sha256", "cases"):
        a = getattr(first.manifest.dataset, field)
        b = getattr(other.manifest.dataset, field)
        if a != b:
            raise refuse(f"dataset.{field}", a, b)
    a_bfcl = first.manifest.bfcl.sha256 if first.manifest.bfcl else None
    b_bfcl = other.manifest.bfcl.sha256 if other.manifest.bfcl else None
    if a_bfcl != b_bfcl:
        raise refuse("bfcl.sha256", a_bfcl, b_bfcl)
    a_variants = {(v.toolset, v.name): v.sha256 for v in first.manifest.variants}
    b_variants = {(v.toolset, v.name): v.sha256 for v in other.manifest.variants}
    for (toolset, name) in [*a_variants, *(v for v in b_variants if v not in a_variants)]:
        if a_variants.get((toolset, name)) != b_variants.get((toolset, name)):
            raise refuse(f"variants.{name}.sha256 (toolset '{toolset}')",
                         a_variants.get((toolset, name)), b_variants.get((toolset, name)))
    a_catalogs = catalog_digests(_catalogs(first.manifest))
    b_catalogs = catalog_digests(_catalogs(other.manifest))
    changed = changed_catalog(a_catalogs, b_catalogs)
    if changed is not None:  # distractors drawn from different descriptions/ folders
        key = next(k for k in [*a_catalogs, *b_catalogs]
                   if a_catalogs.get(k) != b_catalogs.get(k))
        raise refuse(f"toolspace.catalogs ({changed}) sha256", a_catalogs.get(key),
                     b_catalogs.get(key))


def _catalogs(manifest: Manifest) -> list[ManifestCatalog] | None:
    """The grown catalogs a manifest records (``toolspace.catalogs``), or None."""
    return manifest.toolspace.catalogs if manifest.toolspace is not None else None


def _check_identities(shards: list[Shard]) -> None:
    """Refuse shards whose providers are different models (:data:`IDENTITY_FIELDS` of their
    ``describe()``; a shard with nothing to send for a provider never described it).

    Raises:
        BenchError: names the later run, the provider, the field and both values.
    """
    from bench.runner import IDENTITY_FIELDS
    seen: dict[str, tuple[Shard, JsonObject]] = {}
    for shard in shards:
        for provider_id, described in _described(shard).items():
            if provider_id not in seen:
                seen[provider_id] = (shard, described)
                continue
            first, before = seen[provider_id]
            for field in IDENTITY_FIELDS:
                if field in before and field in described and \
                        before[field] != described[field]:
                    raise BenchError(
                        f"{shard.name} differs from run '{first.store.run_id}' in provider "
                        f"'{provider_id}''s {field}: {described[field]!r}, not "
                        f"{before[field]!r}; only shards of one run can be merged",
                        file=shard.store.manifest_path,
                        field=f"providers.{provider_id}.{field}")


def _described(shard: Shard) -> dict[str, JsonObject]:
    """Provider id -> its ``describe()`` entry in the shard's manifest."""
    return {name: p for p in shard.manifest.providers or []
            if isinstance(name := p.get("provider"), str)}


def _check_set(shards: list[Shard], allow_partial: bool) -> list[str]:
    """Refuse a shard given twice and (without ``allow_partial``) a missing one; return the
    missing shards as ``"i/n"``.

    Raises:
        BenchError: two runs of the same shard, or a missing shard without ``allow_partial``.
    """
    seen: dict[int, Shard] = {}
    for shard in shards:
        if shard.index in seen:
            raise BenchError(f"runs '{seen[shard.index].store.run_id}' and "
                             f"'{shard.store.run_id}' are both shard "
                             f"{format_shard(shard.index, shard.total)}; give each shard once",
                             file=shard.store.manifest_path, field="config.shard")
        seen[shard.index] = shard
    total = shards[0].total
    missing = [format_shard(i, total) for i in range(1, total + 1) if i not in seen]
    if missing and not allow_partial:
        given = ", ".join(format_shard(i, total) for i in sorted(seen))
        raise BenchError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                         f"missing (given: {given}); merge every shard, or pass "
                         "--allow-partial and finish the merged run with bench run --resume")
    return missing


def _plan_slices(shards: list[Shard]) -> tuple[int, list[set[str]]]:
    """The whole plan's size and each shard's keys (index 0 is shard 1), rebuilt from the first
    shard's config with this checkout's dataset and descriptions
    (:func:`bench.replan.rebuild_plan`).

    Raises:
        BenchError: the dataset or descriptions cannot be loaded, or they are not those the
            shards ran with (SHA-256 differs).
    """
    first = shards[0]
    plan = rebuild_plan(first.config.model_copy(update={"shard": None}), first.manifest,
                        RunStore(runs_dir(), first.store.run_id), ran_with="the shards",
                        hint="merge where the shards' dataset and descriptions are")
    total = first.total
    return len(plan), [{item.key for item in shard_plan(plan, i, total)}
                       for i in range(1, total + 1)]


def _copy_traces(shard: Shard, target: Path, run_id: str) -> None:
    """Append the shard's complete ``traces.jsonl`` lines to ``target``, ``run_id`` replaced.

    Raises:
        BenchError: a complete trace line that is not a :class:`bench.results.TraceRecord`
            (file, line and field), or written by a newer bench.
    """
    from bench.executor.traces import TRACES
    source = shard.store.dir / TRACES
    if not source.is_file():
        return
    with source.open("rb") as lines, target.open("ab") as out:
        for number, line in enumerate(lines, start=1):
            if not line.endswith(b"\n") or line.isspace():
                continue  # half-written by a stopped run
            try:
                record = loads(line)
            except (ValueError, RecursionError):
                record = None
            if not isinstance(record, dict):
                raise BenchError("corrupt trace line: not a JSON object", file=source,
                                 line=number)
            try:  # checked here, so that the error names the shard's file, not the merge's
                TraceRecord.model_validate(record)
            except ValidationError as exc:
                field, problem = validation_problem(exc)
                raise BenchError(f"trace line: {problem}" if "newer bench" in problem
                                 else f"corrupt trace line: {problem}", file=source,
                                 line=number, field=field) from None
            record["run_id"] = run_id
            out.write(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
        out.flush()
        os.fsync(out.fileno())


def merge_runs(run_ids: Sequence[str], *, run_id: str | None = None,
               allow_partial: bool = False, command: Sequence[str] = ()) -> MergeResult:
    """Join shard runs into one new run (the rules are in the module docstring).

    Args:
        run_ids: the shards' run ids under ``reports/runs``, in any order.
        run_id: the merged run's id (default: a new ``YYYYmmdd-HHMMSS-xxxx``).
        allow_partial: accept missing and unfinished shards (the merged run is ``partial``).
        command: the command line, stored in the manifest.

    Returns:
        A :class:`MergeResult`.

    Raises:
        BenchError: no run given, a run given twice, an unknown or corrupt run, a run that is
            not a shard or is being written, runs that differ (names the run and the field),
            a shard given twice, a missing or unfinished shard without ``allow_partial``, a
            row outside its shard's slice, a dataset or description that changed, or a
            merged run id that exists already or is a dangling symbolic link.
        OSError: the merged run cannot be written (nothing is left behind).
    """
    if not run_ids:
        raise BenchError("bench merge needs the runs of a plan's shards")
    repeated = sorted({r for r in run_ids if list(run_ids).count(r) > 1})
    if repeated:
        raise BenchError(f"run '{repeated[0]}' is given twice")
    merged_id = check_run_id(run_id or new_run_id())
    final = runs_dir() / merged_id
    if final.exists():
        raise BenchError(f"run '{merged_id}' already exists; choose another --run-id", file=final)
    # a dangling link there made the final rename fail naming the hidden merge folder
    RunStore(runs_dir(), merged_id).check_dir()
    shards = [_open(r) for r in run_ids]
    for other in shards[1:]:
        _differences(shards[0], other)
    _check_identities(shards)
    missing = _check_set(shards, allow_partial)
    shards.sort(key=lambda s: s.index)
    with contextlib.ExitStack() as locks:
        for shard in shards:  # no shard may be resumed (appended to) while it is read
            locks.enter_context(shard.store.writing())
            # read again under the lock; "running" with the lock ours: its writer died
            shard.manifest = shard.store.load_manifest()
            shard.status = shard.manifest.status
            if shard.status == "running":
                shard.status = CRASHED
        planned, slices = _plan_slices(shards)
        # the unfinished runs of merges killed before their cleanup (kill -9, power cut)
        sweep_abandoned(runs_dir(), f"{MERGE_PREFIX}*")
        tmp_root = runs_dir() / f"{MERGE_PREFIX}{secrets.token_hex(4)}"
        tmp_root.mkdir()
        owner = claim(tmp_root)  # held until the folder is gone
        try:
            result = _write(shards, slices, planned, missing, merged_id, tmp_root,
                            allow_partial, list(command))
            if final.exists():
                raise BenchError(f"run '{merged_id}' already exists; choose another --run-id",
                                 file=final)
            os.rename(tmp_root / merged_id, final)
        finally:
            shutil.rmtree(tmp_root, ignore_errors=True)
            if owner is not None:
                owner.close()
    return result


def _write(shards: list[Shard], slices: list[set[str]], planned: int, missing: list[str],
           run_id: str, tmp_root: Path, allow_partial: bool, command: list[str]) -> MergeResult:
    """Write the merged run into ``tmp_root/run_id``: rows, traces, then the manifest.

    Raises:
        BenchError: a row outside its shard's slice, or an unfinished shard without
            ``allow_partial``.
    """
    from bench.executor.traces import TRACES
    store = RunStore(tmp_root, run_id)
    store.dir.mkdir(parents=True)
    done: set[str] = set()
    unfinished: list[tuple[str, str, int, int]] = []
    warnings: list[str] = []
    merged_from: list[ManifestShard] = []
    writer = store.writer()
    try:
        for shard in shards:
            mine = slices[shard.index - 1]
            read = RowsRead(shard.store.results_path)
            kept = set()
            # one per key, the first (RunStore.iter_read), streamed: no row is held
            for row in shard.store.iter_read(shard.manifest, plan=lambda row: None
                                             if row.key in mine else "another shard's row, or "
                                             "a case the run did not select", into=read):
                kept.add(row.key)
                writer.append(row.model_copy(update={"run_id": run_id}))
            if read.outside:  # the merged run would hold a row no shard planned
                number, key, why = read.outside[0]
                raise BenchError(f"{shard.name} holds row '{key}', which is not in its shard "
                                 f"of the plan ({why})", file=shard.store.results_path,
                                 line=number, field="key")
            warnings += read.report()  # the lock is ours: a cut last line is a dead writer's
            if shard.status != "complete" or len(kept) < len(mine):
                if not allow_partial:
                    raise BenchError(
                        f"{shard.name} is {shard.status} with {len(kept)} of "
                        f"{count(len(mine), 'row')}; finish it with: bench run --resume "
                        f"{shard.store.run_id} (or pass --allow-partial)",
                        file=shard.store.manifest_path, field="status")
                unfinished.append((shard.store.run_id, shard.status, len(kept), len(mine)))
            done |= kept
            merged_from.append(ManifestShard(
                run_id=shard.store.run_id, shard=shard.config.shard,
                status=shard.status, rows=len(kept),
                started_at=shard.manifest.started_at,
                ended_at=shard.manifest.ended_at,
                git_commit=shard.manifest.git_commit,
                host=shard.manifest.host,
                providers_skipped=shard.manifest.providers_skipped or []))
    finally:
        writer.close()
    for shard in shards:
        _copy_traces(shard, store.dir / TRACES, run_id)
    manifest = _manifest(shards, run_id, command, planned, len(done), missing, merged_from)
    store.write_manifest(manifest)
    commits = sorted({str(s.manifest.git_commit) for s in shards})
    return MergeResult(run_id, manifest, missing, unfinished, commits, warnings)


def _manifest(shards: list[Shard], run_id: str, command: list[str], planned: int, done: int,
              missing: list[str], merged_from: list[ManifestShard]) -> Manifest:
    """The merged run's manifest: the first shard's, with the merge's counts and times."""
    first = shards[0].manifest
    providers: dict[str, JsonObject] = {}
    for shard in shards:
        for provider_id, described in _described(shard).items():
            providers.setdefault(provider_id, described)

    def spent(field: str) -> float:
        return sum(getattr(s.manifest.spent, field) or 0 if s.manifest.spent else 0
                   for s in shards)

    started = [s.manifest.started_at for s in shards if s.manifest.started_at]
    ended = [s.manifest.ended_at for s in shards if s.manifest.ended_at]
    skipped: dict[str, ManifestProviderNote] = {}
    for shard in shards:
        for entry in shard.manifest.providers_skipped or []:
            skipped.setdefault(str(entry.provider), entry)
    cached = [s.manifest.cache for s in shards  # shards with the cache on
              if s.manifest.cache is not None and s.manifest.cache.model_fields_set]
    merged = Manifest(
        run_id=run_id,
        status="complete" if done == planned else "partial",
        command=command,
        config=shards[0].config.model_copy(update={"shard": None}).model_dump(),
        dataset=first.dataset,
        variants=first.variants,
        providers=list(providers.values()),
        providers_skipped=list(skipped.values()),
        rows_planned=planned,
        rows_done=done,
        started_at=min(started) if started else None,
        ended_at=max(ended) if ended else None,
        merged_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        spent=ManifestSpent(billed_usd=round(spent("billed_usd"), 6),
                            billed_tokens=int(spent("billed_tokens")),
                            billed_requests=int(spent("billed_requests"))),
        cache=summed_cache(cached) if cached else None,
        merged_from=merged_from,
        shards_missing=missing,
    )
    # the first shard's inputs and environment, where its manifest has them (each value
    # from the same field of a Manifest: of its type)
    for field in ("cases_skipped", "bfcl", "versions", "git_commit", "host", "pricing",
                  "budget"):
        if field in first.model_fields_set:
            setattr(merged, field, getattr(first, field))
    return merged
