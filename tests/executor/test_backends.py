"""Reference backends: coverage of every shipped tool, deterministic data, read-only SQL,
sandboxed writes, permissions, and the configurable analytics sort_order."""

from __future__ import annotations

import hashlib
import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from bench.descriptions import load_variant
from bench.descriptions.specs import load_specs
from bench.executor.backends import ReferenceBackends, shopcache, shopdb
from bench.executor.backends.shopcache import shop_db_path
from bench.executor.backends.shopdb import GENERATOR_VERSION, N_CUSTOMERS, generate
from bench.executor.outcome import RunContext
from bench.executor.pipeline import Executor
from bench.models import Case, Tool, ToolCall
from bench.paths import descriptions_dir
from bench.project import Project
from bench.runner import RunConfig, RunSession

TOOLSETS = sorted(p.parent.name for p in descriptions_dir().glob("*/specs"))
EVERYTHING = RunContext(allow_writes=True, allow_sensitive=True)


@pytest.fixture(scope="module")
def backends() -> ReferenceBackends:
    return ReferenceBackends()


@pytest.fixture(scope="module")
def executor(backends):
    ex = Executor(backends)
    yield ex
    ex.close()


def run(executor, toolset, name, arguments, context=EVERYTHING, tools=None):
    tools = tools or load_variant(toolset, "l10").tools
    return executor.execute(ToolCall(id="t1", name=name, arguments=arguments), tools, toolset,
                            context)


def test_every_shipped_tool_has_a_reference_handler(backends):
    assert {"ecommerce", "analytics"} <= set(TOOLSETS)
    for toolset in TOOLSETS:
        names = {spec.name for spec in load_specs(descriptions_dir() / toolset)}
        assert names - set(backends(toolset)) == set(), toolset


@pytest.mark.slow
def test_every_spec_example_executes_without_a_validation_or_internal_error(executor):
    """Each spec example's arguments pass validation and the handler runs; business outcomes
    such as not_found are fine, a crash or a rejected example is not."""
    checked = 0
    for toolset in TOOLSETS:
        tools = load_variant(toolset, "l10").tools
        for spec in load_specs(descriptions_dir() / toolset):
            for example in spec.examples:
                if example.arguments is None:
                    continue
                outcome = run(executor, toolset, spec.name, example.arguments, tools=tools)
                checked += 1
                assert outcome.error_class in (None, "permanent") \
                    or outcome.error_code in ("unknown_result", "recipient_rejected",
                                              "email_rejected", "cutoff_passed",
                                              "carrier_mismatch", "invalid_sort_order"), \
                    (toolset, spec.name, example.arguments, outcome.error)
                assert outcome.error_code != "internal_error", outcome.error
    assert checked > 60


@pytest.mark.slow
def test_database_is_deterministic_and_large_enough(tmp_path):
    first, second = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    generate(first, seed=7)
    generate(second, seed=7)

    def digest(path: Path) -> str:
        conn = sqlite3.connect(path)
        text = "\n".join(conn.iterdump())
        conn.close()
        return hashlib.sha256(text.encode()).hexdigest()

    assert digest(first) == digest(second)
    conn = sqlite3.connect(first)
    counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
              for t in ("orders", "products", "customers", "shipment_events", "coupons",
                        "points_ledger", "weather_daily")}
    assert counts["orders"] >= 2000 and counts["products"] >= 500
    assert counts["customers"] >= 300
    assert min(counts.values()) > 0


def test_database_is_cached_by_generator_version_and_seed(tmp_path):
    path = shop_db_path(seed=11, folder=tmp_path)
    stamp = path.stat().st_mtime_ns
    assert shop_db_path(seed=11, folder=tmp_path) == path
    assert path.stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert "-s11" in path.name and path.name.startswith("shop-g")
    assert not list(tmp_path.glob(".shop-*"))  # no temporary file left behind


