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

from bench.redact.commands import (reference_secrets, register_command_secrets,
                                   register_env_secrets)
from bench.redact.records import (ANSWER_FREE_TEXT, MANIFEST_FREE_TEXT, ROW_FREE_TEXT,
                                  redact_data, redact_fields)
from bench.redact.stream import BROKEN_PIPE_EXIT, RedactingStream
from bench.redact.text import (KEY_VARIABLES, MARK, MIN_KEY_CHARS, MIN_LITERAL_CHARS,
                               MIN_SECRET_CHARS, MIN_SHAPED_KEY_CHARS, TOKEN_SHAPES, one_line,
                               redact, redact_bytes, register_secret)
from bench.redact.urls import public_provider_id, public_url, real_provider_id

__all__ = ["ANSWER_FREE_TEXT", "BROKEN_PIPE_EXIT", "KEY_VARIABLES", "MANIFEST_FREE_TEXT", "MARK",
           "MIN_KEY_CHARS", "MIN_LITERAL_CHARS", "MIN_SECRET_CHARS", "MIN_SHAPED_KEY_CHARS",
           "ROW_FREE_TEXT", "RedactingStream", "one_line", "public_provider_id", "public_url",
           "real_provider_id", "redact", "redact_bytes", "redact_data", "redact_fields",
           "reference_secrets", "register_command_secrets", "register_env_secrets",
           "register_secret",
           "TOKEN_SHAPES"]
