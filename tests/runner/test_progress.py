"""`bench run` progress: rows done / planned, rows/s, ETA, variant and provider; plain lines
when stderr is not a terminal (CI logs), rich's bar when it is."""

import pytest
import io
import re

from rich.console import Console

from bench.datasets import load_dataset
from bench.descriptions import load_variant
from bench.progress import RunProgress, format_duration, format_rate
from bench.runner import PlanItem, RunConfig, Runner
from tests.report_runs import expected_answer, make_run

LINE = re.compile(r"^progress: (\d+)/(\d+) rows? \((\d+\.\d)%\), (- rows/s|[\d.]+ rows/s), "
                  r"ETA (-|\d+s|\d+m \d\ds|\d+h \d\dm), variant (\S+), provider (\S+)$")


class SteppingClock:
    """Monotonic seconds that advance ``step`` at every reading (no sleeping)."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def replay_run(run_id: str, limit: int = 6) -> Runner:
    make_run("rec", expected_answer, variants=("l3", "l10"), limit=limit, first=False)
    return Runner(RunConfig(variants=["l3", "l10"], providers=["replay:rec"], limit=limit,
                            concurrency=1, execute=False), run_id=run_id, command=[])


def test_plain_lines_at_each_variant_change_every_interval_and_at_the_end(project):
    runner = replay_run("plain")
    out = io.StringIO()
    console = Console(file=out, width=300)
    assert not console.is_terminal
    with RunProgress(console, interval_s=10.0, clock=SteppingClock(4.0)) as progress:
        runner.run(progress=progress)
    lines = out.getvalue().splitlines()
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    done = [int(m.group(1)) for m in parsed]
    # 12 rows, one per 4 s: row 1 (first l3 row), then every 10 s (rows 4 and 7), row 7 is
    # also the first l10 row, row 10 after 12 s, and the last row
    assert done == [1, 4, 7, 10, 12], lines
    assert [m.group(6) for m in parsed] == ["l3", "l3", "l10", "l10", "l10"]
    assert {m.group(7) for m in parsed} == {"replay:rec"}
    assert lines[1] == ("progress: 4/12 rows (33.3%), 0.25 rows/s, ETA 32s, variant l3, "
                        "provider replay:rec")  # 4 rows in 16 s; 8 left at 4 s each
    assert lines[-1].startswith("progress: 12/12 rows (100.0%), 0.25 rows/s, ETA 0s")


@pytest.mark.slow
def test_a_resumed_run_rates_only_this_sessions_rows(project):
    runner = replay_run("again")
    runner.run()
    rows = runner.store.results_path.read_bytes().splitlines(keepends=True)
    runner.store.results_path.write_bytes(b"".join(rows[:9]))  # 3 rows left to do
    out = io.StringIO()
    resumed = Runner.resume("again", command=[])
    with RunProgress(Console(file=out, width=300), clock=SteppingClock(2.0)) as progress:
        resumed.run(progress=progress)
    first, second = out.getvalue().splitlines()[:2]
    # the session's first row carries its start-up: the rate starts after it
    assert first.startswith("progress: 10/12 rows (83.3%), - rows/s, ETA -, variant l10")
    assert second.startswith("progress: 12/12 rows (100.0%), 0.50 rows/s, ETA 0s, variant l10")


def test_on_a_terminal_it_draws_the_bar_and_prints_no_plain_line(project):
    runner = replay_run("tty", limit=3)
    out = io.StringIO()
    console = Console(file=out, width=160, force_terminal=True, color_system=None)
    with RunProgress(console, clock=SteppingClock(1.0)) as progress:
        runner.run(progress=progress)
    text = out.getvalue()
    assert "progress:" not in text
    assert "l10 · replay:rec" in text and "6/6" in text and "rows/s" in text


def test_one_planned_row_reads_singular(project):
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.runner import PlanItem

    item = PlanItem(load_dataset("ecommerce").cases[0], load_variant("ecommerce", "l3"),
                    "local", 0)
    out = io.StringIO()
    progress = RunProgress(Console(file=out, width=300), clock=SteppingClock(1.0))
    progress(0, 1, None)
    progress(1, 1, item)
    assert out.getvalue() == ("progress: 1/1 row (100.0%), - rows/s, ETA 0s, variant l3, "
                              "provider local\n")


def test_a_slow_first_row_does_not_set_the_eta(project):
    """A model's first row reads the tools block (50 s here), later rows take 5 s each."""
    from bench.datasets import load_dataset
    from bench.descriptions import load_variant
    from bench.runner import PlanItem

    item = PlanItem(load_dataset("ecommerce").cases[0], load_variant("ecommerce", "l3"),
                    "local", 0)
    times = iter([0.0, 50.0, 55.0, 60.0])
    progress = RunProgress(Console(file=io.StringIO(), width=300), clock=lambda: next(times),
                           interval_s=0)
    progress(0, 100, None)
    for done in (1, 2, 3):
        progress(done, 100, item)
    assert progress.rows_per_s == pytest.approx(0.2)
    assert progress.eta_s == pytest.approx(97 * 5)


def test_durations_and_rates():
    assert [format_duration(s) for s in (0, 44.6, 524, 7500)] == ["0s", "45s", "8m 44s",
                                                                  "2h 05m"]
    assert [format_rate(r) for r in (None, 0.071, 1.94, 12.4)] == ["- rows/s", "0.07 rows/s",
                                                                  "1.9 rows/s", "12 rows/s"]


@pytest.mark.slow
def test_bench_run_in_a_log_prints_progress_lines(run_bench, project):
    make_run("rec", expected_answer, variants=("l3", "l10"), limit=4, first=False)
    result = run_bench("run", "--limit", "4", "--variants", "l3,l10", "--provider",
                       "replay:rec", "--run-id", "logged")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("progress:")]
    assert all(LINE.match(line) for line in lines), lines
    assert any("variant l3, provider replay:rec" in line for line in lines)
    assert any("variant l10, provider replay:rec" in line for line in lines)
    assert lines[-1].startswith("progress: 8/8 rows (100.0%)")


# -- a skipped provider: the last row sent prints its line -------------------------------------


def test_the_last_row_sent_prints_its_progress_line_when_a_provider_was_skipped(project):
    """8 rows planned, 4 of them a skipped provider's: the 4th row is this session's last and
    prints its line (the plain log ended at the line before)."""
    cases = list(load_dataset("ecommerce").cases)
    l3 = load_variant("ecommerce", "l3")
    sent = [PlanItem(cases[i], l3, "p", 0) for i in range(4)]
    out = io.StringIO()
    times = iter([0.0, 1.0, 2.0, 3.0, 4.0])
    progress = RunProgress(Console(file=out, width=300), clock=lambda: next(times),
                           interval_s=3600)
    progress.set_plan(sent)
    progress(0, 8, None)
    for done, item in enumerate(sent, start=1):
        progress(done, 8, item)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("progress: 1/8 rows")
    assert lines[-1].startswith("progress: 4/8 rows (50.0%)") and "ETA 0s" in lines[-1]
    assert len(lines) == 2
