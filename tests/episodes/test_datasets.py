"""The shipped agent-episode datasets (``datasets/<toolset>-episodes``, BRIEF §10).

Fast and model-free: every episode dataset loads with its labels checked against every
description variant of its toolset and its state SQL run (what ``bench run`` checks at load);
it holds at least 40 episodes in Chinese and English; every episode pattern occurs in both
languages and each labeled episode has the shape its pattern needs; state checks start out
failing exactly when the episode must write; and each datasheet's count table is the one the
file gives.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from bench.datasets import load_dataset
from bench.datasets.labels import check_against_tools
from bench.datasets.loader import Dataset
from bench.descriptions.variants import available_variants, load_variant
from bench.episodes.state import EpisodeDatabase
from bench.models import Case
from bench.runner.plan import check_episodes

ROOT = Path(__file__).resolve().parents[2]
TOOLSETS = ("ecommerce", "logistics", "analytics")
PATTERNS = ("sequential", "parallel", "branch", "open-ended", "recovery-validation",
            "recovery-transient", "paging", "confirmation", "ask-user")
MIN_EPISODES = 40  # per toolset (the agent-episodes issue)
LANGS = ("zh", "en")
BEGIN, END = "<!-- episode-counts:begin -->", "<!-- episode-counts:end -->"
TOTAL_ROW = "**all episodes**"


def _all_episodes(path: Path) -> bool:
    lines = path.read_text(encoding="utf-8").splitlines()
    return all(json.loads(line).get("kind") == "episode" for line in lines if line.strip())


EPISODE_DATASETS = sorted(p.parent.name for p in (ROOT / "datasets").glob("*/cases.jsonl")
                          if _all_episodes(p))


@cache
def dataset(name: str) -> Dataset:
    """The dataset, loaded once per test session."""
    return load_dataset(name, root=ROOT / "datasets")


@cache
def write_tools(toolset: str) -> frozenset[str]:
    """Tools of ``toolset`` that change data (permission write or sensitive, l50 variant)."""
    tools = load_variant(toolset, "l50", root=ROOT / "descriptions").tools
    return frozenset(t.name for t in tools if t.permission != "read")


def pattern_of(case: Case) -> list[str]:
    """The episode pattern tags the case carries."""
    return [t for t in case.tags if t in PATTERNS]


def file_table(cases: tuple[Case, ...]) -> dict[str, tuple[int, int, int]]:
    """Tag -> (zh, en, episodes) counted from the cases, plus the all-episodes row."""
    per = Counter((tag, c.lang) for c in cases for tag in c.tags)
    langs = Counter(c.lang for c in cases)
    table = {tag: (per[(tag, "zh")], per[(tag, "en")], per[(tag, "zh")] + per[(tag, "en")])
             for tag in {t for c in cases for t in c.tags}}
    table[TOTAL_ROW] = (langs["zh"], langs["en"], len(cases))
    return table


def datasheet_table(text: str) -> dict[str, tuple[int, int, int]]:
    """The count table between the datasheet's episode-counts markers.

    Raises:
        AssertionError: the markers or a well-formed table are missing.
    """
    assert BEGIN in text and END in text, "datasheet lacks the episode-counts block"
    block = text.split(BEGIN, 1)[1].split(END, 1)[0]
    rows = {}
    for line in block.strip().splitlines()[2:]:  # header and alignment rows
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 4, f"bad row: {line!r}"
        rows[cells[0]] = tuple(int(c) for c in cells[1:])
    return rows


def test_every_toolset_ships_an_episode_dataset():
    assert {f"{t}-episodes" for t in TOOLSETS} <= set(EPISODE_DATASETS)
    for toolset in TOOLSETS:
        assert dataset(f"{toolset}-episodes").toolsets == [toolset]


@pytest.mark.slow
@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_loads_with_labels_that_fit_every_variant(name):
    data = dataset(name)
    for toolset in data.toolsets:
        for variant in available_variants(toolset, ROOT / "descriptions"):
            tools = load_variant(toolset, variant, root=ROOT / "descriptions").tools
            check_against_tools(data, toolset, tools)  # raises BenchError naming line, field
    check_episodes(data, data.cases, execute=True)  # overrides and state SQL run


@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_size_and_languages(name):
    cases = dataset(name).cases
    assert len(cases) >= MIN_EPISODES
    assert all(c.kind == "episode" for c in cases)
    langs = Counter(c.lang for c in cases)
    assert set(langs) == set(LANGS)
    assert all(0.4 <= langs[lang] / len(cases) <= 0.6 for lang in LANGS), langs


@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_every_pattern_occurs_in_both_languages(name):
    cases = dataset(name).cases
    assert [c.id for c in cases if len(pattern_of(c)) != 1] == []
    seen = Counter((p, c.lang) for c in cases for p in pattern_of(c))
    missing = [(p, lang) for p in PATTERNS for lang in LANGS if not seen[(p, lang)]]
    assert missing == []


def _shape_problem(case: Case) -> str | None:
    """Why the episode's label does not fit its pattern (None: it fits)."""
    pattern = pattern_of(case)[0]
    required, forbidden = case.required_calls, case.forbidden_calls
    success = case.success
    assert success is not None
    facts = [alt for fact in success.answer_facts for alt in fact]
    chained = any(call.after for call in required)
    if pattern == "sequential" and not chained:
        return "no required call depends on an earlier one (after)"
    if pattern == "parallel" and (len(required) < 2 or chained):
        return "needs two or more independent required calls"
    if pattern == "branch" and not (forbidden or chained):
        return "needs the other path forbidden or a decision step before the action"
    if pattern == "open-ended" and len(required) > 1:
        return "the model chooses the tools: at most one required call"
    if pattern == "recovery-validation" and not required:
        return "needs the fixed call as a required call"
    if pattern == "confirmation" and not (case.user_replies or forbidden):
        return "needs the unconfirmed write forbidden or a scripted reply"
    if pattern == "ask-user" and not (forbidden and {"?", "？"} & set(facts)):
        return "needs a forbidden call and a question mark among the answer facts"
    return None


