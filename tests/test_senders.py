"""SDK calls in worker processes (bench.providers.senders): the children send through the real
openai SDK to the loopback fake server and give back exactly what the in-process adapter gives,
errors keep their class, a dead or unstartable child is a clear error, and a run at
concurrency 16+ uses them by default with the same rows as one without."""

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from bench.errors import BenchError
from bench.providers import make_provider
from bench.providers.errors import ProviderError
from bench.providers.senders import SenderPool, default_sender_processes
from bench.runner import RunConfig, Runner
from fakeserver import FakeServer, Reply, chat_body, chat_stream, error_body, wait_for

BODY = {"model": "m", "messages": [{"role": "user", "content": "where is order 17?"}],
        "tools": [{"type": "function", "function": {
            "name": "get_order", "description": "Get an order.",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}}]}


@pytest.fixture
def server():
    with FakeServer() as running:
        yield running


def compat(server, **options):
    return make_provider(f"openai-compat:m@{server.url}/v1", **options)


def test_a_child_answers_what_the_adapter_answers_in_process(server):
    provider = compat(server)
    reply = chat_body(calls=[("get_order", {"id": 17})])
    headers = {"X-RateLimit-Remaining-Requests": "41"}
    server.script(Reply(body=reply, headers=headers), Reply(body=reply, headers=headers))
    here, here_headers = provider.send(BODY)
    pool = SenderPool(provider, processes=1, threads=2)
    try:
        there, there_headers = pool.send(BODY)
    finally:
        pool.close()
    assert there == here
    assert there_headers["x-ratelimit-remaining-requests"] == \
        here_headers["x-ratelimit-remaining-requests"] == "41"
    assert there_headers["x-request-id"].startswith("req_")
    assert server.requests[1].body == server.requests[0].body == BODY


def test_streamed_answers_are_assembled_in_the_child(server):
    provider = compat(server, stream=True)
    server.script(Reply(events=chat_stream([
        {"index": 0, "id": "call_a", "name": "get_order", "arguments": '{"id":'},
        {"index": 0, "arguments": " 17}"}])))
    pool = SenderPool(provider, processes=1, threads=1)
    try:
        answer, _ = pool.send({**BODY, "stream": True, "stream_options": {"include_usage": True}})
    finally:
        pool.close()
    (call,) = answer["choices"][0]["message"]["tool_calls"]
    assert call["id"] == "call_a" and call["function"]["arguments"] == '{"id": 17}'


@pytest.mark.parametrize("reply, error_class, status, retry_after_s", [
    (Reply(429, error_body(429, "slow down"), headers={"retry-after": "7"}), "rate_limited",
     429, 7.0),
    (Reply(503, error_body(503, "busy")), "transient", 503, None),
    (Reply(401, error_body(401, "bad key")), "permanent", 401, None),
    (Reply(400, error_body(400, "context too long")), "validation", 400, None),
])
def test_errors_keep_their_class_status_and_retry_after(server, reply, error_class, status,
                                                        retry_after_s):
    provider = compat(server)
    server.script(reply, reply)
    with pytest.raises(ProviderError) as here:
        provider.send(BODY)
    pool = SenderPool(provider, processes=1, threads=1)
    try:
        with pytest.raises(ProviderError) as there:
            pool.send(BODY)
    finally:
        pool.close()
    assert (there.value.error_class, there.value.status, there.value.retry_after_s) == \
        (here.value.error_class, here.value.status, here.value.retry_after_s) == \
        (error_class, status, retry_after_s)
    assert there.value.message == here.value.message


def test_a_child_that_dies_fails_its_requests_permanently_instead_of_hanging(server):
    provider = compat(server)
    server.script(Reply(body=chat_body(text="late"), delay_s=30))
    pool = SenderPool(provider, processes=1, threads=1)
    try:
        (worker,) = pool._workers
        started = time.monotonic()
        threading.Timer(0.5, os.kill, (worker.process.pid, signal.SIGKILL)).start()
        with pytest.raises(ProviderError, match=r"sender process 1 exited before answering "
                                                r"\(exit code -9") as info:
            pool.send(BODY)  # in flight when the child is killed
        assert info.value.error_class == "permanent" and not info.value.retryable
        assert time.monotonic() - started < 10
        with pytest.raises(ProviderError, match="sender process 1 is gone"):
            pool.send(BODY)  # the pool does not pretend the child came back
    finally:
        pool.close()


