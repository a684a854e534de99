"""The MCP backend: calls go to a real MCP server over stdio through the official SDK."""

from __future__ import annotations

import concurrent.futures
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from bench.executor.backends.mcp import McpBackend  # noqa: E402
from bench.executor.outcome import RunContext  # noqa: E402
from bench.executor.pipeline import Executor  # noqa: E402
from bench.models import ToolCall  # noqa: E402
from tests.importers.test_own_tools import (error_lines, python_project, run,  # noqa: E402
                                            use_mcp_server)

SERVER = Path(__file__).parents[1] / "mcp_exec_server.py"


@pytest.fixture(scope="module")
def mcp_backend():
    backend = McpBackend(sys.executable, [str(SERVER)])
    yield backend
    backend.close()


@pytest.mark.slow
def test_tools_are_listed_with_permissions_from_annotations(mcp_backend):
    tools = {t.name: t for t in mcp_backend.tools}
    assert set(tools) == {"add", "lookup_city", "delete_everything", "add_item",
                          "broken_lookup"}
    assert tools["add"].permission == "read"
    assert tools["delete_everything"].permission == "write"
    assert tools["add"].input_schema["required"] == ["a", "b"]


def test_calls_run_on_the_server_through_the_pipeline(mcp_backend):
    executor = Executor({"mcp": mcp_backend.handlers()})
    tools = mcp_backend.tools
    try:
        ok = executor.execute(ToolCall(id="1", name="add", arguments={"a": 2, "b": 40}),
                              tools, "mcp")
        assert ok.success and ok.data == 42
        same = [executor.execute(ToolCall(id=c, name="lookup_city", arguments={"city": c}),
                                 tools, "mcp").data for c in ("北京", "Beijing")]
        assert same == [{"city": "Beijing"}] * 2
        invalid = executor.execute(ToolCall(id="2", name="add", arguments={"a": "x"}),
                                   tools, "mcp")
        assert invalid.error_class == "validation"  # rejected before reaching the server
        failed = executor.execute(ToolCall(id="3", name="lookup_city",
                                           arguments={"city": "Atlantis"}), tools, "mcp")
        assert failed.error_code == "tool_error" and "Atlantis" in failed.error
        denied = executor.execute(ToolCall(id="4", name="delete_everything",
                                           arguments={"confirm": True}), tools, "mcp")
        assert denied.error_code == "permission_denied"
        allowed = executor.execute(ToolCall(id="5", name="delete_everything",
                                            arguments={"confirm": True}), tools, "mcp",
                                   RunContext(allow_writes=True))
        assert allowed.success and allowed.data == "deleted"
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            sums = list(pool.map(lambda i: executor.execute(
                ToolCall(id=f"p{i}", name="add", arguments={"a": i, "b": 1000}), tools, "mcp"),
                range(40)))
        assert [o.data for o in sums] == [i + 1000 for i in range(40)]
        assert [o.call_id for o in sums] == [f"p{i}" for i in range(40)]
    finally:
        executor.close()


def test_a_server_that_cannot_start_is_a_clear_error():
    from bench.errors import BenchError
    with pytest.raises(BenchError, match="failed to start|did not start"):
        McpBackend(sys.executable, ["-c", "import sys; sys.exit(3)"], startup_timeout_s=20)


@pytest.mark.slow
def test_a_resumed_run_whose_server_does_not_start_says_how_to_resume_it(run_bench, project):
    """The new run's message ended "fix the cause, then bench run --resume r"; the resumed
    run's, with its server still missing, ended at the server's error without a word on
    how to go on. Both say it now, and the resumed run's folder is kept."""
    gone = project / "moved-away.py"  # never written: the server's program is missing
    first = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                      "--execute-mcp", f"{sys.executable} {gone}", "--run-id", "r")
    assert first.returncode == 2 and "then bench run --resume r (or delete" in first.stderr, \
        first.stderr
    again = run_bench("run", "--resume", "r")
    assert again.returncode == 2, again.stderr
    said = " ".join(again.stderr.split())
    assert "moved-away.py" in said and said.endswith(
        "; fix the cause, then bench run --resume r (its finished rows are kept)"), said
    assert (project / "reports" / "runs" / "r" / "manifest.json").is_file()


