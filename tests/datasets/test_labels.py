"""Label check over every dataset under datasets/ (issue 3): the labels fit the tools.

For each dataset: every expected call validates against its toolset's richest variant (l50),
taking each acceptable literal value and treating null as "omitted"; every tool of the toolset
is expected by at least MIN_CASES_PER_TOOL cases; no two cases share a normalised conversation;
every no_call case mentions the domain (keywords from the datasheet's ```keywords block);
multi-turn histories pair every tool call id with one tool result; every case carries exactly
the category tag its shape implies (bench.datasets.stats.structural_category); the datasheet's
generated counts are current.

Episode datasets (every case ``"kind": "episode"``) take the checks that apply to them: their
required calls validate (arguments a required call does not list are free, so required
arguments may be unlisted), conversations are unique, no-call episodes mention the domain.
Tool coverage, category tags and the generated stats block are single-answer notions;
tests/episodes/test_datasets.py checks episode datasets' own counts.
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.datasets import load_dataset
from bench.datasets.loader import MATCHER_KEYS, Dataset
from bench.datasets.stats import BEGIN, END, declared_category, markdown, structural_category
from bench.descriptions.variants import available_variants, load_variant
from bench.models import Case, Tool

ROOT = Path(__file__).resolve().parents[2]
DATASETS = sorted(p.parent.name for p in (ROOT / "datasets").glob("*/cases.jsonl"))


def _all_episodes(name: str) -> bool:
    """Every line of the dataset's file is an episode case (read as plain JSON, cheaply)."""
    lines = (ROOT / "datasets" / name / "cases.jsonl").read_text(encoding="utf-8").splitlines()
    return all(json.loads(line).get("kind") == "episode" for line in lines if line.strip())


EPISODE_DATASETS = [n for n in DATASETS if _all_episodes(n)]
SINGLE_DATASETS = [n for n in DATASETS if n not in EPISODE_DATASETS]
MIN_CASES_PER_TOOL = 10  # issue 3: "every tool is exercised by at least 10 cases"
RICHEST = "l50"


@cache
def dataset(name: str) -> Dataset:
    """The dataset, loaded once per test session."""
    return load_dataset(name, root=ROOT / "datasets")


@cache
def tools(toolset: str) -> dict[str, Tool]:
    """The toolset's tools in its richest variant (l50, else its last listed variant)."""
    names = available_variants(toolset, ROOT / "descriptions")
    variant = RICHEST if RICHEST in names else names[-1]
    return {t.name: t for t in load_variant(toolset, variant, root=ROOT / "descriptions").tools}


def _is_matcher(value: Any) -> bool:
    return isinstance(value, dict) and any(k in MATCHER_KEYS for k in value)


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def _call_errors(tool: Tool, arguments: dict[str, list[Any]],
                 unlisted_free: bool = False) -> list[str]:
    """Why an expected call's acceptable values cannot all be sent to ``tool`` (empty: fine).

    Each literal acceptable value is put into an arguments object with, for the other
    arguments, their first literal value (omitted where null comes first or only matchers are
    listed); every such object must validate against the tool's whole schema. A required
    argument may not list null. ``unlisted_free`` (an episode's required call,
    :class:`bench.models.RequiredCall`): arguments the label does not list are free, so a
    required argument may be unlisted and is not demanded of the objects checked.
    """
    schema = tool.input_schema
    required = set(schema.get("required", []))
    errors = [f"required argument '{a}' lists null (may be omitted)"
              for a, values in arguments.items() if a in required and None in values]
    unknown = set(arguments) - set(schema.get("properties", {}))
    errors += [f"unknown argument '{a}'" for a in sorted(unknown)]
    missing = required - set(arguments)
    if unlisted_free:
        schema = dict(schema, required=[r for r in schema.get("required", [])
                                        if r in arguments])
    else:
        errors += [f"required argument '{a}' not listed" for a in sorted(missing)]
    if errors:
        return errors
    base = {a: values[0] for a, values in arguments.items()
            if values[0] is not None and not _is_matcher(values[0])}
    matched_only = {a for a, values in arguments.items()
                    if all(_is_matcher(v) or v is None for v in values)}
    # An argument checked only by a matcher has no literal to send; relax "required" for it.
    relaxed = dict(schema, required=[r for r in schema.get("required", [])
                                     if r not in matched_only])
    validator = _validator(relaxed)
    for arg, values in arguments.items():
        for value in values:
            if _is_matcher(value):
                continue
            instance = dict(base)
            if value is None:
                instance.pop(arg, None)
            else:
                instance[arg] = value
            errors += [f"{arg}={value!r}: {e.message}" for e in validator.iter_errors(instance)]
    return errors


