"""How a project's own toolsets are executed: the ``[tool.bench.toolsets.<name>]`` tables of
the project's ``pyproject.toml`` (written by ``bench init``, edited by hand).

Example::

    [tool.bench.toolsets.calendar]
    execute = "mcp"                          # mcp | python | none
    server = ["python", "server.py"]         # stdio command; or "http://127.0.0.1:8000/mcp"
    timeout_s = 10.0                         # per call, seconds
    writes = ["create_event"]                # write tools whose calls may run

    [tool.bench.toolsets.billing]
    execute = "python"
    module = "billing_tools.py"              # a file (relative to the project) or a module name

    [tool.bench.toolsets.shop]
    execute = "mcp"
    server = ["mcp-server-sqlite", "--db-path", "shop.db"]   # pip install mcp-server-sqlite
    error_pattern = "^(Database error|Error):"   # its errors are text, without isError

    [tool.bench.toolsets.crm]
    execute = "none"                         # no safe executor: selection and arguments only
    reason = "the CRM has no sandbox"

    [tool.bench.toolsets.notes]
    execute = "python"
    module = "notes_tools.py"
    reset = ["git", "checkout", "--", "notes.db"]   # puts the system back before each case
    compare = {now = "shape", list_notes = {ignore = ["updated_at"]}, ping = "none"}

A tool is a write unless it is marked read-only (its spec's ``permission: read``, or an MCP
server's ``readOnlyHint``); a write call runs only when its tool is listed in ``writes`` (or
the run passes ``--allow-writes``), and a refused one is reported as such in the run's table
and HTML report.

bench never runs a label's calls on such a system by itself: ``execution_match`` compares
the model's results with results recorded on purpose (``bench labels record``, with the
user's consent), or, with ``reset`` declared, with the label's calls run from a reset (the
command runs in the project folder before the label's calls and before each row's calls).
``compare`` says per tool how results compare: ``"exact"`` (the default), ``"shape"`` (JSON
types and keys only: clocks, generated ids), ``"none"`` (not compared: a successful call
matches) or ``{ignore = [field, ...]}`` (those keys dropped at any depth). ``${NAME}`` in ``server``, ``env`` and ``url`` is replaced by the
environment variable ``NAME`` when the server starts, so a token never has to be written into
the file (bench never writes one: secrets never reach disk).

A call fails when its tool says so: an MCP result with ``isError``, an exception of a Python
function. A server that answers an error as ordinary text (``mcp-server-sqlite`` answers
``Database error: no such column: amount`` without ``isError``) would score that call a
success; ``error_pattern`` declares how the toolset's errors look: a Python regular
expression searched (``re.search``) in every text result of the toolset (a result that is a
string, or each string of a list of strings: an MCP result's text blocks; a JSON object or
number is not text), a match making the call a ``permanent`` ``tool_error`` with that text as
its message (:func:`bench.executor.outcome.failing_on_text`). A search that runs longer than
0.1 s on one result (a pattern that backtracks, ``^(a|a)+$``) fails the call with
``error_pattern_timeout`` instead of hanging the run.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Sequence

import regex
from pydantic import (BaseModel, ConfigDict, Field, ValidationError, field_validator,
                      model_validator)

from bench.errors import BenchError, FieldValueError, pydantic_error_field

PYPROJECT = "pyproject.toml"
ExecuteMode = Literal["mcp", "python", "none"]
#: How one tool's results are compared for ``execution_match`` (``compare``): ``exact``
#: (canonical JSON), ``shape`` (the JSON types and object keys only: clocks, generated
#: ids), ``none`` (not compared: a successful call matches).
CompareMode = Literal["exact", "shape", "none"]
#: A :data:`CompareMode`, or the field names dropped at any depth before an exact comparison
#: (``{ignore = ["datetime"]}``).
Comparison = CompareMode | tuple[str, ...]
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class CompareIgnore(BaseModel):
    """``{ignore = ["field", ...]}``: compare a tool's results without these object keys
    (dropped at any depth)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    ignore: list[str] = Field(min_length=1)


