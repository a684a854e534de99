"""Secrets never reach a file bench writes or a message it prints (issue 19, item 3), and
redaction never rewrites ordinary data.

Where. :func:`redact` works on *free text* only: messages printed (:class:`RedactingStream`
wraps stdout and stderr in :func:`bench.cli.main`), error texts, and what a provider sent back
(a raw answer, a request id). Stored records are redacted field by field
(:func:`redact_fields`) at the paths that hold such text (:data:`ROW_FREE_TEXT`,
:data:`MANIFEST_FREE_TEXT`, :data:`ANSWER_FREE_TEXT`); identifiers, keys, configuration and
data (run, case and provider ids, dataset, toolset, variant, labels, parsed calls, the
manifest's config) are never touched, so that a stored run resumes, merges and replays as it
ran. A provider id whose base URL carries credentials is made public once, where it is read
(:func:`public_provider_id`), and that public id is the one everything stores. One setting is
a command line, free text: the MCP server's (``config.mcp_server``), often given a token; a
resume of a run whose stored one lost a secret takes it again from ``--execute-mcp``.

What :func:`redact` replaces by ``***``:

- known secret values (literally):

  - the API keys bench reads (:data:`KEY_VARIABLES`: ``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``GOOGLE_API_KEY``, ``OPENAI_COMPAT_API_KEY``),
    :data:`MIN_KEY_CHARS` (8) characters or more: shorter values (``x``, ``EMPTY``, ``none``,
    what local OpenAI-compatible servers accept) are no credential, and 8 characters is the
    shortest memorized secret NIST SP 800-63B allows;
  - the value of any other environment variable whose name has a ``KEY``, ``APIKEY``,
    ``TOKEN``, ``SECRET`` or ``PASSWORD``/``PASSWD`` part (not when its last part is
    ``FILE``, ``PATH``, ``DIR`` or ``ID``: a place or a public id), only when it looks
    generated: :data:`MIN_SECRET_CHARS` (20) characters or more, without
    whitespace. bench never sends these, so they can only turn up by coincidence, and a
    shorter value is a word (``MYSQL_PASSWORD=ecommerce`` named a dataset), while a generated
    secret is longer: 128 random bits are 22 characters in base64 and 32 in hex, and issued
    tokens are longer still (GitHub 40, Hugging Face 37, AWS secret keys 40);
  - the user, password and Basic-auth form of every credentialed URL, and the value of every
    secret query parameter, seen by :func:`public_provider_id` (:data:`MIN_LITERAL_CHARS`, 6,
    or more);
  - each of these values of 16 characters or more also when broken across lines (whitespace,
    or the ``\\n`` escape of a JSON string, between its characters) with its first or last 6
    characters whole: a wrapped error text;

- secret shapes:

  - URL userinfo: ``http://user:pass@host`` -> ``http://***@host`` (RFC 3986 section 3.2.1
    deprecates passwords in URLs; httpx sends them as Basic auth);
  - the value of secret-looking headers and fields (``Authorization``,
    ``Proxy-Authorization``, ``x-api-key``, ``x-goog-api-key``, ``api_key``/``api-key``/
    ``apikey``, ``access_token``, ``password``, ``secret``, ``aws_secret_access_key``,
    ``aws_session_token``: the names AWS's shared credentials file and environment variables
    use, AWS CLI User Guide "Configuration and credential file settings"), in JSON (``"x-api-key": "..."``),
    header (``x-api-key: ...``) or query (``api_key=...``) form, so that a 401 body that
    echoes the request's headers is covered; in a JSON object given as data (a raw answer),
    the string value of a field of one of these names;
  - query parameters named ``key`` or ``token`` (``?key=...``, ``&token=...``);
  - ``Bearer``/``Basic`` credentials that look like one (a digit, one of ``-._~+/=``, a
    lower-case letter then an upper-case one, or 20 characters or more: "basic question"
    stays), and key-shaped tokens of a credible
    length: ``sk-`` or ``AIza`` followed by :data:`MIN_SHAPED_KEY_CHARS` (20) characters or
    more (real ones have 35 to 150; ``case_sk-learn-fit-001`` is an id, not a key);
  - AWS access key ids: ``AKIA`` or ``ASIA`` and 16 upper-case letters or digits, alone
    (``AKIAIOSFODNN7EXAMPLE`` -> ``AKIA***``; AWS IAM User Guide, "IAM identifiers"). An AWS
    secret access key (40 characters of base64) has no shape of its own, so it is redacted
    where it is named (``aws_secret_access_key = ...``) or as a secret-named variable's
    value;
  - the issued-token shapes of :data:`TOKEN_SHAPES` (GitHub ``ghp_...``/``github_pat_...``,
    Slack ``xoxb-...``, GitLab ``glpat-...``, Hugging Face ``hf_...``, a JSON Web Token
    ``eyJ...``), whole: an MCP server that echoes its ``--token`` in an error.

:func:`reference_secrets` finds the secrets of a command line (by these shapes and by the
names of options, headers and variables) and writes ``${NAME}`` in their place;
:func:`register_command_secrets` registers what it finds as known secret values before an MCP
server (or a reset command) starts, so that the server's stderr log never holds a
``--api-key X`` that no shape gives away.

Redaction works on text (JSON, HTML, Markdown, XML alike): every replacement keeps JSON valid
(``***`` needs no escaping and the patterns never cross a quote).
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import io
import os
import re
import threading
from typing import Any, Mapping, Sequence, TextIO, TypeVar
from urllib.parse import unquote

from bench.jsonl import MAX_DEPTH, TOO_DEEP

__all__ = ["ANSWER_FREE_TEXT", "BROKEN_PIPE_EXIT", "KEY_VARIABLES", "MANIFEST_FREE_TEXT", "MARK",
           "MIN_KEY_CHARS", "MIN_LITERAL_CHARS", "MIN_SECRET_CHARS", "MIN_SHAPED_KEY_CHARS",
           "ROW_FREE_TEXT", "RedactingStream", "one_line", "public_provider_id", "public_url",
           "real_provider_id", "redact", "redact_bytes", "redact_data", "redact_fields",
           "reference_secrets", "register_command_secrets", "register_secret",
           "TOKEN_SHAPES"]

MARK = "***"
#: Exit code when stdout's reader went away: 128 + SIGPIPE, what a shell reports for a
#: program that a closed pipe stopped (``yes | head``).
BROKEN_PIPE_EXIT = 141
#: The environment variables bench reads API keys from (the providers' ``KEY_ENV``).
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                 "OPENAI_COMPAT_API_KEY")
MIN_KEY_CHARS = 8  # a value of KEY_VARIABLES (see the module docstring)
MIN_SECRET_CHARS = 20  # a value of another secret-named variable (see the module docstring)
MIN_LITERAL_CHARS = 6  # a registered URL credential: shorter ones would redact ordinary words
MIN_SHAPED_KEY_CHARS = 20  # characters after ``sk-`` / ``AIza``

#: Paths (``*``: every item of a list) of the free text in a result row
#: (:class:`bench.results.Row`): the provider's answer as received, its prose, and the error
#: of an answer that could not be decoded (a provider's error message included), of the row
#: and of each episode step. The parsed calls are data (replay answers with them).
ROW_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("response",), ("parsed", "error"), ("parsed", "text"), ("episode", "final_answer"),
    ("episode", "steps", "*", "error"), ("episode", "steps", "*", "text"),
    ("episode", "steps", "*", "parsed", "error"), ("episode", "steps", "*", "parsed", "text"),
    ("retrieval", "tool_search", "searches", "*", "input"))
#: Paths of the free text in a manifest (:class:`bench.results.Manifest`): the command line,
#: the MCP server's command line in the config (``--execute-mcp 'server --token ...'``: a
#: resume asks for it again when it held a secret, :func:`bench.runner.config.given_mcp_secrets`)
#: and every error text or reason.
MANIFEST_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("command",), ("config", "mcp_server", "*"), ("error",), ("request_errors", "*", "error"), ("batch_errors", "*", "error"),
    ("providers_skipped", "*", "reason"), ("providers_paused", "*", "reason"),
    ("cases_skipped", "*", "why"), ("merged_from", "*", "providers_skipped", "*", "reason"))
#: Paths of the free text in a cached answer (:class:`bench.providers.base.ProviderResponse`):
#: the raw answer, the request id, the prose, a decode error and a native tool search's inputs
#: (the model's search text); the parsed calls are the answer itself.
ANSWER_FREE_TEXT: tuple[tuple[str, ...], ...] = (
    ("raw",), ("request_id",), ("parsed", "error"), ("parsed", "text"),
    ("tool_search", "searches", "*", "input"))

# ://userinfo@ : userinfo holds no '/', whitespace, quote or '@' (RFC 3986 3.2.1). The
# pattern starts at the literal '://' (a scheme before it would make a run of letters
# quadratic: a model's 1 MiB argument took minutes).
_USERINFO = re.compile(r"(://)[^/\s@\"'<>\\]+@")
_SCHEME_VALUE = re.compile(r"\b(?i:(bearer|basic))(\s+)([A-Za-z0-9._~+/=-]{6,})")
# what a credential has and a word does not: a digit, a sign, or a lower-case letter then an
# upper-case one (base64 of "user:pass" is dXNlcjpwYXNz)
_CREDENTIAL_SIGN = re.compile(r"[0-9._~+/=-]|[a-z][A-Z]")
_KEYS = re.compile(r"(?<![A-Za-z0-9])(sk-|AIza)[A-Za-z0-9_-]{%d,}" % MIN_SHAPED_KEY_CHARS)
_SECRET_NAMES = (r"(?:proxy-)?authorization|x-api-key|x-goog-api-key|api[-_]?key|"
                 r"aws[-_]secret[-_]access[-_]key|aws[-_]session[-_]token|"
                 r"access[-_]token|password|secret")
# an AWS access key id: AKIA (long-term) or ASIA (temporary, from STS) and 16 upper-case
# letters or digits, 20 characters in all (AWS IAM User Guide, "IAM identifiers", unique
# ID prefixes; "Manage access keys for IAM users": AKIAIOSFODNN7EXAMPLE)
_AWS_KEY_ID = re.compile(r"(?<![A-Za-z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])")
#: Token shapes recognised with no name around them, each prefix as its issuer documents it:
#: GitHub (``ghp_``, ``gho_``, ``ghu_``, ``ghs_``, ``ghr_`` and 36 characters; ``github_pat_``
#: fine-grained tokens: GitHub Docs, "About authentication to GitHub", token formats), OpenAI
#: and Anthropic ``sk-``, Google ``AIza`` (as :data:`MIN_SHAPED_KEY_CHARS`), Slack ``xoxb-``,
#: ``xoxp-``... (Slack API docs, "Token types"), AWS access key ids (as :func:`redact`),
#: GitLab ``glpat-`` (GitLab Docs, "Personal access tokens"), Hugging Face ``hf_`` (Hub docs,
#: "User access tokens") and a JSON Web Token (RFC 7519: base64url JSON, so ``eyJ``, in three
#: dot-separated parts).
TOKEN_SHAPES = re.compile(
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}"
    r"|(?:sk-|AIza)[A-Za-z0-9_-]{%d,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*)(?![A-Za-z0-9_])"
    % MIN_SHAPED_KEY_CHARS)
# a secret-named header, field or parameter, then its value up to a quote, space or separator
# ('|' ends a row key's provider part, '&' and '#' a query value, '`' a Markdown code span)
_NAMED = re.compile(
    r"(?i)(?<![A-Za-z0-9_-])(" + _SECRET_NAMES + r")(\\?[\"']?\s*[:=]\s*\\?[\"']?)"
    r"(?:(bearer|basic|token)\s+)?([^\s\"'`\\,;&|#<>(){}\[\]]+)")
_SECRET_FIELD = re.compile(r"(?i)" + _SECRET_NAMES)
# a query parameter named key or token (Gemini's REST form ``?key=``, proxies' ``?token=``);
# only in query form: a JSON field "key" is a row's key, not a secret
_QUERY = re.compile(r"(?i)([?&](?:key|token)=)([^&|`\s\"'#<>\\]+)")
# the secret query parameters of a URL made public (public_url)
_URL_QUERY = re.compile(r"(?i)([?&](?:" + _SECRET_NAMES + r"|key|token)=)([^&#\s\"'<>|]+)")
# A cheap first test on the lower-cased text (substring tests: a case-insensitive regex took
# ~200 us on a 2.5 KB row); most texts hold none of these.
_TRIGGER_WORDS = ("bearer", "basic", "sk-", "aiza", "akia", "asia", "authorization", "api",
                  "access", "aws_session", "aws-session", "password", "secret", "key=",
                  "token=", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox",
                  "glpat-", "hf_", "eyj")
# the prefixes of TOKEN_SHAPES not tested before it (lower-cased, as the words are)
_SHAPE_WORDS = {"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "glpat-", "hf_",
                "eyj"}
# an environment variable's name with a secret-naming part (split at '_'), unless its last
# part says it names a place or a public id (DB_PASSWORD_FILE, AWS_ACCESS_KEY_ID); not PWD,
# the shell's current folder
_ENV_NAME = re.compile(r"(?i)(?:^|_)(?:api_?key|key|token|secret|password|passwd)(?:_|$)"
                       r"(?!(?:.*_)?(?:file|path|dir|id)$)")

_lock = threading.Lock()
_registered: set[str] = set()
_env_seen: tuple[Any, ...] | None = None  # what the environment looked like when last read
_env_literals: frozenset[str] = frozenset()
_env_names: tuple[str, ...] = KEY_VARIABLES  # the variables whose values _env_seen holds
_credentials: dict[str, str] = {}  # public provider id -> the id with its credentials


def register_secret(value: str | None) -> None:
    """Redact ``value`` literally in free text from now on (values under
    :data:`MIN_LITERAL_CHARS` characters are ignored)."""
    if value and len(value) >= MIN_LITERAL_CHARS:
        with _lock:
            _registered.add(value)


def _credible(name: str, value: str) -> bool:
    """True when the environment variable ``name=value`` holds a secret to redact (the module
    docstring's rule)."""
    if not value or any(c.isspace() for c in value):
        return False
    if name in KEY_VARIABLES:
        return len(value) >= MIN_KEY_CHARS
    return len(value) >= MIN_SECRET_CHARS and _ENV_NAME.search(name) is not None


def _env_signature(names: tuple[str, ...]) -> tuple[Any, ...]:
    """What says that the environment's secrets may have changed: the number of variables
    and the values of ``names`` (reading all of them costs ~100 us, this ~3 us)."""
    return (len(os.environ), *(os.environ.get(name) for name in names))


def _literal_secrets() -> list[str]:
    """Registered secrets plus the credible values of secret-named environment variables,
    longest first (no partial leftovers). The environment is read again when a variable
    comes or goes, or the value of a :data:`KEY_VARIABLES` or secret-named one changes
    (:func:`_env_signature`)."""
    global _env_seen, _env_literals, _env_names
    if _env_signature(_env_names) != _env_seen:
        named = {name: value for name, value in list(os.environ.items())
                 if name in KEY_VARIABLES or _ENV_NAME.search(name)}
        _env_names = tuple(dict.fromkeys((*KEY_VARIABLES, *named)))
        _env_literals = frozenset(value for name, value in named.items()
                                  if _credible(name, value))
        _env_seen = _env_signature(_env_names)
    with _lock:
        return sorted(_registered | _env_literals, key=len, reverse=True)


# What may stand inside a secret broken across lines: whitespace, or the escapes of a line
# break or tab in a JSON string.
_BREAKS = re.compile(r"(?:\s|\\[nrt])+")
_PIECE = 6  # characters of a literal secret's head or tail that make it worth a broken search
# Secrets looked for broken from this length: a shorter one allowed to hold spaces would match
# words ("ab cd ef" for "abcdef"), and it is rarely long enough to be wrapped.
_BROKEN_MIN_CHARS = 16


def _without_broken(text: str, secret: str) -> str:
    """``text`` with each occurrence of ``secret`` that line breaks (:data:`_BREAKS`) split
    replaced by :data:`MARK`. Found in the text without its breaks, then mapped back; linear
    in the text's length whatever the secret's (a pattern with a break allowed between each
    character took 7 s to compile for a 100 KB token)."""
    breaks = [(m.start(), m.end()) for m in _BREAKS.finditer(text)]
    if not breaks:
        return text
    squeezed = _BREAKS.sub("", text)
    at = squeezed.find(secret)
    if at < 0:
        return text
    # where each break falls in the squeezed text, and the characters removed up to it
    places, removed, total = [], [], 0
    for start, end in breaks:
        places.append(start - total)
        total += end - start
        removed.append(total)

    def original(index: int) -> int:
        """The text's index of the squeezed text's character ``index``."""
        before = bisect.bisect_right(places, index)
        return index + (removed[before - 1] if before else 0)

    spans = []
    while at >= 0:
        spans.append((original(at), original(at + len(secret) - 1) + 1))
        at = squeezed.find(secret, at + len(secret))
    for start, end in reversed(spans):
        text = text[:start] + MARK + text[end:]
    return text


def _named(match: re.Match[str]) -> str:
    name, sep, scheme, value = match.groups()
    if value == MARK:
        return match.group(0)
    return f"{name}{sep}{scheme + ' ' if scheme else ''}{MARK}"


def _scheme_value(match: re.Match[str]) -> str:
    scheme, space, value = match.groups()
    if value == MARK or not (len(value) >= 20 or _CREDENTIAL_SIGN.search(value)):
        return match.group(0)  # a word after "basic", not a credential
    return scheme + space + MARK


def _redact(text: str, literals: list[str]) -> str:
    """:func:`redact` with the literal secrets given (read once per record)."""
    if not isinstance(text, str) or not text:
        return text
    hit = [s for s in literals if s in text]
    # a secret broken across lines (wrapped, or a line break escaped in JSON) whose head or
    # tail is still whole (a key split in two by a line break was kept but for 5 characters)
    split = [s for s in literals if len(s) >= _BROKEN_MIN_CHARS
             and (s[:_PIECE] in text or s[-_PIECE:] in text)]
    low = text.lower()
    userinfo = "://" in low and "@" in low
    words = {w for w in _TRIGGER_WORDS if w in low}
    if not hit and not split and not userinfo and not words:
        return text
    for secret in hit:
        text = text.replace(secret, MARK)
    for secret in split:
        if secret[:_PIECE] in text or secret[-_PIECE:] in text:  # not all replaced whole
            text = _without_broken(text, secret)
    # each pattern only when its words occur: the case-insensitive ones are slow on long text
    if userinfo:
        text = _USERINFO.sub(lambda m: m.group(1) + MARK + "@", text)
    if words & {"bearer", "basic"}:
        text = _SCHEME_VALUE.sub(_scheme_value, text)
    if words & {"sk-", "aiza"}:
        text = _KEYS.sub(lambda m: m.group(1) + MARK, text)
    if words & {"akia", "asia"}:
        text = _AWS_KEY_ID.sub(lambda m: m.group(1) + MARK, text)
    if words & _SHAPE_WORDS:
        text = TOKEN_SHAPES.sub(MARK, text)
    if words & {"authorization", "api", "access", "aws_session", "aws-session", "password",
                "secret"}:
        text = _NAMED.sub(_named, text)
    if words & {"key=", "token="}:
        text = _QUERY.sub(lambda m: m.group(0) if m.group(2) == MARK else m.group(1) + MARK,
                          text)
    return text


def redact(text: str) -> str:
    """Free ``text`` with every secret this module knows replaced by ``***`` (see the module
    docstring for the rules; never apply it to an identifier). Idempotent; text without
    secrets comes back unchanged (the same object)."""
    return _redact(text, _literal_secrets())


def one_line(text: str, limit: int, more: str = "") -> str:
    """``text`` redacted (:func:`redact`), on one line (each run of whitespace one space) and
    cut to its first ``limit`` characters, followed by ``more`` when cut. Redacted before it
    is cut: a secret the cut splits keeps a head that no rule recognises (an error body
    echoing a key at its 290th character was stored with the key's first 18 characters)."""
    text = " ".join(redact(str(text)).split())
    return text if len(text) <= limit else text[:limit] + more


def redact_bytes(data: bytes) -> bytes:
    """:func:`redact` for UTF-8 free text in bytes; unchanged bytes come back as the same
    object. Bytes that are not UTF-8 are redacted with surrogate escapes kept."""
    text = data.decode("utf-8", "surrogateescape")
    cleaned = redact(text)
    return data if cleaned is text else cleaned.encode("utf-8", "surrogateescape")


T = TypeVar("T")


def _redact_value(value: T, literals: list[str], depth: int = 0) -> T:
    """``value`` (JSON-like) with :func:`redact` applied to every string in it; a string
    field named like a secret (``authorization``, ``x-api-key``, ``password``...) becomes
    ``***`` whole. Dict keys are kept. The same object when nothing changed. Containers
    nested deeper than :data:`bench.jsonl.MAX_DEPTH` are replaced by its mark, as the writer
    stores them (a 1,200-level answer overflowed Python's recursion limit here)."""
    # the ignores below: the result keeps the value's JSON shape (T), which the checker
    # cannot follow through the isinstance tests; a too-deep container becomes the text mark
    if depth >= MAX_DEPTH and isinstance(value, (dict, list, tuple)):
        return TOO_DEEP  # type: ignore[return-value]
    if isinstance(value, str):
        return _redact(value, literals)  # type: ignore[return-value]
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if isinstance(key, str) and isinstance(item, str) and item and item != MARK \
                    and _SECRET_FIELD.fullmatch(key):
                new: Any = MARK
            else:
                new = _redact_value(item, literals, depth + 1)
            changed = changed or new is not item
            out[key] = new
        return out if changed else value  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        items = [_redact_value(item, literals, depth + 1) for item in value]
        if any(new is not old for new, old in zip(items, value)):
            return items  # type: ignore[return-value]
    return value


def redact_data(value: T) -> T:
    """Free text given as JSON-like data (a raw answer, a list of arguments): every string
    redacted by :func:`redact`, string fields with a secret's name (``x-api-key``...)
    replaced whole; dict keys kept. The same object when nothing changed."""
    return _redact_value(value, _literal_secrets())


def _at(value: Any, path: tuple[str, ...], literals: list[str]) -> Any:
    """``value`` with the free text at ``path`` (``*``: every list item) redacted."""
    if not path:
        return _redact_value(value, literals)
    head, rest = path[0], path[1:]
    if head == "*":
        if not isinstance(value, list):
            return value
        items = [_at(item, rest, literals) for item in value]
        return items if any(new is not old for new, old in zip(items, value)) else value
    if not isinstance(value, Mapping) or head not in value:
        return value
    inner = _at(value[head], rest, literals)
    return value if inner is value[head] else {**value, head: inner}


def redact_fields(record: Mapping[str, Any],
                  paths: tuple[tuple[str, ...], ...]) -> Mapping[str, Any]:
    """``record`` (a row, manifest or cached answer as a JSON dict) with the free text at
    ``paths`` (:data:`ROW_FREE_TEXT`, :data:`MANIFEST_FREE_TEXT`, :data:`ANSWER_FREE_TEXT`)
    redacted by :func:`redact_data`; every other field (identifiers, keys, config, data) is
    kept as it is. ``record`` itself when nothing changed, else a copy (never changed in
    place)."""
    literals = _literal_secrets()
    for path in paths:
        record = _at(record, path, literals)
    return record


def _publish(text: str) -> tuple[str, list[str]]:
    """(``text`` with its URL's userinfo and secret query values replaced by ``***``, the
    secrets taken out)."""
    secrets: list[str] = []
    match = re.search(r"://([^/\s@]+)@", text)
    if match and match.group(1) != MARK:
        userinfo = match.group(1)
        user, _, password = userinfo.partition(":")
        secrets += [userinfo, user, password, unquote(user), unquote(password),
                    base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()]
        text = text[:match.start(1)] + MARK + text[match.end(1):]

    def query(m: re.Match[str]) -> str:
        if m.group(2) == MARK:
            return m.group(0)
        secrets.extend((m.group(2), unquote(m.group(2))))
        return m.group(1) + MARK

    text = _URL_QUERY.sub(query, text) if "=" in text else text
    return text, secrets


def public_url(url: str | None) -> str | None:
    """``url`` as bench stores and prints it: user:password@ and the values of secret query
    parameters (``key``, ``token``, ``api_key``, ``password``...) replaced by ``***``; the
    values taken out are registered as secrets (:func:`register_secret`)."""
    if not url:
        return url
    public, secrets = _publish(url)
    for value in secrets:
        register_secret(value)
    return public


def public_provider_id(provider_id: str) -> str:
    """The id to store and print for ``provider_id``: its base URL made public
    (:func:`public_url`: userinfo and secret query values replaced by ``***``).

    The secrets taken out are registered (:func:`register_secret`), and the full id is kept
    in memory for :func:`real_provider_id`. An id without secrets comes back unchanged.
    """
    public = public_url(provider_id) or provider_id
    if public != provider_id:
        with _lock:
            _credentials[public] = provider_id
    return public


def real_provider_id(provider_id: str) -> str | None:
    """The id with its secrets for a public id from :func:`public_provider_id`; the id itself
    when nothing in it was redacted; None when its secrets are not known in this process
    (e.g. a resumed run: they were never written)."""
    if MARK not in provider_id:
        return provider_id
    with _lock:
        return _credentials.get(provider_id)


# -- secrets of a command line, written as ${NAME} references ---------------------------

# an option and its value in one argument (--token=X) or alone (--token, the value next)
_OPTION = re.compile(r"(-{1,2}[A-Za-z][A-Za-z0-9_.-]*)(?:=(.*))?", re.DOTALL)
# an option whose value is a secret by its name (reference_secrets' docstring): its last word
# (after '-' or '_') is a secret's (--token, --github-token, --api-key, --apikey,
# --client-secret, --access-token, --auth), or a secret's word is followed, last, by a word
# saying the value itself is given (--secret-file-contents, --token-value); --token-file,
# --password-env and --access-token-expiry name a place, a variable or a setting, not a secret
_SECRET_WORD = (r"(?:token|password|passwd|passphrase|pwd|pass|secret|api[-_]?key|"
                r"access[-_]?key|secret[-_]?key|auth|credentials?)")
_VALUE_WORD = r"(?:value|contents?|literal|raw|plain(?:text)?|text|string|b64|base64)"
_SECRET_OPTION = re.compile(r"(?i)(?:^|[-_])" + _SECRET_WORD
                            + r"(?:(?:[-_][a-z0-9]+)*[-_]" + _VALUE_WORD + r")?$")
_HEADER_OPTION = re.compile(r"-H|--?headers?")
# an HTTP header that carries a credential (RFC 9110 11.6.2 Authorization, 11.7.2
# Proxy-Authorization; the API-key headers of OpenAI-style, Anthropic, Google and GitLab APIs)
_SECRET_HEADER = re.compile(r"(?i)(?:proxy-)?authorization|x-api-key|x-goog-api-key|api-?key|"
                            r"x-auth-token|x-access-token|private-token")
_HEADER_TEXT = re.compile(r"\s*([A-Za-z0-9_-]+)\s*:\s*(.*)", re.DOTALL)
_SCHEME_TEXT = re.compile(r"(?i)(?:bearer|basic|token)(?:\s+(\S.*))?", re.DOTALL)
# NAME=value as env(1) and shells take it: an environment variable (upper case by POSIX
# convention; lower-case name=value is a program's own setting, and `password=` is _NAMED's)
_ASSIGNMENT = re.compile(r"([A-Z_][A-Z0-9_]*)=(.+)", re.DOTALL)
_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def _variable(hint: str) -> str:
    """An environment variable name from ``hint`` (an option, header or field name):
    upper-cased, other characters ``_``, ``X-`` dropped, prefixed ``MCP_``
    (``--api-key`` -> ``MCP_API_KEY``; ``Authorization`` -> ``MCP_TOKEN``)."""
    word = re.sub(r"[^A-Za-z0-9]+", "_", hint).strip("_").upper()
    word = word.removeprefix("X_")
    if word in ("AUTHORIZATION", "PROXY_AUTHORIZATION", "BEARER", "BASIC"):
        word = "TOKEN"
    return f"MCP_{word or 'SECRET'}"


def reference_secrets(server: list[str] | str) -> tuple[list[str] | str, dict[str, str]]:
    """An MCP server's command line (or URL) with each secret in it replaced by a
    ``${NAME}`` reference, for a file bench writes (``bench init``'s ``pyproject.toml``; at
    run time :func:`bench.toolset_config.expand` puts the environment's value back).

    A secret is found by name, in one argument or split over several (``--token X`` as
    ``--token=X``):

    - the value of an option named like a secret -> ``MCP_<OPTION>``: its last word
      (after ``-`` or ``_``) is ``token``, ``password``, ``passwd``, ``passphrase``,
      ``pwd``, ``pass``, ``secret``, ``api-key``/``apikey``, ``access-key``,
      ``secret-key``, ``auth`` or ``credential(s)`` (``--token``, ``--github-token``,
      ``--access-token``, ``--client-secret``, ``--apikey``...), or one of these words is
      followed, last, by a word saying that the value itself is given: ``value``,
      ``content(s)``, ``literal``, ``raw``, ``plain``/``plaintext``, ``text``, ``string``,
      ``b64``/``base64`` (``--secret-file-contents``, ``--token-value``). An option whose
      last word names a place, a variable or a setting is not a secret (``--token-file``,
      ``--password-env``, ``--access-token-expiry``);
    - a credential header given to ``-H``/``--header`` (``Authorization: Bearer X``, also
      split as ``Authorization:`` ``Bearer`` ``X``; ``X-Api-Key: X``...): its value after the
      scheme -> ``MCP_TOKEN``, ``MCP_API_KEY``...; and an argument ``Bearer`` or ``Basic``
      followed by one -> ``MCP_TOKEN``;
    - ``NAME=value`` where ``NAME`` is named like a secret (``GITHUB_TOKEN=...``, as for the
      environment, :func:`redact`) -> ``NAME`` itself;
    - in any argument: a URL's password (``MCP_PASSWORD``; a user alone: ``MCP_TOKEN``) and
      secret query values (``?token=`` -> ``MCP_TOKEN``), a secret-named field
      (``password=...``, ``"api_key": "..."``), a ``Bearer`` credential, a value of a
      secret-named environment variable (that variable's name), and a token of a known
      shape (:data:`TOKEN_SHAPES`) -> ``MCP_TOKEN`` (the whole value of ``NAME=value``:
      ``NAME``).

    Values that are already a ``${NAME}`` reference are left. One value gets one name; a
    second value for a name taken gets ``_2``...

    Returns:
        (the command line or URL with references, ``{NAME: secret value}``), the latter in
        the order found; the same command and ``{}`` when it holds no secret.

    Raises:
        ValueError: something :func:`redact` still calls a secret is left (a shape no rule
            above can name): the caller refuses the command line.
    """
    parts, found = _references(server)
    for part in parts:
        masked = _REFERENCE.sub(MARK, part)  # what redact leaves as it is
        masked = re.sub(r"://[^/\s@]*\*\*\*@", "://***@", masked)  # user:${PASSWORD}@
        if redact(masked) != masked or TOKEN_SHAPES.search(masked):
            raise ValueError("a secret bench cannot name is left in the command line")
    return (parts[0] if isinstance(server, str) else parts), found


def register_command_secrets(server: Sequence[str] | str | None) -> list[str]:
    """Register (:func:`register_secret`) every secret :func:`reference_secrets` finds in an
    MCP server's (or a reset's) command line or URL, before the program starts: what it
    prints on its stderr, a file bench keeps, then never holds them. The value of
    ``--api-key X`` or ``--password=X`` has no shape :func:`redact` knows; only its
    option's name says it is a secret. A secret no rule can name (for which
    :func:`reference_secrets` raises) is one :func:`redact` masks by its shape anyway.

    Args:
        server: the argv (``${NAME}`` already expanded) or the URL; None or empty: nothing.

    Returns:
        The values registered, in the order found (values under :data:`MIN_LITERAL_CHARS`
        characters are returned but not registered, as :func:`register_secret` does).
    """
    if not server:
        return []
    values = list(_references(server if isinstance(server, str) else list(server))[1].values())
    for value in values:
        register_secret(value)
    return values


def register_env_secrets(env: Mapping[str, str] | None) -> list[str]:
    """Register (:func:`register_secret`) the values of ``env`` (a server's own environment,
    ``env = {...}`` of a toolset) that the environment rule calls secrets (:func:`_credible`:
    a secret-named variable such as ``API_TOKEN`` with a credible value), so a server that
    prints its environment logs ``***``. bench's own process environment is covered
    already; a value written in clear in ``pyproject.toml`` is not in it.

    Returns:
        The values registered.
    """
    values = [value for name, value in (env or {}).items() if _credible(name, value)]
    for value in values:
        register_secret(value)
    return values


def _references(server: list[str] | str) -> tuple[list[str], dict[str, str]]:
    """:func:`reference_secrets` without its final check: (the arguments with references,
    ``{NAME: value}``)."""
    parts = [server] if isinstance(server, str) else list(server)
    spans: dict[int, list[tuple[int, int, str]]] = {}

    def mark(i: int, start: int, end: int, name: str) -> None:
        value = parts[i][start:end]
        if not value.strip() or _REFERENCE.fullmatch(value) or "${" in value:
            return
        if any(s < end and start < e for s, e, _ in spans.get(i, [])):
            return  # found already, by a rule before
        spans.setdefault(i, []).append((start, end, name))

    def value_at(i: int, start: int, name: str) -> None:
        """``parts[i][start:]`` is a secret, after its scheme (Bearer X; Bearer alone: the
        next argument)."""
        scheme = _SCHEME_TEXT.fullmatch(parts[i], start)
        if scheme:
            if scheme.group(1):
                mark(i, scheme.start(1), len(parts[i]), name)
            elif i + 1 < len(parts) and not parts[i + 1].startswith("-"):
                mark(i + 1, 0, len(parts[i + 1]), name)
            return
        mark(i, start, len(parts[i]), name)

    def header_at(i: int, start: int) -> None:
        """``parts[i][start:]`` is a header, ``Name: value`` (the value maybe next)."""
        header = _HEADER_TEXT.fullmatch(parts[i], start)
        if not header or not _SECRET_HEADER.fullmatch(header.group(1)):
            return
        name = _variable(header.group(1))
        if header.group(2).strip():
            value_at(i, header.start(2), name)
        elif i + 1 < len(parts):
            value_at(i + 1, 0, name)

    for i, arg in enumerate(parts):
        option = _OPTION.fullmatch(arg)
        nxt = i + 1 < len(parts) and not parts[i + 1].startswith("-")
        if option and _HEADER_OPTION.fullmatch(option.group(1)):
            if option.group(2) is not None:
                header_at(i, option.start(2))
            elif i + 1 < len(parts):
                header_at(i + 1, 0)
        elif option and _SECRET_OPTION.search(option.group(1).lstrip("-")):
            name = _variable(option.group(1))
            if option.group(2) is not None:
                value_at(i, option.start(2), name)
            elif nxt:
                value_at(i + 1, 0, name)
        elif not option:
            assignment = _ASSIGNMENT.fullmatch(arg)
            if assignment and _ENV_NAME.search(assignment.group(1)):
                mark(i, assignment.start(2), len(arg), assignment.group(1))
            elif arg.lower() in ("bearer", "basic") and nxt:
                mark(i + 1, 0, len(parts[i + 1]), "MCP_TOKEN")
            else:
                header_at(i, 0)  # Authorization: Bearer X given without -H
    environment = {value: name for name, value in list(os.environ.items())
                   if (name in KEY_VARIABLES or _ENV_NAME.search(name))
                   and _credible(name, value)}
    for i, arg in enumerate(parts):
        for match in re.finditer(r"://([^/\s@\"'<>\\]+)@", arg):
            user, colon, _ = match.group(1).partition(":")
            if colon:
                mark(i, match.start(1) + len(user) + 1, match.end(1), "MCP_PASSWORD")
            else:
                mark(i, match.start(1), match.end(1), "MCP_TOKEN")
        for match in _URL_QUERY.finditer(arg):
            mark(i, match.start(2), match.end(2), _variable(match.group(1)))
        for match in _NAMED.finditer(arg):
            mark(i, match.start(4), match.end(4), _variable(match.group(1)))
        for match in _SCHEME_VALUE.finditer(arg):
            if len(match.group(3)) >= 20 or _CREDENTIAL_SIGN.search(match.group(3)):
                mark(i, match.start(3), match.end(3), "MCP_TOKEN")
        for value, name in environment.items():
            at = arg.find(value)
            if at >= 0:
                mark(i, at, at + len(value), name)
        assignment = _ASSIGNMENT.fullmatch(arg)
        for match in TOKEN_SHAPES.finditer(arg):  # AWS_ACCESS_KEY_ID=AKIA...: its own name
            whole = assignment is not None and match.span() == assignment.span(2)
            mark(i, match.start(), match.end(), assignment.group(1) if whole and assignment
                 else "MCP_TOKEN")
    found: dict[str, str] = {}  # NAME -> value
    names: dict[str, str] = {}  # value -> NAME
    for i in sorted(spans):
        for start, end, hint in sorted(spans[i]):
            value = parts[i][start:end]
            if value not in names:
                name, n = hint, 1
                while name in found:
                    n += 1
                    name = f"{hint}_{n}"
                names[value], found[name] = name, value
    for i, marked in spans.items():
        text = parts[i]
        for start, end, _ in sorted(marked, reverse=True):
            text = text[:start] + "${" + names[text[start:end]] + "}" + text[end:]
        parts[i] = text
    return parts, found


class RedactingStream(io.TextIOBase):
    """A text stream that writes :func:`redact` of each write to ``stream`` (stdout or
    stderr): every message bench prints goes through it. A secret split across two writes
    would pass; bench's messages are written whole (rich renders a message in one write).
    It has no ``buffer``, so that click writes text through it instead of going around it."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write the redacted ``text``; returns ``len(text)`` as callers expect.

        Raises:
            SystemExit: code :data:`BROKEN_PIPE_EXIT` when the reader has gone
                (``bench compare ... | head``), see :meth:`_reader_gone`.
        """
        try:
            self._stream.write(redact(text))
        except BrokenPipeError:
            self._reader_gone()
        return len(text)

    def flush(self) -> None:
        """Flush the wrapped stream (SystemExit :data:`BROKEN_PIPE_EXIT` as :meth:`write`)."""
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._reader_gone()

    def _reader_gone(self) -> None:
        """The pipe's reader closed it: point the descriptor at ``os.devnull`` (what is
        still buffered goes nowhere instead of failing again at exit) and exit with
        :data:`BROKEN_PIPE_EXIT`, never with a code of bench's own (1: a regression), and
        before rich or click turn the error into exit 1. Python's advice:
        https://docs.python.org/3/library/signal.html#note-on-sigpipe"""
        with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        raise SystemExit(BROKEN_PIPE_EXIT)

    def isatty(self) -> bool:
        """The wrapped stream's answer (rich decides on colours and widths by it)."""
        return self._stream.isatty()

    def fileno(self) -> int:
        """The wrapped stream's descriptor."""
        return self._stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]  # TextIOBase's is an attribute
        """The wrapped stream's encoding."""
        return getattr(self._stream, "encoding", "utf-8")
