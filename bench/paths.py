"""Where bench finds datasets, descriptions and run directories."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_PARENT = Path(__file__).resolve().parent.parent


def project_root() -> Path:
    """Return the folder holding ``datasets/`` and ``descriptions/``.

    Order: the ``BENCH_HOME`` environment variable; the current directory if it holds a
    ``datasets/`` folder; else the checkout that holds this package (an editable install).
    """
    env = os.environ.get("BENCH_HOME")
    if env:
        return Path(env).resolve()
    cwd = Path.cwd()
    if (cwd / "datasets").is_dir() and (cwd / "descriptions").is_dir():
        return cwd
    return PACKAGE_PARENT


def datasets_dir() -> Path:
    """``<root>/datasets``: one folder per dataset, each with ``cases.jsonl``."""
    return project_root() / "datasets"


def descriptions_dir() -> Path:
    """``<root>/descriptions``: ``templates/*.j2`` and one folder per toolset."""
    return project_root() / "descriptions"


def runs_dir() -> Path:
    """``<root>/reports/runs``: one folder per run (git-ignored)."""
    return project_root() / "reports" / "runs"


def cache_dir() -> Path:
    """``$BENCH_CACHE_DIR`` if set, else ``<root>/reports/.cache`` (git-ignored): derived data
    that bench can rebuild (the executor's shop database, the model's saved prefix states)."""
    env = os.environ.get("BENCH_CACHE_DIR")
    return Path(env) if env else project_root() / "reports" / ".cache"