def test_a_database_generated_ahead_in_a_child_process_is_the_one_generated_here(tmp_path):
    shopcache.generate_ahead(seed=13, folder=tmp_path / "ahead")
    ahead = shop_db_path(seed=13, folder=tmp_path / "ahead")  # waits for the child
    here = shop_db_path(seed=13, folder=tmp_path / "here")
    assert ahead.read_bytes() == here.read_bytes()
    assert ahead not in shopcache._AHEAD  # waited for and forgotten
    assert not list((tmp_path / "ahead").glob(".shop-*"))


def test_a_generation_ahead_that_fails_leaves_the_database_to_be_generated_on_first_use(
        tmp_path, monkeypatch):
    failing = tmp_path / "fails.py"
    failing.write_text("raise SystemExit(3)\n", encoding="utf-8")
    monkeypatch.setattr(shopcache, "_CHILD", str(failing))
    shopcache.generate_ahead(seed=14, folder=tmp_path)
    path = shop_db_path(seed=14, folder=tmp_path)
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM orders").fetchone()[0] > 0


def test_an_executing_runs_session_generates_its_database_alongside_its_loading(elsewhere):
    project = Project(elsewhere)
    cached = project.cache_dir / "executor"
    RunSession(RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"], limit=1,
                         execute=False), run_id="no-exec", command=[], project=project,
               will_run=True)
    RunSession(RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"], limit=1),
               run_id="shown", command=[], project=project)  # bench show's: nothing runs
    ahead = shopcache._db_file(shopdb.DEFAULT_SEED, cached)
    assert ahead not in shopcache._AHEAD and not cached.exists()  # nothing to execute
    RunSession(RunConfig(dataset="ecommerce", variants=["l3"], providers=["oracle"], limit=1),
               run_id="exec", command=[], project=project, will_run=True)
    assert ahead in shopcache._AHEAD
    shop_db_path(folder=cached)  # the child's file, waited for
    assert [p.name for p in cached.iterdir()] == [
        f"shop-g{shopdb.GENERATOR_VERSION}-s{shopdb.DEFAULT_SEED}.sqlite"]


@pytest.mark.parametrize("sql", [
    "DELETE FROM orders", "UPDATE orders SET status = 'paid'", "DROP TABLE orders",
    "INSERT INTO orders (order_id) VALUES ('x')", "PRAGMA writable_schema = 1",
    "ATTACH DATABASE ':memory:' AS other", "CREATE TABLE t (x)",
    "SELECT 1; DELETE FROM orders",
])
def test_sql_tool_rejects_everything_but_one_select(executor, backends, sql):
    before = hashlib.sha256(backends.db.path.read_bytes()).hexdigest()
    outcome = run(executor, "ecommerce", "query_database", {"sql": sql})
    assert not outcome.success
    assert outcome.error_code == "read_only_violation"
    assert outcome.error_class == "validation"
    assert "SELECT" in outcome.error
    assert hashlib.sha256(backends.db.path.read_bytes()).hexdigest() == before


@pytest.mark.slow
def test_sql_tool_limit_and_truncation(executor):
    outcome = run(executor, "ecommerce", "query_database",
                  {"sql": "SELECT order_id FROM orders ORDER BY order_id", "limit": 5})
    assert outcome.success
    assert outcome.data["row_count"] == 5 and outcome.data["truncated"] is True
    assert "more than 5 rows" in outcome.data["note"]
    whole = run(executor, "ecommerce", "query_database",
                {"sql": "SELECT COUNT(*) FROM orders"})
    assert whole.data["truncated"] is False and whole.data["rows"][0][0] >= 2000
    for bad in (0, 1001):
        rejected = run(executor, "ecommerce", "query_database", {"sql": "SELECT 1",
                                                                 "limit": bad})
        assert rejected.error_class == "validation" and "limit" in rejected.error


def test_sql_error_is_returned_readably(executor):
    outcome = run(executor, "ecommerce", "query_database", {"sql": "SELECT nope FROM orders"})
    assert outcome.error_code == "sql_error" and "no such column" in outcome.error