class ToolsetSettings(BaseModel):
    """How one toolset's calls are executed.

    Attributes:
        execute: ``mcp`` (an MCP server: ``server``), ``python`` (the functions of
            ``module``) or ``none`` (declared no-execute mode: selection and arguments are
            scored, execution metrics are not, and the table and report say so).
        server: the MCP server: a command as a list (started over stdio), or an ``http(s)``
            URL (Streamable HTTP).
        env: extra environment variables for a stdio server (``${NAME}`` expanded).
        module: the Python file (relative to the project) or dotted module of the tools.
        timeout_s: per-call timeout in seconds (the executor's attempt timeout).
        writes: tools whose write calls may run (the per-tool allowance; empty: none).
        reason: why the toolset is not executed (``execute = "none"``; shown in the table).
        error_pattern: a regular expression (Python ``re`` syntax, searched with the
            ``regex`` module and a time limit) that a text result of this toolset matches
            when it is an error the tool answered as text (module docstring); None: only
            ``isError`` and exceptions fail a call.
        reset: a command (argv, ``${NAME}`` expanded) that puts the system back into its
            starting state; run in the project folder before a label's calls and before each
            row's calls, so labels may run there and no state carries over between cases.
        reset_timeout_s: seconds the reset may take (a slower one fails the run).
        compare: tool name -> how its results compare for ``execution_match``: ``"exact"``,
            ``"shape"``, ``"none"``, or ``{ignore = ["field", ...]}`` (module docstring).
        read_only: tools that only read, whatever their backend says (an MCP server that
            does not mark them ``readOnlyHint``): their calls always run. The tool's spec
            must say ``permission: read`` too (the stricter tag applies; ``bench init
            --read-only`` writes both).
        server_names: bench tool name -> the MCP server's own name, for the tools the import
            renamed (``get.weather`` -> ``get_weather``, a second ``foo`` -> ``foo_2``):
            their calls reach the server under its name.
        max_restarts: how often a run starts a stdio MCP server again after it exited
            during a call (the call fails with ``server_exited``); one more exit stops the
            run (:meth:`bench.executor.backends.mcp.McpBackend.ready`). 0: never.
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    execute: ExecuteMode
    server: list[str] | str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    module: str | None = None
    timeout_s: float = Field(default=10.0, gt=0, le=600)
    writes: list[str] = Field(default_factory=list)
    reason: str | None = None
    error_pattern: str | None = Field(default=None, min_length=1)
    reset: list[str] | None = None
    reset_timeout_s: float = Field(default=120.0, gt=0, le=3600)
    compare: dict[str, CompareMode | CompareIgnore] = Field(default_factory=dict)
    read_only: list[str] = Field(default_factory=list)
    server_names: dict[str, str] = Field(default_factory=dict)
    max_restarts: int = Field(default=10, ge=0, le=1000)  # = backends.mcp.MAX_RESTARTS

    @field_validator("compare", mode="before")
    @classmethod
    def _one_line_per_compare(cls, value: Any) -> Any:
        """Each entry is a mode or ``{ignore = [...]}``, checked here so that the error names
        the tool and says what is allowed (pydantic's union error names its branches)."""
        if not isinstance(value, dict):
            return value  # pydantic's own "a valid dictionary"
        for tool, how in value.items():
            if isinstance(how, str) and how in ("exact", "shape", "none"):
                continue
            if isinstance(how, dict) and set(how) == {"ignore"} and \
                    isinstance(how["ignore"], list) and how["ignore"] and \
                    all(isinstance(f, str) and f for f in how["ignore"]):
                continue
            raise FieldValueError(str(tool), f"got {how!r}: a tool compares \"exact\", "
                                  "\"shape\", \"none\" or {ignore = [\"field\", ...]} "
                                  "(one or more field names)")
        return value

    @field_validator("error_pattern")
    @classmethod
    def _a_regular_expression(cls, value: str | None) -> str | None:
        """``error_pattern`` compiles (:func:`checked_error_pattern`)."""
        return checked_error_pattern(value)

    def error_regex(self) -> regex.Pattern[str] | None:
        """``error_pattern`` compiled with the ``regex`` module, whose searches take a time
        limit (:func:`bench.executor.outcome.text_error`); None when not declared."""
        return regex.compile(self.error_pattern) if self.error_pattern else None

    def comparisons(self) -> dict[str, Comparison]:
        """``compare`` as the judge takes it: a mode, or the tuple of field names to drop."""
        return {tool: how if isinstance(how, str) else tuple(how.ignore)
                for tool, how in self.compare.items()}

    @model_validator(mode="after")
    def _needs_its_source(self) -> "ToolsetSettings":
        if self.execute == "mcp" and not self.server:
            raise ValueError("execute = \"mcp\" needs server = [command...] or an http(s) URL")
        if self.execute == "mcp" and isinstance(self.server, str) and \
                not self.server.startswith(("http://", "https://")):
            raise ValueError("server must be a command list or an http(s):// URL")
        if self.execute == "python" and not self.module:
            raise ValueError("execute = \"python\" needs module = \"file.py\" (or a module name)")
        if self.reset is not None and not self.reset:
            raise ValueError("reset needs a command: reset = [\"program\", \"arg\", ...]")
        return self

    def expanded_server(self, environ: dict[str, str] | None = None) -> list[str] | str:
        """``server`` with ``${NAME}`` replaced from the environment.

        Raises:
            BenchError: a variable that is not set.
        """
        assert self.server is not None
        if isinstance(self.server, str):
            return expand(self.server, environ)
        return [expand(part, environ) for part in self.server]

    def expanded_env(self, environ: dict[str, str] | None = None) -> dict[str, str] | None:
        """``env`` with ``${NAME}`` replaced, merged over the current environment (None when
        ``env`` is empty: the SDK's default environment)."""
        if not self.env:
            return None
        base = dict(os.environ if environ is None else environ)
        return {**base, **{k: expand(v, environ) for k, v in self.env.items()}}


def expand(text: str, environ: dict[str, str] | None = None) -> str:
    """``text`` with every ``${NAME}`` replaced by the environment variable's value; each
    value is registered as a secret (:func:`bench.redact.register_secret`), so no log, file
    or message of bench shows it (a server's stderr log included).

    Raises:
        BenchError: a named variable is not set.
    """
    from bench.redact import register_secret
    environ = dict(os.environ) if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise BenchError(f"${{{name}}} is used in a toolset's server settings but the "
                             f"environment variable {name} is not set")
        register_secret(environ[name])
        return environ[name]
    return _VARIABLE.sub(value, text)


#: Programs that run a package named by their first argument that is not an option (npm's
#: ``npx``, pnpm's ``pnpx``, Bun's ``bunx``, uv's ``uvx``), and two-word ones (``pipx run``,
#: ``pnpm dlx``, ``yarn dlx``, ``uv tool run``): a server's label names the package.
_PACKAGE_RUNNERS = {("npx",): 1, ("pnpx",): 1, ("bunx",): 1, ("uvx",): 1, ("pipx", "run"): 2,
                    ("pnpm", "dlx"): 2, ("yarn", "dlx"): 2, ("uv", "tool", "run"): 3}
#: A package name as npm (``@scope/name``, lowercase, optional ``@version``) or PyPI (letters,
#: digits, ``.``, ``_``, ``-``; PEP 508 ``==`` pin) spell it: what a label may quote.
_PACKAGE = re.compile(r"(@[a-z0-9][a-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]{0,100}"
                      r"(@[A-Za-z0-9._^~-]+|==[A-Za-z0-9.+!-]+)?")


def server_label(server: str | Sequence[str]) -> str:
    """What messages call the server: a URL without userinfo and query, or the program's
    file name and what it runs: its script's file name (``python notes_server.py``), a
    module (``python -m mcp_server_time``) or the package a package runner starts (``npx
    @modelcontextprotocol/server-memory``, ``uvx mcp-server-time``); never the whole command
    line, which may carry a token: a word is quoted only when it has a script's, module's or
    package's shape and :func:`bench.redact.redact` leaves it whole (no secret it knows)."""
    if isinstance(server, str):
        from urllib.parse import urlsplit
        parts = urlsplit(server)
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}" \
               f"{parts.path}"
    if not server:
        return "?"
    from bench.redact import redact

    label = Path(server[0]).name
    if label == "env":  # env NAME=value... program: named by its program (never a value)
        rest = list(server[1:])
        while rest and (rest[0].startswith("-") or re.fullmatch(r"\w+=.*", rest[0], re.S)):
            if rest.pop(0) in ("-u", "--unset", "-C", "--chdir"):  # options taking a value
                rest = rest[1:]
        return server_label(rest) if rest else label
    words = [label, *server[1:]]
    runner = next((n for prefix, n in _PACKAGE_RUNNERS.items()
                   if tuple(words[:len(prefix)]) == prefix), 0)
    if runner:
        label = " ".join(words[:runner])
        package = next((part for part in words[runner:] if not part.startswith("-")), None)
        if package and _PACKAGE.fullmatch(package) and redact(package) == package:
            label += " " + package
        return label
    if len(server) > 2 and server[1] == "-m" and \
            re.fullmatch(r"[A-Za-z_][\w.]{0,100}", server[2]) and redact(server[2]) == server[2]:
        return f"{label} -m {server[2]}"  # python -m module
    script = next((part for part in server[1:] if not part.startswith("-")), None)
    if script and re.fullmatch(r"[\w./\\-]+\.(py|js|mjs|ts)", script):  # a script's file name
        label += " " + Path(script).name
    return label


