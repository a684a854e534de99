"""BFCL-compatible checker mode: the AST checker rules of the Berkeley Function Calling
Leaderboard, reproduced for Python-style function docs.

Source of the rules: the public ``ShishirPatil/gorilla`` repository (Apache-2.0) at commit
6ea57973c7a6097fd7c5915698c54c17c5b1b6c8 (2026-03-23; ``ast_checker.py`` last changed in
58f57e91, "BFCL V4 Release"):

- ``berkeley-function-call-leaderboard/bfcl_eval/eval_checker/ast_eval/ast_checker.py``,
  functions ``ast_checker``, ``simple_function_checker``, ``type_checker``,
  ``standardize_string``, ``string_checker``, ``list_checker``, ``dict_checker``,
  ``list_dict_checker``, ``parallel_function_checker_no_order`` and
  ``multiple_function_checker``;
- ``bfcl_eval/eval_checker/eval_runner.py``, ``_evaluate_single_ast_entry`` (an output not in
  call format is ``ast_decoder:decoder_wrong_output_format``) and
  ``_evaluate_single_relevance_entry`` (irrelevance);
- ``bfcl_eval/utils.py``, ``is_function_calling_format_output`` and ``is_empty_output``.

This is an independent implementation of those rules, not a copy; the Java and JavaScript
type converters are not reproduced (Python only). ``benchmarks/bfcl_agreement.py`` runs it
beside BFCL's own ``ast_checker.py`` and prints how often the two agree.

The rules, as BFCL applies them:

- Formats: a model output is a list of ``{function_name: {param: value}}``; a possible answer
  is a list of ``{function_name: {param: [acceptable values]}}``; ``""`` among the acceptable
  values means the parameter may be omitted.
- Call format (``is_function_calling_format_output``): a list of one-key dicts whose value is
  a dict. An output of another shape fails the AST categories
  (``ast_decoder:decoder_wrong_output_format``) and counts as "no call" for irrelevance.
- Simple (one call): the output must hold exactly one call, with the function's name; every
  ``required`` parameter present; no parameter outside the function's properties or the
  possible answer; each value of the right type; each value acceptable; every possible-answer
  parameter present unless ``""`` is acceptable.
- Types: ``string, integer, float, boolean, array, tuple, dict, any`` map to Python ``str, int,
  float, bool, list, list, dict, str`` and are compared with ``type(value) == t`` (so a bool is
  not an integer). A tuple given for a ``tuple`` parameter is converted to a list first. An
  int is accepted for a ``float`` parameter at the top level only (it is converted before the
  check; inside arrays it is not). Arrays are checked one level deep against the item type.
  When the possible answer's own type differs from the declared type, the value counts as a
  "variable" and its type may match the possible answer's instead.
- Strings are compared after :func:`standardize_string` (remove spaces and ``,./-_*^``,
  lower-case, ``'`` -> ``"``), also inside lists and dicts; other values with Python ``==``.
- Lists: each acceptable value is read item by item, so ``""`` reads as ``[]`` (an empty list
  passes where the parameter may be omitted); the same for a list of dicts.
- Dicts: per acceptable dict, the output's keys are checked (unknown key, then value), then
  the acceptable dict's keys are checked for presence; that last check runs even after a value
  failed, so a wrong value plus a missing key reports ``value_error:dict_key``.
- Parallel: the number of calls must equal the number of expected calls; each expected call,
  in order, takes the first not-yet-used output call that passes the simple check (a greedy
  first-fit, unordered).
- Multiple (one call chosen among several functions): as many calls as expected (one), the
  first checked as simple against the expected function.
- Irrelevance: correct when the answer holds no call: it cannot be decoded, or it decodes to
  an "empty" output (``[]``, ``[{}]``, or anything not in call format).
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence, cast

from pydantic import BaseModel, Field

from bench.plural import count

BfclObject = Mapping[str, object]
"""One JSON object of BFCL's files, as read: a function doc, a model call
``{name: {param: value}}`` or a possible answer ``{name: {param: [acceptable values]}}``."""


def _bfcl(value: object) -> Any:
    """``value`` as the untyped JSON BFCL's rules read (they check shapes as BFCL does)."""
    return value


