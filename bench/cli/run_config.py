"""``bench run``'s options read into a run: a new :class:`bench.runner.RunConfig`, or the
settings given again with ``--resume`` checked against the stored run's."""

from __future__ import annotations

import contextlib
import shlex
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

from bench.cli.options import (FACTOR_OPTIONS, OPTION_FIELDS, SPACE_OPTIONS, option_name,
                               option_value, space_fields, split_list)
from bench.errors import BenchError, pydantic_error_field
from bench.limits import DEFAULT_PROVIDERS, DEFAULT_VARIANTS

if TYPE_CHECKING:
    from bench.project import Project
    from bench.runner import RunConfig, Runner

# bench run's parameters that are not a RunConfig field given as it is: read on their own
# (defaults, lists, argv, factors, the tool space), the settings a resume may change
# (RESUME_OVERRIDES, given when not None), and the command's own (ctx, --run-id, --resume)
_READ_APART = frozenset({"ctx", "dataset", "variants", "provider", "cases", "execute_mcp",
                         "factor_values", "run_id", "resume", *SPACE_OPTIONS})


def open_from_options(ctx: typer.Context, project: Project, options: dict[str, Any],
                      stack: contextlib.ExitStack) -> Runner:
    """The run ``bench run``'s ``options`` (parameter name -> value, as the command got them;
    ``factor_values`` holds the factor options) ask for, opened
    (:func:`bench.runner.lifecycle.open_run`): a new run, or the one ``--resume`` names with
    the options given again checked against its stored settings; a resumed run's write lock
    is held in ``stack`` before anything reads its rows.

    Raises:
        BenchError: an option's value is invalid, or changes a resumed run's setting.
    """
    from bench.runner.config import RESUME_OVERRIDES
    from bench.runner.lifecycle import open_run

    # the settings a resume may change (the model's SHA-256 is checked against the run's)
    throughput = {name: options[name] for name in RESUME_OVERRIDES}
    cache, resume = options["cache"], options["resume"]
    if cache is not None and cache not in ("off", "read", "write", "readwrite"):
        raise BenchError(f"--cache must be off, read, write or readwrite, not '{cache}'")
    if options["model"] and options["model_path"]:
        raise BenchError("--model and --model-path both name the model: give one")
    if not resume:
        return open_run(project, config=_new_config(options, throughput),
                        run_id=options["run_id"])
    # options given again are compared with the stored config: only a change is refused
    given, settings = _resume_settings(ctx)
    runner = open_run(project, resume=resume, overrides={**throughput, **given},
                      setting_names=settings)
    _resume_credentials(resume, split_list(options["provider"], "--provider"),
                        runner.config.providers)
    # before anything reads the rows or starts a provider: another process may be writing
    stack.enter_context(runner.store.writing())
    return runner


def given_as_they_are(options: dict[str, Any]) -> dict[str, Any]:
    """The :class:`bench.runner.RunConfig` fields that ``bench run``'s ``options`` give as
    they are: each parameter named as its field (or mapped in
    :data:`bench.cli.options.OPTION_FIELDS`) that is not read apart, with its value as typer
    gave it (None included). A new run option named as its RunConfig field needs no edit
    here (docs/extending.md, "Add a run option")."""
    from bench.runner import RunConfig
    from bench.runner.config import RESUME_OVERRIDES

    apart = _READ_APART | set(RESUME_OVERRIDES)
    return {OPTION_FIELDS.get(name, name): value for name, value in options.items()
            if name not in apart and OPTION_FIELDS.get(name, name) in RunConfig.model_fields}


def _new_config(options: dict[str, Any], throughput: dict[str, Any]) -> RunConfig:
    """The :class:`bench.runner.RunConfig` of a new run from ``bench run``'s ``options``
    (their raw values, checked by RunConfig: e.g. ``--split``'s text).

    Raises:
        BenchError: a value RunConfig refuses (names the option), or a list option given
            empty.
    """
    from bench.runner import RunConfig

    o = options
    mcp_server = mcp_argv(o["execute_mcp"])
    try:
        return RunConfig.model_validate(dict(
            dataset=o["dataset"] or _default_dataset(),
            variants=split_list(o["variants"], "--variants") or list(DEFAULT_VARIANTS),
            providers=split_list(o["provider"], "--provider") or list(DEFAULT_PROVIDERS),
            case_ids=split_list(o["cases"], "--cases") or None,
            mcp_server=mcp_server,
            **given_as_they_are(o),
            factors={name: split_list(values, option_name(name))
                     for name, values in o["factor_values"].items() if values},
            **space_fields(o["tools"], o["retriever"], o["top_k"], o["distractors"],
                           o["always_loaded"]),
            **{k: v for k, v in throughput.items() if v is not None}))
    except ValidationError as exc:  # a limit the options do not state
        field, message = pydantic_error_field(exc)
        # a factor's setting (factors.error_style) is its own option (--error-style)
        option = (field or "").removeprefix("factors.").replace("_", "-")
        raise BenchError(f"--{option}: {message}" if field else message) from None