def read_only_fix(tools: Sequence[str]) -> str:
    """The other fix of a refused write, for messages that name ``writes``: a tool that only
    reads is marked read-only (``read_only`` in its toolset's table, ``permission: read`` in
    its spec and ``variants/current.yaml``: the stricter tag applies, so all of them), which
    ``bench init --force --read-only`` writes. ``tools``: the refused tools' names."""
    names = ", ".join(f'"{name}"' for name in tools)
    one = len(tools) == 1
    return (f"if {'it only reads' if one else 'they only read'}, mark "
            f"{'it' if one else 'them'} read-only instead: read_only = [{names}] and "
            f"permission: read in {'its spec' if one else 'their specs'} and "
            "variants/current.yaml (bench init --force --read-only "
            f"{','.join(tools)} writes them)")


def checked_error_pattern(value: str | None) -> str | None:
    """``value`` when it compiles with the ``regex`` module that searches it (Python ``re``
    syntax): a toolset's ``error_pattern`` and ``bench run --error-pattern`` alike.

    Raises:
        ValueError: one line, it is not a regular expression and why.
    """
    if value is not None:
        try:
            regex.compile(value)
        except regex.error as exc:
            raise ValueError(f"{value!r} is not a regular expression: {exc}") from None
    return value


def read_tool_table(path: Path, name: str) -> dict[str, object] | None:
    """The ``[tool.bench.<name>]`` table of a TOML file (``gate``, ``toolsets``), or None
    when it has none.

    Raises:
        BenchError: the file is not valid TOML (names file and TOML's line/column message).
    """
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise BenchError(f"invalid TOML: {exc}", file=path) from None
    except OSError as exc:
        raise BenchError(f"cannot read: {exc.strerror}", file=path) from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"not UTF-8 text ({exc.reason})", file=path) from None
    table: Any = data
    for key in ("tool", "bench", name):  # another tool's [tool] layout is not ours to judge
        table = table.get(key) if isinstance(table, dict) else None
    return table if isinstance(table, dict) else None


