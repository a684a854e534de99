"""Planted secrets never reach a file bench writes or a message it prints (issue 19.3).

A run goes through the real CLI against the loopback fake server with credentials in the
base URL's userinfo, an API key in the environment and a 401 reply that echoes the request's
``Authorization`` header; then the response cache is read back, reports are written (HTML,
Markdown, JUnit) and traces listed. Every file under the project folder is scanned for the
planted strings."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, Recorded, Reply, chat_body, default_reply, error_body
from tests.stored import row_dicts

USER = "planteduser7"
PASSWORD = "plantedpass-9f3k2"
KEY = "sk-plantedkey-0123456789abcdef"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()  # httpx sends userinfo so
SECRETS = (PASSWORD, KEY, USER, BASIC)


def echo_401(request: Recorded) -> Reply:
    """A 401 whose message echoes the Authorization header the client sent (some servers
    and proxies do)."""
    echoed = request.headers.get("authorization", "")
    return Reply(401, error_body(401, f"invalid credentials: Authorization: {echoed}; "
                                      f"x-api-key={request.headers.get('x-api-key', '')}"))


def scan(root: Path) -> tuple[int, list[str]]:
    """(files scanned, 'path: secret' for every hit) over every file under ``root``."""
    files, hits = 0, []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        files += 1
        data = path.read_bytes()
        hits += [f"{path.relative_to(root)}: {secret}" for secret in SECRETS
                 if secret.encode() in data]
    return files, hits


@pytest.mark.slow
@pytest.mark.timeout(1800)  # about 25 bench commands in subprocesses
def test_planted_secrets_reach_no_file_and_no_message(run_bench, project, monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", KEY)
    outputs = []

    def bench(*args, codes=(0,)):
        result = run_bench(*args, timeout=300)
        outputs.append(result.stdout + result.stderr)
        assert result.returncode in codes, (args, result.stderr)
        assert "Traceback" not in result.stderr, result.stderr
        return result

    with FakeServer() as server:
        host = server.url.removeprefix("http://")
        provider = f"openai-compat:fake-model@http://{USER}:{PASSWORD}@{host}/v1"
        bench("run", "--limit", "3", "--variants", "l3", "--provider", provider, "--run-id",
              "good", "--cache", "readwrite")
        sent = list(server.requests)
        # the second run is answered from the cache, then a 401 echoing the header
        bench("run", "--limit", "3", "--variants", "l3,l10", "--provider", provider,
              "--run-id", "cached", "--cache", "readwrite", codes=(0, 1, 2, 3))
        server.handler = echo_401  # echoes "Basic <user:password>", then "Bearer <key>"
        bench("run", "--limit", "2", "--variants", "l30", "--provider", provider, "--run-id",
              "denied", "--cache", "readwrite", codes=(2,))
        bench("run", "--limit", "2", "--variants", "l30", "--provider",
              f"openai-compat:fake-model@{server.url}/v1", "--run-id", "denied-key", codes=(2,))
        echoed = [r.headers["authorization"] for r in server.requests[len(sent):]]
        server.handler = default_reply
        # the credentials are never stored: resuming without them skips the provider
        skipped = bench("run", "--resume", "denied", codes=(2,))
        assert "credentials are never stored" in skipped.stderr
        # another provider cannot sneak in; the same one with its credentials finishes the run
        other = f"openai-compat:other@http://{USER}:{PASSWORD}@{host}/v1"
        bench("run", "--resume", "denied", "--provider", other, codes=(2,))
        bench("run", "--resume", "denied", "--provider", provider)
    # the credentials were used for the requests (httpx turns userinfo into Basic auth)
    assert sent and sent[0].headers["authorization"] == f"Basic {BASIC}"
    assert echoed[0] == f"Basic {BASIC}" and echoed[-1] == f"Bearer {KEY}"
    for run_id in ("good", "cached", "denied", "denied-key"):
        bench("show", run_id, codes=(0, 2))
        bench("traces", run_id, codes=(0, 2))
        bench("traces", run_id, "--json", codes=(0, 2))
    bench("report", "good")
    bench("report", "good", "-f", "md")
    bench("report", "good", "-f", "junit")
    bench("report", "good", "denied")
    bench("report", "good", "-f", "md", "-o", "-")
    bench("run", "--provider", "replay:good", "--limit", "3", "--variants", "l3", "--run-id",
          "replayed")
    files, hits = scan(project)
    print(f"secret scan: {files} files, {len(hits)} hits")
    printed = [s for out in outputs for s in SECRETS if s in out]
    assert (files, hits, printed) == (files, [], [])
    assert files >= 20
    manifest = json.loads((project / "reports/runs/good/manifest.json").read_text())
    assert manifest["status"] == "complete"
    denied = json.loads((project / "reports/runs/denied/manifest.json").read_text())
    assert denied["status"] == "complete" and denied["config"]["providers"] == [
        f"openai-compat:fake-model@http://***@{host}/v1"]


@pytest.mark.parametrize("text, secret", [
    ("openai-compat:m@http://alice:s3cr3t-pw@host:8000/v1", "s3cr3t-pw"),
    ('{"message": "bad key: Authorization: Bearer abcdef123456789"}', "abcdef123456789"),
    ('{"headers": {"x-api-key": "k-0123456789abcdef"}}', "k-0123456789abcdef"),
    ('{"x-goog-api-key": "AIzaSyA0123456789abcdefghijklmnopqrs"}', "AIzaSyA0123456789"),
    ("https://x.googleapis.com/v1/m:generateContent?key=AIzaSyA0123456789abcdefghijkl",
     "AIzaSyA0123456789"),
    ("error: sk-proj-0123456789abcdefghij rejected", "0123456789abcdefghij"),
    ("Proxy-Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    # a base URL's query key that is not key-shaped was kept in rows and manifests
    ("openai-compat:m@http://127.0.0.1:8000/v1?key=hunter2-proxy-pass|l3|0", "hunter2-proxy"),
    ('{"provider": "openai-compat:m@http://h/v1?a=1&token=tok_98765432"}', "tok_98765432"),
])
def test_redact_removes_each_kind_of_secret_and_keeps_json_valid(text, secret):
    from bench.redact import redact
    cleaned = redact(text)
    assert secret not in cleaned and "***" in cleaned
    if text.startswith("{"):
        json.loads(cleaned)


@pytest.mark.parametrize("text, kept", [
    # the example key pair of the AWS docs (IAM User Guide, "Manage access keys")
    ("aws s3 ls failed for AKIAIOSFODNN7EXAMPLE: denied", "aws s3 ls failed for AKIA***: denied"),
    ('{"AccessKeyId": "ASIAY34FZKBOKMUTVV7A", "Expiration": "2026-01-01"}',
     '{"AccessKeyId": "ASIA***", "Expiration": "2026-01-01"}'),
    ("[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
     "[default]\naws_secret_access_key = ***\n"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
     "export AWS_SECRET_ACCESS_KEY=***"),
    ('{"aws_session_token": "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJH"}',
     '{"aws_session_token": "***"}'),
])
def test_aws_access_key_ids_and_named_secret_keys_are_redacted(text, kept):
    from bench.redact import redact
    assert redact(text) == kept


@pytest.mark.parametrize("text", [
    "AKIA", "order AKIAIOSFODNN7EXAMPL has 19 characters", "XAKIAIOSFODNN7EXAMPLE",
    "ASIAN markets", "aws_access_key_id = AKIAshortlower"])
def test_words_and_ids_near_an_aws_key_shape_stay(text):
    from bench.redact import redact
    assert redact(text) == text


def test_a_recorded_field_named_aws_secret_access_key_is_redacted():
    from bench.redact import redact_data
    got = redact_data({"aws_secret_access_key": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                       "region": "us-east-1"})
    assert got == {"aws_secret_access_key": "***", "region": "us-east-1"}


def test_redact_keeps_ordinary_text_and_row_keys():
    from bench.redact import redact
    for text in ('{"key": "ecom-0001|l3|openai:gpt-4o|0", "task-12345678": 1}',
                 "mailto:someone@example.com", '{"cached_tokens": 0, "disk-12345678": 2}'):
        assert redact(text) == text


def test_a_credentialed_provider_id_runs_under_its_public_id():
    from bench.providers import make_provider
    from bench.redact import real_provider_id
    provider = make_provider("openai-compat:m@http://bob:pw-123456@127.0.0.1:9/v1")
    assert provider.provider_id == "openai-compat:m@http://***@127.0.0.1:9/v1"
    assert provider.options.base_url == "http://bob:pw-123456@127.0.0.1:9/v1"
    assert real_provider_id(provider.provider_id).endswith("bob:pw-123456@127.0.0.1:9/v1")


@pytest.mark.parametrize("text, kept", [
    ("ecom-0053|l3|openai-compat:m@http://h/v1?api_key=AIzaSyFAKEFAKEFAKEFAKEFAKEFAKE|0",
     "ecom-0053|l3|openai-compat:m@http://h/v1?api_key=***|0"),
    ("ecom-0053|l3|openai-compat:m@http://h/v1?key=k0123456789abcdef|0",
     "ecom-0053|l3|openai-compat:m@http://h/v1?key=***|0"),
    ("http://h/v1?api_key=k-0123456789abcdef&model=x", "http://h/v1?api_key=***&model=x"),
    ("http://h/v1?api_key=k-0123456789abcdef#frag", "http://h/v1?api_key=***#frag"),
    ("`api_key=k-0123456789abcdef` or <api_key=k-0123456789abcdef>",
     "`api_key=***` or <api_key=***>"),
])
def test_a_redacted_value_stops_at_the_next_delimiter(text, kept):
    from bench.redact import redact
    assert redact(text) == kept


def test_a_run_whose_provider_url_holds_a_key_is_readable_and_keeps_no_key(run_bench, project,
                                                                           monkeypatch):
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "x")
    secret = "AIzaSyFAKEFAKEFAKEFAKEFAKEFAKEFAKEFAKE"
    # the SDK appends its path after the query (".../v1?api_key=.../chat/completions"):
    # answer every path as Chat Completions
    with FakeServer(handler=lambda request: Reply(body=chat_body(text="no tool"))) as server:
        provider = f"openai-compat:fake@{server.url}/v1?api_key={secret}"
        ran = run_bench("run", "--provider", provider, "--variants", "l3", "--limit", "2",
                        "--run-id", "q-1")
    assert ran.returncode == 0, ran.stderr
    rows = [json.loads(x) for x in
            (project / "reports/runs/q-1/results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["key"].endswith("?api_key=***|0") for r in rows), rows
    shown = run_bench("show", "q-1")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    outputs = ran.stdout + ran.stderr + shown.stdout + shown.stderr
    assert secret not in outputs
    hits = [str(p) for p in project.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert hits == []


# ------------------------------------------------ redaction never rewrites ordinary data

CREDIBLE = "Zt8q2vLk9PwX4mB7nR1sQ"  # 21 characters: a generated secret's length


def test_only_credible_values_of_secret_named_variables_are_redacted(monkeypatch):
    # MYSQL_PASSWORD=ecommerce rewrote the dataset name 'ecommerce' as '***' everywhere
    from bench.redact import redact
    monkeypatch.setenv("MYSQL_PASSWORD", "ecommerce")
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "EMPTY")  # what local servers take
    # long values of variables that name a place, not a secret
    monkeypatch.setenv("PWD", "/home/someone/projects/bench-work")
    monkeypatch.setenv("DB_PASSWORD_FILE", "/run/secrets/db-password-file")
    text = ("unknown dataset 'ecommerce' (EMPTY answer) in /home/someone/projects/bench-work "
            "from /run/secrets/db-password-file")
    assert redact(text) == text
    monkeypatch.setenv("MYSQL_PASSWORD", CREDIBLE)  # changed in place: read again
    assert redact(f"dsn mysql {CREDIBLE}") == "dsn mysql ***"
    monkeypatch.delenv("MYSQL_PASSWORD")
    assert redact(f"dsn mysql {CREDIBLE}") == f"dsn mysql {CREDIBLE}"
    # a key bench sends is redacted from 8 characters on
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "hunter22")
    assert redact("401: key hunter22 rejected") == "401: key *** rejected"


@pytest.mark.parametrize("text", [
    "case 'case_sk-learn-fit-001' failed", "ep-sk-abcdefghijklmnop",
    "a basic question about Bearer authentication", "AIzaTooShort-123"])
def test_words_and_ids_shaped_like_a_short_key_stay(text):
    from bench.redact import redact
    assert redact(text) == text


@pytest.mark.parametrize("text, kept", [
    ("Authorization: Basic dXNlcjpwYXNz", "Authorization: Basic ***"),
    ("got Bearer abc.def-123 back", "got Bearer *** back"),
    ("echo sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "echo sk-***"),
])
def test_credentials_of_a_credible_form_are_redacted(text, kept):
    from bench.redact import redact
    assert redact(text) == kept


def test_a_stored_row_keeps_its_identifiers_and_data_and_loses_the_key_in_its_free_text(
        tmp_path, monkeypatch):
    from bench.results import Row
    from bench.store import RunStore
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("MYSQL_PASSWORD", "ecommerce")
    case = "case_sk-abcdefghijklmnopqrstuvwx"  # key-shaped, but an id
    provider = "openai:gpt-4o"
    call = {"name": "set_password", "arguments": {"password": "hunter2", "api_key": "k-1"}}
    stored = {
        "key": f"{case}|l3|{provider}|0", "run_id": "r", "case_id": case,
        "toolset": "ecommerce", "variant": "l3", "provider": provider, "trial": 0,
        "lang": "en", "query": "set my password: hunter2", "metrics": {}, "usage": {},
        "latency_s": 0.1, "expected": {"calls": [{"name": "set_password",
                                                  "arguments": {"password": ["hunter2"]}}]},
        "parsed": {"calls": [call], "error": f"provider error: 401 Bearer {KEY}",
                   "text": f"the key is {KEY}"},
        "response": {"raw": {"headers": {"x-api-key": "k-0123456789"}, "echo": f"key {KEY}",
                             "arguments": '{"password": "hunter2"}'},
                     "request_id": "req_1"},
    }
    store = RunStore(tmp_path, "r")
    store.append(Row.model_validate(stored))
    text = store.results_path.read_text()
    assert KEY not in text and "k-0123456789" not in text
    [row] = row_dicts(store)
    for field in ("key", "case_id", "toolset", "variant", "provider", "query", "expected"):
        assert row[field] == stored[field], field
    assert row["parsed"]["calls"] == [call]  # replay answers with these
    assert row["parsed"]["error"] == "provider error: 401 Bearer ***"
    assert row["parsed"]["text"] == "the key is ***"
    assert row["response"]["raw"] == {"headers": {"x-api-key": "***"}, "echo": "key ***",
                                      "arguments": '{"password": "***"}'}
    assert row["response"]["request_id"] == "req_1"


def test_every_key_variable_a_provider_reads_is_redacted():
    import re
    import bench.providers
    from bench.redact import KEY_VARIABLES
    folder = Path(bench.providers.__file__).parent
    read = {name for path in folder.glob("*.py")
            for name in re.findall(r"\"([A-Z][A-Z_]*_API_KEY)\"", path.read_text())}
    assert read and read <= set(KEY_VARIABLES), read - set(KEY_VARIABLES)


def test_a_provider_id_with_a_query_key_runs_under_its_public_id():
    from bench.providers import make_provider
    from bench.redact import real_provider_id
    secret = "k-0123456789abcdef"
    provider = make_provider(f"openai-compat:m@http://127.0.0.1:9/v1?api_key={secret}")
    assert provider.provider_id == "openai-compat:m@http://127.0.0.1:9/v1?api_key=***"
    assert provider.options.base_url.endswith(f"?api_key={secret}")
    assert secret not in json.dumps(provider.describe())
    assert real_provider_id(provider.provider_id).endswith(secret)


@pytest.mark.slow
def test_a_run_with_secret_looking_data_runs_resumes_and_merges_intact(run_bench, project,
                                                                        monkeypatch):
    # MYSQL_PASSWORD=ecommerce stored "dataset": "***" and rows' "toolset": "***" (resume and
    # merge failed); case ids case_sk-learn-fit-001/-002 were both stored as case_sk-***
    monkeypatch.setenv("MYSQL_PASSWORD", "ecommerce")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    cases_path = project / "datasets/ecommerce/cases.jsonl"
    ids = ["case_sk-learn-fit-001", "case_sk-learn-fit-002", "case_sk-abcdefghijklmnopqrstuvwx"]
    text = cases_path.read_text()
    for number, new in enumerate(ids, start=1):
        text = text.replace(f'"id": "ecom-{number:04d}"', f'"id": "{new}"')
    cases_path.write_text(text)

    def bench(*args):
        result = run_bench(*args, timeout=300)
        assert result.returncode == 0, (args, result.stderr)
        return result

    common = ("--provider", "oracle", "--dataset", "ecommerce", "--cases", ",".join(ids),
              "--variants", "l3")
    bench("run", *common, "--shard", "1/2", "--run-id", "s1")
    bench("run", *common, "--shard", "2/2", "--run-id", "s2")
    bench("merge", "s1", "s2", "--run-id", "m")
    for run_id in ("s1", "m"):
        assert "already complete" in bench("run", "--resume", run_id).stderr
    manifest = json.loads((project / "reports/runs/m/manifest.json").read_text())
    assert manifest["dataset"]["name"] == manifest["config"]["dataset"] == "ecommerce"
    assert [v["toolset"] for v in manifest["variants"]] == ["ecommerce"]
    rows = [json.loads(line) for line in
            (project / "reports/runs/m/results.jsonl").read_text().splitlines()]
    assert sorted(r["case_id"] for r in rows) == sorted(ids)
    assert {r["toolset"] for r in rows} == {"ecommerce"}
    assert sorted(r["key"] for r in rows) == sorted(f"{i}|l3|oracle|0" for i in ids)
    assert all(r["metrics"]["selection_correct"] for r in rows)
    hits = [str(p) for p in project.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert hits == []


@pytest.mark.slow
def test_user_codes_error_holding_the_key_is_redacted_in_the_manifest_and_on_screen(
        run_bench, project, monkeypatch):
    # the manifest's error is free text: redacted there, while its config stays whole
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    (project / "leaky.py").write_text(
        "import os\n\ndef answer(messages, tools, trial):\n"
        "    raise RuntimeError('auth failed for ' + os.environ['OPENAI_API_KEY'])\n")
    result = run_bench("run", "--provider", "function:leaky:answer", "--dataset", "ecommerce",
                       "--limit", "1", "--variants", "l3", "--run-id", "leak")
    assert result.returncode == 2, result.stderr
    assert KEY not in result.stdout + result.stderr
    assert "the function raised RuntimeError: auth failed for ***" in result.stderr
    manifest = json.loads((project / "reports/runs/leak/manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["error"].endswith("RuntimeError: auth failed for ***")
    assert manifest["config"]["providers"] == ["function:leaky:answer"]
    files, hits = scan(project)  # no planted secret in any file
    assert files and hits == []


# ------------------------------------------------ a secret cut or broken is still a secret

TOKEN = "hf_Qz7Rt8Wp2Lm5Kx9Vb4Nc6Hd3Jf1Gs"  # a secret-named variable's value, no known shape


def test_a_secret_broken_across_lines_is_redacted_whole(monkeypatch):
    # "sk-pr\noj-ABC..." was stored and printed as "sk-pr oj-ABC...": all but 5 characters
    from bench.redact import redact
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    for text in (f"boom {TOKEN[:5]}\n{TOKEN[5:]} end", f"boom {TOKEN[:20]}\r\n  {TOKEN[20:]}",
                 f'{{"error": "boom {TOKEN[:3]}\\n{TOKEN[3:25]}\\n{TOKEN[25:]}"}}',
                 f"whole {TOKEN} and broken {TOKEN[:9]} {TOKEN[9:]}"):
        cleaned = redact(text)
        assert TOKEN[:3] + "Qz7" not in cleaned and TOKEN[-6:] not in cleaned, cleaned
    assert json.loads(redact(f'{{"error": "boom {TOKEN[:3]}\\n{TOKEN[3:]}"}}')) == {
        "error": "boom ***"}
    assert redact(f"a {TOKEN[:5]}\n{TOKEN[5:]} b\t{TOKEN[:9]} \\n  {TOKEN[9:]}\nc") == \
        "a *** b\t***\nc"  # each occurrence replaced where it stood, what is around kept
    long_token = "".join(chr(65 + (i * 7919) % 26) for i in range(100_000))  # a 100 KB value
    monkeypatch.setenv("LONG_SECRET", long_token)
    assert redact(f"x {long_token[:50_000]}\n{long_token[50_000:]} y") == "x *** y"
    # a short secret is never looked for with spaces in it: words stay
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", "hunter22")
    assert redact("the hunter 22 times") == "the hunter 22 times"


def test_a_printed_message_cut_inside_a_secret_shows_none_of_it(monkeypatch):
    # the cut came before the redaction: the head of a token at the cut was printed
    from bench.errors import shorten_message
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    for before in range(430, 460, 3):  # the token straddles the cut at 450 characters
        shown = shorten_message("x" * before + " " + TOKEN + " " + "y" * 700)
        assert "characters; cut" in shown and "Qz7" not in shown, shown


def test_a_provider_error_cut_inside_a_key_stores_none_of_it(monkeypatch):
    # an HTTP 400 whose message echoed the key near its 300th character was stored with the
    # key's first 18 characters (the message was cut before the row was redacted)
    from tests.fakeserver import FakeServer, Reply, complete_once, error_body
    from bench.models import Message, Tool
    from bench.providers import make_provider
    from bench.providers.errors import ProviderError
    monkeypatch.setenv("OPENAI_COMPAT_API_KEY", TOKEN)
    tool = Tool(name="get_weather", description="Weather.",
                input_schema={"type": "object", "properties": {}})
    with FakeServer() as server:
        for padding in (250, 258, 266):
            server.script(Reply(400, error_body(400, "z" * padding + " bad key " + TOKEN)))
            provider = make_provider(f"openai-compat:m@{server.url}/v1")
            with pytest.raises(ProviderError) as raised:
                complete_once(provider, [Message(role="user", content="hi")], [tool],
                              variant_key="v", trial=0)
            assert raised.value.error_class == "validation"
            assert "HTTP 400" in str(raised.value) and "Qz7" not in str(raised.value)


@pytest.mark.slow
def test_an_mcp_servers_token_is_never_stored_and_a_resume_takes_it_again(
        run_bench, project, monkeypatch):
    # --execute-mcp 'server --token $HF_TOKEN' kept the token whole in the manifest's config
    import shlex
    import sys
    server = Path(__file__).with_name("mcp_server.py")
    command = shlex.join([sys.executable, str(server), "--token", TOKEN])
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    made = run_bench("run", "--provider", "oracle", "--limit", "2", "--variants", "l3",
                     "--run-id", "mcp", "--execute-mcp", command)
    assert made.returncode == 0, made.stderr
    folder = project / "reports/runs/mcp"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["config"]["mcp_server"] == [sys.executable, str(server), "--token", "***"]
    rows = (folder / "results.jsonl").read_text().splitlines(keepends=True)
    assert len(rows) == 2
    (folder / "results.jsonl").write_text(rows[0])  # stopped after its first row
    (folder / "manifest.json").write_text(json.dumps({**manifest, "status": "interrupted"}))

    asked = run_bench("run", "--resume", "mcp")
    assert asked.returncode == 2 and "Traceback" not in asked.stderr
    assert asked.stderr.startswith("error: --execute-mcp: the MCP server's command line of "
                                   "'mcp' held secrets, which are never stored")
    monkeypatch.delenv("HF_TOKEN")  # the token is known from --execute-mcp alone
    resumed = run_bench("run", "--resume", "mcp", "--execute-mcp", command)
    assert resumed.returncode == 0, resumed.stderr
    assert len((folder / "results.jsonl").read_text().splitlines()) == 2
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["config"]["mcp_server"][-1] == "***"
    hits = [str(p) for p in project.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert hits == []


@pytest.mark.slow
def test_a_password_option_of_the_execute_mcp_command_never_reaches_the_run_folder(
        run_bench, project):
    # the value of --password has no token shape and no environment variable: only its
    # option's name says it is a secret, which redact() alone did not know
    import shlex
    import sys
    server = Path(__file__).with_name("mcp_server.py")
    secret = "hunter2hunter2xyz"
    command = shlex.join([sys.executable, str(server), "--password", secret])
    made = run_bench("run", "--provider", "oracle", "--limit", "1", "--variants", "l3",
                     "--run-id", "pw", "--execute-mcp", command)
    assert made.returncode == 0, made.stderr
    folder = project / "reports/runs/pw"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["config"]["mcp_server"][-2:] == ["--password", "***"]
    hits = [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert hits == []


def test_the_advice_to_give_base_url_secrets_again_survives_the_screen_guard():
    # "(user:password@, ?key=...)" was printed "(user:password@, ?key=***": the guard took
    # the example and its closing parenthesis for a query key
    from bench.cli.run_config import _resume_credentials
    from bench.errors import BenchError
    from bench.providers import ProviderUnavailable, make_provider
    from bench.redact import redact
    with pytest.raises(ProviderUnavailable) as skipped:
        make_provider("openai-compat:m@http://***@127.0.0.7:9/v1")
    with pytest.raises(BenchError) as refused:
        _resume_credentials("r1", ["openai-compat:m@http://127.0.0.7:9/v1"], ["oracle"])
    for message in (skipped.value.reason, str(refused.value)):
        assert "(user:password@, ?key=<value>)" in message and redact(message) == message


GH = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # a GitHub token's shape: ghp_ and 36 characters


@pytest.mark.parametrize("argv, referenced, variables", [
    (["npx", "srv", "--token", GH], ["npx", "srv", "--token", "${MCP_TOKEN}"],
     {"MCP_TOKEN": GH}),
    (["srv", "--password", "hunter2hunter2xyz"], ["srv", "--password", "${MCP_PASSWORD}"],
     {"MCP_PASSWORD": "hunter2hunter2xyz"}),
    (["srv", "--api-key=abc123def"], ["srv", "--api-key=${MCP_API_KEY}"],
     {"MCP_API_KEY": "abc123def"}),
    (["env", f"GITHUB_TOKEN={GH}", "python", "s.py"],
     ["env", "GITHUB_TOKEN=${GITHUB_TOKEN}", "python", "s.py"], {"GITHUB_TOKEN": GH}),
    # shlex.split("--header=Authorization: Bearer ghp_...") without quotes: three arguments
    (["srv", "--header=Authorization:", "Bearer", GH],
     ["srv", "--header=Authorization:", "Bearer", "${MCP_TOKEN}"], {"MCP_TOKEN": GH}),
    (["srv", "-H", f"Authorization: Bearer {GH}"],
     ["srv", "-H", "Authorization: Bearer ${MCP_TOKEN}"], {"MCP_TOKEN": GH}),
    (["srv", "-H", "X-Api-Key:", "k3y-v4lue"], ["srv", "-H", "X-Api-Key:", "${MCP_API_KEY}"],
     {"MCP_API_KEY": "k3y-v4lue"}),
    (["srv", GH, "--again", GH], ["srv", "${MCP_TOKEN}", "--again", "${MCP_TOKEN}"],
     {"MCP_TOKEN": GH}),  # one value, one name
    (["srv", "--token", "t0ken-one", "--auth-token", "t0ken-two", "xoxb-1234567890-abcdefgh"],
     ["srv", "--token", "${MCP_TOKEN}", "--auth-token", "${MCP_AUTH_TOKEN}", "${MCP_TOKEN_2}"],
     {"MCP_TOKEN": "t0ken-one", "MCP_AUTH_TOKEN": "t0ken-two",
      "MCP_TOKEN_2": "xoxb-1234567890-abcdefgh"}),
    (["srv", "AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE"],
     ["srv", "AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID}"],
     {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE"}),
    (["srv", "--jwt-file", "x", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"],
     ["srv", "--jwt-file", "x", "${MCP_TOKEN}"],
     {"MCP_TOKEN": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"}),
    ("https://u:pw123456@host/mcp?token=abcdef&page=1",
     "https://u:${MCP_PASSWORD}@host/mcp?token=${MCP_TOKEN}&page=1",
     {"MCP_PASSWORD": "pw123456", "MCP_TOKEN": "abcdef"}),
])
def test_secrets_of_a_command_line_become_environment_references(argv, referenced, variables):
    from bench.redact import reference_secrets
    got, found = reference_secrets(argv)
    assert got == referenced and found == variables
    assert list(found) == list(variables)  # in the order found: the user exports them


@pytest.mark.parametrize("option, variable", [
    ("--api-key", "MCP_API_KEY"), ("--apikey", "MCP_APIKEY"), ("--API_KEY", "MCP_API_KEY"),
    ("--client-secret", "MCP_CLIENT_SECRET"), ("--access-token", "MCP_ACCESS_TOKEN"),
    ("--passphrase", "MCP_PASSPHRASE"), ("--secret-file-contents", "MCP_SECRET_FILE_CONTENTS"),
    ("--token-value", "MCP_TOKEN_VALUE"), ("--password-b64", "MCP_PASSWORD_B64")])
def test_an_option_named_for_a_secret_is_found_in_each_spelling(option, variable):
    # a value without a token's shape: only its option's name says it is a secret
    from bench.redact import redact, reference_secrets, register_command_secrets
    value = f"plain{option.strip('-')}99"
    for argv, referenced in ((["srv", option, value], ["srv", option, f"${{{variable}}}"]),
                             ([f"{option}={value}"], [f"{option}=${{{variable}}}"])):
        assert reference_secrets(argv) == (referenced, {variable: value})
    assert redact(f"starting with {value}") == f"starting with {value}"  # not known yet
    assert register_command_secrets(["srv", option, value]) == [value]
    assert redact(f"starting with {value}") == "starting with ***"


@pytest.mark.parametrize("argv", [
    ["python", "server.py", "--port", "8080", "--verbose"],
    ["srv", "--token-file", "/run/secrets/token", "--password-env", "DB_PASS"],
    ["srv", "--access-token-expiry", "3600", "--secret-name", "prod-db", "--auth-type",
     "oauth2", "--token-file-path", "/run/t"],
    ["srv", "sort_key=name", "-H", "Content-Type: application/json", "--token", "${MY_TOKEN}"],
    ["uvx", "mcp-server-sqlite", "--db-path", "shop.db"],
    "http://127.0.0.1:8000/mcp",
])
def test_a_command_line_without_secrets_is_left_as_it_is(argv):
    from bench.redact import reference_secrets
    assert reference_secrets(argv) == (argv, {})


@pytest.mark.parametrize("token", [
    GH, "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123",
    "xoxb-1234567890-0987654321-AbCdEfGhIjKlMnOp", "glpat-AbCdEfGhIjKlMnOpQrSt",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl"])
def test_an_issued_tokens_shape_is_redacted_in_free_text(token):
    # an MCP server that refuses its --token echoes it in its error
    from bench.redact import redact
    assert redact(f"error: bad credentials {token} (401)") == "error: bad credentials *** (401)"
    assert redact(json.dumps({"message": f"token {token} expired"})) == \
        json.dumps({"message": "token *** expired"})