@pytest.mark.slow
def test_a_run_can_execute_on_an_mcp_server_instead_of_the_reference_backends(mcp_backend,
                                                                              tmp_path):
    from bench.executor.runhook import RunExecution
    from bench.models import Case
    from bench.parse import ParsedAnswer

    case = Case.model_validate({
        "id": "m1", "toolset": "anything", "lang": "en",
        "messages": [{"role": "user", "content": "Canonical name of 北京?"}],
        "expected": {"calls": [{"name": "lookup_city", "arguments": {"city": ["Beijing"]}}]}})
    execution = RunExecution(tmp_path, "r1", mcp_command=[sys.executable, str(SERVER)])
    try:
        right = execution.row_metrics(case, mcp_backend.tools, "anything", ParsedAnswer(calls=[
            ToolCall(id="c1", name="lookup_city", arguments={"city": "北京"})]), 0)
        wrong = execution.row_metrics(case, mcp_backend.tools, "anything", ParsedAnswer(calls=[
            ToolCall(id="c2", name="lookup_city", arguments={"city": "Atlantis"})]), 0)
    finally:
        execution.close()
    # the server is the user's: the label's lookup_city never runs there, nothing recorded
    assert right["execution_success"] is True and right["execution_match"] is None
    assert right["execution_match_skipped"] == "not_recorded"
    assert wrong["execution_success"] is False
    assert (tmp_path / "traces.jsonl").read_text(encoding="utf-8").count("lookup_city") >= 2


# -- a label's calls never run on the user's server (docs/executor.md) ---------------------

def _item_project(tmp_path):
    from tests.importers.test_own_tools import ITEM_CASES, bench, write_cases

    root = tmp_path / "items"
    root.mkdir()
    (root / "server.py").write_text(SERVER.read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--writes", "add_item",
                 "--name", "items")
    assert init.returncode == 0, init.stderr
    write_cases(root, "items", ITEM_CASES)
    return root, bench


@pytest.mark.slow
def test_an_mcp_server_never_gets_a_labels_write(tmp_path):
    from tests.importers.test_own_tools import flat, rows, write_answers, writes

    root, bench = _item_project(tmp_path)
    write_answers(root, {})  # a silent model
    silent = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                   "--provider", "function:answers:answer", "--run-id", "silent")
    assert silent.returncode == 0, silent.stderr
    assert writes(root) == 0
    oracle = bench(root, "run", "--dataset", "items", "--variants", "current,l10",
                   "--provider", "oracle", "--run-id", "oracle")
    assert oracle.returncode == 0, oracle.stderr
    assert writes(root) == 4  # the oracle's own calls only
    assert not any(m["execution_match"] is False for m in rows(root, "oracle").values())
    assert "exec match empty for 4 rows of toolset 'items'" in flat(oracle.stdout)
    assert bench(root, "labels", "record", "items", "--yes").returncode == 0
    assert writes(root) == 6
    again = bench(root, "run", "--dataset", "items", "--variants", "current",
                  "--provider", "oracle", "--run-id", "oracle2")
    assert again.returncode == 0, again.stderr
    assert all(m["execution_match"] is True for m in rows(root, "oracle2").values())


@pytest.mark.slow
def test_a_server_failing_every_call_is_never_an_execution_match(tmp_path):
    """Every call of broken_lookup fails, the label's too: exec success 0%, and no exec
    match (identical errors are not a match); the label's failure is told, in one line."""
    from tests.importers.test_own_tools import flat, rows, write_answers, write_cases

    root, bench = _item_project(tmp_path)
    write_cases(root, "items", [
        {"id": f"b{i}", "messages": [{"role": "user", "content": f"look up {k}"}],
         "expected": {"calls": [{"name": "broken_lookup", "arguments": {"k": [k]}}]}}
        for i, k in enumerate(["alpha", "beta"])])
    write_answers(root, {"alpha": [{"name": "broken_lookup", "arguments": {"k": "alpha"}}],
                         "beta": [{"name": "broken_lookup",
                                   "arguments": {"k": "totally-wrong"}}]})
    assert bench(root, "labels", "record", "items", "--yes").returncode == 0
    run = bench(root, "run", "--dataset", "items", "--variants", "current",
                "--provider", "function:answers:answer", "--run-id", "broken")
    assert run.returncode == 0, run.stderr
    got = rows(root, "broken")
    assert all(m["execution_success"] is False for m in got.values())
    assert all(m["execution_match"] is not True for m in got.values())
    assert {m["execution_match_skipped"] for m in got.values()} == {"label_failed"}
    assert "label call failed: 2 rows of toolset 'items' (cases b0, b1)" in flat(run.stdout)
    lint = bench(root, "lint", "--toolset", "items", "--json")
    found = [f for f in json.loads(lint.stdout)["findings"] if f["code"] == "BL015"]
    assert {f["tool"] for f in found} == {"broken_lookup"} and len(found) == 2
    # recorded on the user's system: a warning (it may have changed since), not an error
    assert {f["severity"] for f in found} == {"warning"}