def _user_text(case: Case) -> str:
    return "\n".join(m.content or "" for m in case.messages if m.role == "user")


def _normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return re.sub(r"[\W_]+", "", text)


def domain_keywords(name: str) -> list[str]:
    """Keywords of the dataset's domain, from the datasheet's fenced ```keywords block."""
    readme = ROOT / "datasets" / name / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    block = re.search(r"```keywords\n(.*?)```", text, re.S)
    return [k.strip().casefold() for k in block.group(1).splitlines() if k.strip()] \
        if block else []


@pytest.mark.parametrize("name", DATASETS)
def test_expected_calls_validate_against_the_richest_variant(name):
    problems = []
    for case in dataset(name).cases:
        toolset = tools(case.toolset)
        for i, call in enumerate(case.expected.calls):
            if call.name not in toolset:
                problems.append(f"{case.id} call {i}: unknown tool {call.name}")
                continue
            problems += [f"{case.id} call {i} {call.name}: {e}"
                         for e in _call_errors(toolset[call.name], call.arguments,
                                               unlisted_free=case.kind == "episode")]
    assert problems == []


@pytest.mark.parametrize("name", SINGLE_DATASETS)
def test_every_tool_is_expected_by_enough_cases(name):
    data = dataset(name)
    counts = {(ts, t): 0 for ts in data.toolsets for t in tools(ts)}
    for case in data.cases:
        for tool in {c.name for c in case.expected.calls}:
            counts[(case.toolset, tool)] = counts.get((case.toolset, tool), 0) + 1
    short = {f"{ts}.{t}": n for (ts, t), n in counts.items() if n < MIN_CASES_PER_TOOL}
    assert short == {}


@pytest.mark.parametrize("name", DATASETS)
def test_no_duplicate_conversations(name):
    seen: dict[str, str] = {}
    duplicates = []
    for case in dataset(name).cases:
        key = _normalise("\n".join(f"{m.role}:{m.content or ''}{m.tool_calls or ''}"
                                   for m in case.messages))
        if key in seen:
            duplicates.append((seen[key], case.id))
        seen.setdefault(key, case.id)
    assert duplicates == []


@pytest.mark.parametrize("name", DATASETS)
def test_no_call_cases_mention_the_domain(name):
    keywords = domain_keywords(name)
    assert keywords, f"datasets/{name}/README.md needs a ```keywords block (one per line)"
    implausible = [c.id for c in dataset(name).cases if c.expected.no_call
                   and not any(k in _user_text(c).casefold() for k in keywords)]
    assert implausible == []


@pytest.mark.parametrize("name", DATASETS)
def test_history_tool_calls_are_paired_with_results(name):
    problems = []
    for case in dataset(name).cases:
        open_ids: set[str] = set()
        seen_ids: set[str] = set()
        toolset = tools(case.toolset)
        for i, message in enumerate(case.messages):
            if message.role == "assistant" and message.tool_calls:
                if open_ids:
                    problems.append(f"{case.id} message {i}: calls {sorted(open_ids)} unanswered")
                for call in message.tool_calls:
                    call_id = call.get("id")
                    if not call_id or call_id in seen_ids:
                        problems.append(f"{case.id} message {i}: missing or repeated id {call_id}")
                    seen_ids.add(call_id)
                    open_ids.add(call_id)
                    tool = toolset.get(call.get("name"))
                    if tool is None or not isinstance(call.get("arguments"), dict):
                        problems.append(f"{case.id} message {i}: bad call {call}")
                    elif errors := list(_validator(tool.input_schema).iter_errors(
                            call["arguments"])):
                        problems.append(f"{case.id} message {i}: {errors[0].message}")
            elif message.role == "tool":
                if message.tool_call_id not in open_ids:
                    problems.append(f"{case.id} message {i}: result for unknown or answered "
                                    f"call {message.tool_call_id}")
                open_ids.discard(message.tool_call_id)
            elif open_ids:
                problems.append(f"{case.id} message {i}: calls {sorted(open_ids)} unanswered")
                open_ids.clear()
        if open_ids or case.messages[-1].role not in ("user", "tool"):
            problems.append(f"{case.id}: the conversation must end with a user message or "
                            "with the results of every call")
    assert problems == []