def test_a_child_that_cannot_build_the_provider_is_a_one_line_error(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    provider = make_provider("openai:gpt-4o-mini", base_url=f"{server.url}/v1")
    monkeypatch.delenv("OPENAI_API_KEY")  # the child inherits an environment without it
    with pytest.raises(BenchError, match=r"a sender process could not start: "
                                         r"ProviderUnavailable: .*OPENAI_API_KEY is not set"):
        SenderPool(provider, processes=2, threads=1)


def test_children_run_in_their_own_session_and_exit_when_closed(server):
    pool = SenderPool(compat(server), processes=2, threads=1)
    processes = [worker.process for worker in pool._workers]
    assert all(os.getsid(p.pid) != os.getsid(0) for p in processes)  # Ctrl-C is the run's
    pool.close()
    assert [p.returncode for p in processes] == [0, 0]


def test_default_is_two_processes_from_concurrency_16():
    assert [default_sender_processes(c) for c in (1, 4, 15, 16, 64)] == [0, 0, 0, 2, 2]


def run_rows(project, server, run_id, **settings):
    config = RunConfig(dataset="ecommerce", variants=["l3"], limit=12, trials=2,
                       providers=[f"openai-compat:m@{server.url}/v1"], **settings)
    runner = Runner(config, run_id=run_id, command=[])
    manifest = runner.run()
    rows = {r["key"]: r for r in runner.store.rows()}
    return manifest, rows


def without_ids(parsed):
    """A parsed answer without its call ids (the fake server numbers them per request)."""
    return {**parsed, "calls": [{k: v for k, v in call.items() if k != "id"}
                                for call in parsed["calls"]]}


def test_a_run_at_concurrency_16_sends_from_two_processes_with_the_same_rows(project, server):
    # every request's first attempt gets a 429 with Retry-After 0: retries cross the pipe too
    server.script(Reply(429, error_body(429, "slow"), headers={"retry-after": "0"}))
    manifest, rows = run_rows(project, server, "procs", concurrency=16)
    assert manifest["status"] == "complete"
    assert manifest["providers"][0]["sender_processes"] == 2
    server.script(Reply(429, error_body(429, "slow"), headers={"retry-after": "0"}))
    threads_manifest, threads_rows = run_rows(project, server, "threads", concurrency=16,
                                              sender_processes=0)
    assert threads_manifest["providers"][0]["sender_processes"] == 0
    assert rows.keys() == threads_rows.keys() and len(rows) == 24
    for key, row in rows.items():
        other = threads_rows[key]
        assert (without_ids(row["parsed"]), row["metrics"]) == \
            (without_ids(other["parsed"]), other["metrics"]), key
        assert row["response"]["request_id"].startswith("req_")  # headers crossed the pipe
    assert sorted(r["attempts"] for r in rows.values()) == \
        sorted(r["attempts"] for r in threads_rows.values()) == [1] * 23 + [2]


def test_a_body_too_deep_to_pickle_fails_alone_and_the_pool_keeps_working(server):
    deep = inner = {}
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    pool = SenderPool(compat(server), processes=1, threads=1)
    try:
        with pytest.raises(ProviderError, match="cannot be passed to sender process 1") as info:
            pool.send({**BODY, "metadata": deep})
        assert info.value.error_class == "validation"  # the row's invalid answer, no retry
        server.script(Reply(body=chat_body(text="still here")))
        answer, _ = pool.send(BODY)
        assert answer["choices"][0]["message"]["content"] == "still here"
    finally:
        pool.close()


def test_a_stuck_child_times_out_instead_of_hanging_the_run(server):
    pool = SenderPool(compat(server), processes=1, threads=1)
    (worker,) = pool._workers
    pool.answer_timeout_s = 1.0  # 3 x the request timeout + 30 s by default
    os.kill(worker.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(ProviderError, match="gave no answer within 1 s") as info:
            pool.send(BODY)
        assert info.value.error_class == "timeout" and time.monotonic() - started < 5
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
        pool.close()


def test_abandon_releases_callers_waiting_on_a_stopped_child_and_drops_its_late_answer(
        server):
    pool = SenderPool(compat(server), processes=1, threads=2)
    (worker,) = pool._workers
    os.kill(worker.process.pid, signal.SIGSTOP)
    outcomes: list[BaseException] = []

    def caller() -> None:
        try:
            pool.send(BODY)
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            outcomes.append(exc)

    callers = [threading.Thread(target=caller) for _ in range(2)]
    try:
        for thread in callers:
            thread.start()
        assert wait_for(lambda: len(pool._pending) == 2)
        time.sleep(0.2)
        assert not outcomes  # the stopped child holds them (for up to answer_timeout_s)
        assert pool.abandon("stopping") == 2
        for thread in callers:
            thread.join(5)
        assert [type(e).__name__ for e in outcomes] == ["GateClosed"] * 2
        assert all(str(e) == "stopping" for e in outcomes) and not worker.mine
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
    assert wait_for(lambda: len(server.requests) == 2)  # the child sends them late: dropped
    assert pool.send(BODY)[0]["choices"]  # and the pool goes on working
    pool.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_stopped_children_die_with_a_killed_parent(server):
    """A stopped child never sees its pipe close; the kernel kills it with its parent."""
    from conftest import REPO
    script = ("import sys, time\n"
              "from bench.providers import make_provider\n"
              "from bench.providers.senders import SenderPool\n"
              f"pool = SenderPool(make_provider('openai-compat:m@{server.url}/v1'), "
              "processes=2, threads=1)\n"
              "print(*pool.pids, flush=True)\n"
              "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    children = [int(pid) for pid in parent.stdout.readline().split()]
    try:
        assert len(children) == 2
        for pid in children:
            os.kill(pid, signal.SIGSTOP)
        parent.kill()
        parent.wait(10)
        assert wait_for(lambda: not any(_alive(pid) for pid in children), timeout_s=10)
    finally:
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """True while ``pid`` runs or is stopped (not gone, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_pool_started_in_a_thread_that_ends_keeps_its_children(server):
    """Linux's parent-death signal follows the thread that started a child: a pool started
    outside the main thread does not ask for it, so its children outlive that thread."""
    pools: list[SenderPool] = []
    starter = threading.Thread(target=lambda: pools.append(
        SenderPool(compat(server), processes=1, threads=1)))
    starter.start()
    starter.join(60)
    (pool,) = pools
    try:
        time.sleep(0.5)
        assert all(_alive(pid) for pid in pool.pids)
        assert pool.send(BODY)[0]["choices"]
    finally:
        pool.close()


def test_children_import_what_the_run_imports_not_the_working_folder(server, tmp_path,
                                                                      monkeypatch):
    (tmp_path / "openai.py").write_text("raise ImportError('the working folder shadowed me')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path
                                     if p not in ("", ".", str(tmp_path))])
    pool = SenderPool(compat(server), processes=1, threads=1)
    try:
        server.script(Reply(body=chat_body(text="real sdk")))
        assert pool.send(BODY)[0]["choices"][0]["message"]["content"] == "real sdk"
    finally:
        pool.close()


def sender_children():
    """Pids of this process's live ``bench.providers.senders`` children (Linux /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                command = open(f"/proc/{entry}/cmdline", "rb").read()
            except OSError:
                continue
            if int(stat[1]) == os.getpid() and stat[0] != "Z" and \
                    b"bench.providers.senders" in command:
                found.append(int(entry))
    return found


def test_sender_processes_follow_the_factory_and_the_concurrency(project, server):
    def factory(provider_id, config):
        return make_provider(provider_id)

    def processes(factory=None, **settings):
        config = RunConfig(dataset="ecommerce", variants=["l3"], limit=1,
                           providers=[f"openai-compat:m@{server.url}/v1"], **settings)
        runner = Runner(config, command=[], provider_factory=factory)
        runner.open_providers()
        try:
            return runner.sender_processes(config.providers[0])
        finally:
            runner.close_senders()

    assert processes(concurrency=16) == 2
    assert processes(concurrency=16, sender_processes=0) == 0
    assert processes(concurrency=1, sender_processes=8) == 1  # never more than in flight
    # a caller's factory may have changed the provider object, which a child cannot copy
    assert processes(concurrency=16, factory=factory) == 0
    assert processes(concurrency=16, sender_processes=2, factory=factory) == 2
    assert sender_children() == []


def test_a_run_that_fails_before_its_loop_leaves_no_sender_processes(project, server):
    config = RunConfig(dataset="ecommerce", variants=["l3"], limit=1, concurrency=16,
                       providers=[f"openai-compat:m@{server.url}/v1"],
                       mcp_server=["/nonexistent/mcp-server"])
    runner = Runner(config, run_id="early", command=[])
    with pytest.raises(BenchError):
        runner.run()
    assert runner.senders == {} and sender_children() == []
    # nor a row writer: its fsync thread used to live on, and the manifest said "running"
    assert not any(t.name == "bench-rows-fsync" for t in threading.enumerate())
    assert runner.store.read_manifest()["status"] == "failed"



def test_requests_larger_than_the_pipe_queue_in_order_while_the_child_is_stopped(server):
    # 24 bodies of ~100 kB: more than the request pipe holds (1 MiB at most), so most wait in
    # the writer thread's backlog, partly written; none may block its caller or be mangled.
    pool = SenderPool(compat(server), processes=1, threads=4)
    (worker,) = pool._workers
    os.kill(worker.process.pid, signal.SIGSTOP)
    answers: dict[int, str] = {}

    def ask(index: int) -> None:
        body = {**BODY, "tools": [{**BODY["tools"][0], "function": {
            **BODY["tools"][0]["function"], "name": f"tool_{index}",
            "description": f"{index} " * 25_000}}]}
        answer, _ = pool.send(body)
        answers[index] = answer["choices"][0]["message"]["tool_calls"][0]["function"]["name"]

    callers = [threading.Thread(target=ask, args=(i,)) for i in range(24)]
    try:
        for caller in callers:
            caller.start()
        time.sleep(1.0)
        assert worker._backlog, "nothing waited for the pipe to drain"
        assert not answers
        os.kill(worker.process.pid, signal.SIGCONT)
        for caller in callers:
            caller.join(30)
    finally:
        os.kill(worker.process.pid, signal.SIGCONT)
        pool.close()
    assert answers == {i: f"tool_{i}" for i in range(24)}
    sent = [r.body["tools"][0]["function"]["description"] for r in server.requests]
    assert sorted(sent) == sorted(f"{i} " * 25_000 for i in range(24))


def test_a_request_after_close_fails_at_once(server):
    pool = SenderPool(compat(server), processes=1, threads=1)
    pool.close()
    with pytest.raises(ProviderError, match="sender process 1 is closed") as info:
        pool.send(BODY)
    assert info.value.error_class == "permanent"


def test_ctrl_c_in_a_main_thread_caller_never_leaves_half_a_request_in_the_pipe(server):
    # A signal handler's exception lands only in the main thread; there a request goes to
    # the writer thread whole, through no Python lock, so no interrupt can split a frame
    # (garbling every later request) or leave a lock held (hanging every later request).
    pool = SenderPool(compat(server), processes=1, threads=2)
    pool.answer_timeout_s = 20.0  # a hang fails the test in seconds, not 210
    big = {**BODY, "metadata": {"blob": "x" * 2_000_000}}
    interrupted = 0
    armed = [False]  # raise once per timer, and never after the send has returned

    def interrupt(signum, frame):
        if armed[0]:
            armed[0] = False
            raise KeyboardInterrupt

    # SIGUSR1 from a timer thread, not SIGALRM: pytest-timeout's own alarm stays in place
    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        for attempt in range(80):
            timer = threading.Timer(0.0005 * (1 + attempt % 8), os.kill,
                                    (os.getpid(), signal.SIGUSR1))
            try:
                armed[0] = True
                timer.start()
                pool.send(big)
                armed[0] = False
            except KeyboardInterrupt:
                interrupted += 1
            finally:
                armed[0] = False
                timer.cancel()
                timer.join()
        assert interrupted > 0
        last = {**BODY, "tools": [{**BODY["tools"][0], "function": {
            **BODY["tools"][0]["function"], "name": "still_in_step"}}]}
        started = time.monotonic()
        answer, _ = pool.send(last)  # the fake server calls the first tool it is given
        call = answer["choices"][0]["message"]["tool_calls"][0]
        assert call["function"]["name"] == "still_in_step"
        assert time.monotonic() - started < 10
    finally:
        signal.signal(signal.SIGUSR1, previous)
        pool.close()


def test_requests_avoid_a_child_that_died(server):
    pool = SenderPool(compat(server), processes=2, threads=4)
    try:
        first, second = pool._workers
        os.kill(first.process.pid, signal.SIGKILL)
        assert wait_for(lambda: not first.alive)
        for _ in range(20):
            answer, _ = pool.send(BODY)  # all go to the living child
            assert answer["choices"]
    finally:
        pool.close()


def test_a_child_that_cannot_start_leaks_no_file_descriptors(server, monkeypatch):
    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr("sys.executable", "/nonexistent/python")
    for _ in range(3):
        with pytest.raises(BenchError, match="cannot start a sender process"):
            SenderPool(compat(server), processes=1, threads=1)
    assert len(os.listdir("/proc/self/fd")) == before
