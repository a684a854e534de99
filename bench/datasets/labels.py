"""Every label problem of a dataset against a toolset's tools (not only the first).

Used by :func:`check_against_tools` (which stops at the first) and by
``bench variants diff`` (which compares the problems under two variants).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import jsonschema

from bench.datasets.loader import MATCHER_KEYS, Dataset
from bench.errors import BenchError
from bench.models import ExpectedCall, ForbiddenCall, Tool


@dataclass(frozen=True)
class LabelProblem:
    """A case label that does not fit a toolset: unknown tool or argument, or an acceptable
    value its schema rejects. ``line`` is the case's 1-based line in the dataset file."""

    case_id: str
    line: int
    field: str
    message: str


def iter_label_problems(dataset: Dataset, toolset: str,
                        tools: Sequence[Tool]) -> Iterator[LabelProblem]:
    """Yield every label problem of the cases of ``toolset`` against ``tools``, in file order.

    Literal acceptable values are validated against the argument's JSON Schema (formats
    checked); ``null`` (may be omitted) and matchers (``$regex``, ``$any``) are skipped.
    """
    by_name = {t.name: t.input_schema.get("properties", {}) for t in tools}
    roots = {t.name: t.input_schema for t in tools}
    for case in dataset.cases:
        if case.toolset != toolset:
            continue
        line = dataset.lines[case.id]
        # an episode's expected calls are its required calls (bench.models.Case)
        prefix = "required_calls" if case.kind == "episode" else "expected.calls"
        labelled: list[tuple[str, Sequence[ExpectedCall | ForbiddenCall]]] = [
            ("forbidden_calls", case.forbidden_calls), (prefix, case.expected.calls)]
        for where, calls in labelled:
            for i, call in enumerate(calls):
                if call.name not in by_name:
                    yield LabelProblem(case.id, line, f"{where}.{i}.name",
                                       f"unknown tool '{call.name}' (toolset '{toolset}' "
                                       f"has: {', '.join(sorted(by_name))})")
                    continue
                # a forbidden call's arguments too: a misspelt one would never match, so
                # the forbidden call would silently never count
                for arg, acceptable in call.arguments.items():
                    field = f"{where}.{i}.arguments.{arg}"
                    if arg not in by_name[call.name]:
                        yield LabelProblem(case.id, line, field,
                                           f"tool '{call.name}' has no argument '{arg}'")
                        continue
                    validator = value_validator(by_name[call.name][arg], roots[call.name])
                    for value in acceptable:
                        why = value_problem(validator, value)
                        if why is not None:
                            yield LabelProblem(case.id, line, field,
                                               f"acceptable value {value!r} breaks the "
                                               f"tool's schema: {why}")
        for i, required in enumerate(case.required_calls):
            if required.example is None or required.name not in roots:
                continue
            field = f"required_calls.{i}.example"
            why = value_problem(value_validator(roots[required.name]), required.example)
            if why is not None:
                yield LabelProblem(case.id, line, field, f"the example breaks the tool's "
                                   f"schema: {why}")
            for arg, acceptable in required.arguments.items():
                literals = [v for v in acceptable if not isinstance(v, dict)]
                if len(literals) == len(acceptable) and \
                        required.example.get(arg) not in literals:
                    yield LabelProblem(case.id, line, f"{field}.{arg}",
                                       f"the example's {required.example.get(arg)!r} is not "
                                       f"one of the label's values {acceptable!r}")


def value_validator(schema: dict[str, Any], root: dict[str, Any] | None = None
                    ) -> jsonschema.Draft202012Validator:
    """The validator labels are checked with: JSON Schema 2020-12, formats checked.

    Args:
        schema: the argument's schema (a property of the tool's input schema).
        root: the tool's whole input schema, which ``schema``'s ``$ref``s point into
            (``#/$defs/Name``); without it only references inside ``schema`` resolve.
    """
    if root is None:
        return jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return jsonschema.Draft202012Validator(
        root, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER).evolve(
            schema=schema)


def value_problem(validator: jsonschema.Draft202012Validator, value: object) -> str | None:
    """Why one acceptable value breaks its argument's schema (the first error's message), or
    None when it fits; ``null`` (may be omitted) and matchers (``$regex``, ``$any``) always
    fit. Shared by the dataset check and the BFCL importer so that both judge alike."""
    if value is None or (isinstance(value, dict) and any(k in MATCHER_KEYS for k in value)):
        return None
    error = next(iter(validator.iter_errors(value)), None)
    return None if error is None else error.message


def check_against_tools(dataset: Dataset, toolset: str, tools: Sequence[Tool]) -> None:
    """Check that every case of ``toolset`` names known tools and known arguments.

    Args:
        dataset: the loaded dataset.
        toolset: the toolset whose cases are checked.
        tools: that toolset's tools (any variant: names and schemas agree across variants).

    Raises:
        BenchError: naming the file, line and field of the first unknown tool or argument.
    """
    problem = next(iter_label_problems(dataset, toolset, tools), None)
    if problem is not None:
        raise BenchError(problem.message, file=dataset.path, line=problem.line,
                         field=problem.field)
