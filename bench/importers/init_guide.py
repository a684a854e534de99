"""The texts ``bench init`` writes for a new project besides the tools and specs: the dataset's
datasheet (:func:`datasheet`), the project's guide (:func:`project_readme`, with the variants
its first run compares: :func:`suggested_variants`), and its ``pyproject.toml`` tables'
comments and gate table (:func:`pyproject_header`, :func:`gate_toml`, :data:`LABELS_TOML`,
:data:`ERRORS_TOML`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import yaml

from bench.errors import BenchError
from bench.models import Tool
from bench.plural import count
from bench.toolset_config import ToolsetSettings

def _example_case(toolset: str, tool: Tool) -> str:
    """One example case line for the datasheet (the tool's required arguments, with
    placeholder values of their type)."""
    placeholders = {"string": "...", "integer": 1, "number": 1.5, "boolean": True,
                    "array": [], "object": {}}
    properties = tool.input_schema.get("properties", {})
    arguments = {}
    for name in tool.input_schema.get("required", []):
        prop = properties.get(name, {})
        if not isinstance(prop, dict):  # a boolean schema (true: anything) has no type
            prop = {}
        enum = prop.get("enum")
        value = enum[0] if isinstance(enum, list) and enum else \
            placeholders.get(str(prop.get("type")), "...")
        arguments[name] = [value]
    case = {"id": f"{toolset}-0001", "toolset": toolset, "lang": "en",
            "messages": [{"role": "user", "content": "<what a user would say>"}],
            "expected": {"calls": [{"name": tool.name, "arguments": arguments}]},
            "tags": ["simple"]}
    return json.dumps(case, ensure_ascii=False)


def datasheet(toolset: str, tools: list[Tool], source: str) -> str:
    """The dataset's ``README.md``: what goes in ``cases.jsonl``, with an example per kind."""
    names = ", ".join(t.name for t in tools)
    first = tools[0]
    no_call = json.dumps({"id": f"{toolset}-0002", "toolset": toolset, "lang": "en",
                          "messages": [{"role": "user", "content": "<a request no tool fits>"}],
                          "expected": {"no_call": True}, "tags": ["no_call"]},
                         ensure_ascii=False)
    ask = json.dumps({"id": f"{toolset}-0003", "toolset": toolset, "lang": "en",
                      "messages": [{"role": "user", "content": "<a request missing a required "
                                                               "argument>"}],
                      "expected": {"ask": True}, "tags": ["ask"]}, ensure_ascii=False)
    return f"""# Dataset `{toolset}`

Labeled queries for the tools of toolset `{toolset}` ({names}), imported by `bench init` from
{source}. `cases.jsonl` starts empty: add one JSON object per line. bench refuses to run an
empty dataset and names this file.

## The case format

- `id`: unique, e.g. `{toolset}-0001`; `toolset`: `{toolset}`; `lang`: `en`, `zh` or
  `mixed`; `tags`: free labels (`simple`, `multiple`, `parallel`, `no_call`, `ask`...), shown
  per tag in the report.
- `messages`: the conversation, `[{{"role": "user", "content": "..."}}]`.
- `expected`, one of:
  - `{{"calls": [{{"name": TOOL, "arguments": {{ARG: [acceptable values]}}}}]}}`: the calls the
    model should make. Each argument lists every acceptable value; `null` among them means it
    may be omitted. `"ordered": true` makes the order of several calls matter.
  - `{{"no_call": true}}`: no tool fits; the model must not call one.
  - `{{"ask": true}}`: information is missing; the model should ask, not guess.

A call case (a placeholder for each required argument of `{first.name}`: replace them):

```json
{_example_case(toolset, first)}
```

A no-call case and an ask case:

```json
{no_call}
{ask}
```

An argument's label lists every acceptable value, matched exactly (case included); for
free text give a pattern, `{{"$regex": "(?i)renew.*passport"}}`, or accept any value with
`{{"$any": true}}` (docs/datasets-and-labels.md).

`bench run --dataset {toolset} --skip-invalid-cases` lists the cases whose labels do not fit
the tools' schemas instead of refusing the dataset. When there are enough cases (30 or more
is a useful start), `bench split {toolset}` assigns them to `dev` and `test`:
descriptions may quote `dev` cases, never `test` ones.
"""


