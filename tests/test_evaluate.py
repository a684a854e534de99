"""bench.evaluate: the in-process API gives the rows, table and statistics of `bench run`,
with the cache and resume, from an explicit project folder (no CLI, no cwd, no BENCH_HOME)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bench
from bench.errors import BenchError
from bench.providers.pipeline import Exchange, Layer, Outcome



class Sent:
    """Counts the requests that reached the provider (below the cache)."""

    count = 0

    def __init__(self, provider_id: str, inner: Layer) -> None:
        self.inner = inner

    async def __call__(self, exchange: Exchange) -> Outcome:
        outcome = await self.inner(exchange)
        Sent.count += outcome.cache != "hit"
        return outcome


def test_evaluate_returns_the_rows_and_table_of_bench_run(elsewhere, run_bench, project):
    result = bench.evaluate("ecommerce", ["l3", "l10"], ["oracle"], project=elsewhere,
                            run_id="api", limit=6, split="all")
    assert isinstance(result, bench.Evaluation) and result.status == "complete"
    assert len(result.rows) == 12 and all(isinstance(r, bench.Row) for r in result.rows)
    assert (elsewhere / "reports" / "runs" / "api" / "results.jsonl").is_file()
    assert not any(Path.cwd().iterdir())  # nothing written in the cwd
    table = result.summary.set_index("variant")
    assert list(table.index) == ["l3", "l10"]
    assert (table["cases"] == 6).all()
    assert (table["selection_correct_rate"] == 1.0).all()  # the oracle answers the labels
    assert (table["selection_correct_low"] < 1.0).all()  # with its Wilson interval
    # the same run through the command line gives the same rows (timestamps aside)
    assert run_bench("run", "--provider", "oracle", "--variants", "l3,l10", "--limit", "6",
                     "--split", "all", "--run-id", "cli").returncode == 0
    cli_rows = [json.loads(line) for line in
                (project / "reports" / "runs" / "cli" / "results.jsonl").open()]

    def comparable(row: dict) -> dict:
        return {k: v for k, v in row.items() if k not in ("run_id", "finished_at", "latency_s")}
    assert sorted(map(comparable, cli_rows), key=lambda r: r["key"]) == \
        sorted((comparable(r.to_json_dict()) for r in result.rows), key=lambda r: r["key"])


def test_evaluate_resumes_and_reads_the_cache(elsewhere):
    Sent.count = 0
    first = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                           limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and first.manifest.cache["misses"] == 4
    # the same run again: resumed, nothing sent
    again = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                           limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and [r.key for r in again.rows] == [r.key for r in first.rows]
    # a new run of the same requests: every answer from the cache
    cached = bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="two",
                            limit=4, cache="readwrite", layers=[Sent])
    assert Sent.count == 4 and {r.cache for r in cached.rows} == {"hit"}
    with pytest.raises(BenchError, match="'one' exists"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                       limit=4, resume=False)
    with pytest.raises(BenchError, match="trials cannot change"):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, run_id="one",
                       limit=4, trials=2)


def test_evaluate_compares_two_variants_and_refuses_bad_settings(elsewhere):
    result = bench.evaluate("ecommerce", ["l3", "l50"], ["oracle"], project=elsewhere,
                            limit=5, execute=False)
    comparison = result.compare("l3", "l50")
    assert {m.metric for m in comparison.tests} >= {"selection_correct"}
    selection = next(m for m in comparison.tests if m.metric == "selection_correct")
    assert selection.n == 5 and selection.rate_a == selection.rate_b == 1.0
    assert selection.verdict == "no significant difference"
    with pytest.raises(BenchError, match="no variant 'l10'"):
        result.compare("l3", "l10")
    with pytest.raises(BenchError, match="^evaluate\\(\\): trials: "):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, trials=0)
    with pytest.raises(BenchError, match="unknown setting .no_such_setting."):
        bench.evaluate("ecommerce", ["l3"], ["oracle"], project=elsewhere, no_such_setting=1)


def test_evaluate_names_a_skipped_provider_and_refuses_when_all_are_skipped(elsewhere,
                                                                            monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # one provider runs, the other has no key: rows of the first, a warning naming the second
    result = bench.evaluate("ecommerce", ["l3"], ["oracle", "openai:gpt-4o-mini"],
                            project=elsewhere, run_id="half", limit=2)
    assert result.status == "partial"
    assert {row.provider for row in result.rows} == {"oracle"}
    assert any("openai:gpt-4o-mini skipped: OPENAI_API_KEY is not set" in w
               for w in result.warnings)
    # nothing can run: one line naming the provider and why, as `bench run` says
    with pytest.raises(BenchError, match=r"every provider was skipped \(openai:gpt-4o-mini: "
                                         r"OPENAI_API_KEY is not set\)"):
        bench.evaluate("ecommerce", ["l3"], ["openai:gpt-4o-mini"], project=elsewhere,
                       run_id="none", limit=2)


def test_evaluate_errors_say_how_to_continue_in_python(elsewhere):
    from bench.providers import make_provider
    from bench.providers.base import Provider
    from bench.providers.errors import ProviderError

    class Revoked(Provider):
        """Every request fails permanently, as with a revoked key."""

        provider_id = "revoked"

        async def complete(self, messages, tools, *, variant_key, trial):
            raise ProviderError("invalid key", error_class="permanent", status=401)

        def describe(self):
            return {"provider": "revoked", "model": "none"}

    def factory(provider_id, config):
        return Revoked() if provider_id == "revoked" else make_provider(provider_id)

    with pytest.raises(BenchError) as caught:
        bench.evaluate("ecommerce", ["l3"], ["revoked"], project=elsewhere, run_id="stopped",
                       limit=2, provider_factory=factory)
    message = str(caught.value)
    assert "continue with: evaluate(..., run_id='stopped') again" in message
    assert "bench run --resume" not in message