@pytest.mark.slow
def test_writes_are_sandboxed_and_permission_checked(executor, backends):
    order = sqlite3.connect(backends.db.path).execute(
        "SELECT order_id FROM orders WHERE status = 'paid' LIMIT 1").fetchone()[0]
    denied = run(executor, "ecommerce", "cancel_order", {"order_id": order},
                 context=RunContext())
    assert denied.error_code == "permission_denied" and "--allow-writes" in denied.error
    done = run(executor, "ecommerce", "cancel_order", {"order_id": order})
    assert done.success and done.data["status"] == "cancelled"
    assert sqlite3.connect(backends.db.path).execute(
        "SELECT status FROM orders WHERE order_id = ?", (order,)).fetchone()[0] == "paid"
    again = run(executor, "ecommerce", "cancel_order", {"order_id": order})
    assert again.data == done.data  # same call, same result
    sensitive = run(executor, "ecommerce", "update_shipping_address",
                    {"order_id": order, "phone": "13912345678"},
                    context=RunContext(allow_writes=True))
    assert sensitive.error_code == "permission_denied" and "--allow-sensitive" in sensitive.error


def test_backend_permission_wins_over_a_variant_that_calls_a_write_tool_read(executor):
    tools = [t.model_copy(update={"permission": "read"})
             for t in load_variant("ecommerce", "l10").tools]
    outcome = run(executor, "ecommerce", "cancel_order", {"order_id": "ORD20261105"},
                  context=RunContext(), tools=tools)
    assert outcome.error_code == "permission_denied"


@pytest.mark.slow
def test_city_names_in_any_language_give_the_same_weather(executor):
    results = [run(executor, "ecommerce", "get_weather", {"city": city, "days": 3}).data
               for city in ("北京", "北京市", "Beijing", "beijing")]
    assert all(r == results[0] for r in results) and results[0]["city"] == "Beijing"
    assert len(results[0]["forecast"]) == 3
    unknown = run(executor, "ecommerce", "get_weather", {"city": "Atlantis"})
    assert unknown.error_code == "not_found" and "Atlantis" in unknown.error


def _drifted_tools(values: list[str]) -> list[Tool]:
    """analytics tools whose description schema teaches other sort_order values."""
    tools = []
    for tool in load_variant("analytics", "l10").tools:
        schema = tool.input_schema
        if "sort_order" in schema.get("properties", {}):
            props = {**schema["properties"], "sort_order": {"type": "string", "enum": values}}
            schema = {**schema, "properties": props}
        tools.append(tool.model_copy(update={"input_schema": schema}))
    return tools


@pytest.mark.slow
def test_analytics_sort_order_accepts_exactly_the_configured_values():
    args = {"table": "customers", "metric": "count(*)", "group_by": "city", "limit": 3}
    default = Executor(ReferenceBackends())
    lower = Executor(ReferenceBackends(sort_order_values=("asc", "desc")))
    drifted = _drifted_tools(["asc", "desc"])
    try:
        ok = run(default, "analytics", "query_metrics", {**args, "sort_order": "ASC"})
        assert ok.success and ok.data["rows"][0][1] <= ok.data["rows"][-1][1]
        # the description says "asc" but the backend wants "ASC": the call fails loudly
        drift = run(default, "analytics", "query_metrics", {**args, "sort_order": "asc"},
                    tools=drifted)
        assert drift.error_code == "invalid_sort_order" and "ASC, DESC" in drift.error
        switched = run(lower, "analytics", "query_metrics", {**args, "sort_order": "asc"},
                       tools=drifted)
        assert switched.success and switched.data["rows"] == ok.data["rows"]
        old = run(lower, "analytics", "top_products", {"sort_order": "DESC"})
        assert old.error_code == "invalid_sort_order"
    finally:
        default.close()
        lower.close()


def test_sort_order_values_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("BENCH_ANALYTICS_SORT_ORDER", "asc,desc")
    assert ReferenceBackends().sort_order_values == ("asc", "desc")


