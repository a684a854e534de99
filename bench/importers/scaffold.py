"""``bench init``: a new project folder from a user's own tools.

Sources (each through its importer): an MCP server (a stdio command, or a Streamable HTTP
URL: :mod:`bench.importers.mcp_server`), an OpenAI, Anthropic or Gemini tools JSON file
(:mod:`bench.importers.toollists`), or a Python module of typed functions or pydantic models
(:mod:`bench.importers.python_module`).

What it writes (all at once, never over a file bench did not write:
:mod:`bench.importers.init_files`)::

    <dest>/
      pyproject.toml                       [tool.bench.gate] and [tool.bench.toolsets.<t>]
                                           (added to an existing one, its tables kept)
      README.md                            what to do next, step by step (BENCH.md beside
                                           a README of the user's)
      descriptions/<t>/variants/current.yaml   the imported tools, word for word
      descriptions/<t>/specs/<tool>.yaml   one spec per tool: the l3..l50 variants render it
      datasets/<t>/cases.jsonl             empty: one labeled case per line goes here
      datasets/<t>/README.md               the datasheet, with the case format and an example
      gate/                                the gate's baseline and recorded answers go here

A spec's sections come from the imported description (:func:`spec_sections`): its first
paragraph is the summary; sentences that start "Use it/this ..." and "Do not use ..." become
``when_to_use`` / ``when_not_to_use``; ``Returns:``, ``Raises:``/``Errors:`` and
``Examples:`` sections become ``returns``, ``errors`` and (as text) ``edge_cases``; every
other sentence is ``business_context``. Its ``input_schema`` is the tool's, parameter
descriptions included (the rendered variants move them into the prose).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

import yaml

from bench.errors import BenchError
from bench.importers.common import ImportedToolset, check_name, variant_yaml, write_file
from bench.importers.init_files import (INIT_SETTINGS, ProjectFile, bench_wrote,
                                        earlier_toolset, guide_name, keep_spec_variants,
                                        merge_pyproject, plan_files, write_project)
from bench.models import Tool
from bench.plural import count
from bench.toolset_config import PYPROJECT, ToolsetSettings, server_label, settings_toml

SourceKind = Literal["mcp", "tools", "python"]
#: Where a stdio MCP server's stderr during ``bench init`` is kept, under ``reports/``.
INIT_SERVER_LOG = "mcp-server-init.log"

_USE = re.compile(r"^(?:use (?:it|this(?: tool| function)?)|call (?:it|this(?: tool)?)|use)\s+",
                  re.IGNORECASE)
_DONT = re.compile(r"^(?:do not|don't|never) (?:use|call)(?: it| this(?: tool| function)?)?\s*",
                   re.IGNORECASE)
_HEADER = re.compile(r"^(returns?|raises|errors?|examples?|notes?|when to use|when not to use|"
                     r"do not use|don't use)\s*:\s*(.*)$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'(])")


@dataclass
class InitSource:
    """Where ``bench init`` reads the tools.

    Attributes:
        kind: ``mcp`` (``server``: a command list or a URL), ``tools`` (``path``: a JSON
            file; ``fmt`` its format or None to detect it) or ``python`` (``module``: a file
            or dotted module name).
    """

    kind: SourceKind
    server: list[str] | str | None = None
    path: Path | None = None
    fmt: str | None = None
    module: str | None = None

    def label(self) -> str:
        """A few words naming the source (never a whole command line: it may hold a token)."""
        if self.kind == "mcp":
            assert self.server is not None
            return f"the MCP server {server_label(self.server)}"
        if self.kind == "tools":
            return f"the {self.fmt or 'tools'} file {self.path.name if self.path else '?'}"
        return f"the Python module {self.module}"


@dataclass
class InitResult:
    """What :func:`init_project` did: the files written, the import's notes, and the tools
    (with their permissions).

    Attributes:
        guide: the project guide's file name (``README.md``, ``BENCH.md`` beside a user's
            README, None when both are the user's).
        exports: the environment variables ``pyproject.toml`` names (``${NAME}``) in place
            of the secrets of the server's command line; each must be set for bench run.
    """

    root: Path
    toolset: str
    tools: list[Tool]
    written: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    settings: ToolsetSettings | None = None
    guide: str | None = "README.md"
    exports: list[str] = field(default_factory=list)


def _strip(pattern: re.Pattern[str], sentence: str) -> str:
    return pattern.sub("", sentence, count=1).strip()


def spec_sections(description: str) -> dict[str, Any]:
    """The spec sections of an imported description (see the module docstring).

    Returns:
        ``{"summary": str, "when_to_use": [...], "when_not_to_use": [...], "returns": str,
        "errors": [...], "edge_cases": [...], "business_context": [...]}`` (empty ones
        included).
    """
    sections: dict[str, Any] = {"summary": "", "when_to_use": [], "when_not_to_use": [],
                                "business_context": [], "returns": "", "errors": [],
                                "edge_cases": []}
    paragraphs: list[tuple[str | None, list[str]]] = []
    current: tuple[str | None, list[str]] = (None, [])
    for raw in description.splitlines():
        line = raw.strip()
        header = _HEADER.match(line)
        if header:
            if current[1]:
                paragraphs.append(current)
            current = (header.group(1).lower(), [header.group(2)] if header.group(2) else [])
        elif not line:
            if current[1]:
                paragraphs.append(current)
            current = (current[0], []) if current[0] else (None, [])
        else:
            current[1].append(line)
    if current[1]:
        paragraphs.append(current)

    def items(lines: list[str]) -> list[str]:
        found: list[str] = []
        for line in lines:
            if line.startswith(("- ", "* ", "• ")) or not found:
                found.append(line.lstrip("-*• ").strip())
            else:
                found[-1] += " " + line
        return [f for f in found if f]

    for kind, lines in paragraphs:
        if kind is None:
            text = " ".join(lines)
            sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()] \
                if not any(line.startswith(("- ", "* ")) for line in lines) else items(lines)
            for sentence in sentences:
                if _DONT.match(sentence):
                    sections["when_not_to_use"].append(_strip(_DONT, sentence))
                elif _USE.match(sentence) and not sentence.lower().startswith("user"):
                    sections["when_to_use"].append(_strip(_USE, sentence))
                elif not sections["summary"]:
                    sections["summary"] = sentence
                else:
                    sections["business_context"].append(sentence)
        elif kind.startswith("return"):
            sections["returns"] = " ".join(lines)
        elif kind in ("raises", "error", "errors"):
            sections["errors"] += items(lines)
        elif kind.startswith("example"):
            sections["edge_cases"] += [f"Example: {item}" for item in items(lines)]
        elif kind.startswith("note"):
            sections["business_context"] += items(lines)
        elif kind == "when to use":
            sections["when_to_use"] += [_strip(_USE, i) for i in items(lines)]
        else:
            sections["when_not_to_use"] += [_strip(_DONT, i) for i in items(lines)]
    return sections


def spec_data(tool: Tool) -> dict[str, Any]:
    """A spec (:class:`bench.descriptions.specs.ToolSpec` shape) of an imported tool."""
    sections = spec_sections(tool.description)
    data: dict[str, Any] = {"name": tool.name, "permission": tool.permission,
                            "summary": sections.pop("summary"),
                            "input_schema": tool.input_schema}
    data.update({key: value for key, value in sections.items() if value})
    return data


def spec_yaml(tool: Tool, source: str, toolset: str) -> str:
    """The text of ``descriptions/<toolset>/specs/<tool>.yaml`` for an imported tool."""
    from bench.descriptions.specs import ToolSpec
    data = spec_data(tool)
    ToolSpec.model_validate(data)  # what bench init writes, bench must read
    header = (f"# {tool.name}: made by `bench init` from {source}.\n"
              f"# The imported description, word for word, is the variant `current`\n"
              f"# (descriptions/{toolset}/variants/current.yaml); the variants l3, l10, l30 and\n"
              "# l50 render this spec with bench's built-in templates. Edit the sections (see\n"
              "# docs/descriptions-and-variants.md of bench); keys: summary, when_to_use,\n"
              "# when_not_to_use, constraints, business_context, returns, errors, examples\n"
              "# ({query, arguments} or {query, note}), edge_cases, permission (read, write or\n"
              "# sensitive), input_schema.\n")
    if not data["summary"]:
        header += "# TODO: the imported tool has no description: write its summary.\n"
    # without a stream safe_dump returns the document as str
    body: str = yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)
    return header + body


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
    left_out = f"\n   {'; '.join(said)}." if said else ""
    allowed = set(settings.writes)
    writes = [t.name for t in result_tools if t.permission != "read" and t.name not in allowed]
    if settings.execute == "none":
        execution = ("Calls are not executed (`execute = \"none\"` in `pyproject.toml`): the "
                     "table and report say so, and score selection and arguments only.")
    else:
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


def read_source(source: InitSource, base: Path, timeout: float = 30.0) -> ImportedToolset:
    """The tools of ``source`` (through its importer).

    Raises:
        BenchError: whatever the importer raises (one line naming the file or server).
    """
    if source.kind == "mcp":
        from bench.importers.mcp_server import import_mcp
        from bench.toolset_config import expand
        assert source.server is not None
        parts = [source.server] if isinstance(source.server, str) else source.server
        unset = [name for part in parts for name in re.findall(r"\$\{([A-Za-z_]\w*)\}", part)
                 if name not in os.environ]
        if unset:
            raise BenchError(f"--mcp names ${{{unset[0]}}} but the environment variable "
                             f"{unset[0]} is not set: export it, then run bench init again")
        # ${NAME} in the command line, expanded as bench run does
        server = expand(source.server) if isinstance(source.server, str) else \
            [expand(part) for part in source.server]
        return import_mcp(server, timeout=timeout)
    if source.kind == "tools":
        from bench.importers.toollists import detect_format, import_tool_list
        assert source.path is not None
        fmt = source.fmt or detect_format(source.path)
        source.fmt = fmt
        return import_tool_list(source.path, fmt)  # type: ignore[arg-type]
    from bench.importers.python_module import import_python
    assert source.module is not None
    return import_python(source.module, base)[0]


def referenced_server(source: InitSource) -> tuple[list[str] | str | None, dict[str, str]]:
    """The server's command line or URL as ``pyproject.toml`` gets it: each secret replaced
    by a ``${NAME}`` reference (:func:`bench.redact.reference_secrets`: by shape and by
    option, header or variable name, in one argument or split over several), since secrets
    never reach disk.

    Returns:
        (the command line or URL with references, ``{NAME: value}`` of the secrets taken
        out: the user exports them for ``bench run``).

    Raises:
        BenchError: a secret that no rule can name is left in it (refused, with the
            ``${NAME}`` way to pass it).
    """
    from bench.redact import reference_secrets
    if source.server is None:
        return None, {}
    try:
        return reference_secrets(source.server)
    except ValueError:
        raise BenchError("the server's command line or URL holds what looks like a secret, "
                         "and bench init would write it to pyproject.toml: pass it through an "
                         "environment variable and write ${NAME} instead (single-quoted, so "
                         "the shell keeps it), e.g. 'https://host/mcp?token=${MCP_TOKEN}'"
                         ) from None


def _from_project(server: list[str] | str | None, dest: Path) -> list[str] | str | None:
    """A stdio command as the project will start it (in its own folder): an argument naming
    an existing file relative to the current directory is made relative to ``dest``."""
    if not isinstance(server, list):
        return server
    here = Path.cwd().resolve()
    if here == dest:
        return server
    return [os.path.relpath(here / part, dest) if i and not Path(part).is_absolute()
            and (here / part).is_file() else part for i, part in enumerate(server)]


#: Seconds per call (and for the import) when ``--timeout`` is not given.
DEFAULT_TIMEOUT_S = 10.0
#: The settings bench init writes whose earlier value a note may quote (never ``server``:
#: a command line written in clear may hold a secret).
_QUOTED = ("execute", "timeout_s", "writes", "read_only")


def _still_there(listed: Any, names: set[str]) -> tuple[list[str], list[str]]:
    """(the names of ``listed``, an earlier table's ``writes`` or ``read_only``, that are
    tools of the import; the others). Not a list of strings: ([], [])."""
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        return [], []
    return [n for n in listed if n in names], [n for n in listed if n not in names]


def _carry_settings(toolset: str, settings: ToolsetSettings, earlier: dict[str, Any],
                    pyproject: Path, dropped: dict[str, list[str]]
                    ) -> tuple[ToolsetSettings, str | None]:
    """``settings`` (this init's) with every setting of the ``earlier`` table that bench init
    does not write (:data:`~bench.importers.init_files.INIT_SETTINGS`: ``env``, ``reset``,
    ``compare``, ``error_pattern``...) kept, for ``--force``. ``timeout_s``, ``writes`` and
    ``read_only`` were taken from ``earlier`` already unless given (``dropped``: the names
    of each that are no tool of the import).

    Returns:
        (the settings to write, a note naming the settings kept, those this init wrote with
        another value, and the names dropped; None when there is nothing to say).

    Raises:
        BenchError: a kept setting is not valid (names the file and field).
    """
    from pydantic import ValidationError

    from bench.errors import pydantic_error_field

    carried = {key: value for key, value in earlier.items() if key not in INIT_SETTINGS}
    if carried:
        try:
            settings = ToolsetSettings.model_validate(
                {**settings.model_dump(exclude_none=True), **carried})
        except ValidationError as exc:
            where, message = pydantic_error_field(exc)
            raise BenchError(f"{message} (a setting bench init --force keeps: fix it, then run "
                             "bench init again)", file=pyproject,
                             field=f"tool.bench.toolsets.{toolset}"
                             + (f".{where}" if where else "")) from None
    now = settings.model_dump(exclude_none=True)
    same = [key for key in ("timeout_s", "writes", "read_only")
            if earlier.get(key) == now.get(key) and earlier.get(key)]
    gone = {key: names for key, names in dropped.items() if names}
    replaced = [key for key in INIT_SETTINGS
                if key in earlier and earlier[key] != now.get(key) and key not in gone]
    kept = [*carried, *same]
    if not kept and not replaced and not gone:
        return settings, None

    def was(key: str) -> str:  # never the server's command line: it may hold a secret
        return f"{key} (was {json.dumps(earlier[key])})" if key in _QUOTED else key

    parts = ([f"kept {', '.join(kept)}"] if kept else []) + \
        [f"{key}: dropped {', '.join(names)} (no tool of the import)"
         for key, names in gone.items()] + \
        ([f"replaced {', '.join(map(was, replaced))} by this init's"] if replaced else [])
    return settings, f"pyproject.toml [tool.bench.toolsets.{toolset}]: {'; '.join(parts)}"


def init_project(dest: Path, source: InitSource, toolset: str, *, read_only: Sequence[str] = (),
                 writes: Sequence[str] = (), execute: bool = True,
                 timeout_s: float | None = None, force: bool = False) -> InitResult:
    """Write a new project folder for the tools of ``source`` (see the module docstring).

    Args:
        dest: the project folder (created; may exist, but its files are not replaced unless
            ``force``).
        source: where the tools come from.
        toolset: the toolset (and dataset) name.
        read_only: tools that only read (permission ``read``; they always run).
        writes: write tools whose calls may run (``writes`` of the toolset's settings).
        execute: False declares no-execute mode (``execute = "none"``); a tools JSON file
            has nothing to execute and is always no-execute.
        timeout_s: per-call timeout written to the settings, in seconds; also the seconds
            an MCP server has to answer the import (``bench init --timeout``). None:
            :data:`DEFAULT_TIMEOUT_S`, or under ``force`` the earlier table's.
        force: replace bench's existing files and ``[tool.bench.toolsets.<toolset>]``,
            keeping each spec's ``variants:`` texts, ``[tool.bench.gate]``, the toolset's
            settings bench init does not write, and its ``timeout_s``, ``writes`` and
            ``read_only`` unless given (names of tools no longer imported dropped); the
            notes name what was kept and replaced.

    Returns:
        The files written and the import's notes.

    Raises:
        BenchError: a bad name, a source that fails or has no tools (nothing is written),
            an unknown tool in ``read_only`` or ``writes``, a secret in a server command
            line, or a file that exists (without ``force``).
    """
    check_name("toolset", toolset)
    dest = Path(dest).resolve()
    stored_server, secrets = referenced_server(source) if source.kind == "mcp" else (None, {})
    pyproject = dest / PYPROJECT
    earlier = earlier_toolset(pyproject, toolset) if force else None
    if timeout_s is None:
        old = (earlier or {}).get("timeout_s")
        timeout_s = float(old) if isinstance(old, (int, float)) and not isinstance(old, bool) \
            and 0 < old <= 600 else DEFAULT_TIMEOUT_S
    from bench.importers.mcp_server import ServerImportError
    try:
        imported = read_source(source, Path.cwd(), timeout=timeout_s)
    except ServerImportError as exc:
        raise kept_server_log(dest, exc.server_log, exc) from None
    try:
        return _init_imported(dest, source, toolset, imported, read_only=read_only,
                              writes=writes, execute=execute, timeout_s=timeout_s,
                              force=force, stored_server=stored_server, secrets=secrets,
                              earlier=earlier)
    except BenchError as exc:
        raise kept_server_log(dest, imported.server_log, exc) from None


def kept_server_log(dest: Path, log: str, error: BenchError) -> BenchError:
    """``error`` of a failed ``bench init`` naming the server's stderr ``log`` (redacted), kept
    in ``reports/`` :data:`INIT_SERVER_LOG` of ``dest`` (written atomically, replacing an
    earlier one); ``error`` itself when the server wrote nothing or the log cannot be
    written."""
    if not log.strip():
        return error
    path = dest / "reports" / INIT_SERVER_LOG
    try:
        write_file(path, log, force=True)
    except (BenchError, OSError):
        return error
    kept = BenchError(f"{error.message}; the server's stderr is kept in {path}", file=error.file,
                      line=error.line, field=error.field)
    kept.exit_code = error.exit_code
    return kept


def _init_imported(dest: Path, source: InitSource, toolset: str, imported: ImportedToolset,
                   *, read_only: Sequence[str], writes: Sequence[str], execute: bool,
                   timeout_s: float, force: bool, stored_server: list[str] | str | None,
                   secrets: dict[str, str], earlier: dict[str, Any] | None) -> InitResult:
    """:func:`init_project` once the tools of ``source`` are ``imported`` (its arguments,
    and what it computed before the import: the server's command line as stored,
    ``secrets`` it holds, the earlier toolset table under ``force``).

    Raises:
        BenchError: as :func:`init_project`, after the import.
    """
    pyproject = dest / PYPROJECT
    if not imported.tools:  # a project needs a tool: its guide and datasheet name one
        why = f" ({'; '.join(imported.notes)})" if imported.notes else ""
        if source.kind == "tools":
            raise BenchError(f"no tools{why}: bench init wrote nothing", file=source.path)
        raise BenchError(f"{source.label()} lists no tools{why}: bench init wrote nothing")
    names = {t.name for t in imported.tools}
    for option, listed in (("--read-only", read_only), ("--writes", writes)):
        unknown = [n for n in listed if n not in names]
        if unknown:
            raise BenchError(f"{option}: no tool named {', '.join(unknown)} (tools: "
                             f"{', '.join(sorted(names))})")
    dropped: dict[str, list[str]] = {}  # setting -> its names no tool of the import has
    if earlier is not None:  # not given: the earlier table's, for the tools still there
        if not read_only:
            read_only, dropped["read_only"] = _still_there(earlier.get("read_only"), names)
        if not writes:
            writes, dropped["writes"] = _still_there(earlier.get("writes"), names)
    tools = [t.model_copy(update={"permission": "read"}) if t.name in read_only else t
             for t in imported.tools]
    label = source.label()
    if source.kind == "tools" or not execute:
        reason = ("a tools file has no implementation to execute" if source.kind == "tools"
                  else "declared by bench init --no-execute")
        settings = ToolsetSettings(execute="none", reason=reason, timeout_s=timeout_s)
    elif source.kind == "mcp":
        # the server's word on a tool's permission and name is its annotation and its
        # listing: --read-only and the import's renames must reach the run (runhook)
        settings = ToolsetSettings(execute="mcp", server=_from_project(stored_server, dest),
                                   timeout_s=timeout_s, writes=list(writes),
                                   read_only=[t.name for t in tools if t.name in read_only],
                                   server_names=dict(imported.source_names))
    else:
        module = source.module or ""
        module_path = Path(module)
        if module.endswith(".py") or module_path.is_file():
            absolute = module_path.resolve()
            try:
                module = str(absolute.relative_to(dest))
            except ValueError:
                module = str(absolute)
        settings = ToolsetSettings(execute="python", module=module, timeout_s=timeout_s,
                                   writes=list(writes))
    settings_note = None
    if earlier is not None:
        settings, settings_note = _carry_settings(toolset, settings, earlier, pyproject,
                                                  dropped)
    result = InitResult(root=dest, toolset=toolset, tools=tools, notes=list(imported.notes),
                        settings=settings, exports=list(secrets))
    header = f"Imported by `bench init` from {label}: variant `current`, word for word."
    guide, guide_note = guide_name(dest)
    result.guide = guide
    if guide_note:
        result.notes.append(guide_note)
    top = pyproject_header(toolset, label, guide)
    toolset_table = settings_toml(toolset, settings, {
        "execute": "mcp | python | none (selection and arguments only)",
        "timeout_s": "seconds per call",
        "writes": "write tools whose calls may run",
        "read_only": "tools that only read: their calls always run",
        "server_names": "bench name -> the server's own name",
        "reason": "shown in the table and report"}) \
        + ("" if settings.execute == "none" else LABELS_TOML + ERRORS_TOML)
    gate_table = gate_toml(toolset, guide or "README.md")
    files = [
        ProjectFile(Path("descriptions", toolset, "variants", "current.yaml"),
                    variant_yaml(tools, header), "bench"),
        *[ProjectFile(Path("descriptions", toolset, "specs", f"{t.name}.yaml"),
                      spec_yaml(t, label, toolset), "bench") for t in tools],
        ProjectFile(Path("datasets", toolset, "cases.jsonl"), "", "data"),
        ProjectFile(Path("datasets", toolset, "README.md"), datasheet(toolset, tools, label),
                    "doc"),
        ProjectFile(Path("gate", ".gitkeep"), "", "keep"),
    ]
    kept_work = []
    for item in files:  # a spec's drafted and accepted texts are reviewed work: kept
        if force and item.rel.parent.name == "specs" and (dest / item.rel).is_file() \
                and bench_wrote(dest / item.rel):
            item.text, note = keep_spec_variants(dest / item.rel, item.rel, item.text)
            if note:
                kept_work.append(note)
    if guide:  # its first run compares only variants that differ (specs as written)
        suggested = suggested_variants(toolset, tools, [item.text for item in files
                                                        if item.rel.parent.name == "specs"],
                                       dest / "descriptions")
        files.insert(0, ProjectFile(Path(guide), project_readme(toolset, tools, label,
                                                                settings, suggested), "guide"))
    plan, existing = plan_files(dest, files, force)
    if not pyproject.exists():
        plan.new.insert(0, (Path(PYPROJECT), top + toolset_table + "\n" + gate_table))
    else:
        merged, merge_notes = merge_pyproject(pyproject, toolset, top, toolset_table,
                                              gate_table, force)
        if merged is None:
            existing.insert(0, f"{PYPROJECT} [tool.bench.toolsets.{toolset}]")
        else:
            plan.replace.insert(0, (Path(PYPROJECT), merged))
            plan.notes += merge_notes
    if existing:
        raise BenchError(f"{count(len(existing), 'file')} of an earlier bench init already "
                         f"exist here, e.g. {existing[0]}: --force replaces bench's files "
                         "(your own files, your cases, the specs' variant texts, "
                         "[tool.bench.gate] and the other tables of pyproject.toml are kept)",
                         file=dest)
    result.written += write_project(dest, plan)
    result.notes += plan.notes + ([settings_note] if settings_note else []) + kept_work
    if imported.server_log.strip():  # the server's stderr: kept, not on the terminal
        log = dest / "reports" / INIT_SERVER_LOG
        write_file(log, imported.server_log, force=True)
        lines = len(imported.server_log.strip().splitlines())
        result.notes.append(f"the server wrote {lines} line(s) to its stderr during the "
                            f"import: kept, redacted, in {log.relative_to(dest)}")
    return result