# -- tools the import renamed (docs/your-own-tools.md, "Names and permissions") -------------

RENAMED_SERVER = Path(__file__).parents[1] / "mcp_renamed_server.py"


def _server_calls(folder: Path) -> list[dict]:
    """The tools/call requests tests/mcp_renamed_server.py received (its calls.log)."""
    log = folder / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.slow
def test_tools_renamed_at_import_are_called_by_the_servers_own_names(tmp_path):
    """get.weather is get_weather here and the second foo is foo_2; both start, list and
    run, and the server receives its own names."""
    backend = McpBackend(sys.executable, [str(RENAMED_SERVER)], cwd=tmp_path,
                         names={"get_weather": "get.weather", "foo_2": "foo"})
    executor = Executor({"ren": backend.handlers()})
    try:
        assert [t.name for t in backend.tools] == ["get_weather", "foo", "foo_2", "count_rows"]
        done = [executor.execute(ToolCall(id=name, name=name, arguments={"city": "Oslo"}),
                                 backend.tools, "ren") for name in ("get_weather", "foo_2")]
    finally:
        executor.close()
        backend.close()
    assert [(o.success, o.error_code) for o in done] == [(True, None)] * 2
    assert [o.data["tool"] for o in done] == ["get.weather", "foo"]
    assert [c["name"] for c in _server_calls(tmp_path)] == ["get.weather", "foo"]


def test_declared_server_names_hold_when_the_server_reorders_its_tools():
    from bench.importers.mcp_server import bench_names

    listed = ["get.weather", "get_weather", "foo", "foo"]
    declared = {"get_weather": "get.weather", "get_weather_2": "get_weather", "foo_2": "foo"}
    assert bench_names(listed) == ["get_weather", "get_weather_2", "foo", "foo_2"]
    assert bench_names(listed, declared) == bench_names(listed)
    # listed the other way round: each bench name still reaches the same server tool
    assert bench_names(["get_weather", "foo", "get.weather"], declared) == \
        ["get_weather_2", "foo", "get_weather"]


@pytest.mark.slow
def test_a_stdio_servers_stderr_log_is_redacted(tmp_path):
    """A value bench expanded from ${NAME} (registered as a secret) never reaches the
    server's log, though the server prints it on its stderr."""
    from bench.toolset_config import expand

    token = "tok-9f3k2q7"  # short and shapeless: only its value gives it away
    assert expand("${API_TOKEN}", {"API_TOKEN": token}) == token
    log = tmp_path / "mcp-server-x.log"
    backend = McpBackend(sys.executable, [str(RENAMED_SERVER), "--plain"], cwd=tmp_path,
                         env={"API_TOKEN": token}, errlog=log)
    assert [t.name for t in backend.tools] == ["count_rows"]
    backend.close()
    text = log.read_text()
    assert "renamed-test server starting with token ***" in text
    assert token not in text


