"""docs/extending.md's "Add a run option" recipe stays true: a ``bench run`` option named as
its :class:`bench.runner.RunConfig` field is the field (bench/runner/config.py), the option
(bench/cli/run.py) and the code that acts on it; nothing else maps it. Its value reaches the
run's stored config (and ``bench.evaluate``'s keyword of the same name), and a resume given
another value is refused naming the option, unless the field is one a resume may change
(``RESUME_OVERRIDES``).

A run option cannot be added without editing bench, so these tests check the seam every
option goes through, for every option there is: a new one is checked as soon as it exists."""

from __future__ import annotations

import json
import types
import typing

import pytest
import typer

from bench import cli
from bench.cli.options import FACTOR_OPTIONS, OPTION_FIELDS, SPACE_OPTIONS
from bench.cli.run_config import given_as_they_are
from bench.runner import RunConfig
from bench.runner.config import RESUME_OVERRIDES

# bench run's parameters that set no RunConfig field: the command's own
COMMAND_OWN = {"run_id": "the new run's id (its folder)", "resume": "the run to continue"}
# RunConfig fields no option sets
NO_OPTION = {"limit_sampling": "set only when a stored config from before --limit sampled "
                               "is read (stored_run_config)"}
# text settings, whose other values cannot be derived from the field's type: two each
TEXT_VALUES = {"no_call_layout": ("empty-list", "none-tool-first"),
               "tool_choice": ("required", "none"), "shard": ("1/2", "2/2")}
# options given as they are that this run cannot take, and where they are tested
NOT_IN_THIS_RUN = {"error_pattern": "needs --execute-mcp (tests/executor/test_mcp.py)"}


def _run_options() -> dict[str, list[str]]:
    """``bench run``'s parameters (names) -> their command-line options, as the command line
    parses them."""
    command = typer.main.get_command(cli.app).commands["run"]  # type: ignore[attr-defined]
    return {param.name: [*param.opts, *getattr(param, "secondary_opts", [])]
            for param in command.params}


def _run_parameters() -> list[str]:
    """``bench run``'s parameters (names)."""
    return list(_run_options())


def _field(parameter: str) -> str:
    """The RunConfig field a ``bench run`` parameter sets."""
    if parameter in FACTOR_OPTIONS:
        return "factors"
    return SPACE_OPTIONS.get(parameter) or OPTION_FIELDS.get(parameter, parameter)


def _option(parameter: str) -> str:
    return f"--{parameter.replace('_', '-')}"


def _kind(field: str) -> object:
    """The type of RunConfig ``field`` without its None (``int | None`` -> ``int``)."""
    annotation = RunConfig.model_fields[field].annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return next(k for k in typing.get_args(annotation) if k is not type(None))
    return annotation


def _other_value(field: str, than: object = None) -> object:
    """A value of RunConfig ``field`` other than ``than`` (default: the field's default),
    from its type: the other boolean, the next integer, half the float, another literal,
    else one of :data:`TEXT_VALUES`."""
    info = RunConfig.model_fields[field]
    than = info.default if than is None else than
    kind = _kind(field)
    if typing.get_origin(kind) is typing.Literal:
        return next(v for v in typing.get_args(kind) if v != than)
    if kind is bool:
        return True if than is None else not than
    if kind is int:
        return 2 if than is None else than + 1
    if kind is float:
        return 5.0 if than is None else than / 2
    assert field in TEXT_VALUES, f"give {field} two values in TEXT_VALUES (a {kind} setting)"
    return next(v for v in TEXT_VALUES[field] if v != than)


def _arguments(values: dict[str, object]) -> list[str]:
    """Command-line arguments giving each parameter its value."""
    args: list[str] = []
    for parameter, value in values.items():
        if value is True or value is False:
            args.append(_option(parameter) if value else f"--no-{parameter.replace('_', '-')}")
        else:
            args += [_option(parameter), str(value)]
    return args