@pytest.mark.parametrize("name", SINGLE_DATASETS)
def test_each_case_has_the_category_tag_its_shape_implies(name):
    wrong = {c.id: (declared_category(c), structural_category(c))
             for c in dataset(name).cases if declared_category(c) != structural_category(c)}
    assert wrong == {}


@pytest.mark.parametrize("name", SINGLE_DATASETS)
def test_datasheet_counts_are_generated_from_the_cases(name):
    readme = (ROOT / "datasets" / name / "README.md").read_text(encoding="utf-8")
    assert BEGIN in readme and END in readme, "datasheet lacks the generated stats block"
    block = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    data = dataset(name)
    names = [t for ts in data.toolsets for t in tools(ts)]
    assert block == markdown(data, names).strip(), (
        f"run: python -m bench.descriptions.datasheet {name} --write")


def test_call_check_rejects_a_bad_label():
    """The validator above can fail: a wrong enum case, a null on a required argument."""
    tool = Tool(name="t", description="", input_schema={
        "type": "object", "properties": {"unit": {"type": "string", "enum": ["asc", "desc"]},
                                         "id": {"type": "string"}},
        "required": ["id"], "additionalProperties": False})
    assert _call_errors(tool, {"id": ["x"], "unit": ["asc", None]}) == []
    assert any("ASC" in e for e in _call_errors(tool, {"id": ["x"], "unit": ["ASC"]}))
    assert _call_errors(tool, {"id": ["x", None]}) == [
        "required argument 'id' lists null (may be omitted)"]
    # an episode's required call may leave 'id' unlisted, but a listed value still counts
    assert _call_errors(tool, {"unit": ["asc"]}) == ["required argument 'id' not listed"]
    assert _call_errors(tool, {"unit": ["asc"]}, unlisted_free=True) == []
    assert any("ASC" in e for e in _call_errors(tool, {"unit": ["ASC"]}, unlisted_free=True))


# -- every shipped label executes on bench's reference backend -------------------------------

REFERENCE_DATASETS = ("ecommerce", "analytics", "logistics")


@pytest.mark.slow
@pytest.mark.parametrize("name", REFERENCE_DATASETS)
def test_every_shipped_label_executes_on_its_state_or_declares_why_not(name):
    from bench.executor.label_results import label_failures
    dataset = load_dataset(name)
    failures = [f"{f.case_id} call {f.index} ({f.tool}): {f.error}"
                for toolset in dataset.toolsets
                for f in label_failures(dataset.cases, toolset,
                                        load_variant(toolset, "l50").tools)]
    assert failures == []
    for case in dataset.cases:  # a declared reason is a result id issued in the history
        if case.expected.not_executable is not None:
            history = json.dumps([m.model_dump() for m in case.messages[:-1]])
            ids = [v for call in case.expected.calls
                   for v in call.arguments.get("result_id", [])]
            assert ids and all(i in history for i in ids), case.id


