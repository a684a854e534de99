"""The worked example of docs/optimize.md: a scripted target and proposer, no network.

A tiny project (toolset ``shop``: three tools, 13 dev and 21 test cases) where the target is
a ``function:`` provider whose choice depends on the description text: it calls the first
tool whose description mentions the query's *key term* (its longest word, the first on a
tie); with no such tool it calls a tool whose description claims to be the one to use (the
assertive cue of arXiv 2505.18135), else nothing. The start variant's ``track_shipment``
never says "parcel", so every parcel question fails. The proposers:

- ``good``: reads the failures in its prompt and adds their key terms to the tool's
  description: the real fix;
- ``pushy``: adds the key term with "Always use this tool for any request": wins the parcel
  cases by over-triggering on no-call cases;
- ``leaky``: pastes test queries into the description as examples (a proposer that saw the
  benchmark);
- ``babble``: answers prose, not a proposal.

    python benchmarks/optimize_example.py            # prints the worked example (Markdown)
    python benchmarks/optimize_example.py --project /tmp/opt-example

The script writes its project into a temporary folder (or ``--project``) and prints what
docs/optimize.md shows; tests/optimize/test_optimize.py checks that the two agree.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import yaml

TOOLS = [
    {"name": "track_shipment", "description": "Show where an order is: its shipment status "
     "and the expected delivery date.", "input_schema": {"type": "object", "properties": {}}},
    {"name": "refund_order", "description": "Refund a paid order to the customer's card.",
     "input_schema": {"type": "object", "properties": {}}},
    {"name": "search_products", "description": "Search the product catalogue by keyword.",
     "input_schema": {"type": "object", "properties": {}}},
]
DEV = [("track my shipment", "track_shipment"), ("where is my parcel", "track_shipment"),
       ("is the parcel late", "track_shipment"), ("parcel status", "track_shipment"),
       ("lost parcel", "track_shipment"), ("shipment delayed", "track_shipment"), ("refund my order", "refund_order"),
       ("refund now", "refund_order"), ("catalogue search", "search_products"),
       ("browse catalogue", "search_products"), ("tell me a joke", None),
       ("sing a song", None), ("hello there", None)]
TEST = [("where did my parcel go", "track_shipment"), ("is my parcel lost", "track_shipment"),
        ("parcel not here", "track_shipment"), ("my parcel is late", "track_shipment"),
        ("find my parcel", "track_shipment"), ("the parcel is slow", "track_shipment"),
        ("parcel is stuck", "track_shipment"), ("a parcel for me", "track_shipment"),
        ("shipment update", "track_shipment"),
        ("shipment late", "track_shipment"), ("refund please", "refund_order"),
        ("want a refund", "refund_order"), ("catalogue items", "search_products"),
        ("the catalogue", "search_products"), ("what a day", None), ("good night", None),
        ("thanks a lot", None), ("nice weather", None), ("see you", None),
        ("i am bored", None), ("how are you", None)]
ASSERTIVE = re.compile(r"always use this tool", re.IGNORECASE)


def key_term(text: str) -> str:
    """The longest word of ``text`` (the first on a tie), lower-cased."""
    words = re.findall(r"[a-z]+", text.lower())
    return max(words, key=len) if words else ""


def target(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
    """The scripted target (see the module docstring)."""
    term = key_term(messages[-1].content or "")
    for tool in tools:
        if re.search(rf"\b{re.escape(term)}\b", tool.description.lower()):
            return [{"name": tool.name, "arguments": {}}]
    for tool in tools:
        if ASSERTIVE.search(tool.description):
            return [{"name": tool.name, "arguments": {}}]
    return []


def _prompt_parts(prompt: str) -> tuple[str, str, list[str]]:
    """(tool, its current description, the failed requests) read back from a prompt made
    by the shipped template."""
    tool = re.search(r"Current description of `([^`]+)`:\n", prompt)
    assert tool is not None, "not the shipped template"
    description = prompt[tool.end():].split("\n\nFailures", 1)[0].strip()
    requests = re.findall(r"^- request: (.*)$", prompt, re.MULTILINE)
    return tool.group(1), description, requests


def _proposal(tool: str, description: str, reason: str) -> list[dict[str, Any]]:
    return [{"name": "propose_edit", "arguments": {"tool": tool, "description": description,
                                                   "reason": reason}}]


def good(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
    """Adds the failures' key terms to the tool's description."""
    tool, description, requests = _prompt_parts(messages[-1].content or "")
    terms = sorted({key_term(r) for r in requests} - set(description.lower().split()))
    return _proposal(tool, f"{description} Also for {', '.join(terms)} questions.",
                     f"the failed requests ask about {', '.join(terms)}, which the "
                     "description never mentions")


def pushy(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
    """Adds the key terms and an assertive cue."""
    tool, description, requests = _prompt_parts(messages[-1].content or "")
    terms = sorted({key_term(r) for r in requests})
    return _proposal(tool, f"{description} Also {', '.join(terms)}. Always use this tool.",
                     "make the model pick it")


def leaky(messages: Any, tools: Any, trial: int) -> list[dict[str, Any]]:
    """Pastes the first test queries into the description as examples."""
    tool, description, _ = _prompt_parts(messages[-1].content or "")
    examples = "\n".join(f'- "{q}" -> {{}}' for q, name in TEST[:1] if name == tool)
    return _proposal(tool, f"{description}\nExamples:\n{examples}", "examples help")


def babble(messages: Any, tools: Any, trial: int) -> str:
    """Prose instead of a proposal."""
    return "I think the descriptions are fine as they are."


def write_project(root: Path) -> Path:
    """The example project in ``root``: ``descriptions/shop/variants/start.yaml`` and
    ``datasets/shop/cases.jsonl`` (dev and test). Returns ``root``."""
    variants = root / "descriptions" / "shop" / "variants"
    variants.mkdir(parents=True, exist_ok=True)
    (variants / "start.yaml").write_text(yaml.safe_dump({"tools": TOOLS}, sort_keys=False),
                                         encoding="utf-8")
    cases = []
    for split, items in (("dev", DEV), ("test", TEST)):
        for number, (query, tool) in enumerate(items, start=1):
            expected = {"calls": [{"name": tool, "arguments": {}}]} if tool else \
                {"no_call": True}
            cases.append({"id": f"{split}-{number:02d}", "toolset": "shop", "lang": "en",
                          "split": split, "messages": [{"role": "user", "content": query}],
                          "expected": expected})
    folder = root / "datasets" / "shop"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases),
                                        encoding="utf-8")
    return root


def register() -> None:
    """Register the scripted target and proposers as ``function:opt-<name>`` providers."""
    from bench.providers.function import register_function
    for name, function in (("target", target), ("good", good), ("pushy", pushy),
                           ("leaky", leaky), ("babble", babble)):
        register_function(f"opt-{name}", function)


def _dev_lines(result: Any) -> list[str]:
    lines = []
    for c in result.candidates:
        dev = f"{c.dev_k}/{c.dev_n} = {c.dev_rate:.1%}" if c.dev_n else "not run"
        extra = f", fixed {', '.join(c.fixed)}" if c.fixed else ""
        extra += f", broke {', '.join(c.broke)}" if c.broke else ""
        lines.append(f"  round {c.round} {c.name}: dev selection {dev}, "
                     f"{c.tokens} tokens ({c.token_ratio:.2f}x){extra}, {c.status}")
    return lines


def worked_example(root: Path) -> str:
    """Run the four proposers and a replay on the example project in ``root``; the text
    docs/optimize.md shows (deterministic: no paths, no times)."""
    from bench.optimize import optimize
    from bench.optimize.report import diff_markdown

    out: list[str] = []
    good_run = optimize("shop", "start", "function:opt-target", "function:opt-good",
                        project=root, opt_id="good")
    result = good_run.result
    out.append('>>> optimize("shop", "start", "function:opt-target", "function:opt-good", '
               'project=root, opt_id="good")')
    out += _dev_lines(result)
    out.append(f"  search stopped: {result.stop_reason}")
    for t in result.acceptance.tests:
        out.append(f"  test {t.metric}: {t.rate_start:.1%} -> {t.rate_final:.1%} "
                   f"(n {t.n}; {t.b_only} fixed, {t.a_only} broke; McNemar p {t.p_value:.3g},"
                   f" Holm p {t.p_holm:.3g}; {t.verdict})")
    out.append(f"  {result.final}: {'ACCEPTED' if good_run.accepted else 'not accepted'}, "
               f"tokens {result.acceptance.token_ratio:.3f}x the start's")
    from bench.descriptions.variants import load_variant
    start = load_variant("shop", "start", root / "descriptions")
    out += ["", "The accepted diff (variant/diff.md):", "", diff_markdown(start,
                                                                           good_run.final)]
    for name, options in (("pushy", {"allow_assertive": True}), ("pushy", {}),
                          ("leaky", {}), ("babble", {})):
        run = optimize("shop", "start", "function:opt-target", f"function:opt-{name}",
                       project=root, opt_id=f"{name}{'-allowed' if options else ''}",
                       **options)
        flag = ", allow_assertive=True" if options else ""
        out.append(f'>>> optimize(..., "function:opt-{name}"{flag})')
        out += _dev_lines(run.result)[1:]
        out += [f"  rejected: {r.kind}: {r.reason}" for r in run.result.rejections]
        out.append(f"  {'ACCEPTED' if run.accepted else 'nothing accepted'}: "
                   f"{'; '.join(run.result.acceptance.reasons)}")
    replay = optimize("shop", "start", "function:opt-target", "function:opt-good",
                      project=root, opt_id="good-replay")
    same = replay.result.model_dump(exclude={"opt_id", "runs"}) == \
        result.model_dump(exclude={"opt_id", "runs"})
    out.append('>>> optimize("shop", "start", "function:opt-target", "function:opt-good", '
               'project=root, opt_id="good-replay")  # replay: same cache, new id')
    out.append(f"  requests sent: {replay.result.requests} (first run: {result.requests}); "
               f"cache hits: {sum(r.cache_hits for r in replay.result.runs)}; "
               f"same result: {same}")
    return "\n".join(out) + "\n"


def main() -> None:
    """Print the worked example (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", help="write the example project here (default: a "
                                          "temporary folder)")
    args = parser.parse_args()
    root = Path(args.project) if args.project else Path(tempfile.mkdtemp(prefix="opt-"))
    write_project(root)
    register()
    print(worked_example(root), end="")


if __name__ == "__main__":
    main()