PYTHON_TYPES: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool,
                                 "array": list, "tuple": list, "dict": dict, "any": str}
NESTED_TYPES = ("array", "tuple")
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")


class CheckResult(BaseModel):
    """The BFCL verdict on one answer.

    Attributes:
        valid: the answer passes.
        error_type: BFCL's error type string (e.g. ``"type_error:simple"``,
            ``"value_error:string"``, ``"simple_function_checker:missing_required"``), None
            when valid.
        errors: human-readable messages.
    """

    valid: bool
    error_type: str | None = None
    errors: list[str] = Field(default_factory=list)


def fail(error_type: str, message: str) -> CheckResult:
    """A failed :class:`CheckResult` with BFCL's ``error_type`` and one message."""
    return CheckResult(valid=False, error_type=error_type, errors=[message])


_OK = CheckResult(valid=True)
#: Error-type prefix of a row without any answer of the model's (bench's, not BFCL's).
NO_ANSWER_TYPE = "no_answer"


def standardize_string(text: str) -> str:
    """BFCL's string normalisation: drop spaces and ``,./-_*^``, lower-case, ``'`` -> ``"``."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def function_name(name: str, underscore_to_dot: bool) -> str:
    """The name an output must use: BFCL replaces ``.`` by ``_`` for models whose API forbids
    dots in function names (OpenAI, Mistral, Google: ``underscore_to_dot`` in its model
    config)."""
    return name.replace(".", "_") if underscore_to_dot else name


def _answer_type(acceptable: Sequence[Any]) -> type | None:
    for value in acceptable:
        if value != "":
            return type(value)
    return None


def _type_check(param: str, value: Any, acceptable: Sequence[Any], declared: str,
                expected: type, nested: type | None) -> tuple[CheckResult, bool]:
    """(result, is_variable) as BFCL's ``type_checker``."""
    answer_type = _answer_type(acceptable)
    is_variable = answer_type is not None and answer_type != expected
    if type(value) == expected:  # noqa: E721 - BFCL compares exact types (bool is not int)
        if nested is None:
            return _OK, is_variable
        assert isinstance(value, list)  # nested is set for array and tuple, both typed list
        for item_answers in acceptable:
            fits = True
            if type(item_answers) == list:  # noqa: E721
                for item in value:
                    if not _type_check(param, item, item_answers, nested.__name__, nested,
                                       None)[0].valid:
                        fits = False
                        break
            if fits:
                return _OK, is_variable
        return fail("type_error:nested", f"nested type check failed for {param!r}: expected "
                     f"{declared} of {nested.__name__}, got {value!r}"), is_variable
    if answer_type is not None and type(value) == answer_type:  # noqa: E721
        return _OK, True
    return fail("type_error:simple", f"incorrect type for {param!r}: expected {declared}, got "
                 f"{type(value).__name__} ({value!r})"), is_variable


def _standard(value: Any) -> Any:
    return standardize_string(value) if isinstance(value, str) else value


def _string_check(param: str, value: str, acceptable: Sequence[Any]) -> CheckResult:
    if standardize_string(value) in [standardize_string(a) for a in acceptable
                                     if isinstance(a, str)]:
        return _OK
    return fail("value_error:string", f"invalid value for {param!r}: {value!r}; expected one "
                 f"of {list(acceptable)} (case-insensitive)")


def _list_check(param: str, value: list[Any], acceptable: Sequence[Any]) -> CheckResult:
    got = [_standard(v) for v in value]
    # BFCL's list_checker reads every acceptable value item by item: "" reads as [] (so an
    # empty list passes where the parameter may be omitted) and a string as its characters
    options = [[_standard(v) for v in option] for option in acceptable
               if isinstance(option, (list, str))]
    if got in options:
        return _OK
    return fail("value_error:list/tuple", f"invalid value for {param!r}: {value!r}; expected "
                 f"one of {list(acceptable)}")