@pytest.mark.slow
def test_a_bad_override_of_a_single_case_is_one_error_naming_file_line_and_field(
        run_bench, project):
    from tests.cli.test_errors import assert_one_line_error
    good = json.loads((project / "datasets" / "ecommerce" / "cases.jsonl")
                      .read_text(encoding="utf-8").splitlines()[0])
    bad = dict(good, id="bad-state", state={"overrides": [
        "UPDATE orders SET status = 'paid'", "UPDATE nowhere SET x = 1"]})
    path = project / "bad.jsonl"
    path.write_text(json.dumps(good, ensure_ascii=False) + "\n"
                    + json.dumps(bad, ensure_ascii=False) + "\n", encoding="utf-8")
    result = run_bench("run", "--dataset", str(path), "--provider", "oracle", "-v", "l3")
    assert_one_line_error(result, f"{path}:2", "state.overrides.1", "no such table: nowhere")


def test_a_single_case_may_declare_state_but_not_executable_needs_calls():
    base = {"id": "s", "toolset": "ecommerce", "lang": "en",
            "messages": [{"role": "user", "content": "hi"}]}
    case = Case.model_validate({**base, "expected": {"calls": [{"name": "get_order_status"}]},
                                "state": {"overrides": ["SELECT 1"], "user_id": "C0001"}})
    assert case.state is not None and case.state.overrides == ["SELECT 1"]
    with pytest.raises(ValueError, match="not_executable is only for cases that expect calls"):
        Case.model_validate({**base, "expected": {"no_call": True, "not_executable": "why"}})
    with pytest.raises(ValueError, match="not_executable needs a reason"):
        Case.model_validate({**base, "expected": {"calls": [{"name": "get_order_status"}],
                                                  "not_executable": " \t"}})


@pytest.mark.slow
def test_a_shipped_toolset_label_that_fails_on_the_reference_backend_is_a_lint_error(
        run_bench, project):
    cases = (project / "datasets" / "ecommerce" / "cases.jsonl").read_text(encoding="utf-8")
    stated = next(json.loads(line) for line in cases.splitlines()
                  if json.loads(line)["id"] == "ecom-0171")
    assert stated["state"]["overrides"]  # the order is unshipped only in the case's state
    broken = {k: v for k, v in stated.items() if k != "state"}
    folder = project / "datasets" / "broken"
    folder.mkdir()
    (folder / "cases.jsonl").write_text(json.dumps(broken, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    result = run_bench("lint", "--toolset", "ecommerce", "--variant", "l50", "--dataset",
                       "broken", "--json")
    assert result.returncode == 1, result.stderr
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "BL015"]
    assert [(f["severity"], f["tool"]) for f in found] == [("error", "cancel_order")]
    assert "not_cancellable" in found[0]["message"]
    assert "'state'" in found[0]["hint"] and "not_executable" in found[0]["hint"]


@pytest.mark.slow
def test_a_shipped_toolset_name_the_project_gives_its_own_backend_is_not_linted_on_bench_data(
        run_bench, project):
    """A project may serve the ecommerce tools from its own module (runs execute there, and
    labels come from its recordings): bench's reference data says nothing about its labels,
    and lint never calls the module."""
    cases = (project / "datasets" / "ecommerce" / "cases.jsonl").read_text(encoding="utf-8")
    stated = next(json.loads(line) for line in cases.splitlines()
                  if json.loads(line)["id"] == "ecom-0171")
    broken = {k: v for k, v in stated.items() if k != "state"}  # fails on bench's data
    folder = project / "datasets" / "mine"
    folder.mkdir()
    (folder / "cases.jsonl").write_text(json.dumps(broken, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    (project / "shop.py").write_text(
        "def cancel_order(order_id: str, reason: str) -> dict:\n"
        "    open('calls.log', 'a').write(order_id + '\\n')\n"
        "    return {'order_id': order_id, 'status': 'cancelled'}\n", encoding="utf-8")
    (project / "pyproject.toml").write_text(
        '[tool.bench.toolsets.ecommerce]\nexecute = "python"\nmodule = "shop.py"\n',
        encoding="utf-8")
    result = run_bench("lint", "--toolset", "ecommerce", "--variant", "l50", "--dataset",
                       "mine", "--json")
    assert result.returncode == 0, result.stderr
    assert [f for f in json.loads(result.stdout)["findings"] if f["code"] == "BL015"] == []
    assert not (project / "calls.log").exists()