#: The variants the guide's first run compares, when they differ (:func:`suggested_variants`).
SUGGESTED_VARIANTS = ("current", "l10", "l30")
#: Every variant a new project has: the imported text and the built-in templates' lengths.
PROJECT_VARIANTS = ("current", "l3", "l10", "l30", "l50")


def suggested_variants(toolset: str, tools: Sequence[Tool], spec_texts: Sequence[str],
                       root: Path) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The variants of :data:`SUGGESTED_VARIANTS` worth comparing in a first run, and every
    variant of :data:`PROJECT_VARIANTS` it leaves out with why, rendered in memory before
    anything is written: a variant that renders the same text as an earlier one (same
    :attr:`~bench.descriptions.variants.Variant.sha256`: an imported toolset's l30 and l50
    are its l10 until the specs' longer sections are filled) is left out for it; ``l3`` and
    ``l50`` are left out of the first run to keep it short.

    Args:
        toolset: the toolset's name.
        tools: the imported tools (the variant ``current``, word for word).
        spec_texts: the YAML texts of the specs bench init writes.
        root: the project's ``descriptions/`` folder (its own templates, if any, apply).

    Returns:
        ``(names, left_out)``: the suggested variants whose texts differ, in the order of
        :data:`SUGGESTED_VARIANTS`; ``left_out``: ``(variant, twin)`` for each other variant
        of :data:`PROJECT_VARIANTS`, in that order, ``twin`` the variant whose text it
        renders (one of ``names`` when one has it), None when its text differs from all of
        them. All of :data:`SUGGESTED_VARIANTS` and ``l3``, ``l50`` without a twin when a
        spec or template does not render (the run says why).
    """
    from bench.descriptions.specs import ToolSpec
    from bench.descriptions.variants import CURRENT, Variant, specs_variant

    try:
        specs = sorted((ToolSpec.model_validate(yaml.safe_load(text)) for text in spec_texts),
                       key=lambda spec: spec.name)  # load_specs's order
        variants = [Variant(name=CURRENT, toolset=toolset, tools=tuple(tools), source="")] + [
            specs_variant(toolset, name, specs, root) for name in PROJECT_VARIANTS[1:]]
    except (BenchError, ValueError, yaml.YAMLError):
        return list(SUGGESTED_VARIANTS), [(name, None) for name in PROJECT_VARIANTS
                                          if name not in SUGGESTED_VARIANTS]
    text = {variant.name: variant.sha256 for variant in variants}
    names: list[str] = []
    for name in SUGGESTED_VARIANTS:
        if all(text[kept] != text[name] for kept in names):
            names.append(name)
    left_out: list[tuple[str, str | None]] = []
    for index, name in enumerate(PROJECT_VARIANTS):
        if name in names:
            continue
        twins = [k for k in names if text[k] == text[name]] or \
            [k for k in PROJECT_VARIANTS[:index] if text[k] == text[name]]
        left_out.append((name, twins[0] if twins else None))
    return names, left_out


def project_readme(toolset: str, result_tools: list[Tool], source: str,
                   settings: ToolsetSettings,
                   suggested: tuple[list[str], list[tuple[str, str | None]]] | None = None
                   ) -> str:
    """The project's ``README.md``: its layout and the steps to a report and a gate.
    ``suggested``: :func:`suggested_variants` (None: all of :data:`SUGGESTED_VARIANTS`, and
    ``l3``, ``l50`` left out), the variants step 3 compares, with why each other variant is
    left out (it renders the same text as another, or the first run is kept short)."""
    names, left = suggested or (list(SUGGESTED_VARIANTS), [
        (name, None) for name in PROJECT_VARIANTS if name not in SUGGESTED_VARIANTS])
    left_out = _left_out(toolset, left)
    execution = _execution(toolset, result_tools, settings)
    return f"""# bench project: `{toolset}`

Made by `bench init` from {source}: {count(len(result_tools), 'tool')}
({', '.join(t.name for t in result_tools)}).

| path | what |
|---|---|
| `descriptions/{toolset}/variants/current.yaml` | the tools as imported, word for word: variant `current` |
| `descriptions/{toolset}/specs/*.yaml` | one spec per tool; bench's built-in templates render it as variants `l3`, `l10`, `l30`, `l50` |
| `datasets/{toolset}/cases.jsonl` | your labeled cases (empty: see `datasets/{toolset}/README.md`) |
| `pyproject.toml` | `[tool.bench.toolsets.{toolset}]`: how calls execute; `[tool.bench.gate]`: the regression gate |
| `gate/` | the gate's recorded answers and baseline |

{execution}

## Next steps

Run every command in this folder (or set `BENCH_HOME` to it).

1. Write cases: `datasets/{toolset}/README.md` shows the format.
2. Look at the variants: `bench variants --toolset {toolset}` (lines and tokens per variant),
   `bench lint --toolset {toolset}` (description problems).
3. Run and read the report:
   `bench run --dataset {toolset} --variants {','.join(names)} --provider local`, then
   `bench report <run-id>` (HTML under `reports/<run-id>/`). Any provider works:
   `openai:<model>`, `anthropic:<model>`, `gemini:<model>`, `function:<module>:<callable>`.{left_out}
4. The gate: record the answers once,
   `bench run --dataset {toolset} --variants current --split all --provider local --cache write --cache-path gate/responses.sqlite`,
   set `providers = ["replay:gate/responses.sqlite"]` in `[tool.bench.gate]` (it is), then
   `bench baseline update` and commit `gate/`. From then on `pytest` fails when a
   description change makes the tools worse.
"""


def _left_out(toolset: str, left: Sequence[tuple[str, str | None]]) -> str:
    """Step 3's words on the variants its first run leaves out (``left``: ``(variant,
    twin)`` of :func:`suggested_variants`): those that render the same text as their twin,
    and those left out to keep the run short; ``""`` when none is."""
    said = []
    twins: dict[str, list[str]] = {}  # twin -> the variants left out for rendering its text
    for name, twin in left:
        if twin is not None:
            twins.setdefault(twin, []).append(f"`{name}`")
    for twin, same in twins.items():
        said.append(f"{' and '.join(same)} {'is' if len(same) == 1 else 'are'} left out: "
                    f"{'it renders' if len(same) == 1 else 'they render'} the same text as "
                    f"`{twin}`, until the sections the longer templates add are filled in "
                    f"`descriptions/{toolset}/specs/`, or drafted: `bench variants draft "
                    f"--toolset {toolset} --provider local`, then `bench variants accept "
                    f"--toolset {toolset}`")
    short = [f"`{name}`" for name, twin in left if twin is None]
    if short:
        said.append(f"{' and '.join(short)} {'is' if len(short) == 1 else 'are'} left out to "
                    f"keep this first run short: add {'it' if len(short) == 1 else 'them'} "
                    "to `--variants` to compare every length")
    return f"\n   {'; '.join(said)}." if said else ""


def _execution(toolset: str, result_tools: Sequence[Tool], settings: ToolsetSettings) -> str:
    """The guide's paragraph on how calls execute: not at all, or on the MCP server or the
    Python functions (with the write tools whose calls are refused until listed, and how a
    tool's errors are told from its results)."""
    allowed = set(settings.writes)
    writes = [t.name for t in result_tools if t.permission != "read" and t.name not in allowed]
    if settings.execute == "none":
        return ("Calls are not executed (`execute = \"none\"` in `pyproject.toml`): the "
                "table and report say so, and score selection and arguments only.")
    what = "the MCP server" if settings.execute == "mcp" else "the Python functions"
    execution = (f"`bench run` executes each answer's calls on {what} (`[tool.bench."
                 f"toolsets.{toolset}]` in `pyproject.toml`, {settings.timeout_s:g} s per "
                 "call). ")
    if writes:
        execution += (f"{', '.join(f'`{w}`' for w in writes)} may change data: their "
                      "calls are refused (and the table says so) until you list them in "
                      "`writes = [...]` there. Mark a tool that only reads with "
                      "`permission: read` in its spec and in `variants/current.yaml`"
                      + (", and list it in `read_only = [...]` there (the server's "
                         "missing `readOnlyHint` makes it a write otherwise)."
                         if settings.execute == "mcp" else "."))
    execution += ("\n\nA call fails when its tool says so: `isError` in an MCP result, "
                  "an exception of a Python function. If your tools answer their errors "
                  "as ordinary text (`Error: no such note`), those calls count as "
                  "successes until `error_pattern` in that table says how an error looks "
                  "(a regular expression; a commented example is there).")
    return execution


#: The toolset table's word on errors answered as text (after :data:`LABELS_TOML`): exec
#: success trusts an MCP result's ``isError`` and a Python exception; ``error_pattern``
#: (:class:`bench.toolset_config.ToolsetSettings`) is how a tool that answers its errors as
#: text says so. Nothing at import time tells such a tool apart (only a failing call shows
#: it), so this is a commented example, not a guess.
ERRORS_TOML = """\
# A call fails when its tool says so: isError in an MCP result, an exception in Python. A
# tool that answers its errors as ordinary text (mcp-server-sqlite: "Database error: no such
# column: x") scores them as successes until error_pattern says how they look: a regular
# expression searched in each text result (docs/your-own-tools.md of bench).
# error_pattern = "^(Error|Database error):"
"""


LABELS_TOML = """\
# bench never runs a label's calls on your system by itself. exec match compares the model's
# results with results you record once (`bench labels record <dataset>`: it lists the write
# calls, if any, and asks first), or, when a command can put your system back, declare it:
# bench then runs it before each case and may run the labels' calls (docs/your-own-tools.md).
# reset = ["git", "checkout", "--", "data/"]
# Results that depend on the clock or on state: per tool "exact" (default), "shape" (types
# and keys only), "none" (not compared) or {ignore = ["field", ...]}.
# compare = {get_time = "shape", list_items = {ignore = ["updated_at"]}}
"""


def pyproject_header(toolset: str, source: str, guide: str | None) -> str:
    """The comment bench init puts above its tables in ``pyproject.toml`` (its first lines in
    a new one: they carry :data:`bench.importers.init_files.BENCH_MARK`)."""
    return (f"# bench project `{toolset}`, made by `bench init` from {source}.\n"
            "# [tool.bench.toolsets.*]: how calls execute; [tool.bench.gate]: the regression "
            f"gate\n# (see {guide or 'docs/your-own-tools.md of bench'}).\n\n")


def gate_toml(toolset: str, guide: str = "README.md") -> str:
    """The ``[tool.bench.gate]`` table of a new project (see bench's docs/gate.md); ``guide``
    names the project's guide (``README.md``, or ``BENCH.md`` beside a user's README)."""
    return f"""[tool.bench.gate]
dataset = "{toolset}"
variants = ["current"]                       # the descriptions the gate guards
providers = ["replay:gate/responses.sqlite"] # answers recorded once ({guide}, step 4)
split = "all"                                # every case ("test" after `bench split {toolset}`)
metrics = ["selection_correct", "arguments_correct"]
# execute: unset, the answers' calls run on the toolset only when a gated metric needs them
# (execution_success, task_success): these two need no server in CI. true/false force it.
margin = 0.0                                 # tolerated drop vs the baseline (fraction)
alpha = 0.05
baseline = "gate/baseline.json"
# floors: added by the first `bench baseline update` (from the baseline's rates); with
# recorded answers, any case right in the baseline and wrong now fails (fail_on_flips)
"""
