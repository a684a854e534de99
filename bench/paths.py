"""Where bench finds datasets, descriptions and run directories: shortcuts to the current
project (:func:`bench.project.current_project`) for code that does not take a
:class:`bench.project.Project` argument yet. New code takes a ``project`` and uses its
attributes."""

from __future__ import annotations

from pathlib import Path

from bench.project import PACKAGE_PARENT, current_project

__all__ = ["PACKAGE_PARENT", "cache_dir", "datasets_dir", "descriptions_dir", "project_root",
           "runs_dir"]


def project_root() -> Path:
    """The current project's folder (:func:`bench.project.current_project`: the active one,
    else ``$BENCH_HOME``, a cwd holding ``datasets/`` and ``descriptions/``, or this
    package's checkout)."""
    return current_project().root


def datasets_dir() -> Path:
    """``<root>/datasets``: one folder per dataset, each with ``cases.jsonl``."""
    return current_project().datasets_dir


def descriptions_dir() -> Path:
    """``<root>/descriptions``: ``templates/*.j2`` and one folder per toolset."""
    return current_project().descriptions_dir


def runs_dir() -> Path:
    """``<root>/reports/runs``: one folder per run (git-ignored)."""
    return current_project().runs_dir


def cache_dir() -> Path:
    """``$BENCH_CACHE_DIR`` if set, else ``<root>/reports/.cache`` (git-ignored): derived data
    that bench can rebuild (the executor's shop database, the model's saved prefix states)."""
    return current_project().cache_dir
