"""The secrets of a command line (an MCP server's, a reset's) or URL: found by their shapes
and by the names of options, headers and variables, written as ``${NAME}`` references
(:func:`reference_secrets`) or registered as known secret values before the program starts
(:func:`register_command_secrets`, :func:`register_env_secrets`).
"""

from __future__ import annotations

import os
import re
from typing import Mapping, Sequence

from bench.redact.text import (_CREDENTIAL_SIGN, _ENV_NAME, _NAMED, _SCHEME_VALUE, _URL_QUERY,
                               KEY_VARIABLES, MARK, TOKEN_SHAPES, _credible, redact,
                               register_secret)

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
    marks = _Marks([server] if isinstance(server, str) else list(server))
    _mark_by_name(marks)
    _mark_by_shape(marks)
    return marks.referenced()


class _Marks:
    """The secrets found in a command line's arguments (``parts``), as spans ``(start, end,
    name hint)`` per argument; a span overlapping one found before is not added."""

    def __init__(self, parts: list[str]) -> None:
        self.parts = parts
        self.spans: dict[int, list[tuple[int, int, str]]] = {}

    def mark(self, i: int, start: int, end: int, name: str) -> None:
        """``parts[i][start:end]`` is a secret to name after ``name`` (not when empty, a
        ``${NAME}`` reference already, or found already by a rule before)."""
        value = self.parts[i][start:end]
        if not value.strip() or _REFERENCE.fullmatch(value) or "${" in value:
            return
        if any(s < end and start < e for s, e, _ in self.spans.get(i, [])):
            return  # found already, by a rule before
        self.spans.setdefault(i, []).append((start, end, name))

    def value_at(self, i: int, start: int, name: str) -> None:
        """``parts[i][start:]`` is a secret, after its scheme (Bearer X; Bearer alone: the
        next argument)."""
        parts = self.parts
        scheme = _SCHEME_TEXT.fullmatch(parts[i], start)
        if scheme:
            if scheme.group(1):
                self.mark(i, scheme.start(1), len(parts[i]), name)
            elif i + 1 < len(parts) and not parts[i + 1].startswith("-"):
                self.mark(i + 1, 0, len(parts[i + 1]), name)
            return
        self.mark(i, start, len(parts[i]), name)

    def header_at(self, i: int, start: int) -> None:
        """``parts[i][start:]`` is a header, ``Name: value`` (the value maybe next)."""
        header = _HEADER_TEXT.fullmatch(self.parts[i], start)
        if not header or not _SECRET_HEADER.fullmatch(header.group(1)):
            return
        name = _variable(header.group(1))
        if header.group(2).strip():
            self.value_at(i, header.start(2), name)
        elif i + 1 < len(self.parts):
            self.value_at(i + 1, 0, name)

    def referenced(self) -> tuple[list[str], dict[str, str]]:
        """(the arguments with each span replaced by its ``${NAME}``, ``{NAME: value}``): one
        value gets one name, a second value for a name taken gets ``_2``..."""
        parts, spans = self.parts, self.spans
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


def _mark_by_name(marks: _Marks) -> None:
    """Mark the secrets a name gives away: the value of a secret-named option, of a
    credential header (``-H``, or given without it), of ``NAME=value`` with a secret-named
    variable, and the argument after ``Bearer`` / ``Basic``."""
    parts = marks.parts
    for i, arg in enumerate(parts):
        option = _OPTION.fullmatch(arg)
        nxt = i + 1 < len(parts) and not parts[i + 1].startswith("-")
        if option and _HEADER_OPTION.fullmatch(option.group(1)):
            if option.group(2) is not None:
                marks.header_at(i, option.start(2))
            elif i + 1 < len(parts):
                marks.header_at(i + 1, 0)
        elif option and _SECRET_OPTION.search(option.group(1).lstrip("-")):
            name = _variable(option.group(1))
            if option.group(2) is not None:
                marks.value_at(i, option.start(2), name)
            elif nxt:
                marks.value_at(i + 1, 0, name)
        elif not option:
            assignment = _ASSIGNMENT.fullmatch(arg)
            if assignment and _ENV_NAME.search(assignment.group(1)):
                marks.mark(i, assignment.start(2), len(arg), assignment.group(1))
            elif arg.lower() in ("bearer", "basic") and nxt:
                marks.mark(i + 1, 0, len(parts[i + 1]), "MCP_TOKEN")
            else:
                marks.header_at(i, 0)  # Authorization: Bearer X given without -H


def _mark_by_shape(marks: _Marks) -> None:
    """Mark the secrets found in any argument: a URL's password or user, secret query values,
    secret-named fields, ``Bearer`` credentials, values of secret-named environment variables
    and tokens of a known shape (:data:`TOKEN_SHAPES`)."""
    environment = {value: name for name, value in list(os.environ.items())
                   if (name in KEY_VARIABLES or _ENV_NAME.search(name))
                   and _credible(name, value)}
    for i, arg in enumerate(marks.parts):
        for match in re.finditer(r"://([^/\s@\"'<>\\]+)@", arg):
            user, colon, _ = match.group(1).partition(":")
            if colon:
                marks.mark(i, match.start(1) + len(user) + 1, match.end(1), "MCP_PASSWORD")
            else:
                marks.mark(i, match.start(1), match.end(1), "MCP_TOKEN")
        for match in _URL_QUERY.finditer(arg):
            marks.mark(i, match.start(2), match.end(2), _variable(match.group(1)))
        for match in _NAMED.finditer(arg):
            marks.mark(i, match.start(4), match.end(4), _variable(match.group(1)))
        for match in _SCHEME_VALUE.finditer(arg):
            if len(match.group(3)) >= 20 or _CREDENTIAL_SIGN.search(match.group(3)):
                marks.mark(i, match.start(3), match.end(3), "MCP_TOKEN")
        for value, name in environment.items():
            at = arg.find(value)
            if at >= 0:
                marks.mark(i, at, at + len(value), name)
        assignment = _ASSIGNMENT.fullmatch(arg)
        for match in TOKEN_SHAPES.finditer(arg):  # AWS_ACCESS_KEY_ID=AKIA...: its own name
            whole = assignment is not None and match.span() == assignment.span(2)
            marks.mark(i, match.start(), match.end(), assignment.group(1) if whole and assignment
                       else "MCP_TOKEN")