def shard_option(value: str | None) -> str | None:
    """``--shard``'s check: ``i/n`` (:func:`bench.shard.parse_shard`), canonical form.

    Raises:
        typer.BadParameter: another form (a one-line usage error, exit 2).
    """
    if value is None:
        return None
    from bench.shard import format_shard, parse_shard
    try:
        return format_shard(*parse_shard(value))
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _default_dataset() -> str:
    """The dataset ``bench run`` takes without ``--dataset``: a project's only one (a
    ``bench init`` project has one), else the shipped ``ecommerce``."""
    from bench.datasets import available_datasets
    found = available_datasets()
    return found[0] if len(found) == 1 else "ecommerce"


def mcp_argv(execute_mcp: str | None) -> list[str] | None:
    """``--execute-mcp``'s command line as argv (:func:`shlex.split`), or None.

    Raises:
        BenchError: it cannot be split (e.g. an unclosed quote).
    """
    try:
        return shlex.split(execute_mcp) if execute_mcp else None
    except ValueError as exc:
        raise BenchError(f"--execute-mcp: {exc} in '{execute_mcp}'") from None


def _resume_settings(ctx: typer.Context) -> tuple[dict[str, Any], dict[str, str]]:
    """The run settings given on ``bench run --resume``'s command line, for
    :meth:`bench.runner.Runner.resume` to compare with the stored ones: (RunConfig field ->
    value, with ``factors`` holding the factor options given; setting -> the option that
    gave it, ``factors.<name>`` for a factor). ``--provider`` is checked by
    :func:`_resume_credentials`; the settings a resume may change
    (:data:`bench.runner.config.RESUME_OVERRIDES`) are passed on their own.

    Raises:
        BenchError: ``--run-id`` names another run than ``--resume``, or an option's value
            cannot be read (an empty ``--variants``, an unclosed quote in
            ``--execute-mcp``).
    """
    from bench.runner.config import RESUME_OVERRIDES

    params = ctx.params
    given: dict[str, Any] = {}
    factors: dict[str, list[str]] = {}
    options: dict[str, str] = {}
    for name, value in params.items():
        if name in ("resume", "provider", *RESUME_OVERRIDES) or \
                getattr(ctx.get_parameter_source(name), "name", "") != "COMMANDLINE":
            continue
        option = option_name(name)
        options[f"factors.{name}" if name in FACTOR_OPTIONS
                else SPACE_OPTIONS.get(name) or OPTION_FIELDS.get(name, name)] = option
        if name == "run_id":
            if value != params["resume"]:
                raise BenchError(f"--run-id cannot change when resuming '{params['resume']}':"
                                 f" stored {params['resume']}, given {value}; start a new run "
                                 "to use another id")
        elif name in FACTOR_OPTIONS:
            factors[name] = split_list(value, option)
        elif name in SPACE_OPTIONS:
            given[SPACE_OPTIONS[name]] = option_value(name, value)
        elif name in ("variants", "cases"):
            given[OPTION_FIELDS.get(name, name)] = split_list(value, option)
        elif name == "execute_mcp":
            given["mcp_server"] = mcp_argv(value)
        else:
            given[OPTION_FIELDS.get(name, name)] = value
    if factors:
        given["factors"] = factors
    return given, options


def _resume_credentials(run_id: str, given: list[str], stored: list[str]) -> None:
    """Check ``--provider`` ids given with ``--resume``: each must be a stored provider, given
    again as it is or with its base URL's credentials (``user:password@``, never stored:
    :mod:`bench.redact`); their public ids were registered when ``given`` was parsed here.

    Raises:
        BenchError: an id whose public form is not a provider of the run (names the stored
            and the given providers).
    """
    from bench.redact import public_provider_id
    for provider_id in given:
        public = public_provider_id(provider_id)
        if public not in stored:
            raise BenchError(f"--provider cannot change when resuming '{run_id}': stored "
                             f"{','.join(stored)}, given {public} (it would change what the "
                             "run measures); with --resume it only gives a stored provider's "
                             "id again, or its base-URL secrets (user:password@, ?key=<value>)")
