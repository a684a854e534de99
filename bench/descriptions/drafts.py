"""Drafted description lengths for any toolset: ``bench variants draft`` asks a provider to
rewrite each tool's ``current`` description (the imported text) at about 3, 10, 30 and 50
lines, and keeps each answer in the tool's spec as ``variants.l<N>`` with ``draft: true``
(:class:`bench.descriptions.specs.SpecVariant`) until ``bench variants accept`` marks it
reviewed. The length ablation (``--variants l3,l10,l30,l50``) then runs on toolsets that
were imported with one description per tool; runs, tables and reports mark variants that
still hold drafts (:attr:`bench.descriptions.Variant.draft_tools`).

A toolset without specs (``bench import`` writes ``variants/current.yaml``) gets one spec per
tool on its first draft: its name, permission, input schema and, as the required
``summary``, the first line of its current description.

Drafts are asked through the provider's request pipeline
(:func:`bench.providers.pipeline.build_pipeline`), as a run asks, offering one tool,
``write_description``, whose ``lines`` argument is the draft, one string per line, with
``minItems``/``maxItems`` set to the line range asked for (:func:`draft_tool`). The embedded
model can only answer in grammar-constrained JSON whose free strings are capped at
:data:`bench.providers.local.prompt.GRAMMAR_MAX_STRING` characters: a text reply could never
hold a 30-line draft, an array of lines can, and its grammar keeps the count in range. A
plain-text answer (a model that does not call the tool) is read as the draft too.

The model's answer is untrusted data (:func:`read_draft`): it is a draft only when it is text
of about the asked length (:data:`USABLE` range), without control characters, over-long lines
or a JSON document in place of prose; it is stored as a YAML string (never evaluated, never a
path) in a spec that must load (:func:`bench.descriptions.specs.load_spec`), and shown to the
model under test as a description, nothing more. A tool with any unusable draft keeps its
spec unchanged and is named with the reason (:class:`DraftResult`).

Each spec file is rewritten atomically, and only its top-level ``variants:`` block changes:
the rest of the file, comments included, stays as it was.
"""

from __future__ import annotations

import asyncio
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from bench.descriptions.specs import load_spec
from bench.descriptions.variants import CURRENT, check_toolset, count_lines, load_variant
from bench.errors import BenchError
from bench.models import Message, Tool
from bench.parse import ParsedAnswer
from bench.paths import descriptions_dir
from bench.yamlio import load_yaml

DEFAULT_LENGTHS = (3, 10, 30, 50)

# What each length should hold; the same order of content as the shipped templates
# (descriptions/templates/l3.j2 ... l50.j2): the purpose first, then parameters, usage
# boundaries, then examples and edge cases.
_CONTENT = {
    3: "what the tool does and when to use it, and its one or two key parameters",
    10: "what it does, when to use it and when not to, and one line per parameter (type, "
        "allowed values, default)",
    30: "purpose, when to use and when not to, every parameter with its type, allowed values, "
        "defaults and bounds, what it returns, and its errors",
    50: "purpose, when to use and when not to, every parameter in detail, constraints, "
        "business context, what it returns, its errors, two or three example requests with "
        "the arguments they need, and edge cases",
}


DRAFT_TOOL = "write_description"

USABLE = (0.5, 1.5)
"""A draft of target ``N`` lines is usable with ``ceil(0.5 N)`` to ``floor(1.5 N) + 1``
non-empty lines (the prompt asks for 0.7 N to 1.3 N + 1, :func:`asked_range`): outside that,
a variant ``l<N>`` would not measure the length its name says."""

