"""Execution metrics of answers, the runner hook, and ``bench traces``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bench.cli import app
from bench.descriptions import load_variant
from bench.executor.backends import ReferenceBackends
from bench.executor.judge import ExecutionJudge, build_expected_call
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor
from bench.models import Expected, ExpectedCall, Tool, ToolCall
from bench.parse import ParsedAnswer
from bench.providers.base import Provider, ProviderResponse
from bench.runner import RunConfig, Runner
from tests.stored import row_dicts


@pytest.fixture(scope="module")
def judge():
    executor = Executor(ReferenceBackends())
    yield ExecutionJudge(executor)
    executor.close()


TOOLS = load_variant("ecommerce", "l10").tools
WEATHER = Expected(calls=[ExpectedCall(name="get_weather", arguments={
    "city": ["北京", "Beijing"], "days": [3], "unit": ["celsius", None]})])


def metrics(judge, expected, calls):
    return judge.metrics(expected, calls, TOOLS, "ecommerce", RunContext(case_id="x"))


def test_same_result_in_another_language_is_an_execution_match(judge):
    got = metrics(judge, WEATHER, [ToolCall(id="a", name="get_weather",
                                            arguments={"city": "Beijing", "days": 3})])
    assert got == {"execution_success": True, "execution_match": True, "execution_errors": {},
                   "write_refused": False}


def test_a_different_result_is_no_match_and_failures_are_counted(judge):
    wrong_city = metrics(judge, WEATHER, [ToolCall(id="a", name="get_weather",
                                                   arguments={"city": "上海", "days": 3})])
    assert wrong_city["execution_success"] is True and wrong_city["execution_match"] is False
    invalid = metrics(judge, WEATHER, [ToolCall(id="a", name="get_weather",
                                                arguments={"city": "北京", "days": 9})])
    assert invalid == {"execution_success": False, "execution_match": False,
                       "execution_errors": {"validation": 1}, "write_refused": False}
    extra = metrics(judge, WEATHER, [ToolCall(id="a", name="get_weather",
                                              arguments={"city": "北京", "days": 3}),
                                     ToolCall(id="b", name="get_weather",
                                              arguments={"city": "北京", "days": 3})])
    assert extra["execution_success"] is True and extra["execution_match"] is False


def test_metrics_are_none_where_they_do_not_apply(judge):
    no_call = metrics(judge, Expected(no_call=True), [])
    assert no_call["execution_success"] is None and no_call["execution_match"] is None
    regex_only = Expected(calls=[ExpectedCall(name="query_database",
                                              arguments={"sql": [{"$regex": "(?i)select"}]})])
    sql = metrics(judge, regex_only, [ToolCall(id="a", name="query_database",
                                               arguments={"sql": "SELECT 1"})])
    assert sql["execution_success"] is True and sql["execution_match"] is None
    unparseable = metrics(judge, WEATHER, None)
    assert unparseable["execution_success"] is False
    nothing = metrics(judge, WEATHER, [])
    assert nothing["execution_success"] is False and nothing["execution_match"] is False


CANCEL = Expected(calls=[ExpectedCall(name="cancel_order", arguments={
    "order_id": ["ORD20261118"], "reason": ["ordered_by_mistake"]})])
CANCEL_CALL = ToolCall(id="c", name="cancel_order",
                       arguments={"order_id": "ORD20261118", "reason": "ordered_by_mistake"})


def test_a_refused_write_is_not_an_execution_failure(judge):
    """The run's permissions refuse cancel_order (no --allow-writes): the row says so in
    write_refused and leaves the refused call out of execution_success and its errors."""
    refused = metrics(judge, CANCEL, [CANCEL_CALL])
    assert refused["write_refused"] is True
    assert refused["execution_success"] is None  # every call refused: nothing ran to judge
    assert refused["execution_errors"] == {}
    wrong_tool = metrics(judge, WEATHER, [CANCEL_CALL])  # refused, and not what was asked
    assert (wrong_tool["execution_success"], wrong_tool["execution_match"]) == (None, False)
    weather = ToolCall(id="w", name="get_weather", arguments={"city": "Beijing", "days": 3})
    both = Expected(calls=[*WEATHER.calls, *CANCEL.calls])
    mixed = metrics(judge, both, [weather, CANCEL_CALL])
    assert (mixed["write_refused"], mixed["execution_success"]) == (True, True)
    broken = ToolCall(id="w", name="get_weather", arguments={"city": "Beijing", "days": 9})
    failed = metrics(judge, both, [broken, CANCEL_CALL])
    assert (failed["write_refused"], failed["execution_success"]) == (True, False)
    assert failed["execution_errors"] == {"validation": 1}


def test_write_refused_is_false_when_every_call_was_allowed_and_none_where_nothing_ran(judge):
    ran = metrics(judge, WEATHER, [ToolCall(id="a", name="get_weather",
                                            arguments={"city": "Beijing", "days": 3})])
    assert ran["write_refused"] is False
    assert metrics(judge, WEATHER, [])["write_refused"] is False
    assert metrics(judge, WEATHER, None)["write_refused"] is None  # undecodable: not run
    assert metrics(judge, Expected(no_call=True), [CANCEL_CALL])["write_refused"] is None


def test_expected_call_takes_the_first_literal_and_skips_omittable_arguments():
    built = build_expected_call(ExpectedCall(name="search_orders", arguments={
        "keyword": [None], "status": ["shipped", "paid"], "page": [None, 1],
        "note": [{"$any": True}, None]}), 0)
    assert built.arguments == {"status": "shipped", "page": 1}
    assert build_expected_call(ExpectedCall(name="x", arguments={"sql": [{"$regex": "."}]}),
                               0) is None


def test_expected_call_takes_a_patterns_example_as_its_value():
    """A $regex carrying "$example" names a value (the one the oracle sends): the call is
    built with it, in the order of the acceptable values; a bare $regex or $any names none."""
    example = {"$regex": "(?i)^select", "$example": "SELECT 1"}
    built = build_expected_call(ExpectedCall(name="run_sql", arguments={
        "sql": [example], "db": [{"$any": True}, None]}), 0)
    assert built is not None and built.arguments == {"sql": "SELECT 1"}
    first = build_expected_call(ExpectedCall(name="run_sql", arguments={
        "sql": [example, "SELECT 2"]}), 0)
    assert first is not None and first.arguments == {"sql": "SELECT 1"}


class OracleProvider(Provider):
    """Answers every case with its label's expected calls (a perfect model)."""

    id = "oracle"

    def prepare(self, tools, variant_key, label=""):
        pass

    async def complete(self, messages, tools, variant_key, trial=0):
        raise NotImplementedError  # replaced per case below

    def describe(self):
        return {"id": "oracle"}

    def close(self):
        pass


