"""A bench project: the folder holding ``datasets/``, ``descriptions/`` and ``reports/``.

Library code takes a :class:`Project` argument instead of reading ``$BENCH_HOME`` or the
current directory, so two projects can be used in one process (tests in parallel, the gate
beside a CLI command). Only the command line's edge reads the environment
(:meth:`Project.from_env`).

Code that cannot take the argument yet reaches the project through :func:`current_project`:
the one a caller made current with :meth:`Project.activate` (a context variable: per thread
and per asyncio task, never the process's cwd or environment), else :meth:`Project.from_env`.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

from bench.errors import BenchError

if TYPE_CHECKING:
    from bench.results import Row
    from bench.store import RunStore

PACKAGE_PARENT = Path(__file__).resolve().parent.parent
USER_PRICING_NAME = "pricing.yaml"

_ACTIVE: contextvars.ContextVar["Project | None"] = contextvars.ContextVar(
    "bench_project", default=None)


@dataclass(frozen=True)
class Project:
    """One project folder and where bench keeps its files in it.

    Args:
        root: the project folder (made absolute).
        cache_root: derived data bench can rebuild (``$BENCH_CACHE_DIR`` at the edge; made
            absolute); None: ``<root>/reports/.cache``.

    Both are made absolute once, when the project is made: code that changes the working
    directory later (a user's function in a run) cannot move them.
    """

    root: Path
    cache_root: Path | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).resolve())
        if self.cache_root is not None:
            object.__setattr__(self, "cache_root", Path(self.cache_root).resolve())

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> "Project":
        """The project the command line works in: ``$BENCH_HOME``; else ``cwd`` (default the
        current directory) when it holds ``datasets/`` and ``descriptions/``; else the
        checkout holding this package (an editable install). ``$BENCH_CACHE_DIR`` sets
        :attr:`cache_root`. Only the CLI's edge (and :func:`current_project`'s fallback)
        calls this.

        Raises:
            BenchError: ``$BENCH_HOME`` names something that is not a folder (a folder that
                does not exist yet is accepted: a run creates its ``reports/``).
        """
        environ = os.environ if environ is None else environ
        cache = environ.get("BENCH_CACHE_DIR") or None
        home = environ.get("BENCH_HOME")
        if home:
            if Path(home).exists() and not Path(home).is_dir():
                raise BenchError("$BENCH_HOME is not a folder (the project holding datasets/ "
                                 "and descriptions/)", file=home)
            return cls(Path(home), Path(cache) if cache else None)
        cwd = Path.cwd() if cwd is None else cwd
        if (cwd / "datasets").is_dir() and (cwd / "descriptions").is_dir():
            return cls(cwd, Path(cache) if cache else None)
        return cls(PACKAGE_PARENT, Path(cache) if cache else None)

    @property
    def datasets_dir(self) -> Path:
        """``<root>/datasets``: one folder per dataset, each with ``cases.jsonl``."""
        return self.root / "datasets"

    @property
    def descriptions_dir(self) -> Path:
        """``<root>/descriptions``: ``templates/*.j2`` and one folder per toolset."""
        return self.root / "descriptions"

    @property
    def reports_dir(self) -> Path:
        """``<root>/reports``: runs, reports, caches."""
        return self.root / "reports"

    @property
    def runs_dir(self) -> Path:
        """``<root>/reports/runs``: one folder per run (git-ignored)."""
        return self.reports_dir / "runs"

    @property
    def cache_dir(self) -> Path:
        """:attr:`cache_root`, else ``<root>/reports/.cache`` (the executor's shop database,
        the model's saved prefix states)."""
        return self.cache_root if self.cache_root is not None else self.reports_dir / ".cache"

    @property
    def pricing_file(self) -> Path:
        """``<root>/pricing.yaml``: the project's price overrides (used when it exists)."""
        return self.root / USER_PRICING_NAME

    def resolve(self, path: str | Path) -> Path:
        """``path`` made absolute against :attr:`root` (an absolute path is kept)."""
        path = Path(path)
        return path if path.is_absolute() else self.root / path

    def store(self, run_id: str) -> "RunStore":
        """The run ``run_id`` under :attr:`runs_dir`.

        Raises:
            BenchError: an invalid run id.
        """
        from bench.store import RunStore
        return RunStore(self.runs_dir, run_id)

    def rows(self, run_id: str) -> list["Row"]:
        """The finished rows of run ``run_id`` as :class:`bench.results.Row`, in file order,
        each checked against the run's plan (:meth:`bench.store.RunStore.load_rows`).

        Raises:
            BenchError: an invalid run id, a run without manifest, or a row that does not fit
                the contract or the plan (file, line, field).
        """
        store = self.store(run_id)
        return list(store.load_rows(store.load_manifest()))

    @contextlib.contextmanager
    def activate(self) -> Iterator["Project"]:
        """Make this the project of :func:`current_project` in this thread / asyncio task
        for the block (for code that does not take a ``project`` argument yet). Nothing
        process-wide changes: not the cwd, not ``os.environ``."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)


def active_project() -> Project | None:
    """The project :meth:`Project.activate` made current here, or None."""
    return _ACTIVE.get()


def current_project() -> Project:
    """The active project (:meth:`Project.activate`), else :meth:`Project.from_env`."""
    return _ACTIVE.get() or Project.from_env()
