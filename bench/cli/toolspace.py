"""What ``bench run`` prints of its tool space (:mod:`bench.toolspace`; its options are read
in :mod:`bench.cli.options`): the grown catalogs, and the retrieval signal printed under the
run's table (recall@k per variant, no generation: :mod:`bench.toolspace.signal`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from bench.errors import BenchError

if TYPE_CHECKING:
    from concurrent.futures import Future


def toolspace_notes(runner: Any) -> list[str]:
    """One line per grown catalog of ``runner`` (a :class:`bench.runner.Runner`): tools, the
    distractors drawn per source and the level each was rendered at, then one line per
    renamed distractor (name collisions)."""
    lines = []
    for catalog in runner.session.spaces.describe():
        levels = catalog.levels or {}
        sources = ", ".join(f"{n} from {s} ({levels[s]})"
                            for s, n in (catalog.sources or {}).items())
        lines.append(f"catalog {catalog.toolset}/{catalog.variant}: {catalog.tools} "
                     f"tools = {catalog.own} own + {sources or 'no distractor'}")
        for hit in catalog.collisions or []:
            lines.append(f"  name collision: {hit.source}'s {hit.name} renamed "
                         f"{hit.renamed}")
    return lines + whole_catalog_notes(runner)


def whole_catalog_notes(runner: Any) -> list[str]:
    """One note per ``--top-k`` that is at least a catalog's size (``runner``: a
    :class:`bench.runner.Runner`): that retriever sends every tool (in its ranked order), so
    the condition measures the order, not retrieval; said so that a top-k meant to cut the
    list does not silently cut nothing."""
    setup = runner.session.spaces
    lines = []
    for space in setup.spaces:
        if space.top_k is None:
            continue
        for variant in runner.variants:
            size = len(setup.catalog(variant, space).tools)
            if space.top_k >= size:
                lines.append(f"note: --top-k {space.top_k} is at least the {size} tools of "
                             f"catalog {variant.toolset}/{variant.name}"
                             f"{'' if space.tools is None else f' at --tools {space.tools}'}: "
                             f"{space.retriever} sends every tool (ranked), nothing is left out")
    return lines


def signal_retrievers(config: Any) -> list[str]:
    """The retrievers of the run's fast signal: BM25 always; the embedding retriever when the
    run asks for it, or runs the embedded model (``local``)."""
    wanted = ["bm25"]
    from bench.providers.registry import runs_embedded_model
    if "embedding" in config.retrievers or any(runs_embedded_model(p)
                                               for p in config.providers):
        wanted.append("embedding")
    return wanted


def signal_table(records: list[dict[str, object]]) -> Any:
    """A rich Table of :func:`bench.toolspace.signal.retrieval_signal`: per variant and
    retriever, recall@k with its 95% Wilson interval."""
    from rich.markup import escape
    from rich.table import Table

    from bench.report.table import as_float, format_rate

    table = Table(title="retrieval signal: recall@k of the expected tools per variant (no "
                        "generation; each toolset's own tools)", title_justify="left")
    for column in ("variant", "retriever", "cases"):
        table.add_column(column, justify="right" if column == "cases" else "left")
    ks = [c.split("@")[1] for c in (records[0] if records else {})
          if c.startswith("recall@") and c.count("_") == 0]
    for k in ks:
        table.add_column(f"recall@{k}", justify="right")
    for record in records:
        cells = [escape(str(record["variant"])), str(record["retriever"]),
                 str(record["cases"])]
        for k in ks:
            n = int(as_float(record["cases"]))
            cells.append(format_rate(as_float(record[f"recall@{k}"]),
                                     as_float(record[f"recall@{k}_low"]),
                                     as_float(record[f"recall@{k}_high"]), n))
        table.add_row(*cells)
    return table


def bm25_signal_ahead(runner: Any) -> "Future[list[dict[str, object]]]":
    """Start the BM25 part of the run's retrieval signal in a worker thread, to be passed to
    :func:`print_signal`. Importing bm25s (scipy.sparse, multiprocessing) and numpy and
    ranking the cases took about 0.1-0.2 s after the run's last row (measured on 250 and
    2,000 cases); in a thread it runs while the run's event loop waits on its providers (a
    response waits at most the interpreter's 5 ms switch interval for the loop's turn). The
    embedding retriever is not started here: it loads a model beside the run's own.

    The thread is a daemon: a run stopped (Ctrl-C, SIGTERM) or failed never prints the
    signal, and its exit does not wait for it (a pool's worker is joined at exit: 2.5 s more
    after Ctrl-C on 20,000 cases by 4 variants, measured)."""
    import threading
    from concurrent.futures import Future

    from bench.toolspace.signal import retrieval_signal

    cases, variants = list(runner.cases), list(runner.variants)
    future: Future[list[dict[str, object]]] = Future()

    def work() -> None:
        future.set_running_or_notify_cancel()
        try:
            future.set_result(retrieval_signal(cases, variants, ["bm25"]))
        except BaseException as exc:  # re-raised by result(), in print_signal's thread
            future.set_exception(exc)

    threading.Thread(target=work, name="bench-signal", daemon=True).start()
    return future


class SignalAhead:
    """A run's progress hook that also starts :func:`bm25_signal_ahead` once the run writes
    its first row: by then its first requests are out, so the thread does not delay them.

    Args:
        runner: the run's :class:`bench.runner.Runner`.
        progress: the hook it wraps (``(done, total, item)``, as :data:`ProgressHook`).
    """

    def __init__(self, runner: Any, progress: Callable[..., None]) -> None:
        self.runner, self.progress = runner, progress
        #: The BM25 signal's future, once started (None: the run wrote no row).
        self.future: Future[list[dict[str, object]]] | None = None

    def __call__(self, done: int, total: int, item: object | None = None) -> None:
        """Pass the event on; start the signal at the first row written."""
        if item is not None and self.future is None:
            self.future = bm25_signal_ahead(self.runner)
        self.progress(done, total, item)


def print_signal(runner: Any, console: Any, err: Any,
                 bm25_ahead: "Future[list[dict[str, object]]] | None" = None) -> None:
    """Print the run's retrieval signal under its table (:func:`signal_table`); a retriever
    that cannot run (no embedded model installed) is one note on ``err`` instead.
    ``bm25_ahead`` is :func:`bm25_signal_ahead`'s result, used for the BM25 rows."""
    from bench.toolspace.signal import retrieval_signal

    records = []
    for retriever in signal_retrievers(runner.config):
        try:
            if retriever == "bm25" and bm25_ahead is not None:
                records.extend(bm25_ahead.result())
                continue
            with runner.project.activate():
                records.extend(retrieval_signal(
                    runner.cases, runner.variants, [retriever],
                    embedder=lambda: _embedder(runner.config)))
        except BenchError as exc:
            err.print(f"note: retrieval signal ({retriever}) skipped: {exc}", markup=False)
    if records:
        console.print(signal_table(records))


def _embedder(config: Any) -> object:
    from bench.toolspace.embedding import LlamaEmbedder
    return LlamaEmbedder(config.model, config.model_path, threads=config.threads)
