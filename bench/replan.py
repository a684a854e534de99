"""The plan of a stored run, rebuilt from its stored config with this project's dataset and
descriptions, as ``bench run --resume`` rebuilds it.

``bench merge`` needs it to deal each shard its slice; ``bench show`` to tell which rows of
``results.jsonl`` belong to the run (a row of another shard, or of a case the run did not
select, is not one of its rows). Both first check that the dataset and every variant's
descriptions are byte for byte those the run ran with (SHA-256 in the manifest): another
dataset would plan other cases.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from bench.datasets.loader import HF_PREFIX
from bench.errors import BenchError
from bench.project import Project
from bench.results import Manifest
from bench.store import RunStore

if TYPE_CHECKING:  # the session is imported when a plan is rebuilt, not with this module
    from bench.runner import PlanItem, RunConfig


def stored_config(store: RunStore, manifest: Manifest) -> "RunConfig":
    """The run's :class:`~bench.runner.RunConfig` as a resume reads it
    (:func:`bench.runner.config.stored_run_config`: old runs' settings migrated).

    Raises:
        BenchError: the stored config does not validate (names the manifest and field).
    """
    from bench.runner.config import stored_run_config
    return stored_run_config(manifest.config, file=store.manifest_path)


def rebuild_plan(config: "RunConfig", manifest: Manifest, store: RunStore,
                 *, ran_with: str, hint: str, project: Project | None = None,
                 check_catalogs: bool = True) -> Sequence["PlanItem"]:
    """The plan of ``config`` (the shard's slice when ``config.shard`` is set), built from
    ``project``'s dataset and descriptions, checked against ``manifest``'s SHA-256 of both.

    Args:
        config: the run's config (:func:`stored_config`); its pricing and cache paths are
            ignored (they plan nothing, and may not exist here).
        manifest: the run's manifest.
        store: the run (the session needs one; nothing is written).
        ran_with: who ran with the files, for messages (``"the shards"``, ``"run 'ID'"``).
        hint: what to do when they differ, appended to the message.
        project: where the dataset and descriptions are (default: the current project).
        check_catalogs: also check the grown catalogs (``--tools``) against the manifest's;
            off for a reader that needs only the plan's keys, which do not depend on the
            distractors drawn (a toolset imported since the run does not change them).

    Raises:
        BenchError: the dataset or descriptions cannot be loaded, or they are not those
            the run ran with ("dataset 'NAME' is not the one RAN_WITH ran with (its SHA-256
            differs); HINT"), a grown catalog (``--tools``) included.
    """
    from bench.runner.session import RunSession
    from bench.toolspace.setup import catalog_digests, changed_catalog
    config = config.model_copy(update={"pricing": None, "cache_path": None})
    session = RunSession(config, store=store, command=[], project=project)
    if session.dataset.sha256 != manifest.dataset.sha256:
        raise BenchError(f"dataset '{config.dataset}' is not the one {ran_with} ran with (its "
                         f"SHA-256 differs); {hint}", file=session.dataset.path)
    for variant in session.variants:
        ran = next((v.sha256 for v in manifest.variants
                    if v.name == variant.name and v.toolset == variant.toolset), None)
        if ran != variant.sha256:
            raise BenchError(f"variant '{variant.name}' of '{variant.toolset}' is not the one "
                             f"{ran_with} ran with (its SHA-256 differs); {hint}")
    stored = manifest.toolspace.catalogs if manifest.toolspace is not None else None
    changed = changed_catalog(catalog_digests(stored),
                              catalog_digests(session.spaces.describe())) \
        if check_catalogs else None
    if changed is not None:  # the distractor toolsets under descriptions/ differ
        raise BenchError(f"the catalog {changed} is not the one {ran_with} ran with (its "
                         f"SHA-256 differs: the toolsets its distractors come from under "
                         f"descriptions/ changed); {hint}")
    return session.plan


def planned_keys(store: RunStore, manifest: Manifest, project: Project | None = None
                 ) -> set[str]:
    """The keys (``case|condition|provider|trial``) of run ``store``'s plan, its shard's
    for a shard (:func:`rebuild_plan`).

    Raises:
        BenchError: as :func:`stored_config` and :func:`rebuild_plan`, or a dataset read from
            the Hugging Face Hub (``hf:``: loading it may download it).
    """
    config = stored_config(store, manifest)
    if config.dataset.startswith(HF_PREFIX):  # a reader must not download it
        raise BenchError(f"dataset '{config.dataset}' is read from the Hugging Face Hub, "
                         "not rebuilt here", file=store.manifest_path, field="config.dataset")
    plan = rebuild_plan(config, manifest, store, ran_with=f"run '{store.run_id}'",
                        hint="its rows are checked against its manifest only",
                        project=project, check_catalogs=False)
    return {item.key for item in plan}
