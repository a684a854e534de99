"""OpenAI / Anthropic tool lists and a live MCP server become hand-written variants."""

from __future__ import annotations

import pytest
import json
import sys
from pathlib import Path

from bench.descriptions import load_variant

TESTS = Path(__file__).resolve().parents[1]
SCHEMA = {"type": "object", "properties": {"q": {"type": "string", "description": "Query."}},
          "required": ["q"]}


def _write(path: Path, data) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_openai_chat_and_responses_shapes(run_bench, project, tmp_path):
    tools = [{"type": "function", "function": {"name": "find.docs", "description": "Find docs.",
                                               "parameters": SCHEMA, "strict": False}},
             {"type": "function", "name": "查找", "description": "中文描述",
              "parameters": SCHEMA},
             {"type": "web_search"}]
    result = run_bench("import", "openai", str(_write(tmp_path / "my-tools.json",
                                                      {"tools": tools})))
    assert result.returncode == 0, result.stderr
    assert "skipped a built-in tool of type 'web_search'" in result.stdout
    variant = load_variant("my-tools", "current")
    assert [t.name for t in variant.tools] == ["find_docs", "__"]
    assert variant.tools[0].input_schema == SCHEMA  # 'strict' is a request option, dropped
    assert variant.tools[1].description == "中文描述"


def test_anthropic_list(run_bench, project, tmp_path):
    tools = [{"name": "get_stock", "description": "Stock level of a product.",
              "input_schema": SCHEMA, "cache_control": {"type": "ephemeral"}},
             {"type": "web_search_20250305", "name": "web_search"}]
    result = run_bench("import", "anthropic", str(_write(tmp_path / "t.json", tools)),
                       "--name", "stock", "--variant", "v1")
    assert result.returncode == 0, result.stderr
    variant = load_variant("stock", "v1")
    assert [(t.name, t.description) for t in variant.tools] == [
        ("get_stock", "Stock level of a product.")]


def test_invalid_schema_is_a_one_line_error(run_bench, tmp_path):
    bad = [{"name": "x", "description": "d", "input_schema": {
        "type": "object", "properties": {"n": {"type": "integr"}}}}]
    result = run_bench("import", "anthropic", str(_write(tmp_path / "bad.json", bad)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "tool 0" in result.stderr and "properties.n.type" in result.stderr


@pytest.mark.slow
def test_mcp_server_tools_become_a_variant(run_bench, project):
    result = run_bench("import", "mcp", "--name", "mcpshop", "--",
                       sys.executable, str(TESTS / "mcp_server.py"), timeout=120)
    assert result.returncode == 0, result.stderr
    variant = load_variant("mcpshop", "current")
    tools = {t.name: t for t in variant.tools}
    assert set(tools) == {"search_orders", "ship_to", "store_hours"}
    sort = tools["search_orders"].input_schema["properties"]["sort"]
    assert sort["enum"] == ["asc", "desc"] and sort["default"] == "desc"
    limit = tools["search_orders"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 50)
    assert tools["search_orders"].description.splitlines()[1].startswith("without")
    assert "$defs" in tools["ship_to"].input_schema  # nested model kept as the server sent it
    assert sys.executable not in (project / "descriptions/mcpshop/variants/current.yaml") \
        .read_text()  # only the program name is recorded


@pytest.mark.slow
def test_mcp_server_that_dies_is_a_one_line_error(run_bench):
    result = run_bench("import", "mcp", "--name", "dead", "--timeout", "20", "--",
                       sys.executable, "-c", "import sys; sys.exit(3)", timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len([l for l in result.stderr.splitlines() if l.strip()]) == 1