def test_sql_cannot_build_huge_values(tmp_path):
    """A single SQL function call is not interrupted by the progress handler; SQLite's length
    limit turns a gigabyte-sized value into a validation error (break-it review finding)."""
    import sqlite3

    from bench.executor.backends.base import ShopDB
    from bench.executor.outcome import ToolError

    path = tmp_path / "tiny.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t(a)")
        conn.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(3)])
    db = ShopDB(path)
    with pytest.raises(ToolError) as raised:
        db.select("SELECT randomblob(200000000) AS b FROM t", 10, None)
    assert raised.value.code == "sql_error" and "too big" in str(raised.value)
    assert db.select("SELECT a FROM t", 10, None)["row_count"] == 3


def test_sql_limit_of_one_row_reads_singular(executor):
    outcome = run(executor, "ecommerce", "query_database",
                  {"sql": "SELECT order_id FROM orders ORDER BY order_id", "limit": 1})
    assert outcome.data["row_count"] == 1
    assert outcome.data["note"].startswith("more than 1 row matched; only the first is shown.")


def test_query_metrics_takes_a_column_name_with_digits(executor):
    """``sum(sales_30d)``: the metric pattern took letters and underscores only, so a real
    products column was refused as an invalid metric."""
    result = run(executor, "analytics", "query_metrics",
                 {"table": "products", "metric": "sum(sales_30d)"})
    assert result.success, result.error
    refused = run(executor, "analytics", "query_metrics",
                  {"table": "products", "metric": "sum(sales_31d)"})
    assert not refused.success and refused.error_code == "unknown_column"


# -- a single-answer case's state ------------------------------------------------------------

DELIVERED = "ORD20261012"  # delivered in the seeded database


def _cancel_case(state: dict | None) -> Case:
    return Case.model_validate({
        "id": "state-1", "toolset": "ecommerce", "lang": "en",
        "messages": [{"role": "user", "content": f"Cancel {DELIVERED}, I changed my mind."}],
        "expected": {"calls": [{"name": "cancel_order", "arguments": {
            "order_id": [DELIVERED], "reason": ["changed_mind"]}}]},
        **({"state": state} if state is not None else {})})


def _answer(case):
    from types import SimpleNamespace
    call = ToolCall(id="c1", name="cancel_order",
                    arguments={"order_id": DELIVERED, "reason": "changed_mind"})
    return SimpleNamespace(error=None, calls=[call])


def test_a_single_case_with_state_runs_its_label_and_the_answer_on_the_overridden_copy(
        tmp_path):
    from bench.executor.runhook import RunExecution
    paid = _cancel_case({"overrides": [
        f"UPDATE orders SET status = 'paid', payment_status = 'paid' WHERE order_id = "
        f"'{DELIVERED}'"]})
    tools = load_variant("ecommerce", "l10").tools
    execution = RunExecution(tmp_path, "state", allow_writes=True, allow_sensitive=True)
    try:
        for trial in range(2):  # the label's write and the first answer's are rolled back
            metrics = execution.row_metrics(paid, tools, "ecommerce", _answer(paid), trial)
            assert metrics["execution_success"] is True
            assert metrics["execution_match"] is True
            assert "execution_match_skipped" not in metrics
        # the same label without the state: the seeded order is delivered, the label fails
        plain = _cancel_case(None)
        metrics = execution.row_metrics(plain, tools, "ecommerce", _answer(plain), 0)
        assert metrics["execution_match"] is None
        assert metrics["execution_match_skipped"] == "label_failed"
    finally:
        execution.close()
    seeded = sqlite3.connect(shop_db_path(shopdb.DEFAULT_SEED))
    try:  # the cached seeded file never changes
        assert seeded.execute("SELECT status FROM orders WHERE order_id = ?",
                              (DELIVERED,)).fetchone() == ("delivered",)
    finally:
        seeded.close()