def _plain_options() -> dict[str, str]:
    """parameter -> RunConfig field of the options that set one plain field as they are: the
    field is a single value (a list is read apart), not a setting a resume may change
    (RESUME_OVERRIDES, given only when not None), and not ``--dataset`` (read apart: its
    default is the project's only dataset)."""
    plain = {}
    for name in _run_parameters():
        field = _field(name)
        if name in COMMAND_OWN or name == "dataset" or field in RESUME_OVERRIDES:
            continue
        if typing.get_origin(_kind(field)) not in (list, dict):
            plain[name] = field
    return plain


def test_every_run_option_sets_a_run_config_field_of_its_name_or_mapped():
    """An option whose field has another name is mapped in OPTION_FIELDS (or is a tool-space
    or factor option); no option is read into nothing."""
    unmapped = [name for name in _run_parameters()
                if name not in COMMAND_OWN and _field(name) not in RunConfig.model_fields]
    assert unmapped == []


def test_every_run_config_field_has_its_run_option():
    """A new RunConfig field without its bench run option fails here."""
    set_by_options = {_field(name) for name in _run_parameters()}
    assert set(RunConfig.model_fields) - set_by_options == set(NO_OPTION)


def test_every_plain_option_reaches_the_config_as_it_is():
    """bench run's options that set one plain RunConfig field go to the new run's config
    with no line of their own (given_as_they_are): a new option named as its field needs no
    edit of bench/cli/run_config.py."""
    parameters = {name: f"value of {name}" for name in _run_parameters()}
    given = given_as_they_are({**parameters, "factor_values": {}})
    plain = _plain_options()
    assert given == {field: parameters[name] for name, field in plain.items()}
    assert {"seed", "trials", "execute", "shard", "request_timeout_s"} <= set(given)


@pytest.mark.slow
def test_each_plain_option_reaches_the_stored_config_and_a_resume_refuses_a_change(
        run_bench, project):
    """Every option given as it is, each with a value other than its default: a real
    ``bench run`` (oracle) stores each in its config; ``bench.evaluate`` takes the same
    values as keywords; a resume given another value of any of them is refused naming the
    option; a setting of RESUME_OVERRIDES (here --concurrency and --attempts, stored too)
    may change."""
    fields = _plain_options()
    chosen = {name: _other_value(field) for name, field in fields.items()
              if name not in NOT_IN_THIS_RUN}
    resumable = {"concurrency": 2, "attempts": 3}
    made = run_bench("run", "--dataset", "ecommerce", "--variants", "l3", "--provider",
                     "oracle", "--run-id", "options", *_arguments({**chosen, **resumable}))
    assert made.returncode == 0, made.stderr
    config = json.loads((project / "reports" / "runs" / "options" / "manifest.json")
                        .read_text())["config"]
    assert {fields[name]: config[fields[name]] for name in chosen} == \
        {fields[name]: value for name, value in chosen.items()}
    assert {name: config[name] for name in resumable} == resumable

    from bench import evaluate
    result = evaluate("ecommerce", ["l3"], ["oracle"], project=project, run_id="in-process",
                      **{fields[name]: value for name, value in chosen.items()})
    assert {fields[name]: result.manifest.config[fields[name]] for name in chosen} == \
        {fields[name]: value for name, value in chosen.items()}

    options = _run_options()
    for name, value in chosen.items():
        other = _other_value(fields[name], value)
        if other is False and f"--no-{name.replace('_', '-')}" not in options[name]:
            continue  # a flag that can only be given on: leaving it off is not a change
        changed = run_bench("run", "--resume", "options", *_arguments({name: other}))
        assert changed.returncode == 2, (name, changed.stderr)
        assert f"{_option(name)} cannot change when resuming 'options'" in changed.stderr, \
            changed.stderr
    again = run_bench("run", "--resume", "options", "--concurrency", "3", "--attempts", "1")
    assert again.returncode == 0, again.stderr
    assert "already complete" in again.stderr