def _dict_check(param: str, value: dict[str, Any], acceptable: Sequence[Any]) -> CheckResult:
    result = fail("dict_checker:unclear", f"no acceptable dict for {param!r}")
    for option in acceptable:
        if option == "":
            continue
        if not isinstance(option, dict):  # BFCL would compare against a non-dict: no match
            result = fail("value_error:dict_key", f"acceptable value {option!r} of {param!r} "
                           "is not a dict")
            continue
        ok = True
        for key, item in value.items():
            if key not in option:
                result = fail("value_error:dict_key", f"unexpected dict key {key!r}")
                ok = False
                break
            if _standard(item) not in [_standard(v) for v in option[key]]:
                result = fail("value_error:dict_value", f"invalid value for {key!r}: {item!r}")
                ok = False
                break
        # BFCL runs the missing-key check even after a value failed (its error type wins)
        for key, values in option.items():
            if key not in value and "" not in values:
                result = fail("value_error:dict_key", f"missing dict key {key!r}")
                ok = False
                break
        if ok:
            return _OK
    return result


def _list_dict_check(param: str, value: list[Any], acceptable: Sequence[Any]) -> CheckResult:
    result = fail("list_dict_checker:unclear", f"no acceptable list of dicts for {param!r}")
    for option in acceptable:
        # BFCL compares lengths first: "" has length 0, so [] passes where "" is acceptable
        if not isinstance(option, (list, str)) or len(value) != len(option):
            result = fail("value_error:list_dict_count", "wrong number of dicts in the list")
            continue
        checks = [_dict_check(param, item, [want]) for item, want in zip(value, option)]
        failed = next((c for c in checks if not c.valid), None)
        if failed is None:
            return _OK
        result = failed
    return result


def check_simple(function: BfclObject, output: BfclObject, answer: BfclObject,
                 underscore_to_dot: bool = False) -> CheckResult:
    """BFCL's ``simple_function_checker`` on one call.

    Args:
        function: the function doc (``name``, ``parameters`` with ``properties``, ``required``).
        output: one model call, ``{name: {param: value}}``.
        answer: one possible answer, ``{name: {param: [acceptable values]}}``.
        underscore_to_dot: the model's API forbids dots in names (see :func:`function_name`).

    Returns:
        A :class:`CheckResult` with BFCL's error type on failure.

    Raises:
        ValueError: the function doc declares a type BFCL does not know.
    """
    doc = _bfcl(function)
    acceptable_by_param = _bfcl(next(iter(answer.values())))
    properties = doc["parameters"]["properties"]
    name = function_name(doc["name"], underscore_to_dot)
    if name not in output:
        return fail("simple_function_checker:wrong_func_name",
                     f"function {name!r} not found in the output")
    params = output[name]
    if not isinstance(params, dict):
        return fail("simple_function_checker:wrong_func_name", f"{name!r} has no arguments")
    for param in doc["parameters"].get("required", []):
        if param not in params:
            return fail("simple_function_checker:missing_required",
                         f"missing required parameter {param!r}")
    for param, value in params.items():
        if param not in properties or param not in acceptable_by_param:
            return fail("simple_function_checker:unexpected_param",
                         f"unexpected parameter {param!r}")
        declared = properties[param].get("type")
        if declared not in PYTHON_TYPES:
            raise ValueError(f"BFCL type {declared!r} of {name}.{param} is not a Python type")
        expected = PYTHON_TYPES[declared]
        nested = None
        if declared in NESTED_TYPES:
            nested = PYTHON_TYPES.get(properties[param].get("items", {}).get("type"))
        if declared == "tuple" and type(value) == tuple:  # noqa: E721 - as BFCL, before typing
            value = list(value)
        if declared == "float" and type(value) == int:  # noqa: E721 - top level only
            value = float(value)
        acceptable = acceptable_by_param[param]
        typed, is_variable = _type_check(param, value, acceptable, declared, expected, nested)
        if not typed.valid:
            return typed
        if not is_variable:
            if expected is dict:
                checked = _dict_check(param, value, acceptable)
            elif expected is list and nested is dict:
                checked = _list_dict_check(param, value, acceptable)
            elif expected is str:
                checked = _string_check(param, value, acceptable)
            elif expected is list:
                checked = _list_check(param, value, acceptable)
            else:
                checked = None
            if checked is not None:
                if not checked.valid:
                    return checked
                continue
        if value not in acceptable:
            return fail("value_error:others", f"invalid value for {param!r}: {value!r}; "
                         f"expected one of {list(acceptable)}")
    for param, acceptable in acceptable_by_param.items():
        if param not in params and "" not in acceptable:
            return fail("simple_function_checker:missing_optional",
                         f"parameter {param!r} not provided and not marked optional")
    return _OK