@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_each_episode_has_the_shape_of_its_pattern(name):
    problems = {c.id: why for c in dataset(name).cases if (why := _shape_problem(c))}
    assert problems == {}


@pytest.mark.slow
@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_state_checks_fail_before_a_required_write_and_hold_otherwise(name):
    """On the untouched starting state, an episode that must write has a failing state check
    (so the check sees the write); one that must not write has all checks passing (so a
    stray write is what breaks them)."""
    wrong = {}
    for case in dataset(name).cases:
        checks = case.success.state_checks if case.success else []
        if not checks:
            continue
        must_write = any(c.name in write_tools(case.toolset) for c in case.required_calls)
        with EpisodeDatabase(case.state.overrides if case.state else []) as episode:
            passing = all(r["ok"] for r in episode.check(checks))
        if passing == must_write:
            wrong[case.id] = "passes before the write" if must_write else "fails at the start"
    assert wrong == {}


@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_datasheet_counts_match_the_file(name):
    readme = (ROOT / "datasets" / name / "README.md").read_text(encoding="utf-8")
    assert datasheet_table(readme) == file_table(dataset(name).cases)


def test_a_stale_count_is_caught():
    name = "ecommerce-episodes"
    readme = (ROOT / "datasets" / name / "README.md").read_text(encoding="utf-8")
    stale = re.sub(r"^\| sequential \| (\d+) \|",
                   lambda m: f"| sequential | {int(m.group(1)) + 1} |", readme, count=1,
                   flags=re.M)
    assert stale != readme
    assert datasheet_table(stale) != file_table(dataset(name).cases)


@pytest.mark.parametrize("name", EPISODE_DATASETS)
def test_datasheet_totals_of_calls_and_checks_match_the_file(name):
    readme = (ROOT / "datasets" / name / "README.md").read_text(encoding="utf-8")
    stated = {what: int(n) for n, what in re.findall(
        r"(\d+) (required calls|forbidden calls|state)", " ".join(readme.split()))}
    cases = dataset(name).cases
    assert stated == {
        "required calls": sum(len(c.required_calls) for c in cases),
        "forbidden calls": sum(len(c.forbidden_calls) for c in cases),
        "state": sum(len(c.success.state_checks) for c in cases)}