@pytest.mark.slow
@pytest.mark.parametrize("given", ["settings", "execute_mcp"])
def test_secrets_given_in_clear_on_a_servers_command_line_never_reach_its_log(tmp_path, given):
    """A toolset's ``server = [...]`` written in clear (or ``--execute-mcp``'s command) holds
    values only an option's name calls secret; the server prints its argv on stderr, and
    its log in the run folder keeps none of them."""
    from bench.executor.runhook import MCP_LOG, RunExecution

    secrets = [f"plainsecret-{given}", f"sfc-{given}-xyz", f"dbpw-{given}"]
    argv = [sys.executable, str(RENAMED_SERVER), "--plain", "--api-key", secrets[0],
            "--secret-file-contents", secrets[1], "--db", f"postgres://u:{secrets[2]}@h/d"]
    run_dir = tmp_path / "reports" / "runs" / "r1"
    if given == "settings":
        (tmp_path / "pyproject.toml").write_text(
            "[tool.bench.toolsets.ren]\nexecute = \"mcp\"\n"
            f"server = {json.dumps(argv)}\n", encoding="utf-8")
        execution = RunExecution(run_dir, "r1", project_root=tmp_path, toolsets=["ren"])
        log = run_dir / "mcp-server-ren.log"
    else:
        execution = RunExecution(run_dir, "r1", mcp_command=argv)
        log = run_dir / MCP_LOG
    execution.close()
    text = log.read_text()
    assert '"--api-key", "***", "--secret-file-contents", "***"' in text, text
    assert [s for s in secrets if s in text] == []


@pytest.mark.slow
def test_a_secret_written_in_clear_in_a_servers_env_never_reaches_its_log(tmp_path):
    """``env = {API_TOKEN = "..."}`` written in clear (no ``${NAME}``): the value is in the
    server's environment, not bench's, and the server prints it on stderr."""
    from bench.executor.runhook import RunExecution

    secret = "envtok-in-clear-5521"
    argv = [sys.executable, str(RENAMED_SERVER), "--plain"]
    (tmp_path / "pyproject.toml").write_text(
        "[tool.bench.toolsets.ren]\nexecute = \"mcp\"\n"
        f"server = {json.dumps(argv)}\nenv = {{API_TOKEN = \"{secret}\"}}\n",
        encoding="utf-8")
    run_dir = tmp_path / "reports" / "runs" / "r1"
    RunExecution(run_dir, "r1", project_root=tmp_path, toolsets=["ren"]).close()
    text = (run_dir / "mcp-server-ren.log").read_text()
    assert "with token ***" in text, text
    assert secret not in text


@pytest.mark.slow
def test_server_names_naming_no_tool_of_the_toolset_is_refused_naming_the_field(tmp_path):
    """A key of server_names is a bench tool name, checked as read_only's names are: a
    misspelt one would leave the tool it meant called by the wrong name, without a word."""
    from bench.errors import BenchError
    from bench.executor.runhook import RunExecution

    argv = [sys.executable, str(RENAMED_SERVER), "--plain"]
    (tmp_path / "pyproject.toml").write_text(
        "[tool.bench.toolsets.ren]\nexecute = \"mcp\"\n"
        f"server = {json.dumps(argv)}\nserver_names = {{\"nope\" = \"count_rows\"}}\n",
        encoding="utf-8")
    with pytest.raises(BenchError) as refused:
        RunExecution(tmp_path / "runs" / "r1", "r1", project_root=tmp_path, toolsets=["ren"])
    assert refused.value.field == "tool.bench.toolsets.ren.server_names"
    assert refused.value.message == ("server_names names 'nope', not a tool of this toolset "
                                     "(tools: count_rows)")


_TOKEN = "tok-9f3k2q7"  # short and shapeless: only its value gives it away


@pytest.fixture(scope="module")
def renamed_run(tmp_path_factory):
    """A project made by bench init from tests/mcp_renamed_server.py, its server given
    API_TOKEN through env = {API_TOKEN = "${API_TOKEN}"}, run once by a scripted model that
    calls get_weather, foo and foo_2: (project folder, the run's rows, the run's output)."""
    from tests.importers.test_own_tools import bench, rows, write_answers, write_cases

    root = tmp_path_factory.mktemp("renamed")
    (root / "server.py").write_text(RENAMED_SERVER.read_text(), encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "ren")
    assert init.returncode == 0, init.stderr
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        'server = ["python", "server.py"]',
        'server = ["python", "server.py"]\nenv = {API_TOKEN = "${API_TOKEN}"}'))
    calls = {"weather": ("get_weather", "Paris"), "Oslo": ("foo", "Oslo"),
             "again": ("foo_2", "Rome")}
    write_cases(root, "ren", [
        {"id": f"r{i}", "messages": [{"role": "user", "content": f"{key} {city}"}],
         "expected": {"calls": [{"name": name, "arguments": {"city": [city]}}]}}
        for i, (key, (name, city)) in enumerate(calls.items())])
    write_answers(root, {key: [{"name": name, "arguments": {"city": city}}]
                         for key, (name, city) in calls.items()})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("API_TOKEN", _TOKEN)
        run = bench(root, "run", "--dataset", "ren", "--variants", "current", "--provider",
                    "function:answers:answer", "--run-id", "r1")
    got = rows(root, "r1") if run.returncode == 0 else {}
    return root, got, run