@pytest.mark.slow
def test_runner_adds_execution_metrics_and_traces(project, monkeypatch):
    from bench.datasets import load_dataset
    cases = {c.id: c for c in load_dataset("ecommerce").cases}

    async def complete(self, messages, tools, variant_key, trial=0):
        case = next(c for c in cases.values() if c.messages[-1].content == messages[-1].content)
        calls = [build_expected_call(e, i) for i, e in enumerate(case.expected.calls)]
        parsed = ParsedAnswer(calls=[c for c in calls if c is not None])
        return ProviderResponse(raw="", parsed=parsed, latency_s=0.01)

    monkeypatch.setattr(OracleProvider, "complete", complete)
    # the first 30 cases: their labels hold no $regex matcher the oracle could not answer
    config = RunConfig(variants=["l3"], providers=["oracle"], case_ids=list(cases)[:30])
    runner = Runner(config, run_id="exec-1", provider_factory=lambda pid, cfg: OracleProvider())
    runner.run()
    rows = row_dicts(runner.store)
    assert len(rows) == 30
    with_calls = [r for r in rows if r["expected"]["calls"]]
    # a perfect answer fails only where the label names data the shop lacks (not_found)
    assert all(r["metrics"]["execution_success"] is True
               or r["metrics"]["execution_errors"] == {"permanent": 1} for r in with_calls)
    assert sum(r["metrics"]["execution_success"] is True for r in with_calls) >= 20
    assert all(r["metrics"]["execution_match"] in (True, None) for r in with_calls)
    assert sum(r["metrics"]["execution_match"] is True for r in with_calls) >= 15
    assert all(r["metrics"]["execution_success"] is None for r in rows
               if not r["expected"]["calls"])
    traces = (runner.store.dir / "traces.jsonl").read_text().splitlines()
    assert len(traces) == sum(len(r["parsed"]["calls"]) for r in rows)
    first = json.loads(traces[0])
    assert {"run_id", "case_id", "trial", "call_id", "tool", "args_sha256", "status",
            "attempt", "duration_ms", "error_class"} <= first.keys()
    assert first["run_id"] == "exec-1"

    cli = CliRunner()
    table = cli.invoke(app, ["traces", "exec-1"])
    assert table.exit_code == 0, table.output
    assert "failure rate" in table.output and "search_orders" in table.output
    as_json = cli.invoke(app, ["traces", "exec-1", "--json"])
    summary = json.loads(as_json.output)
    tools = {t["tool"]: t for t in summary["tools"]}
    assert tools["search_orders"]["failure_rate"] == 0.0
    assert sum(t["calls"] for t in tools.values()) == len(traces)