MAX_LINE_CHARS = 400
"""Longest line a draft may hold (characters): a description line is a sentence; a longer
one is a model repeating itself, or data that is not a description."""

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def asked_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines the prompt asks for around ``lines`` (about +-30 %)."""
    return max(1, round(lines * 0.7)), round(lines * 1.3) + 1


def usable_range(lines: int) -> tuple[int, int]:
    """The range of non-empty lines a draft of ``lines`` must have to be kept (:data:`USABLE`)."""
    return max(1, math.ceil(lines * USABLE[0])), math.floor(lines * USABLE[1]) + 1


def draft_tool(lines: int) -> Tool:
    """The one tool a drafting request offers: ``write_description(lines: [str, ...])`` with
    :func:`asked_range` as ``minItems``/``maxItems``."""
    low, high = asked_range(lines)
    return Tool(name=DRAFT_TOOL, description=(
        "Write the tool description you were asked for: each item of `lines` is one line of "
        "its plain text."), input_schema={
        "type": "object", "properties": {"lines": {
            "type": "array", "items": {"type": "string"}, "minItems": low, "maxItems": high,
            "description": f"The description, one line per item, {low} to {high} lines."}},
        "required": ["lines"], "additionalProperties": False})


def _parameter_lines(schema: dict[str, Any]) -> list[str]:
    """One plain line per top-level property of ``schema``: name, type, required or not, the
    enum, default and bounds, and its description (a small model copies JSON it is shown)."""
    required = set(schema.get("required") or [])
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        facts = [str(prop.get("type", "any")), "required" if name in required else "optional"]
        for key in ("enum", "default", "minimum", "maximum", "pattern", "format"):
            if key in prop:
                facts.append(f"{key} {prop[key]}")
        text = f"- {name} ({', '.join(facts)})"
        if prop.get("description"):
            text += f": {prop['description']}"
        lines.append(text)
    return lines or ["(no parameters)"]


def draft_prompt(tool: Tool, lines: int) -> str:
    """The request that drafts ``tool``'s description at about ``lines`` lines.

    It gives the current description and the parameters, one plain line each (with the
    property descriptions: a drafted variant is sent without them, so the text must carry
    what the length allows), and asks for plain text only, and for nothing the source does
    not support.
    """
    closest = min(_CONTENT, key=lambda n: abs(n - lines))
    low, high = asked_range(lines)
    return (
        f"Rewrite the description of the tool `{tool.name}` for an AI model that chooses tools "
        f"and fills in their arguments. Write about {lines} non-empty lines (between "
        f"{low} and {high}), covering {_CONTENT[closest]}.\n"
        "Use only facts stated in the current description or the parameters below; never "
        "invent behaviour, limits, defaults or values. Plain text, one fact per line, no "
        f"Markdown headings, no code fences. Answer by calling {DRAFT_TOOL} with the "
        "description's lines, or with the description only.\n\n"
        f"Current description:\n{tool.description.strip() or '(none)'}\n\n"
        "Parameters:\n" + "\n".join(_parameter_lines(tool.input_schema)) + "\n")


_ECHOES = ("Rewrite the description of the tool", "Current description:",
           "Input schema (JSON Schema)", "reply_to_user", DRAFT_TOOL, "tool_calls")
"""Words of the drafting prompt or of the answer format: a text holding one copies its
instructions back instead of describing the tool."""


_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n```\s*$", re.DOTALL)


def clean_draft(text: str) -> str:
    """The model's answer as a description: one surrounding code fence removed, trailing
    blanks and blank lines at both ends dropped."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def read_draft(answer: ParsedAnswer, lines: int) -> str:
    """The draft in a model's answer for a target of ``lines`` lines: the ``lines`` of its
    first :data:`DRAFT_TOOL` call joined by newlines, else its text (:func:`clean_draft`).

    Raises:
        ValueError: the answer holds no usable draft; the message says why in a few words
            (an invalid or cut answer, no text, lines that are not strings, control
            characters, a line over :data:`MAX_LINE_CHARS`, the prompt's own words
            (:data:`_ECHOES`), a JSON document, a line count
            outside :func:`usable_range`).
    """
    import json

    if answer.error is not None:
        raise ValueError(f"invalid answer ({answer.error[:120]})")
    call = next((c for c in answer.calls if c.name == DRAFT_TOOL), None)
    if call is not None:
        items = call.arguments.get("lines") if call.valid else None
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise ValueError(f"{DRAFT_TOOL} without a list of strings as lines")
        text = clean_draft("\n".join(items))
    else:
        text = clean_draft(answer.text or "")
    if not text:
        raise ValueError("no text")
    echo = next((words for words in _ECHOES if words in text), None)
    if echo is not None:
        raise ValueError(f"the prompt copied back ('{echo}')")
    if _CONTROL.search(text):
        raise ValueError("control characters in the text")
    longest = max(len(line) for line in text.splitlines())
    if longest > MAX_LINE_CHARS:
        raise ValueError(f"a line of {longest} characters (at most {MAX_LINE_CHARS})")
    if text[0] in "{[":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            raise ValueError("a JSON document, not a description")
    low, high = usable_range(lines)
    found = count_lines(text)
    if not low <= found <= high:
        raise ValueError(f"{found} lines, not {low} to {high}")
    return text