@pytest.mark.slow
def test_mcp_tools_renamed_at_import_run_under_the_servers_names(renamed_run):
    root, got, run = renamed_run
    assert run.returncode == 0, run.stderr
    assert 'server_names = {"get_weather" = "get.weather", "foo_2" = "foo"}' in \
        (root / "pyproject.toml").read_text()
    assert {case: m["execution_success"] for (case, _), m in got.items()} == \
        {"r0": True, "r1": True, "r2": True}
    assert sorted((c["name"], c["arguments"]["city"]) for c in _server_calls(root)) == \
        [("foo", "Oslo"), ("foo", "Rome"), ("get.weather", "Paris")]


@pytest.mark.slow
def test_an_mcp_servers_stderr_log_never_keeps_a_token(renamed_run):
    root, _, _ = renamed_run
    log = root / "reports" / "runs" / "r1" / "mcp-server-ren.log"
    assert "renamed-test server starting with token ***" in log.read_text()
    leaked = [path.name for path in (root / "reports").rglob("*")
              if path.is_file() and _TOKEN.encode() in path.read_bytes()]
    assert leaked == []


@pytest.mark.slow
def test_read_only_tools_run_though_the_server_gives_no_read_only_hint(tmp_path):
    """tests/mcp_server.py marks no tool readOnlyHint; bench init --read-only store_hours
    makes store_hours run, the others stay refused writes."""
    from tests.importers.test_own_tools import bench, rows, write_answers, write_cases

    root = tmp_path / "shop"
    root.mkdir()
    (root / "server.py").write_text(SERVER.with_name("mcp_server.py").read_text(),
                                    encoding="utf-8")
    init = bench(root, "init", ".", "--mcp", "python server.py", "--name", "shop",
                 "--read-only", "store_hours")
    assert init.returncode == 0, init.stderr
    assert 'read_only = ["store_hours"]' in (root / "pyproject.toml").read_text()
    write_cases(root, "shop", [
        {"id": "h", "messages": [{"role": "user", "content": "when are you open"}],
         "expected": {"calls": [{"name": "store_hours", "arguments": {}}]}},
        {"id": "s", "messages": [{"role": "user", "content": "find my lamp order"}],
         "expected": {"calls": [{"name": "search_orders", "arguments": {"keyword": ["lamp"]}}]}}])
    write_answers(root, {"open": [{"name": "store_hours", "arguments": {}}],
                         "lamp": [{"name": "search_orders", "arguments": {"keyword": "lamp"}}]})
    run = bench(root, "run", "--dataset", "shop", "--variants", "current", "--provider",
                "function:answers:answer", "--run-id", "r1")
    assert run.returncode == 0, run.stderr
    got = rows(root, "r1")
    assert (got[("h", "current")]["execution_success"],
            got[("h", "current")]["write_refused"]) == (True, False)
    assert got[("s", "current")]["write_refused"] is True  # not listed: still a write


# -- a server that exits during a call (docs/executor.md, "A server that exits") ------------

CRASH_SERVER = Path(__file__).parents[1] / "mcp_crash_server.py"


