"""Free text with its secrets replaced by ``***`` (:func:`redact`; the rules are in
:mod:`bench.redact`): the secret shapes, the known secret values (registered ones and those of
secret-named environment variables), and a secret broken across lines.
"""

from __future__ import annotations

import bisect
import os
import re
import threading
from typing import Any

MARK = "***"
#: The environment variables bench reads API keys from (the providers' ``KEY_ENV``).
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
                 "OPENAI_COMPAT_API_KEY")
MIN_KEY_CHARS = 8  # a value of KEY_VARIABLES (see :mod:`bench.redact`)
MIN_SECRET_CHARS = 20  # a value of another secret-named variable (see :mod:`bench.redact`)
MIN_LITERAL_CHARS = 6  # a registered URL credential: shorter ones would redact ordinary words
MIN_SHAPED_KEY_CHARS = 20  # characters after ``sk-`` / ``AIza``

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


def register_secret(value: str | None) -> None:
    """Redact ``value`` literally in free text from now on (values under
    :data:`MIN_LITERAL_CHARS` characters are ignored)."""
    if value and len(value) >= MIN_LITERAL_CHARS:
        with _lock:
            _registered.add(value)


def _credible(name: str, value: str) -> bool:
    """True when the environment variable ``name=value`` holds a secret to redact (the rule
    in :mod:`bench.redact`)."""
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
    """Free ``text`` with every secret this module knows replaced by ``***`` (see
    :mod:`bench.redact` for the rules; never apply it to an identifier). Idempotent; text without
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