def test_traces_show_each_error_class_with_its_codes(project, monkeypatch):
    """`bench traces` puts the error code beside the class: a write tool refused without
    --allow-writes reads `permanent` with `permission_denied`, in the table and the JSON."""
    from bench.datasets import load_dataset
    cases = [c for c in load_dataset("ecommerce").cases
             if [e.name for e in c.expected.calls] == ["cancel_order"]][:2]

    async def complete(self, messages, tools, variant_key, trial=0):
        case = next(c for c in cases if c.messages[-1].content == messages[-1].content)
        calls = [build_expected_call(e, i) for i, e in enumerate(case.expected.calls)]
        return ProviderResponse(raw="", parsed=ParsedAnswer(calls=calls), latency_s=0.01)

    monkeypatch.setattr(OracleProvider, "complete", complete)
    config = RunConfig(variants=["l3"], providers=["oracle"], case_ids=[c.id for c in cases])
    Runner(config, run_id="refused", provider_factory=lambda pid, cfg: OracleProvider()).run()
    cli = CliRunner()
    table = cli.invoke(app, ["traces", "refused"])
    assert table.exit_code == 0, table.output
    (line,) = [l for l in table.output.splitlines() if "cancel_order" in l]
    permanent = line.split("│")[1 + 9 + 3].strip()  # tool, 8 figures, then the classes
    assert permanent == "2 permission_denied", line
    summary = json.loads(cli.invoke(app, ["traces", "refused", "--json"]).output)
    (tool,) = [t for t in summary["tools"] if t["tool"] == "cancel_order"]
    assert tool["permanent"] == 2
    assert tool["error_codes"] == {"permanent": {"permission_denied": 2}}


def test_traces_table_shows_a_models_tool_name_as_inert_text(project, monkeypatch):
    """A made-up tool name is model output: '[/x]' raised rich's MarkupError (a traceback)
    and an ESC sequence reached the terminal raw."""
    from bench.datasets import load_dataset
    from bench.models import ToolCall
    case = load_dataset("ecommerce").cases[0]

    async def complete(self, messages, tools, variant_key, trial=0):
        calls = [ToolCall(id="c1", name="[/x]", arguments={}),
                 ToolCall(id="c2", name="get_weather\x1b]0;owned\x07", arguments={})]
        return ProviderResponse(raw="", parsed=ParsedAnswer(calls=calls), latency_s=0.01)

    monkeypatch.setattr(OracleProvider, "complete", complete)
    config = RunConfig(variants=["l3"], providers=["oracle"], case_ids=[case.id])
    Runner(config, run_id="made-up", provider_factory=lambda pid, cfg: OracleProvider()).run()
    table = CliRunner().invoke(app, ["traces", "made-up"])
    assert table.exit_code == 0, table.output
    assert "│ [/x]" in table.output and "\x1b" not in table.output
    assert "get_weather\\x1b]0;owned\\x07" in table.output


def test_traces_class_cells_list_several_codes_most_frequent_first():
    from bench.cli.traces import class_cell
    assert class_cell(0, None) == "0"
    assert class_cell(3, {"permission_denied": 1, "not_found": 2}) == \
        "3: not_found 2, permission_denied 1"
    assert class_cell(1, {"[bold]x": 1}) == "1 \\[bold]x"  # rich markup stays text


def test_runner_without_execution_writes_no_traces(project):
    config = RunConfig(variants=["l3"], providers=["oracle"], limit=2, execute=False)

    class Silent(OracleProvider):
        async def complete(self, messages, tools, variant_key, trial=0):
            return ProviderResponse(raw="", parsed=ParsedAnswer(), latency_s=0.01)

    runner = Runner(config, run_id="exec-2", provider_factory=lambda pid, cfg: Silent())
    runner.run()
    assert not (runner.store.dir / "traces.jsonl").exists()
    assert all("execution_success" not in r["metrics"] for r in row_dicts(runner.store))
    missing = CliRunner().invoke(app, ["traces", "exec-2"])
    assert missing.exit_code != 0