@pytest.mark.slow
def test_a_server_that_exits_during_a_call_fails_that_call_and_is_restarted_for_the_next(
        tmp_path):
    """crash ends the server (exit status 3): that call fails with the class server_exited,
    the next calls run on a server started again; one exit more than max_restarts stops
    with one line naming the server and its log, and no call is sent any more."""
    from bench.errors import BenchError

    log = tmp_path / "mcp-server-crashy.log"
    backend = McpBackend(sys.executable, [str(CRASH_SERVER)], cwd=tmp_path, errlog=log,
                         name="toolset 'crashy'", max_restarts=1)
    executor = Executor({"crashy": backend.handlers()})

    def call(name: str) -> object:
        return executor.execute(ToolCall(id=name, name=name, arguments={"x": "hi"}),
                                backend.tools, "crashy")
    try:
        crashed = call("crash")
        after = [call("echo"), call("with_default")]
        assert (crashed.success, crashed.error_class, crashed.error_code) == \
            (False, "server_exited", "exit_3")
        assert "exited with exit code 3 while it ran 'crash'" in crashed.error
        assert [(o.success, o.data) for o in after] == [(True, "hi"), (True, "hi 30")]
        assert [(e.returncode, e.tools) for e in backend.exits] == [(3, ["crash"])]
        assert backend.restarts == 1
        assert call("crash").error_class == "server_exited"  # the second exit: no restart left
        with pytest.raises(BenchError) as stopped:
            call("echo")
    finally:
        executor.close()
        backend.close()
    assert str(stopped.value) == (
        "the MCP server of toolset 'crashy' exited 2 times (during calls of crash); bench "
        f"restarted it 1 time, its limit for one run (max_restarts), and stopped: fix what "
        f"ends it (its stderr: {log})")
    assert len((tmp_path / "starts.log").read_text().splitlines()) == 2
    assert "bench: the server exited with exit code 3 (during calls of crash); starting it " \
        "again (restart 1 of at most 1 in this run)" in log.read_text()


# -- --execute-mcp with --error-pattern (docs/executor.md, "Your own MCP server") -----------

TEXT_ERROR_SERVER = Path(__file__).parents[1] / "mcp_text_errors_server.py"


@pytest.mark.slow
def test_execute_mcp_fails_a_call_whose_text_result_matches_the_error_pattern(tmp_path,
                                                                              monkeypatch):
    """The server answers its errors as text, without isError: with --execute-mcp's
    error_pattern such a result is a failed call (permanent tool_error, its text the
    message); without one it is a success, and a right answer is one either way."""
    import sqlite3

    from bench.executor.runhook import RunExecution

    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, total REAL)")
        db.execute("INSERT INTO orders (total) VALUES (42.0)")
    monkeypatch.chdir(tmp_path)  # the server reads shop.db in the folder it starts in

    def outcomes(pattern: str | None) -> list:
        execution = RunExecution(tmp_path / "run", "r", toolsets=["shop"],
                                 mcp_command=[sys.executable, str(TEXT_ERROR_SERVER)],
                                 mcp_error_pattern=pattern)
        try:
            tools = execution._mcp.tools
            return [execution.executor.execute(
                ToolCall(id=q, name="read_query", arguments={"query": q}), tools, "shop")
                for q in ("SELECT SUM(amount) FROM orders", "SELECT SUM(total) FROM orders")]
        finally:
            execution.close()

    trusted = outcomes(None)
    assert [o.success for o in trusted] == [True, True]
    wrong, right = outcomes("^(Database error|Error):")
    assert (wrong.success, wrong.error_class, wrong.error_code) == \
        (False, "permanent", "tool_error")
    assert wrong.error == "Database error: no such column: amount"
    assert right.success is True


@pytest.mark.parametrize("options, said", [
    (("--execute-mcp", "python server.py", "--error-pattern", "^(Error"),
     "error: --error-pattern: '^(Error' is not a regular expression: missing ) at position "
     "7"),
    (("--error-pattern", "^Error"), "error: --error-pattern goes with --execute-mcp")])
def test_a_bad_error_pattern_for_execute_mcp_is_one_line_naming_the_option(tmp_path, options,
                                                                           said):
    from tests.importers.test_own_tools import bench

    run = bench(tmp_path, "run", "--provider", "oracle", "--run-id", "r", *options)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith(said) and len(run.stderr.strip().splitlines()) == 1, \
        run.stderr
    assert not (tmp_path / "reports").exists()


# -- the oracle never sends a placeholder (bench/providers/oracle.py) -----------------------

