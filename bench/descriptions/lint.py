"""``bench lint``: rules for tool descriptions and their JSON Schemas.

Each rule has a stable code and name, a severity (``error`` fails ``bench lint``; ``warning``
does not) and a fix hint. Rendered variants move parameter descriptions from the schema into
the prose, so parameter rules look at both: a parameter counts as described when its schema has
a ``description`` or the tool's prose names it.

Provider rules (``openai-strict``, ``gemini-schema``) ask the API family's schema dialect what
it rejects (:mod:`bench.descriptions.schema_dialects`, which cites the sources), the same rules
the provider adapters rewrite schemas by.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from bench.descriptions.schema_dialects import dialect, schema_types, walk_schema
from bench.descriptions.variants import Variant, count_lines
from bench.models import Tool
from bench.plural import count

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class Rule:
    """A lint rule: stable ``code`` and ``name``, ``severity``, one-line ``summary``."""

    code: str
    name: str
    severity: str
    summary: str


RULES: dict[str, Rule] = {r.name: r for r in (
    Rule("BL001", "no-purpose", ERROR, "the description does not say what the tool does"),
    Rule("BL002", "no-when-to-use", WARNING, "the description does not say when to use it"),
    Rule("BL003", "param-no-description", WARNING, "a parameter is described nowhere"),
    Rule("BL004", "closed-set-no-enum", WARNING, "a closed set of values without `enum`"),
    Rule("BL005", "number-no-bounds", WARNING, "a number without minimum or maximum"),
    Rule("BL006", "default-not-stated", WARNING, "an optional parameter's default is not stated"),
    Rule("BL007", "implementation-leak", WARNING, "URLs, file paths or internal endpoints"),
    Rule("BL008", "repeats-name", ERROR, "the description only repeats the tool's name"),
    Rule("BL009", "length-budget", WARNING, "description lines outside the budget"),
    Rule("BL010", "overlapping-tools", WARNING, "two tools' descriptions overlap strongly"),
    Rule("BL011", "openai-strict", WARNING, "OpenAI strict mode rejects the schema as is"),
    Rule("BL012", "gemini-schema", WARNING, "Gemini's Schema subset rejects the schema"),
    Rule("BL013", "mirrors-test-case", ERROR,
         "description text mirrors a test case (bench lint --dataset)"),
    Rule("BL014", "translated-example", WARNING,
         "an example in another language has a test case's exact arguments: a translation?"),
    Rule("BL015", "label-call-fails", WARNING,
         "a label's own call returns an error: its rows get no exec match (bench lint "
         "--dataset; bench.executor.label_results); an error for a label run on bench's "
         "reference backend, a warning for a failure recorded on a user's system"),
    Rule("BL016", "paraphrases-test-case", WARNING,
         "an example or edge case paraphrases a test case (embedding score; bench lint "
         "--dataset; bench.descriptions.paraphrase)"),
    Rule("BL017", "copies-drafting-prompt", WARNING,
         "a line holds the wording of bench variants draft's prompt (a drafted text that "
         "copied its instructions)"),
    Rule("BL018", "length-order", WARNING,
         "a longer length (l<N>) of a tool has fewer lines than a shorter one"),
)}


@dataclass(frozen=True)
class LintConfig:
    """Thresholds. ``min_lines``/``max_lines``: description budget in non-blank lines;
    ``overlap``: TF-IDF cosine at or above which two tools overlap (0-1)."""

    min_lines: int = 15
    max_lines: int = 30
    overlap: float = 0.5


#: A per-tool check added with :func:`register_rule`: ``(tool, config) -> iterable of
#: (param or None, message, hint)``, one item per violation.
ToolCheck = Callable[[Tool, LintConfig], Iterable[tuple[str | None, str, str]]]
_ADDED_CHECKS: dict[str, ToolCheck] = {}


def register_rule(rule: Rule, check: ToolCheck) -> None:
    """Add a rule that :func:`lint_variant` (and so ``bench lint``) runs on every tool, after
    the built-in rules. How-to: docs/extending.md#add-a-lint-rule.

    Args:
        rule: the rule's code (``BL`` + digits for rules shipped with bench), name, severity
            (``error`` or ``warning``) and summary.
        check: called once per tool of every linted variant.

    Raises:
        ValueError: the name or code is already taken, or the severity is unknown.
    """
    if rule.severity not in (ERROR, WARNING):
        raise ValueError(f"rule {rule.code}: severity must be '{ERROR}' or '{WARNING}', "
                         f"got {rule.severity!r}")
    taken = [r for r in RULES.values() if r.name == rule.name or r.code == rule.code]
    if taken:
        raise ValueError(f"rule {rule.code} {rule.name}: code or name already used by "
                         f"{taken[0].code} {taken[0].name}")
    RULES[rule.name] = rule
    _ADDED_CHECKS[rule.name] = check


@dataclass(frozen=True)
class Finding:
    """One rule violation; ``param`` is a parameter path (``address.city``) or None."""

    code: str
    rule: str
    severity: str
    toolset: str
    variant: str
    tool: str
    param: str | None
    message: str
    hint: str

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return asdict(self)


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9']*|[0-9]+|[\u3400-\u9fff]")
_STOP = set("a an the this that these it its is are be to of for in on at by with and or "
            "from as tool function use used using can will".split())
_WHEN = re.compile(r"\buse (?:this|it|when|for|only|to|if)\b|\bwhen (?:the )?(?:user|customer|"
                   r"you)\b|\bdo not use\b|\bdon'?t use\b|\bnot for\b|\bonly (?:when|if|for)\b|"
                   r"\bcall (?:this|it) (?:when|if)\b|\binstead\b|用于|当用户|适用|不要用|请勿|"
                   r"不适用", re.IGNORECASE)
_DEFAULT = re.compile(r"\bdefaults?\b|\bif omitted\b|\bif not (?:given|set|provided)\b|"
                      r"\bwhen omitted\b|默认|缺省", re.IGNORECASE)
_CLOSED_SET = re.compile(r"\bone of\b|\beither\b|(['\"`])[^'\"`\s]{1,30}\1\s*(?:,|/|\||or)\s*"
                         r"(['\"`])[^'\"`\s]{1,30}\2|之一", re.IGNORECASE)
_EXAMPLE = re.compile(r"e\.g\.|\bfor example\b|\bsuch as\b|\blike\b|例如|比如", re.IGNORECASE)
_LEAKS = (
    ("URL", re.compile(r"\b(?:https?|ftp|s3|gs)://\S+", re.IGNORECASE)),
    ("host", re.compile(r"\blocalhost\b|\b\d{1,3}(?:\.\d{1,3}){3}\b|\b[\w-]+\.(?:internal|"
                        r"local|corp|lan)\b|svc\.cluster\b")),
    ("endpoint", re.compile(r"\b(?:GET|POST|PUT|PATCH|DELETE)\s+/\S*")),
    ("path", re.compile(r"(?<![\w/.])(?:/[A-Za-z_][\w.-]*){2,}/?|\b[A-Za-z]:\\[\w\\.-]+|"
                        r"(?<![\w/])~/[\w./-]+")),
    ("source file", re.compile(r"\b[\w-]+\.(?:py|js|ts|java|go|rb|php|sql|sh|yaml|yml|ini|"
                               r"conf|env)\b")),
)


def _closed_set(text: str, params: Sequence[str] = ()) -> bool:
    """True when ``text`` lists the allowed values ('one of', 'a' / 'b'): not examples
    ('e.g. "x" or "y"'), and not a choice among parameters ('at least one of a, b')."""
    for match in _CLOSED_SET.finditer(text):
        before, after = text[max(0, match.start() - 25):match.start()], text[match.end():][:80]
        if _EXAMPLE.search(before) or re.search(r"\b(?:at least|at most|exactly)\s*$", before):
            continue
        if any(_mentioned(p, after) for p in params):
            continue
        return True
    return False


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def _name_words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return {_stem(w) for w in _words(re.sub(r"[_.\-]", " ", spaced))}


def _first_sentence(text: str) -> str:
    return re.split(r"(?<=[.!?。！？])\s|\n|[。！？]", text.strip(), maxsplit=1)[0]


def _top_params(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], bool]]:
    required = set(schema.get("required", []))
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield name, sub, name in required


def _mentioned(name: str, text: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text) is not None


_PARAM_LINE = re.compile(r"\s*(?:[-*•]\s*)?`?([A-Za-z_][\w.]*)`?\s*[(:：]")


def _param_text(name: str, sub: dict[str, Any], description: str,
                params: Sequence[str] = ()) -> str:
    """What the model reads about one parameter: its schema description and prose lines
    naming it. Left out: example lines (with ``{`` or ``->``: their quoted values are
    examples, not the allowed set) and lines that define another parameter (``- other: ...``).
    """
    def about_other(line: str) -> bool:
        head = _PARAM_LINE.match(line)
        return head is not None and head.group(1) != name and head.group(1) in params

    lines = [ln for ln in description.splitlines() if _mentioned(name, ln)
             and not re.search(r"\{|->|=>", ln) and not about_other(ln)]
    return " ".join([str(sub.get("description") or "")] + lines)


def _rule_texts(tool_name: str, description: str, schema: dict[str, Any], cfg: LintConfig
                ) -> Iterator[tuple[str, str | None, str, str]]:
    """(rule, param, message, hint) of the per-tool prose rules."""
    words = _words(description)
    content = [w for w in words if w not in _STOP]
    if content and {_stem(w) for w in content} <= _name_words(tool_name):
        yield ("repeats-name", None, f"'{description.strip()}' only restates '{tool_name}'",
               "say what the tool returns or changes, for which object, and its limits")
    if len(_words(_first_sentence(description))) < 3:
        yield ("no-purpose", None, "no first sentence saying what the tool does",
               "start with one sentence: what the tool does and what it returns")
    if description.strip() and not _WHEN.search(description):
        yield ("no-when-to-use", None, "no 'use when' / 'do not use' guidance",
               "add when to use it and when to use which other tool instead")
    lines = count_lines(description)
    if not cfg.min_lines <= lines <= cfg.max_lines:
        yield ("length-budget", None, f"{count(lines, 'description line')} (budget {cfg.min_lines}-"
               f"{cfg.max_lines})", "shorten to the essentials" if lines > cfg.max_lines
               else "add parameters, constraints, business context and an example")
    texts = [(None, description)] + [(p, str(s.get("description") or ""))
                                     for p, s in walk_schema(schema) if p]
    for param, text in texts:
        for kind, pattern in _LEAKS:
            match = pattern.search(text)
            if match:
                yield ("implementation-leak", param, f"{kind} '{match.group(0)[:60]}' in the "
                       "description", "describe behaviour the model needs; keep hosts, paths "
                       "and endpoints in code")
                break


def _rule_params(description: str, schema: dict[str, Any]
                 ) -> Iterator[tuple[str, str | None, str, str]]:
    names = list(schema.get("properties") or {})
    for name, sub, required in _top_params(schema):
        text = _param_text(name, sub, description, names)
        if not sub.get("description") and not _mentioned(name, description):
            yield ("param-no-description", name, f"parameter '{name}' is described nowhere",
                   "say what the value means, its format and an example")
        if "string" in schema_types(sub) and "enum" not in sub and "const" not in sub and \
                _closed_set(text, [p for p in schema.get("properties", {}) if p != name]):
            yield ("closed-set-no-enum", name, f"'{name}' reads as a closed set of values but "
                   "has no enum", "list the values in the schema's enum (exact case)")
        if not required and "default" not in sub and not _DEFAULT.search(text):
            yield ("default-not-stated", name, f"optional '{name}' has no stated default",
                   "add 'default' to the schema or say what happens when it is omitted")
    for path, sub in walk_schema(schema):
        if path and schema_types(sub) & {"integer", "number"} and not any(
                k in sub for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")):
            yield ("number-no-bounds", path, f"number '{path}' has no minimum or maximum",
                   "add minimum/maximum (e.g. page >= 1, limit <= 100)")


def _tokens(text: str) -> list[str]:
    """TF-IDF terms: lower-case words of two letters or more (stop words out), CJK bigrams."""
    terms = [w for w in _words(text) if len(w) > 1 and w not in _STOP and not w.isdigit()]
    cjk = re.findall(r"[\u3400-\u9fff]+", text)
    terms += [run[i:i + 2] for run in cjk for i in range(len(run) - 1)]
    return terms


def tfidf_cosine(texts: Sequence[str]) -> list[list[float]]:
    """Pairwise cosine similarity of TF-IDF vectors (raw term counts, smoothed idf
    ``ln((1+n)/(1+df)) + 1``, L2-normalised: scikit-learn's ``TfidfVectorizer`` defaults, which
    are used when scikit-learn is installed)."""
    try:
        from sklearn.feature_extraction.text import TfidfVectorizer
    except ImportError:
        TfidfVectorizer = None
    if TfidfVectorizer is not None:
        matrix = TfidfVectorizer(analyzer=_tokens).fit_transform(texts)
        # a sparse float matrix: its dense rows are lists of floats
        similarity: list[list[float]] = (matrix @ matrix.T).toarray().tolist()
        return similarity
    docs = [Counter(_tokens(t)) for t in texts]
    n = len(docs)
    df = Counter(term for doc in docs for term in doc)
    idf = {term: math.log((1 + n) / (1 + count)) + 1 for term, count in df.items()}
    vectors = []
    for doc in docs:
        vec = {term: tf * idf[term] for term, tf in doc.items()}
        norm = math.sqrt(sum(v * v for v in vec.values())) or 1.0
        vectors.append({term: v / norm for term, v in vec.items()})
    return [[sum(w * b.get(t, 0.0) for t, w in a.items()) for b in vectors] for a in vectors]


def lint_variant(variant: Variant, config: LintConfig = LintConfig()) -> list[Finding]:
    """All findings for one variant, in tool order then rule code.

    Returns:
        findings (empty when clean).
    """
    findings: list[Finding] = []

    def add(rule_name: str, tool: str, param: str | None, message: str, hint: str) -> None:
        rule = RULES[rule_name]
        findings.append(Finding(rule.code, rule.name, rule.severity, variant.toolset,
                                variant.name, tool, param, message, hint))

    for tool in variant.tools:
        for rule_name, param, message, hint in _rule_texts(tool.name, tool.description,
                                                           tool.input_schema, config):
            add(rule_name, tool.name, param, message, hint)
        copied = _prompt_copies(tool.description)
        if copied:
            add("copies-drafting-prompt", tool.name, None, copied,
                "rewrite the line in the tool's own words, or draft the length again "
                "(bench variants draft --force --lengths N --tools TOOL)")
        for rule_name, param, message, hint in _rule_params(tool.description, tool.input_schema):
            add(rule_name, tool.name, param, message, hint)
        strict = dialect("openai-strict").problems(tool.input_schema)
        if strict:
            add("openai-strict", tool.name, None, _first_problems(strict),
                "send additionalProperties: false, list every property in required and make "
                "optional ones nullable (type [T, 'null'])")
        gemini = dialect("gemini").problems(tool.input_schema)
        if gemini:
            add("gemini-schema", tool.name, None, _first_problems(gemini),
                "inline $ref, drop unsupported keywords (state them in prose) or send the "
                "schema as parametersJsonSchema")
        for rule_name, check in list(_ADDED_CHECKS.items()):
            for param, message, hint in check(tool, config):
                add(rule_name, tool.name, param, message, hint)
    tools = list(variant.tools)
    if len(tools) > 1:
        sims = tfidf_cosine([t.description for t in tools])
        for i in range(len(tools)):
            for j in range(i + 1, len(tools)):
                if sims[i][j] >= config.overlap:
                    add("overlapping-tools", tools[i].name, None,
                        f"description overlaps '{tools[j].name}' (TF-IDF cosine "
                        f"{sims[i][j]:.2f} >= {config.overlap})",
                        "say in each when to use the other one instead, and what differs")
    order = {t.name: i for i, t in enumerate(tools)}
    return sorted(findings, key=lambda f: (order.get(f.tool, 0), f.code, f.param or ""))


def _prompt_copies(description: str) -> str | None:
    """BL017's message: the lines of ``description`` that hold the drafting prompts' wording
    (:func:`bench.descriptions.draft_wording.prompt_wording`), the first two quoted, or None."""
    from bench.descriptions.draft_wording import prompt_wording

    found = [(line.strip(), words) for line in description.splitlines()
             if (words := prompt_wording(line)) is not None]
    if not found:
        return None
    shown = "; ".join(f"'{line[:70]}' ('{words}')" for line, words in found[:2])
    more = f"; +{len(found) - 2} more" if len(found) > 2 else ""
    return f"{count(len(found), 'line')} copied from the drafting prompt: {shown}{more}"


_LENGTH = re.compile(r"^l(\d+)$")


def length_order_findings(variants: Sequence[Variant]) -> list[Finding]:
    """BL018: for each tool, a length variant (``l<N>``) with fewer non-empty lines than a
    shorter length of the same toolset (``l50`` 5 lines, ``l10`` 8: a length left undrafted
    renders from a spec with empty sections, or a draft came out short), so the length
    ablation would measure the wrong order. One finding per longer variant and tool, naming
    the shorter length it undercuts the most.

    Args:
        variants: the variants of one toolset (others than ``l<N>`` are ignored).
    """
    lengths = sorted(((int(m.group(1)), v) for v in variants if (m := _LENGTH.match(v.name))),
                     key=lambda item: item[0])
    rule = RULES["length-order"]
    found = []
    for i, (target, variant) in enumerate(lengths):
        for tool, lines in variant.line_counts.items():
            shorter = [(other.line_counts[tool], n) for n, other in lengths[:i]
                       if n < target and other.line_counts.get(tool, 0) > lines]
            if not shorter:
                continue
            most, name = max(shorter)
            found.append(Finding(rule.code, rule.name, rule.severity, variant.toolset,
                                 variant.name, tool, None,
                                 f"{count(lines, 'line')}, fewer than l{name} ({most})",
                                 f"draft it (bench variants draft --lengths {target} --tools "
                                 f"{tool}; --force over a text it has) or fill the sections "
                                 f"l{target} adds in its spec"))
    return found


def _first_problems(problems: list[tuple[str, str]], shown: int = 4) -> str:
    """``"path: message; ...; +N more"`` for the first ``shown`` (path, message) pairs."""
    text = "; ".join(f"{path}: {message}" for path, message in problems[:shown])
    return text + (f"; +{len(problems) - shown} more" if len(problems) > shown else "")


def leak_findings(variant: Variant, cases: Sequence[Any], datasheet: Any = None,
                  everywhere: Any = None) -> list[Finding]:
    """BL013/BL014 findings of ``variant`` against a dataset's ``test`` cases
    (:mod:`bench.descriptions.leaks`).

    Args:
        variant: the variant to check.
        cases: the cases it must not mirror (:class:`bench.models.Case`; pass the ``test``
            split, or every case of a dataset without splits).
        datasheet: the dataset's README (a ``pathlib.Path``) whose ``## Reviewed
            cross-language mirrors`` section lists translated mirrors; None: none.
        everywhere: the :class:`bench.descriptions.containment.TestIndex` the
            ``containment`` signal searches (every test split of the project); None:
            ``cases``. Pass an empty index to leave the signal to another call.
    """
    from bench.descriptions.leaks import find_leaks, reviewed_mirrors

    reviewed = reviewed_mirrors(datasheet) if datasheet is not None else {}
    found = []
    for leak in find_leaks(variant, cases, reviewed, everywhere=everywhere):
        rule = RULES["translated-example" if leak.is_hint else "mirrors-test-case"]
        what = {"near-copy": f"nearly the same as the query (similarity {leak.score:.2f}, "
                             "IDs and numbers masked)",
                "trigger-phrase": f"quotes the query's phrase '{leak.evidence}'",
                "reviewed": "a reviewed cross-language mirror (datasheet)",
                "argument-copy": "has the case's exact expected arguments",
                "containment": f"contains the query ({leak.score:.0%} of its n-grams; "
                               f"'{leak.evidence[:80]}')"}[leak.signal]
        case = f"{leak.case_id} ({leak.dataset})" if leak.dataset else leak.case_id
        found.append(Finding(rule.code, rule.name, rule.severity, variant.toolset,
                             variant.name, leak.tool, _param(leak.section),
                             f"{leak.section} line '{leak.text[:80]}' mirrors test case "
                             f"{case}: {what}",
                             "rewrite the line from dev cases only, or move the case to dev "
                             "(bench split --force-dev)"))
    return found


def _param(section: str) -> str | None:
    """The parameter path (``address.city``) of a schema location
    (``input_schema.properties.address.properties.city.description``), else None."""
    if not section.startswith("input_schema."):
        return None
    names = re.findall(r"(?:^|\.)properties\.([^.\[]+)", section[len("input_schema"):])
    return ".".join(names) or None