def test_prepare_runs_the_reference_calls_once_and_metrics_reuses_them():
    """The runner prepares a label's reference results while it waits for answers; scoring
    the rows afterwards executes only the model's calls, and the result is unchanged."""
    executed = []

    class Counting(Executor):
        def execute(self, call, tools, toolset, run=None):
            executed.append(call.id)
            return super().execute(call, tools, toolset, run)

    executor = Counting(ReferenceBackends())
    try:
        fresh = ExecutionJudge(executor)
        fresh.prepare(WEATHER, TOOLS, "ecommerce", RunContext(case_id="x"))
        assert executed == ["expected_0"]
        call = ToolCall(id="a", name="get_weather", arguments={"city": "Beijing", "days": 3})
        for _ in range(3):
            got = fresh.metrics(WEATHER, [call], TOOLS, "ecommerce", RunContext(case_id="x"))
            assert got["execution_match"] is True
        assert executed == ["expected_0", "a", "a", "a"]
        fresh.prepare(Expected(no_call=True), TOOLS, "ecommerce", RunContext(case_id="y"))
        assert len(executed) == 4  # nothing to prepare for a no-call label
    finally:
        executor.close()


# -- where the label's expected results come from (docs/executor.md) -----------------------

ITEM_TOOLS = [Tool(name="add_item", description="Add an item to the list.", permission="write",
                   input_schema={"type": "object", "properties": {"title": {"type": "string"}},
                                 "required": ["title"]}),
              Tool(name="now", description="The time.", permission="read",
                   input_schema={"type": "object", "properties": {}})]
MILK = Expected(calls=[ExpectedCall(name="add_item", arguments={"title": ["milk"]})])
WRITE_CONTEXT = RunContext(case_id="c1", write_tools=frozenset({"add_item"}))


class ItemList:
    """A user's system: a list that add_item appends to (every write is counted)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.resets = 0
        self.log: list[str] = []

    def add(self, arguments, ctx):  # noqa: ANN001 - a Handler's run
        self.items.append(arguments["title"])
        self.log.append(f"add {arguments['title']}")
        return {"added": arguments["title"], "count": len(self.items)}

    def reset(self) -> None:
        self.items.clear()
        self.resets += 1
        self.log.append("reset")

    def handlers(self):
        from bench.executor.backends.base import Handler
        return {"add_item": Handler(self.add), "now": Handler(
            lambda arguments, ctx: {"datetime": f"2026-01-0{len(self.log) % 9 + 1}", "tz": "UTC"})}


def _judge_on(backend):
    executor = Executor({"items": backend})
    return executor, ExecutionJudge(executor)


def test_a_users_system_never_runs_a_labels_calls():
    """A plain handler mapping is the user's system: neither prepare nor metrics runs the
    label's write, whatever the model answered; exec match is None and says why."""
    system = ItemList()
    executor, judge = _judge_on(system.handlers())
    try:
        judge.prepare(MILK, ITEM_TOOLS, "items", WRITE_CONTEXT)
        silent = judge.metrics(MILK, [], ITEM_TOOLS, "items", WRITE_CONTEXT)
        undecodable = judge.metrics(MILK, None, ITEM_TOOLS, "items", WRITE_CONTEXT)
        assert system.items == []  # the label's add_item never ran
        oracle = judge.metrics(MILK, [ToolCall(id="a", name="add_item",
                                               arguments={"title": "milk"})],
                               ITEM_TOOLS, "items", WRITE_CONTEXT)
    finally:
        executor.close()
    assert system.items == ["milk"]  # the model's own call, once
    for got in (silent, undecodable, oracle):
        assert got["execution_match"] is None
        assert got["execution_match_skipped"] == "not_recorded"
    assert oracle["execution_success"] is True


def test_bench_owns_only_the_reference_backends():
    from bench.executor.backends import Owner
    from bench.executor.backends.base import backend_of

    assert ReferenceBackends()("ecommerce").owner is Owner.BENCH
    assert ReferenceBackends()("ecommerce").runs_labels
    assert backend_of({}).owner is Owner.USER and not backend_of({}).runs_labels