def load_toolset_settings(root: Path) -> dict[str, ToolsetSettings]:
    """The ``[tool.bench.toolsets.*]`` tables of ``<root>/pyproject.toml`` ({} without the
    file or the tables).

    Raises:
        BenchError: invalid TOML, or a table with an invalid field (names the file and
            ``tool.bench.toolsets.<name>.<field>``).
    """

    path = Path(root) / PYPROJECT
    if not path.is_file():
        return {}
    table = read_tool_table(path, "toolsets")
    if table is None:
        return {}
    found: dict[str, ToolsetSettings] = {}
    for name, settings in table.items():
        where = f"tool.bench.toolsets.{name}"
        if not isinstance(settings, dict):
            raise BenchError("must be a table", file=path, field=where)
        try:
            found[name] = ToolsetSettings.model_validate(settings)
        except ValidationError as exc:
            field, message = pydantic_error_field(exc)
            raise BenchError(message, file=path,
                             field=where + (f".{field}" if field else "")) from None
    return found


def _toml_value(value: Any) -> str:
    """A TOML value for a string, number, bool, list of strings or table of strings."""
    import json
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a TOML basic string is JSON's
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def settings_toml(toolset: str, settings: ToolsetSettings, comments: dict[str, str]) -> str:
    """``[tool.bench.toolsets.<toolset>]`` as TOML text, each set field on its line, with
    ``comments[field]`` after it."""
    lines = [f"[tool.bench.toolsets.{toolset}]"]
    data = settings.model_dump(exclude_none=True)
    for key, value in data.items():
        if key in ("env", "compare", "read_only", "server_names") and not value:
            continue
        if key == "reset_timeout_s" and not data.get("reset"):
            continue
        if key == "max_restarts" and value == ToolsetSettings.model_fields[key].default:
            continue  # the default: not written
        line = f"{key} = {_toml_value(value)}"
        if key in comments:
            line = f"{line:<44} # {comments[key]}"
        lines.append(line)
    return "\n".join(lines) + "\n"
