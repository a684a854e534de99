"""How provider ids are shown: the one place outside the registry that reads an id's parts."""

from __future__ import annotations

from typing import Iterable

from bench.providers.registry import kind_of, provider_spec


def shown_provider_ids(ids: Iterable[str]) -> dict[str, str]:
    """How the terminal table shows each provider id: whole, except ``replay:`` ids of a file
    path, which keep the last path parts that tell them apart (at least the file name), e.g.
    ``replay:/home/me/project/reports/cache/responses.sqlite`` -> ``replay:…/responses.sqlite``
    (``replay:…/a/responses.sqlite`` and ``replay:…/b/responses.sqlite`` when two files share
    a name). A run id (``replay:20261130-050032-973d``) has no path and stays whole.

    Args:
        ids: provider ids (duplicates allowed).

    Returns:
        ``{provider id: text to show}``; distinct ids always get distinct texts.
    """
    unique = list(dict.fromkeys(ids))
    paths: dict[str, tuple[tuple[str, ...], str]] = {}
    for pid in unique:
        spec = provider_spec(pid)
        if spec is None or not spec.recorded:
            continue
        source, hash_sign, recorded = pid.partition(":")[2].partition("#")
        if "/" in source.rstrip("/"):
            parts = tuple(part for part in source.split("/") if part)
            paths[pid] = (parts, hash_sign + recorded)
    keep = {pid: 1 for pid in paths}
    while True:
        shown = {pid: pid for pid in unique}
        for pid, (parts, suffix) in paths.items():
            if keep[pid] < len(parts):
                shown[pid] = f"{kind_of(pid)}:…/" + "/".join(parts[-keep[pid]:]) + suffix
        texts = list(shown.values())
        clashing = [pid for pid in paths if texts.count(shown[pid]) > 1
                    and shown[pid] != pid]
        if not clashing:
            return shown
        for pid in clashing:
            keep[pid] += 1