@pytest.mark.slow
@pytest.mark.parametrize("title", [{"$regex": "^(oat|soy) milk$"}, {"$any": True}])
def test_the_oracle_never_sends_a_placeholder_for_a_pattern_only_argument(tmp_path, title):
    """c3's label accepts any plant milk by pattern, without "$example", and its query does
    not match the pattern (or accepts any title, $any): the oracle has no value to send. Its
    call is not executed (the server's writes.log gets the two literal labels' items only,
    never the placeholder nor an invented "x"), the row has no exec success and no argument
    score, and a note under the table says how many label calls were not executed and
    why."""
    from bench.executor.traces import read_traces
    from tests.importers.test_own_tools import ITEM_CASES, flat, rows, write_cases, writes

    root, bench = _item_project(tmp_path)
    pattern = {"id": "c3", "messages": [{"role": "user", "content": "add a plant milk"}],
               "expected": {"calls": [{"name": "add_item", "arguments": {
                   "title": [title]}}]}}
    write_cases(root, "items", [*ITEM_CASES, pattern])
    run = bench(root, "run", "--dataset", "items", "--variants", "current",
                "--provider", "oracle", "--run-id", "oracle")
    assert run.returncode == 0, run.stderr
    assert (root / "writes.log").read_text().splitlines() == ["milk", "eggs"]
    assert writes(root) == 2
    got = rows(root, "oracle")
    c3 = got[("c3", "current")]
    assert (c3["execution_success"], c3["execution_match"]) == (None, None)
    assert (c3["arguments_correct"], c3["arguments_correct_lenient"]) == (None, None)
    assert c3["selection_correct"] is True
    assert all(got[(c, "current")]["arguments_correct"] is True for c in ("c1", "c2"))
    final = [r for r in read_traces(root / "reports/runs/oracle/traces.jsonl")
             if r.final and r.case_id == "c3"]
    assert [(r.status, r.error_code) for r in final] == [("rejected", "no_literal_value")]
    said = flat(run.stdout)
    assert "the oracle could not answer 1 row of toolset 'items' as labelled (cases c3): " \
        "add_item.title is only a pattern" in said, said
    assert "1 label call was not executed" in said
    assert "arguments score of those rows is not meaningful, so it is not counted" in said


@pytest.mark.slow
def test_bench_starts_a_stdio_server_itself_and_reads_its_exit_status_from_its_process(
        tmp_path):
    """The server is bench's own child (bench.mcp_stdio, a Transport as
    mcp.Client takes one), not a local read out of the SDK's stdio_client generator: the
    process handed over tells the exit status of a server that exits during a call, and a
    server left running is stopped when the session ends."""
    import anyio
    from mcp import Client

    from bench.mcp_stdio import stdio_transport

    started: list = []

    async def session(server: Path, tool: str) -> str:
        with open(tmp_path / "stderr.log", "ab") as errlog:
            async with Client(stdio_transport(sys.executable, [str(server)], env=None,
                                              cwd=tmp_path, errlog=errlog,
                                              started=started.append)) as client:
                assert tool in {t.name for t in (await client.list_tools()).tools}
                try:
                    result = await client.call_tool(tool, {"x": "hi"})
                except Exception as exc:  # noqa: BLE001 - the SDK's Connection closed
                    return f"{type(exc).__name__}: {exc}"
                return str(result.content[0].text)

    said = anyio.run(session, CRASH_SERVER, "crash")
    assert "Connection closed" in said
    assert started[0].returncode == 3
    assert anyio.run(session, CRASH_SERVER, "echo") == "hi"
    assert started[1].returncode is not None  # stopped with the session, not left running