def test_recorded_results_are_compared_and_a_changed_label_is_stale():
    from bench.models import RecordedResult, Recording

    system = ItemList()
    from bench.executor.judge import schema_sha256

    recorded = MILK.model_copy(update={"recorded": Recording(at="2026-01-01T00:00:00Z", results=[
        RecordedResult(name="add_item", arguments={"title": "milk"}, ok=True,
                       data={"added": "milk", "count": 1},
                       schema_sha256=schema_sha256(ITEM_TOOLS[0].input_schema))])})
    executor, judge = _judge_on(system.handlers())
    try:
        same = judge.metrics(recorded, [ToolCall(id="a", name="add_item",
                                                 arguments={"title": "milk"})],
                             ITEM_TOOLS, "items", WRITE_CONTEXT)
        other = judge.metrics(recorded, [ToolCall(id="b", name="add_item",
                                                  arguments={"title": "eggs"})],
                              ITEM_TOOLS, "items", WRITE_CONTEXT)
        changed = recorded.model_copy(update={"calls": [ExpectedCall(
            name="add_item", arguments={"title": ["oat milk"]})]})
        stale = judge.metrics(changed, [], ITEM_TOOLS, "items", WRITE_CONTEXT)
    finally:
        executor.close()
    assert system.items == ["milk", "eggs"]  # the model's calls only
    assert same["execution_match"] is True and other["execution_match"] is False
    assert stale["execution_match"] is None
    assert stale["execution_match_skipped"] == "recording_stale"


def test_a_recording_is_stale_when_the_tools_input_schema_changed_or_was_not_stored():
    from bench.executor.judge import schema_sha256
    from bench.models import RecordedResult, Recording

    def recorded(schema_hash):
        return MILK.model_copy(update={"recorded": Recording(
            at="2026-01-01T00:00:00Z", results=[RecordedResult(
                name="add_item", arguments={"title": "milk"}, ok=True,
                data={"added": "milk", "count": 1}, schema_sha256=schema_hash)])})

    current = recorded(schema_sha256(ITEM_TOOLS[0].input_schema))
    # the same tool with another argument: its results may differ now
    changed_tool = ITEM_TOOLS[0].model_copy(update={"input_schema": {
        "type": "object", "properties": {"title": {"type": "string"},
                                         "list": {"type": "string"}},
        "required": ["title", "list"]}})
    # only the description changed: the recording still holds
    reworded = ITEM_TOOLS[0].model_copy(update={"description": "Append to the list."})
    milk = [ToolCall(id="a", name="add_item", arguments={"title": "milk"})]
    system = ItemList()
    executor, judge = _judge_on(system.handlers())
    try:
        same = judge.metrics(current, milk, [reworded, ITEM_TOOLS[1]], "items", WRITE_CONTEXT)
        new_schema = judge.metrics(current, milk, [changed_tool, ITEM_TOOLS[1]], "items",
                                   WRITE_CONTEXT)
        # recorded before bench stored the schema's hash: stale, not trusted
        old = judge.metrics(recorded(None), milk, ITEM_TOOLS, "items", WRITE_CONTEXT)
    finally:
        executor.close()
    assert same["execution_match"] is True
    for got in (new_schema, old):
        assert got["execution_match"] is None
        assert got["execution_match_skipped"] == "recording_stale"


def test_a_tools_schema_identity_ignores_descriptions_but_not_arguments():
    from bench.executor.judge import schema_sha256

    base = {"type": "object", "description": "x", "properties": {
        "title": {"type": "string", "description": "The item's title.", "title": "Title"},
        "description": {"type": "string"}}, "required": ["title"]}
    reworded = {"type": "object", "properties": {
        "title": {"type": "string", "description": "What to add."},
        "description": {"type": "string", "examples": ["big"]}}, "required": ["title"]}
    assert schema_sha256(base) == schema_sha256(reworded)
    # a property named "description" is an argument, not an annotation
    dropped = {"type": "object", "properties": {"title": {"type": "string"}},
               "required": ["title"]}
    assert schema_sha256(base) != schema_sha256(dropped)
    enum = {**dropped, "properties": {"title": {"type": "string", "enum": ["a"]}}}
    assert schema_sha256(dropped) != schema_sha256(enum)


