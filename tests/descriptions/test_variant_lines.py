"""The rendered variants l3 ... l50 of every toolset: line targets, growth, valid examples, bare
schemas.

These check the repository's own descriptions (not a temp copy), so a spec or template edit that
pushes a tool off its length target, or an example that no longer fits the schema, fails here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from bench.descriptions.specs import load_specs
from bench.descriptions.variants import LINE_TARGETS, count_lines, load_variant
from bench.limits import DEFAULT_VARIANTS

DESCRIPTIONS = Path(__file__).resolve().parents[2] / "descriptions"
TOLERANCE = 0.2  # a tool's line count may differ from its variant's target by at most 20 %
# Per tool: 4,000 chars of l50 prose is about 1,000 tokens (the six original tools averaged
# 2,970 chars); the toolset total grows with the tool count and is reported by `bench variants`.
L50_CHAR_BUDGET_PER_TOOL = 4_000

TOOLSETS = sorted({p.parent.parent.name for p in DESCRIPTIONS.glob("*/specs/*.yaml")})
SPECS = {toolset: load_specs(DESCRIPTIONS / toolset) for toolset in TOOLSETS}
TOOLS = [(toolset, spec.name) for toolset in TOOLSETS for spec in SPECS[toolset]]
TOOL_IDS = [f"{toolset}.{name}" for toolset, name in TOOLS]
ALL_SPECS = [spec for toolset in TOOLSETS for spec in SPECS[toolset]]


@pytest.fixture(scope="module")
def variants():
    """Every default variant of every toolset, rendered once for the module."""
    return {(toolset, name): load_variant(toolset, name, root=DESCRIPTIONS)
            for toolset in TOOLSETS for name in DEFAULT_VARIANTS}


def _description(variants, toolset: str, variant: str, tool: str) -> str:
    rendered = variants[toolset, variant].tool(tool)
    assert rendered is not None, f"{toolset} {variant} has no tool {tool}"
    return rendered.description


def test_every_toolset_is_checked():
    assert {"ecommerce", "analytics", "logistics"} <= set(TOOLSETS)


@pytest.mark.slow
@pytest.mark.parametrize(("toolset", "tool"), TOOLS, ids=TOOL_IDS)
@pytest.mark.parametrize("variant", DEFAULT_VARIANTS)
def test_line_count_within_20_percent_of_target(variants, variant, toolset, tool):
    target = LINE_TARGETS[variant]
    lines = count_lines(_description(variants, toolset, variant, tool))
    assert abs(lines - target) <= TOLERANCE * target, (
        f"{tool} in {variant}: {lines} non-blank lines, target {target} "
        f"(allowed {target * (1 - TOLERANCE):g} to {target * (1 + TOLERANCE):g})")


@pytest.mark.parametrize(("toolset", "tool"), TOOLS, ids=TOOL_IDS)
def test_each_level_is_longer_than_the_one_below(variants, toolset, tool):
    lengths = {v: len(_description(variants, toolset, v, tool)) for v in DEFAULT_VARIANTS}
    for lower, higher in zip(DEFAULT_VARIANTS, DEFAULT_VARIANTS[1:]):
        assert lengths[higher] > lengths[lower], f"{tool}: {higher} is not longer than {lower}"


@pytest.mark.parametrize(("toolset", "tool"), TOOLS, ids=TOOL_IDS)
def test_each_l50_description_fits_the_character_budget(variants, toolset, tool):
    length = len(_description(variants, toolset, "l50", tool))
    assert length <= L50_CHAR_BUDGET_PER_TOOL, (
        f"{toolset}.{tool}: l50 description has {length} chars")


@pytest.mark.parametrize("spec", ALL_SPECS, ids=TOOL_IDS)
def test_spec_examples_validate_against_the_input_schema(spec):
    validator = jsonschema.Draft202012Validator(
        spec.input_schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    assert spec.examples, f"{spec.name} has no examples"
    for example in spec.examples:
        if example.arguments is None:
            assert example.note, f"{spec.name}: example {example.query!r} needs arguments or a note"
            continue
        errors = [e.message for e in validator.iter_errors(example.arguments)]
        assert not errors, f"{spec.name}: example {example.query!r}: {errors}"


def _description_keywords(schema: Any, path: str = "") -> list[str]:
    """Paths of every ``description`` keyword in a schema (property *names* are not keywords)."""
    found: list[str] = []
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "description":
                found.append(f"{path}/description")
            elif key in ("properties", "$defs", "definitions", "patternProperties") \
                    and isinstance(value, dict):
                for name, sub in value.items():
                    found += _description_keywords(sub, f"{path}/{key}/{name}")
            else:
                found += _description_keywords(value, f"{path}/{key}")
    elif isinstance(schema, list):
        for i, item in enumerate(schema):
            found += _description_keywords(item, f"{path}/{i}")
    return found


@pytest.mark.parametrize("toolset", TOOLSETS)
@pytest.mark.parametrize("variant", DEFAULT_VARIANTS)
def test_rendered_schemas_carry_no_descriptions(variants, variant, toolset):
    for tool in variants[toolset, variant].tools:
        assert not _description_keywords(tool.input_schema), (
            f"{tool.name} in {toolset} {variant}: {_description_keywords(tool.input_schema)}")
        spec = next(s for s in SPECS[toolset] if s.name == tool.name)
        assert set(tool.input_schema["properties"]) == set(spec.input_schema["properties"])


@pytest.mark.parametrize("toolset", TOOLSETS)
def test_llama_cpp_grammar_converter_accepts_every_schema(variants, toolset):
    """The local provider builds one decoding grammar from all tools (no model is loaded)."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from bench.providers.local import (DEFAULT_NO_CALL_LAYOUT, NO_CALL_LAYOUTS, answer_schema,
                                       json_schema_grammar)

    tools = variants[toolset, "l50"].tools
    schema = answer_schema(tools, NO_CALL_LAYOUTS[DEFAULT_NO_CALL_LAYOUT])
    grammar = llama_cpp.LlamaGrammar.from_string(json_schema_grammar(json.dumps(schema)),
                                                 verbose=False)
    assert grammar is not None