@pytest.mark.slow
@pytest.mark.parametrize("signame, code", [("SIGINT", 130), ("SIGTERM", 143)])
def test_a_stop_while_the_mcp_server_starts_sends_it_nothing(tmp_path, signame, code):
    """Ctrl-C or SIGTERM while --execute-mcp's server starts (slowly: it imports a model,
    say) ends the run there: the server is stopped and never gets a call. The start blocked
    the run's event loop, so the stop was seen only after it, once the rows were sent: the
    server wrote both items about 15 s after the signal."""
    import os
    import signal

    from conftest import REPO, stop_once_ready
    from tests.importers.test_own_tools import manifest, writes

    root, _ = _item_project(tmp_path)
    (root / "slowsrv.py").write_text(SERVER.read_text(encoding="utf-8").replace(
        'if __name__ == "__main__":\n', 'if __name__ == "__main__":\n'
        "    import os, pathlib, time\n"
        "    pathlib.Path('starting').write_text(str(os.getpid()))\n"
        "    time.sleep(15)\n", 1), encoding="utf-8")  # within its start-up timeout
    env = {**os.environ, "PYTHONPATH": str(REPO),
           "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("BENCH_HOME", None)
    result = stop_once_ready(
        [sys.executable, "-m", "bench", "run", "--dataset", "items", "--variants", "current",
         "--provider", "oracle", "--execute-mcp", "python slowsrv.py", "--allow-writes",
         "--run-id", "stopped"], root / "starting", getattr(signal, signame), cwd=root,
        env=env)
    assert result.returncode == code, result.stderr
    assert "0 of 2 rows kept" in result.stderr and "Traceback" not in result.stderr
    assert manifest(root, "stopped")["status"] == "interrupted"
    assert writes(root) == 0
    server = int((root / "starting").read_text(encoding="utf-8"))
    state = Path(f"/proc/{server}/stat")  # stopped by bench, not left sleeping
    assert not state.exists() or state.read_text().split(")")[-1].split()[0] == "Z"


# -- a declared server that does not start or exits says why and leaves no run folder ----------


def test_an_mcp_command_that_does_not_exist_leaves_no_run_folder(tmp_path):
    project = python_project(tmp_path)
    use_mcp_server(project, [str(tmp_path / "no-such-server")])
    result = run(project, "broken")
    assert "failed to start" in error_lines(result)[0]
    assert not (project / "reports" / "runs" / "broken").exists()


def test_a_server_that_says_why_it_exits_keeps_its_log_and_says_how_to_go_on(tmp_path):
    project = python_project(tmp_path)
    use_mcp_server(project, [sys.executable, "-c",
                             "import sys; print('no licence key', file=sys.stderr); sys.exit(3)"])
    result = run(project, "broken")
    line = error_lines(result)[0]
    log = project / "reports" / "runs" / "broken" / "mcp-server-proj.log"
    assert "no licence key" in line and str(log) in line
    assert "bench run --resume broken" in line
    assert log.read_text(encoding="utf-8").strip() == "no licence key"


# -- what an MCP server prints does not reach bench's terminal ---------------------------------

RAW_SERVER = r'''
import json, sys, traceback
TOOL = {"name": "add", "description": "Add two numbers.", "inputSchema": {"type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"]}}
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "raw", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        try:
            1 / 0
        except ZeroDivisionError:
            traceback.print_exc()                    # on its stderr
            traceback.print_exc(file=sys.stdout)     # on its stdout: not JSON-RPC
            sys.stdout.flush()
        args = msg["params"]["arguments"]
        result = {"content": [{"type": "text", "text": str(args["a"] + args["b"])}],
                  "isError": False}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
'''


@pytest.mark.parametrize("how", ["declared", "--execute-mcp"])
def test_a_servers_tracebacks_go_to_its_log_named_in_one_line(tmp_path, how):
    project = python_project(tmp_path)
    (project / "raw_server.py").write_text(RAW_SERVER, encoding="utf-8")
    server = [sys.executable, str(project / "raw_server.py")]
    if how == "declared":
        use_mcp_server(project, server)
        result = run(project, "tb")
        log = project / "reports" / "runs" / "tb" / "mcp-server-proj.log"
    else:
        result = run(project, "tb", "--execute-mcp", " ".join(server), "--allow-writes")
        log = project / "reports" / "runs" / "tb" / "mcp-server.log"
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    assert "ZeroDivisionError" not in result.stderr + result.stdout
    said = [line for line in result.stderr.splitlines() if "MCP server output" in line]
    assert said == [f"MCP server output (its stderr) in {log}"]
    text = log.read_text(encoding="utf-8")
    assert "ZeroDivisionError: division by zero" in text  # its stderr
    assert "input_value='Traceback (most recent call last):'" in text  # its stray stdout
    row = json.loads((project / "reports" / "runs" / "tb" / "results.jsonl").read_text())
    assert row["metrics"]["execution_success"] is True
