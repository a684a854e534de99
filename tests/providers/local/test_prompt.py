"""The embedded provider's prompt and grammar (no model weights needed)."""

import json

import pytest

from bench.descriptions import load_variant
from bench.providers.local import (GRAMMAR_MAX_STRING, NO_CALL_LAYOUTS, answer_schema,
                                   json_schema_grammar, tools_block)
from tests.importers.test_toollists import TREE_SCHEMA

llama_cpp = pytest.importorskip("llama_cpp")


def test_tools_block_comes_first_and_depends_only_on_the_variant():
    variant = load_variant("ecommerce", "l10")
    layout = NO_CALL_LAYOUTS["none-tool-last"]
    block = tools_block(variant.tools, layout)
    assert block.startswith("# Tools")
    assert block == tools_block(load_variant("ecommerce", "l10").tools, layout)
    names = [line[3:] for line in block.splitlines() if line.startswith("## ")]
    assert names == [t.name for t in variant.tools] + ["no_tool_fits"]
    first = tools_block(variant.tools, NO_CALL_LAYOUTS["none-tool-first"])
    assert [l[3:] for l in first.splitlines() if l.startswith("## ")][0] == "no_tool_fits"


def test_answer_schema_offers_decline_as_layout_says():
    tools = load_variant("ecommerce", "l3").tools
    empty = answer_schema(tools, NO_CALL_LAYOUTS["empty-list"])["properties"]["tool_calls"]
    assert empty["minItems"] == 0 and len(empty["items"]["anyOf"]) == len(tools)
    pseudo = answer_schema(tools, NO_CALL_LAYOUTS["none-tool-first"])["properties"]["tool_calls"]
    assert pseudo["minItems"] == 1
    assert pseudo["items"]["anyOf"][0]["properties"]["name"] == {"const": "no_tool_fits"}


def test_grammar_excludes_control_characters_and_caps_free_strings():
    gbnf = json_schema_grammar(json.dumps({"type": "object",
                                           "properties": {"q": {"type": "string"}}}))
    assert 'char ::= [^"\\\\\\x7F\\x00-\\x1F]' in gbnf
    assert f"char{{0,{GRAMMAR_MAX_STRING}}}" in gbnf
    llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)  # llama.cpp accepts it


def test_every_variant_grammar_parses():
    for name in ("l3", "l50"):
        tools = load_variant("ecommerce", name).tools
        schema = json.dumps(answer_schema(tools, NO_CALL_LAYOUTS["empty-list"]))
        llama_cpp.LlamaGrammar.from_string(json_schema_grammar(schema), verbose=False)


# -- the grammar of a recursive schema ---------------------------------------------------------


def _undefined_rules(gbnf: str) -> set[str]:
    """Rule names a GBNF grammar refers to but does not define."""
    import re
    defined, used = set(), set()
    for line in gbnf.splitlines():
        name, sep, body = line.partition("::=")
        if not sep:
            continue
        defined.add(name.strip())
        body = re.sub(r'"(\\.|[^"\\])*"', " ", body)       # literals
        body = re.sub(r"\[(\\.|[^\]\\])*\]", " ", body)     # character classes
        body = re.sub(r"\{[0-9, ]*\}", " ", body)           # repetition counts
        used.update(re.findall(r"[A-Za-z][A-Za-z0-9_-]*", body))
    return used - defined


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"name": {"type": "string"}, "child": {"$ref": "#"}},
     "required": ["name"]},
    {"type": "object", "$defs": {"tree_node": {
        "type": "object", "properties": {"x": {"type": "integer"},
                                         "kids": {"type": "array",
                                                  "items": {"$ref": "#/$defs/tree_node"}}}}},
     "properties": {"root": {"$ref": "#/$defs/tree_node"}}},
    TREE_SCHEMA,
], ids=["ref-to-root", "underscore-def-name", "property-recursion"])
def test_the_local_models_grammar_of_a_recursive_schema_defines_every_rule(schema):
    from bench.providers.local.prompt import grammar_schema, json_schema_grammar

    gbnf = json_schema_grammar(json.dumps(grammar_schema(schema)))
    assert _undefined_rules(gbnf) == set(), gbnf
