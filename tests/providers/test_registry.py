"""The provider registry (a decorator with capabilities), and the ``function`` and ``oracle``
providers run through the real runner, parser and scorer."""

from __future__ import annotations

import json
import textwrap

import pytest

import bench.providers
from bench.descriptions import load_variant
from bench.errors import BenchError
from bench.providers import make_provider
from bench.providers.function import register_function
from bench.providers.registry import (provider, provider_spec, registered_kinds,
                                      unregister_provider)
from bench.paths import runs_dir
from bench.project import Project
from bench.runner import RunConfig, Runner


def _rows(run_id: str) -> list[dict]:
    store = Project.from_env().store(run_id)
    return [row.to_json_dict() for row in store.load_rows(store.load_manifest())]


def first_tool(messages, tools, trial):  # noqa: ANN001, ANN201 - a user's answer function
    """Always call the first tool offered, without arguments."""
    return [{"name": tools[0].name, "arguments": {}}]


def test_oracle_scores_the_shipped_ecommerce_labels_right(project):
    """Every case answered with its own label: tool selection, arguments, no-call and ask are
    100% (every SQL pattern carries an example the oracle sends)."""
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"],
                              execute=False, split="all"), run_id="oracle",
                    command=["bench", "run"])
    runner.run()
    rows = _rows("oracle")
    cases = [json.loads(line) for line in
             (project / "datasets" / "ecommerce" / "cases.jsonl").read_text().splitlines()]
    assert len(rows) == len(cases)
    metrics = [r["metrics"] for r in rows]
    for name in ("selection_correct", "no_call_correct", "ask_correct", "schema_valid"):
        known = [m[name] for m in metrics if m.get(name) is not None]
        assert known and all(known), name
    wrong = {r["case_id"] for r in rows if r["metrics"].get("arguments_correct") is False}
    unlabeled = {r["case_id"] for r in rows if r["request"].get("unlabeled")}
    assert wrong == unlabeled == set()
    manifest = json.loads((runs_dir() / "oracle" / "manifest.json").read_text())
    assert "ecommerce sha256:" in json.dumps(manifest["providers"])


def test_the_oracle_makes_no_episode_call_it_has_no_value_for():
    """An episode's required call whose argument is only a pattern (no "$example", and the
    query does not match it) gets no value: the oracle makes the other ready call, and
    when only that one is left it ends the episode saying why, never sending the
    placeholder to a system."""
    from bench.models import Case, Message, Tool
    from bench.providers.oracle import NO_LITERAL, episode_step

    tools = [Tool(name=name, description=name, input_schema={
        "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
        for name in ("search", "lookup")]
    case = Case.model_validate({
        "id": "e1", "toolset": "t", "lang": "en", "kind": "episode",
        "messages": [{"role": "user", "content": "find the thing"}],
        "success": {"answer_facts": [["found"]]},
        "required_calls": [{"name": "lookup", "arguments": {"q": ["thing"]}},
                           {"name": "search", "arguments": {"q": [{"$regex": "^SELECT"}]}}]})
    first = episode_step(case, case.messages, tools)
    assert first["tool_calls"] == [{"name": "lookup", "arguments": {"q": "thing"}}]
    done = [*case.messages,
            Message(role="assistant", tool_calls=[{"id": "c1", "name": "lookup",
                                                   "arguments": {"q": "thing"}}]),
            Message(role="tool", tool_call_id="c1", content='{"ok": true}')]
    last = episode_step(case, done, tools)
    assert last["tool_calls"] == [] and NO_LITERAL not in json.dumps(last)
    assert last["text"].startswith("I cannot make search: its label gives no value")


def test_the_oracle_sends_only_values_its_case_holds_never_one_it_makes_up():
    """$any gave the oracle a value of the schema's type ("x", 0, the first enum value),
    sent to the user's system as a call no label made. Now an argument gets only a literal,
    a $regex's $example, or the query's own text when a $regex matches it; $any is left out
    when the argument may be omitted (null), else its call is marked unexecutable, like a
    pattern without an example."""
    from bench.models import Case, Tool
    from bench.providers.oracle import NO_LITERAL, label_answer

    tools = [Tool(name="find", description="find", input_schema={
        "type": "object", "properties": {
            "q": {"type": "string"}, "kind": {"type": "string", "enum": ["a", "b"]},
            "limit": {"type": "integer", "minimum": 1}}})]

    def answer(arguments: dict, query: str = "please find the blue bottle"):
        case = Case.model_validate({
            "id": "c1", "toolset": "t", "lang": "en",
            "messages": [{"role": "user", "content": query}],
            "expected": {"calls": [{"name": "find", "arguments": arguments}]}})
        return label_answer(case, tools)

    for label in ({"q": [{"$any": True}]}, {"kind": [{"$any": True}]},
                  {"limit": [{"$any": True}]}):
        name = next(iter(label))
        assert answer(label) == ([{"name": "find", "arguments": {name: NO_LITERAL}}],
                                 [f"find.{name}"], [0]), label
    assert answer({"q": ["bottle"], "limit": [{"$any": True}, None]}) == (
        [{"name": "find", "arguments": {"q": "bottle"}}], [], [])
    assert answer({"limit": [{"$any": True}, 20]}) == (
        [{"name": "find", "arguments": {"limit": 20}}], [], [])
    # text a $regex matches in the query is the user's own words: sent as it is
    assert answer({"q": [{"$regex": "blue"}]}) == (
        [{"name": "find", "arguments": {"q": "please find the blue bottle"}}], [], [])


def test_function_provider_by_registered_name_and_by_module_path(project):
    register_function("first-tool", first_tool)
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=5, execute=False,
                              providers=["function:first-tool",
                                         f"function:{__name__}:first_tool"]),
                    run_id="fn", command=["bench", "run"])
    runner.run()
    rows = _rows("fn")
    first = load_variant("ecommerce", "l3").tools[0].name
    assert len(rows) == 10 and {r["provider"] for r in rows} == set(runner.config.providers)
    for row in rows:
        assert [c["name"] for c in row["parsed"]["calls"]] == [first]
    with pytest.raises(BenchError, match="cannot import 'no_such_module'"):
        make_provider("function:no_such_module:answer")
    with pytest.raises(BenchError, match="function:<module>:<callable>"):
        make_provider("function:unregistered")