@pytest.mark.slow
def test_a_write_on_a_state_whose_table_is_an_endless_view_times_out_instead_of_hanging():
    """An override may replace a table by a view without an end; a reference write tool runs
    in the caller's thread (no executor timeout stops it), so its statements need their own
    budget, or bench run and bench lint never return."""
    import threading
    endless = (
        "DROP TABLE order_items",
        "CREATE VIEW order_items AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
        "FROM c) SELECT 'O' || x AS order_id, 'P' AS product_id, 1 AS quantity, "
        "1.0 AS unit_price_cny FROM c")
    seeded = sqlite3.connect(shop_db_path(shopdb.DEFAULT_SEED))
    try:
        number, = seeded.execute("SELECT tracking_number FROM shipments WHERE status = "
                                 "'label_created' LIMIT 1").fetchone()
    finally:
        seeded.close()
    executor = Executor(ReferenceBackends())
    got = []
    context = RunContext(allow_writes=True, allow_sensitive=True, inject_faults=False,
                         state=endless)
    worker = threading.Thread(target=lambda: got.append(run(
        executor, "logistics", "cancel_shipment",
        {"tracking_number": number, "reason": "duplicate"}, context)), daemon=True)
    try:
        worker.start()
        worker.join(120)  # a hang guard, not a timing assertion: the budget is 5 s
        assert not worker.is_alive(), "the write never returned"
        assert not got[0].success and got[0].error_code == "timeout"
    finally:
        executor.close()


def test_a_label_declared_not_executable_is_never_run_and_its_answers_get_no_exec_scores(
        tmp_path):
    from bench.executor.runhook import RunExecution
    case = Case.model_validate({
        "id": "export-1", "toolset": "analytics", "lang": "en",
        "messages": [{"role": "user", "content": "Export res_3c9e1a20 as CSV."}],
        "expected": {"calls": [{"name": "export_report", "arguments": {
            "result_id": ["res_3c9e1a20"], "format": ["csv"]}}],
            "not_executable": "res_3c9e1a20 was issued in the conversation's history"}})
    from types import SimpleNamespace
    call = ToolCall(id="c1", name="export_report",
                    arguments={"result_id": "res_3c9e1a20", "format": "csv"})
    execution = RunExecution(tmp_path, "ne", allow_writes=True, allow_sensitive=True)
    try:
        metrics = execution.row_metrics(case, load_variant("analytics", "l10").tools,
                                        "analytics", SimpleNamespace(error=None, calls=[call]),
                                        0)
    finally:
        execution.close()
    assert metrics["execution_match_skipped"] == "label_not_executable"
    assert metrics["execution_match"] is None
    assert metrics["execution_success"] is None


# -- a damaged cached shop database ------------------------------------------------------------


def _damage(path: Path, how: str) -> None:
    whole = path.read_bytes()
    damaged = {"empty": b"", "garbage": b"garbage\n", "cut": whole[:1_000_000],
               "cut at a page": whole[:4096 * 100],
               "overwritten head": b"\0" * 100 + whole[100:]}[how]
    path.write_bytes(damaged)


@pytest.mark.parametrize("how", ["empty", "garbage", "cut", "cut at a page",
                                 "overwritten head"])
def test_a_damaged_cached_shop_database_is_built_again(tmp_path, how):
    path = shop_db_path(seed=11, folder=tmp_path)
    good = path.read_bytes()
    _damage(path, how)
    assert shop_db_path(seed=11, folder=tmp_path) == path
    assert path.read_bytes() == good  # generated again, deterministically
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM customers").fetchone()[0] == N_CUSTOMERS
    assert not list(tmp_path.glob(".shop-*"))


@pytest.mark.slow  # two `bench run` subprocesses
def test_runs_on_a_damaged_cached_shop_database_score_as_on_a_whole_one(
        run_bench, project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("BENCH_CACHE_DIR", str(cache))
    path = shop_db_path(folder=cache / "executor")
    assert path.name == f"shop-g{GENERATOR_VERSION}-s20261129.sqlite"
    # episodes: the load-time check read it (a traceback: "file is not a database")
    path.write_bytes(b"garbage\n")
    done = run_bench("run", "--dataset", "ecommerce-episodes", "--provider", "oracle",
                     "--variants", "l3", "--limit", "2", "--run-id", "ep")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    # single answers: every execution failed on a shop without tables, silently
    path.write_bytes(b"")
    done = run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "6",
                     "--run-id", "single")
    assert done.returncode == 0, done.stderr
    results = project / "reports" / "runs" / "single" / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text(encoding="utf-8").splitlines()]
    ran = [r["metrics"]["execution_success"] for r in rows
           if r["metrics"]["execution_success"] is not None]
    assert ran and all(ran)  # the oracle's calls run