@dataclass
class Draft:
    """One drafted text: ``tool``, ``variant`` (``l<N>``), the ``target`` and actual
    ``lines`` (non-empty lines), and the ``text``."""

    tool: str
    variant: str
    target: int
    lines: int
    text: str


@dataclass
class DraftResult:
    """What ``bench variants draft`` did.

    Attributes:
        drafts: the drafts written, in tool then length order.
        failed: tool -> one line saying which lengths had no usable draft and why; these
            tools' specs were left unchanged (none of their drafts written).
    """

    drafts: list[Draft]
    failed: dict[str, str]


def _ask(provider_id: str, prompts: Sequence[tuple[str, int, str]], timeout_s: float,
         max_tokens: int) -> list[ParsedAnswer | str]:
    """The answer to each ``(key, target lines, prompt)``, asked through ``provider_id``'s
    request pipeline one at a time, offering :func:`draft_tool` of that length: the parsed
    answer, or the one-line reason a request failed (the provider's error).

    Raises:
        BenchError: the provider cannot start.
    """
    from bench.providers.errors import ProviderError
    from bench.providers.pipeline import ModelRequest, build_pipeline
    from bench.runner.config import RunConfig
    from bench.runner.startup import default_factory

    from bench.providers.local.prompt import EPISODE_NO_CALL_LAYOUT

    # the embedded model answers in a constrained JSON layout: the one whose "no call"
    # carries words (an episode's final answer) lets it answer in text as well
    config = RunConfig(providers=[provider_id], request_timeout_s=timeout_s,
                       max_tokens=max_tokens, no_call_layout=EPISODE_NO_CALL_LAYOUT)
    provider = default_factory(provider_id, config)
    try:
        for lines in sorted({lines for _, lines, _ in prompts}):
            provider.prepare([draft_tool(lines)], variant_key=f"bench-variants-draft-l{lines}",
                             label="the drafting request")
        pipeline = build_pipeline(provider_id, provider, concurrency=1,
                                  attempts=config.attempts or 3)

        async def ask_all() -> list[ParsedAnswer | str]:
            answers: list[ParsedAnswer | str] = []
            try:
                for key, lines, prompt in prompts:
                    request = ModelRequest(messages=[Message(role="user", content=prompt)],
                                           tools=[draft_tool(lines)], trial=0,
                                           variant_key=f"bench-variants-draft-l{lines}",
                                           key=key)
                    try:
                        outcome = await pipeline.complete(request)
                    except ProviderError as exc:
                        answers.append(f"the request failed: {str(exc).splitlines()[0][:160]}")
                        continue
                    answers.append(outcome.response.parsed)
            finally:
                await provider.aclose()
            return answers

        return asyncio.run(ask_all())
    finally:
        provider.close()


def _spec_path(toolset_dir: Path, tool: str) -> Path:
    return toolset_dir / "specs" / f"{tool}.yaml"


def _new_spec_text(tool: Tool) -> str:
    """A minimal spec for an imported tool (name, permission, summary, schema)."""
    summary = next((line.strip() for line in tool.description.splitlines() if line.strip()),
                   tool.name)
    data: dict[str, Any] = {"name": tool.name}
    if tool.permission != "read":
        data["permission"] = tool.permission
    data["summary"] = summary
    data["input_schema"] = tool.input_schema
    return ("# Written by `bench variants draft` from the imported description; "
            "the variants below are\n# the tool's own texts (draft: true until "
            "`bench variants accept`).\n"
            + yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100))