def _find(functions: Sequence[BfclObject], name: str) -> BfclObject:
    for function in functions:
        if function["name"] == name:
            return function
    raise ValueError(f"possible answer names function {name!r}, which the entry lacks")


def check_parallel(functions: Sequence[BfclObject], outputs: Sequence[BfclObject],
                   answers: Sequence[BfclObject], underscore_to_dot: bool = False
                   ) -> CheckResult:
    """BFCL's ``parallel_function_checker_no_order``: same count, then each expected call in
    turn takes the first unused output call that passes :func:`check_simple` (greedy)."""
    if len(outputs) != len(answers):
        return fail("parallel_function_checker_no_order:wrong_count",
                     f"{count(len(outputs), 'call')} for {len(answers)} expected")
    used: set[int] = set()
    for index, answer in enumerate(answers):
        function = _find(functions, next(iter(answer)))
        match = next((i for i, output in enumerate(outputs) if i not in used and
                      check_simple(function, output, answer, underscore_to_dot).valid), None)
        if match is None:
            return fail("parallel_function_checker_no_order:cannot_find_match",
                         f"no output call matches expected call {index}")
        used.add(match)
    return _OK


def check_entry(category: str, functions: Sequence[BfclObject],
                outputs: Sequence[BfclObject] | None,
                answers: Sequence[BfclObject] | None = None,
                underscore_to_dot: bool = False) -> CheckResult:
    """Check one BFCL entry the way BFCL's ``ast_checker`` (and its irrelevance rule) does.

    Args:
        category: the BFCL test category, e.g. ``simple_python``, ``multiple``, ``parallel``,
            ``irrelevance`` (dispatch on substrings, as BFCL does).
        functions: the entry's function docs.
        outputs: the decoded model calls ``[{name: {param: value}}]``; None when the answer
            could not be decoded.
        answers: the entry's ``ground_truth`` (unused for irrelevance).
        underscore_to_dot: see :func:`function_name`.

    Returns:
        A :class:`CheckResult`.

    Raises:
        ValueError: a non-irrelevance entry without answers, or a malformed entry.
    """
    if "irrelevance" in category:
        if outputs is not None and not is_empty_output(outputs):
            return fail("irrelevance_error:decoder_success", "the model called a function")
        return _OK
    if answers is None:
        raise ValueError(f"category {category!r} needs possible answers")
    if outputs is None:
        return fail("ast_decoder:decoder_failed", "the answer could not be decoded")
    if not is_call_format(outputs):
        return fail("ast_decoder:decoder_wrong_output_format",
                     "the output is not a list of {function: {parameter: value}}")
    if "parallel" in category:
        return check_parallel(functions, outputs, answers, underscore_to_dot)
    if "multiple" in category:
        if len(outputs) != len(answers):
            return fail("multiple_function_checker:wrong_count", "wrong number of functions")
        function = _find(functions, next(iter(answers[0])))
        return check_simple(function, outputs[0], answers[0], underscore_to_dot)
    if len(outputs) != 1:
        return fail("simple_function_checker:wrong_count", "wrong number of functions")
    return check_simple(functions[0], outputs[0], answers[0], underscore_to_dot)


def is_call_format(outputs: object) -> bool:
    """BFCL's ``is_function_calling_format_output`` (``bfcl_eval/utils.py``): a list of dicts,
    each with exactly one key whose value is a dict; ``[]`` qualifies."""
    return type(outputs) == list and all(  # noqa: E721 - BFCL compares exact types
        type(item) == dict and len(item) == 1 and  # noqa: E721
        type(next(iter(item.values()))) == dict for item in outputs)  # noqa: E721


def is_empty_output(outputs: object) -> bool:
    """BFCL's ``is_empty_output`` (``bfcl_eval/utils.py``), used for irrelevance: ``[]``,
    ``[{}]`` and anything not in call format (:func:`is_call_format`) hold no call."""
    if not is_call_format(outputs):
        return True
    outputs = cast("list[dict[str, object]]", outputs)  # is_call_format checked the shape
    return len(outputs) == 0 or (len(outputs) == 1 and len(outputs[0]) == 0)