# -- the shop database generated ahead, stopped: a SIGTERM to bench's process group while the
# child wrote it left its temporary file (~3.6 MB) in the cache folder, every time -------------


def test_a_terminated_generation_ahead_leaves_no_temporary_file(tmp_path):
    """``timeout`` or a cancelled CI job sends SIGTERM to the whole group: the child removes
    its temporary file, and the parent generates the database itself."""
    for attempt in range(20):  # until the signal lands while the file is being written
        folder = tmp_path / str(attempt)
        shopcache.generate_ahead(seed=17, folder=folder)
        path = shopcache._db_file(17, folder)
        child = shopcache._AHEAD[path]
        while child.poll() is None and not list(folder.glob(".shop-*.tmp")):
            time.sleep(0.001)
        child.send_signal(signal.SIGTERM)
        child.wait()
        if path.exists():  # the child finished first: try again
            shop_db_path(seed=17, folder=folder)
            continue
        assert not list(folder.glob(".shop-*")), list(folder.iterdir())
        assert child.returncode == 128 + signal.SIGTERM  # it exited through its cleanup
        made = shop_db_path(seed=17, folder=folder)  # generated here instead
        assert [p.name for p in folder.iterdir()] == [made.name]
        return
    pytest.skip("the child always finished before the signal")


# -- a project of its own tools got the 3.6 MB shop database written into its cache by every
# first run, though nothing of it ever reads that database -------------------------------------


def own_toolset_project(root: Path, episode: bool = False) -> Project:
    """A project with one toolset of its own (``mine``), one case, one variant."""
    (root / "descriptions" / "mine" / "variants").mkdir(parents=True)
    (root / "descriptions" / "mine" / "variants" / "current.yaml").write_text(
        "tools:\n- name: add\n  description: Add two numbers.\n"
        "  input_schema: {type: object, properties: {a: {type: integer}}}\n",
        encoding="utf-8")
    case: dict[str, object] = {"id": "c1", "toolset": "mine", "lang": "en",
                               "messages": [{"role": "user", "content": "add 1"}]}
    if episode:
        case.update(kind="episode", required_calls=[{"name": "add", "arguments": {}}],
                    success={"answer_facts": [["1"]]})
    else:
        case["expected"] = {"calls": [{"name": "add", "arguments": {"a": [1]}}]}
    (root / "datasets" / "mine").mkdir(parents=True)
    (root / "datasets" / "mine" / "cases.jsonl").write_text(json.dumps(case) + "\n",
                                                          encoding="utf-8")
    return Project(root, root / "cache")


def test_a_run_of_a_projects_own_tools_does_not_generate_the_shop_database(tmp_path):
    project = own_toolset_project(tmp_path / "own")
    RunSession(RunConfig(dataset="mine", variants=["current"], providers=["oracle"]),
               run_id="own", command=[], project=project, will_run=True)
    cached = project.cache_dir / "executor"
    ahead = shopcache._db_file(shopdb.DEFAULT_SEED, cached)
    started = shopcache._AHEAD.pop(ahead, None)
    if started is not None:
        started.wait()
    assert started is None and not cached.exists()
    # an episode's label checks read the shop database, whatever its toolset
    project = own_toolset_project(tmp_path / "episode", episode=True)
    RunSession(RunConfig(dataset="mine", variants=["current"], providers=["oracle"]),
               run_id="ep", command=[], project=project, will_run=True)
    ahead = shopcache._db_file(shopdb.DEFAULT_SEED, project.cache_dir / "executor")
    started = shopcache._AHEAD.pop(ahead, None)  # still running when the checks were cached
    if started is not None:
        started.wait()
    assert ahead.is_file()