def replace_variants_block(text: str, variants: dict[str, Any]) -> str:
    """``text`` (a spec's YAML) with its top-level ``variants:`` block replaced by
    ``variants`` (appended at the end when absent; removed when empty). Every other line,
    comments included, is kept as it was."""
    out: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        if re.match(r"^variants\s*:", line):
            skipping = True
            continue
        if skipping and line.strip() and not line[0].isspace() and not line.startswith("#"):
            skipping = False
        if not skipping:
            out.append(line)
    body = "".join(out).rstrip("\n") + "\n"
    if variants:
        body += yaml.safe_dump({"variants": variants}, allow_unicode=True, sort_keys=False,
                               width=100)
    return body


def _write_spec(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically, after checking that it loads as a spec (a copy
    of the same name in a temporary folder beside it is loaded first).

    Raises:
        BenchError: the new text is not a valid spec (the file is left unchanged).
    """
    import tempfile

    from bench.runstore import atomic_write_text

    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".check-") as folder:
        check = Path(folder) / path.name
        check.write_text(text, encoding="utf-8")
        try:
            load_spec(check)
        except BenchError as exc:
            raise BenchError(f"the updated spec would not load: {exc.message}", file=path,
                             field=exc.field) from None
    atomic_write_text(path, text)


def _variants_of(path: Path) -> dict[str, Any]:
    """The ``variants:`` block of the spec at ``path`` ({} without the file or the block).

    Raises:
        BenchError: the file is not UTF-8 YAML (names the file and line).
    """
    data = load_yaml(path)[0] if path.is_file() else None
    found = data.get("variants") if isinstance(data, dict) else None
    return dict(found) if isinstance(found, dict) else {}


TOKENS_PER_LINE = 40
"""Tokens budgeted per drafted line: English runs about 4 characters per token (OpenAI,
"What are tokens and how to count them"), so a 100-character line is about 25, plus the JSON
quotes and comma of its item in the ``lines`` array; the rest is headroom."""


def default_max_tokens(lengths: Iterable[int]) -> int:
    """Completion cap per draft: :data:`TOKENS_PER_LINE` for each line the longest length may
    have (:func:`asked_range`), at least 256 (3 lines of JSON framing need well under it)."""
    return max(256, TOKENS_PER_LINE * max(asked_range(n)[1] for n in lengths))


def draft_variants(toolset: str, provider_id: str, lengths: Iterable[int] = DEFAULT_LENGTHS,
                   *, source: str = CURRENT, tools: Iterable[str] | None = None,
                   force: bool = False, root: Path | None = None, timeout_s: float = 120.0,
                   max_tokens: int | None = None) -> DraftResult:
    """Draft ``l<N>`` texts for the tools of ``toolset`` from its ``source`` variant and store
    them in the specs as drafts (``draft: true``, ``drafted_by``, ``drafted_from``).

    Each answer is read by :func:`read_draft`; a tool with any unusable answer keeps its spec
    as it was (its usable drafts are not written either, so that a variant is never drafted
    for some of its lengths only by accident) and is named in :attr:`DraftResult.failed`.

    Args:
        toolset: the toolset's folder name.
        provider_id: any bench provider id (``function:...`` in tests).
        lengths: target lines per description (``l3`` ... ``l50`` by default).
        source: the variant drafted from (default ``current``: the imported text).
        tools: only these tools (default: all).
        force: replace texts already in a spec (a draft, or an accepted one).
        root: the ``descriptions/`` folder (default: the project's).
        timeout_s: seconds per request.
        max_tokens: completion cap per request (default :func:`default_max_tokens`).

    Returns:
        The drafts written and the tools left unchanged with the reason.

    Raises:
        BenchError: an unknown toolset, source variant or tool; lengths outside 1-200; a
            spec that does not load (names its file, line and field); a spec that already has
            a text for a length (without ``force``); a provider that cannot start.
    """
    from bench.descriptions.lock import tool_hashes

    root = root or descriptions_dir()
    base = load_variant(toolset, source, root)
    toolset_dir = root / toolset
    wanted = list(tools) if tools is not None else [t.name for t in base.tools]
    unknown = [name for name in wanted if base.tool(name) is None]
    if unknown:
        raise BenchError(f"no tool {', '.join(unknown)} in variant '{source}' of toolset "
                         f"'{toolset}'")
    lengths = sorted(set(lengths))
    if not lengths or min(lengths) < 1 or max(lengths) > 200:
        raise BenchError("--lengths: give line counts from 1 to 200, e.g. 3,10,30,50")
    jobs = []
    for name in wanted:
        if _spec_path(toolset_dir, name).is_file():  # a broken spec: one line naming its field
            load_spec(_spec_path(toolset_dir, name))
        existing = _variants_of(_spec_path(toolset_dir, name))
        for lines in lengths:
            variant = f"l{lines}"
            if variant in existing and not force:
                entry = existing[variant]
                state = ("a draft" if isinstance(entry, dict) and entry.get("draft")
                         else "an accepted text")
                raise BenchError(f"tool '{name}' already has {state} for {variant} (pass "
                                 "--force to draft it again)",
                                 file=_spec_path(toolset_dir, name), field=f"variants.{variant}")
            jobs.append((name, lines))
    answers = _ask(provider_id, [(f"draft|{toolset}|{name}|l{lines}", lines,
                                  draft_prompt(base.tool(name), lines))  # type: ignore[arg-type]
                                 for name, lines in jobs], timeout_s,
                   max_tokens or default_max_tokens(lengths))
    drafts: list[Draft] = []
    problems: dict[str, list[str]] = {}
    for (name, lines), answer in zip(jobs, answers):
        try:
            if isinstance(answer, str):
                raise ValueError(answer)
            text = read_draft(answer, lines)
        except ValueError as exc:
            problems.setdefault(name, []).append(f"l{lines}: {exc}")
            continue
        drafts.append(Draft(name, f"l{lines}", lines, count_lines(text), text))
    for name in wanted:
        if name in problems:
            continue
        tool = base.tool(name)
        assert tool is not None
        path = _spec_path(toolset_dir, name)
        text = path.read_text(encoding="utf-8") if path.is_file() else _new_spec_text(tool)
        variants = _variants_of(path)
        origin = f"{source} sha256:{tool_hashes(tool)['sha256'][:12]}"
        for draft in (d for d in drafts if d.tool == name):
            variants[draft.variant] = {"description": draft.text, "draft": True,
                                       "drafted_by": provider_id, "drafted_from": origin}
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            _write_spec(path, replace_variants_block(text, variants))
        except BenchError as exc:  # the drafts would make the spec invalid: left unchanged
            problems[name] = [exc.message]
    return DraftResult(drafts=[d for d in drafts if d.tool not in problems],
                       failed={name: "; ".join(found) for name, found in problems.items()})


def accept_drafts(toolset: str, variants: Iterable[str] | None = None,
                  tools: Iterable[str] | None = None, root: Path | None = None
                  ) -> list[tuple[str, str]]:
    """Mark drafts reviewed: ``draft: true`` becomes false with ``reviewed_at`` set.

    Args:
        toolset: the toolset's folder name.
        variants: only these variants (default: every drafted one).
        tools: only these tools (default: all).
        root: the ``descriptions/`` folder (default: the project's).

    Returns:
        ``(tool, variant)`` of each draft accepted.

    Raises:
        BenchError: an unknown toolset (:func:`check_toolset`), the toolset has no specs,
            or nothing matched (names what was asked).
    """
    root = root or descriptions_dir()
    paths = sorted((check_toolset(toolset, root) / "specs").glob("*.yaml"))
    if not paths:
        raise BenchError(f"toolset '{toolset}' has no specs: nothing was drafted (bench "
                         f"variants draft --toolset {toolset} --provider <id>)",
                         file=root / toolset)
    only_variants = set(variants) if variants else None
    only_tools = set(tools) if tools else None
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    accepted = []
    for path in paths:
        if only_tools is not None and path.stem not in only_tools:
            continue
        found = _variants_of(path)
        changed = False
        for name, entry in found.items():
            if not isinstance(entry, dict) or not entry.get("draft"):
                continue
            if only_variants is not None and name not in only_variants:
                continue
            entry["draft"] = False
            entry["reviewed_at"] = now
            accepted.append((path.stem, name))
            changed = True
        if changed:
            _write_spec(path, replace_variants_block(path.read_text(encoding="utf-8"), found))
    if not accepted:
        asked = ", ".join(sorted(only_variants or [])) or "any variant"
        raise BenchError(f"no draft to accept in toolset '{toolset}' for {asked}")
    return accepted