def test_a_recording_from_before_schema_hashes_still_loads():
    from bench.models import Case

    case = Case.model_validate({
        "id": "c", "toolset": "items", "lang": "en",
        "messages": [{"role": "user", "content": "add milk"}],
        "expected": {"calls": [{"name": "add_item", "arguments": {"title": ["milk"]}}],
                     "recorded": {"at": "2026-01-01T00:00:00Z", "system": "x", "results": [
                         {"name": "add_item", "arguments": {"title": "milk"}, "ok": True,
                          "data": {"added": "milk"}}]}}})
    assert case.expected.recorded is not None
    assert case.expected.recorded.results[0].schema_sha256 is None


def test_identical_failures_are_never_a_match():
    """The label's call and the model's fail alike (days=9 is out of range): the label is
    at fault, exec match is None and names it; a failing call against a good label is no
    match."""
    executor = Executor(ReferenceBackends())
    try:
        judge = ExecutionJudge(executor)
        bad_label = Expected(calls=[ExpectedCall(name="get_weather", arguments={
            "city": ["Beijing"], "days": [9]})])
        same_error = ToolCall(id="a", name="get_weather", arguments={"city": "Beijing",
                                                                   "days": 9})
        both = judge.metrics(bad_label, [same_error], TOOLS, "ecommerce", RunContext())
        wrong = judge.metrics(WEATHER, [same_error], TOOLS, "ecommerce", RunContext())
    finally:
        executor.close()
    assert both["execution_success"] is False
    assert both["execution_match"] is None and both["execution_match_skipped"] == "label_failed"
    assert wrong["execution_match"] is False


def test_a_recorded_failure_is_a_label_problem_not_a_match():
    from bench.models import RecordedResult, Recording

    def down(arguments, ctx):  # noqa: ANN001 - every call fails, as a server that is down
        raise ToolError("permanent", "tool_error", "the backing service is down")

    from bench.executor.backends.base import Handler
    from bench.executor.outcome import ToolError

    from bench.executor.judge import schema_sha256

    label = Expected(calls=[ExpectedCall(name="now", arguments={})], recorded=Recording(
        at="2026-01-01T00:00:00Z", results=[RecordedResult(
            name="now", ok=False, error_code="tool_error",
            error="the backing service is down",
            schema_sha256=schema_sha256(ITEM_TOOLS[1].input_schema))]))
    executor, judge = _judge_on({"now": Handler(down)})
    try:
        got = judge.metrics(label, [ToolCall(id="a", name="now", arguments={})],
                            ITEM_TOOLS, "items", RunContext())
    finally:
        executor.close()
    assert got["execution_success"] is False
    assert got["execution_match"] is None and got["execution_match_skipped"] == "label_failed"


def test_declared_comparisons_shape_ignore_and_none():
    from bench.executor.judge import compared_body

    a = {"datetime": "2026-01-01T10:00:00", "tz": "UTC", "items": [{"id": 1, "at": "x"}]}
    b = {"datetime": "2027-05-05T11:11:11", "tz": "UTC", "items": [{"id": 2, "at": "y"}]}
    assert compared_body(a) != compared_body(b)
    assert compared_body(a, "shape") == compared_body(b, "shape")
    assert compared_body(a, "shape") != compared_body({"tz": 1}, "shape")
    assert compared_body(a, ("datetime", "id", "at")) == compared_body(b, ("datetime", "id",
                                                                           "at"))
    assert compared_body(a, ("datetime",)) != compared_body(b, ("datetime",))
    assert compared_body(a, "none") == compared_body(None, "none")


def test_a_declared_reset_runs_before_the_label_and_before_each_answer():
    """With a reset, the label may run on the user's system: reset, label, reset, answer;
    the next row resets again and reuses the label's results."""
    from bench.executor.backends import Backend, Owner

    system = ItemList()
    backend = Backend(system.handlers(), Owner.USER, reset=system.reset)
    executor, judge = _judge_on(backend)
    call = ToolCall(id="a", name="add_item", arguments={"title": "milk"})
    try:
        first = judge.metrics(MILK, [call], ITEM_TOOLS, "items", WRITE_CONTEXT)
        second = judge.metrics(MILK, [call], ITEM_TOOLS, "items", WRITE_CONTEXT)
    finally:
        executor.close()
    assert system.log == ["reset", "add milk", "reset", "add milk", "reset", "add milk"]
    assert first["execution_match"] is True and second["execution_match"] is True