def test_a_new_provider_is_one_module(project, tmp_path, monkeypatch):
    """A module named after its kind registers it, capabilities included; nothing else is
    edited: the runner builds it, caps its concurrency and does not ask for a price."""
    folder = tmp_path / "extra"
    folder.mkdir()
    (folder / "echo_first.py").write_text(textwrap.dedent('''
        from bench.providers.function import FunctionProvider
        from bench.providers.registry import provider

        @provider("echo-first", id_form="echo-first:<anything>", max_concurrency=2)
        def _echo():
            def answer(messages, tools, trial):
                return '{"tool_calls": [{"name": "%s", "arguments": {}}]}' % tools[0].name
            return lambda provider_id, rest, options: FunctionProvider(
                answer, provider_id=provider_id, model="echo " + rest)
    '''), encoding="utf-8")
    monkeypatch.setattr(bench.providers, "__path__", [*bench.providers.__path__, str(folder)])
    try:
        runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=3, execute=False,
                                  providers=["echo-first:v1"], concurrency=8, max_usd=1.0),
                        run_id="echo", command=["bench", "run"])
        runner.run()
        spec = provider_spec("echo-first:v1")
        assert (spec.max_concurrency, spec.priced, spec.batch) == (2, False, False)
        built = make_provider("echo-first:v1")
        assert built.max_concurrency == 2  # what Runner.concurrency caps requests in flight at
        runner.providers["echo-first:v1"] = built
        assert runner.concurrency("echo-first:v1") == 2
        assert len(_rows("echo")) == 3
        assert "echo-first:<anything>" in [s.id_form for s in registered_kinds()]
    finally:
        unregister_provider("echo-first")


def test_registration_errors_and_unknown_ids():
    @provider("twice-test")
    def _first():
        return lambda provider_id, rest, options: None

    try:
        with pytest.raises(ValueError, match="already registered"):
            provider("twice-test")(_first)
    finally:
        unregister_provider("twice-test")
    with pytest.raises(ValueError, match="lower-case"):
        provider("Bad_Kind")
    with pytest.raises(BenchError, match=r"unknown provider 'mistral:large' \(use local, "
                                         r"openai:<model>.*function:<module>:<callable>, "
                                         r"oracle, do-nothing\)"):
        make_provider("mistral:large")
    priced = {s.kind: s.priced for s in registered_kinds()}
    assert priced["openai"] and priced["anthropic"] and not priced["local"] \
        and not priced["replay"]


def test_the_bench_command_imports_a_function_module_from_the_current_directory(project):
    """The console script (unlike ``python -m bench``) leaves the current directory off
    sys.path; a ``function:<module>:<callable>`` next to the user must still be found."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    # the script installed with this interpreter (PATH may name another environment's)
    script = Path(sys.executable).with_name("bench")
    if not script.exists():
        pytest.skip(f"the bench console script is not installed next to {sys.executable}")
    (project / "mybaseline.py").write_text(
        "def answer(messages, tools, trial):\n    return []\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([script, "run", "--provider", "function:mybaseline:answer",
                             "--limit", "3", "--variants", "l3", "--no-execute"],
                            cwd=project, env={**env, "BENCH_HOME": str(project)},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "cannot import" not in result.stderr
    assert "rows in" in result.stderr


def test_a_function_module_that_fails_to_import_is_one_line(tmp_path, monkeypatch):
    # only ImportError was caught: a syntax error or an exception at import was a traceback
    (tmp_path / "broken_syntax.py").write_text("def answer(:\n", encoding="utf-8")
    (tmp_path / "raises_at_import.py").write_text("raise ValueError('no key set')\n",
                                                  encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BenchError, match=r"cannot import 'broken_syntax': SyntaxError"):
        make_provider("function:broken_syntax:answer")
    with pytest.raises(BenchError, match=r"cannot import 'raises_at_import': ValueError: "
                                         r"no key set"):
        make_provider("function:raises_at_import:answer")


def circular(messages, tools, trial):  # noqa: ANN001, ANN201
    calls: list = [{"name": tools[0].name, "arguments": {}}]
    calls[0]["arguments"]["self"] = calls
    return calls


def too_deep(messages, tools, trial):  # noqa: ANN001, ANN201
    value: list = []
    for _ in range(100_000):
        value = [value]
    return [{"name": tools[0].name, "arguments": {"x": value}}]


def exits(messages, tools, trial):  # noqa: ANN001, ANN201
    raise SystemExit(3)


@pytest.mark.parametrize("answer, why", [
    (circular, "returned an answer that is not JSON"),
    (too_deep, "returned an answer that is not JSON"),
    (exits, "the function raised SystemExit: 3")])
def test_a_function_that_misbehaves_stops_the_run_in_one_line(project, answer, why):
    # each was a traceback (json's RecursionError, ValueError) or a silent exit 3 (SystemExit)
    register_function(answer.__name__, answer)
    runner = Runner(RunConfig(dataset="ecommerce", variants=["l3"], limit=1, execute=False,
                              providers=[f"function:{answer.__name__}"]),
                    run_id=answer.__name__, command=["bench", "run"])
    with pytest.raises(BenchError) as raised:
        runner.run()
    assert why in str(raised.value) and "\n" not in str(raised.value)
    manifest = json.loads((runs_dir() / answer.__name__ / "manifest.json").read_text())
    assert manifest["status"] == "failed"


def test_what_a_provider_is_comes_from_its_kinds_declaration_not_its_name():
    """The runner, synth and drafting ask the registry what a provider is (the embedded
    model, answers from labels, a recording) rather than comparing ids with "local",
    "oracle" or "replay:"; a kind registered elsewhere gets the same treatment."""
    from bench.providers.registry import (answers_from_labels, is_recorded, provider,
                                          runs_embedded_model, unregister_provider)

    assert runs_embedded_model("local") and not runs_embedded_model("openai:gpt-4o-mini")
    assert answers_from_labels("oracle") and not answers_from_labels("local")
    assert is_recorded("replay:run-1") and not is_recorded("oracle")
    assert not runs_embedded_model("no-such-kind")

    @provider("my-gguf", options="local", deterministic=True)
    def _my_gguf():  # a second embedded runtime, as a plugin would add one
        raise AssertionError("not built here")

    try:
        assert runs_embedded_model("my-gguf") and not answers_from_labels("my-gguf")
    finally:
        unregister_provider("my-gguf")
