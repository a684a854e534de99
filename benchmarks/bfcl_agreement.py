"""bench's BFCL-compatible checker beside BFCL's own ``ast_checker.py``: how often they agree.

For every entry of the BFCL data folder (default: the shared sample, read in place) the script
builds model outputs from the possible answers (right answers, each acceptable alternative, and
mutations: a parameter dropped, wrong or re-typed values, int for float, bool for int, strings
re-cased and re-punctuated, a tuple for a tuple or array, ``[]`` for arrays, dict keys dropped
or changed, unknown parameters, wrong function names, calls missing, doubled or reordered,
outputs not in call format, no call) and checks each with both checkers. BFCL's checker is
loaded from a local gorilla mirror (``fetch github:ShishirPatil/gorilla``): its
``ast_checker.py``, ``type_mappings.py``, ``enums.py`` and Java/JS converters as they are, and
``is_function_calling_format_output`` / ``is_empty_output`` cut out of ``utils.py`` (that module
imports the whole leaderboard); ``model_config.py`` is replaced by a stub whose only model has
``underscore_to_dot = False`` (the checker reads nothing else from it). Irrelevance is scored
with the rule of ``eval_runner._evaluate_single_relevance_entry``; the AST categories as
``_evaluate_single_ast_entry`` (format check, then ``ast_checker``).

Prints the pairs checked, the agreement on valid/invalid and on the error type, per category,
and every disagreement (up to ``--show``).

    python benchmarks/bfcl_agreement.py --gorilla /work/.mirror/ShishirPatil+gorilla/repo \
        [--commit 6ea57973c7a6097fd7c5915698c54c17c5b1b6c8] [--data DIR] [--show 20]

``--gorilla`` is the mirror's git directory (read with ``git show``, no work tree needed) or a
checkout. ``--data`` defaults to the shared sample (``$BFCL_SAMPLE`` or ``../shared/bfcl-sample``);
give the mirror's ``bfcl_eval/data`` extracted to a folder to check all of BFCL v4.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib
import json
import subprocess
import sys
import tempfile
import types
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scoring.bfcl import check_entry, load_entries  # noqa: E402
from conftest import bfcl_sample_dir  # noqa: E402

DEFAULT_COMMIT = "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8"
LEADERBOARD = "berkeley-function-call-leaderboard/bfcl_eval"
COPIED = ("eval_checker/ast_eval/ast_checker.py", "constants/type_mappings.py",
          "constants/enums.py", "eval_checker/ast_eval/type_convertor/java_type_converter.py",
          "eval_checker/ast_eval/type_convertor/js_type_converter.py")
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple",
              "live_multiple", "live_parallel", "live_parallel_multiple", "irrelevance",
              "live_irrelevance")
MODEL = "stub-model"


def _read(gorilla: Path, commit: str, path: str) -> str:
    full = f"{LEADERBOARD}/{path}"
    if (gorilla / full).is_file():  # a checkout
        return (gorilla / full).read_text(encoding="utf-8")
    return subprocess.run(["git", f"--git-dir={gorilla}", "show", f"{commit}:{full}"],
                          check=True, capture_output=True, text=True).stdout


def load_bfcl(gorilla: Path, commit: str, into: Path) -> types.SimpleNamespace:
    """BFCL's checker functions, imported from files written under ``into``."""
    package = into / "bfcl_eval"
    for path in COPIED:
        target = package / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_read(gorilla, commit, path), encoding="utf-8")
    for folder in [package, *(p for p in package.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    (package / "constants" / "model_config.py").write_text(
        "from types import SimpleNamespace\n"
        f"MODEL_CONFIG_MAPPING = {{{MODEL!r}: SimpleNamespace(underscore_to_dot=False)}}\n",
        encoding="utf-8")
    utils = ast.parse(_read(gorilla, commit, "utils.py"))
    wanted = [node for node in utils.body if isinstance(node, ast.FunctionDef) and node.name in
              ("is_function_calling_format_output", "is_empty_output")]
    (package / "format_rules.py").write_text(ast.unparse(ast.Module(wanted, [])),
                                             encoding="utf-8")
    sys.path.insert(0, str(into))
    checker = importlib.import_module("bfcl_eval.eval_checker.ast_eval.ast_checker")
    rules = importlib.import_module("bfcl_eval.format_rules")
    enums = importlib.import_module("bfcl_eval.constants.enums")
    return types.SimpleNamespace(ast_checker=checker.ast_checker, python=enums.Language.PYTHON,
                                 is_format=rules.is_function_calling_format_output,
                                 is_empty=rules.is_empty_output)


def bfcl_verdict(bfcl: types.SimpleNamespace, category: str, functions: list[dict[str, Any]],
                 outputs: Any, answers: Any) -> tuple[bool, str | None]:
    """(valid, error type) as BFCL's eval runner gives it (outputs None = decoding failed)."""
    if "irrelevance" in category:
        has_call = outputs is not None and not bfcl.is_empty(outputs)
        return (not has_call, None if not has_call else "irrelevance_error:decoder_success")
    if outputs is None:
        return False, "ast_decoder:decoder_failed"
    if not bfcl.is_format(outputs):
        return False, "ast_decoder:decoder_wrong_output_format"
    result = bfcl.ast_checker(copy.deepcopy(functions), copy.deepcopy(outputs),
                              copy.deepcopy(answers), bfcl.python, category, MODEL)
    return result["valid"], None if result["valid"] else result["error_type"]


def _pick(values: Any) -> Any:
    """The first acceptable literal of a per-key list (BFCL: one level of dicts only)."""
    if not isinstance(values, list):
        return values
    return next((v for v in values if v != ""), "")


def _literal(value: Any) -> Any:
    """A concrete argument from one acceptable value: a dict (or list of dicts) in BFCL's
    per-key form becomes a dict of each key's first acceptable literal."""
    def one(item: dict[str, Any]) -> dict[str, Any]:
        return {k: _pick(v) for k, v in item.items()
                if not isinstance(v, list) or any(x != "" for x in v)}
    if isinstance(value, dict):
        return one(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [one(item) for item in value]
    return value


def _right(answer: dict[str, Any], pick: int = 0) -> dict[str, Any]:
    name, params = next(iter(answer.items()))
    out = {}
    for param, values in params.items():
        concrete = [v for v in values if v != ""]
        if not concrete:
            continue
        out[param] = _literal(concrete[min(pick, len(concrete) - 1)])
    return {name: out}


def _variants(value: Any) -> Iterator[Any]:
    """Wrong, re-typed or re-written versions of one argument value."""
    if isinstance(value, bool):
        yield not value
        yield int(value)
        yield str(value).lower()
    elif isinstance(value, int):
        yield value + 1
        yield float(value)
        yield str(value)
        yield bool(value)
    elif isinstance(value, float):
        yield value + 0.5
        yield str(value)
        if value.is_integer():
            yield int(value)
    elif isinstance(value, str):
        yield value.upper()
        yield f" {value}."
        yield value.replace(" ", "_")
        yield value + "x"
        yield ""
        yield [value]
    elif isinstance(value, list):
        yield []
        yield tuple(value)
        yield value[::-1]
        yield value[:-1]
        yield [*value, value[0]] if value else ["x"]
        yield [str(v) if not isinstance(v, str) else v.upper() for v in value]
        yield [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
        if value and all(isinstance(v, dict) for v in value):
            yield [{k: v for k, v in list(item.items())[1:]} for item in value]
            yield [{**item, "extra": 1} for item in value]
    elif isinstance(value, dict):
        keys = list(value)
        for key in keys:
            yield {k: v for k, v in value.items() if k != key}
            changed = dict(value)
            changed[key] = next(iter(_variants(value[key])), None)
            yield changed
            # a wrong value and a missing key at once
            if len(keys) > 1:
                other = next(k for k in keys if k != key)
                both = {k: v for k, v in changed.items() if k != other}
                yield both
        yield {**value, "extra_key": 1}
        yield {}
    yield None


def outputs_for(entry: Any) -> Iterator[Any]:
    """Model outputs for one entry, right and wrong (see the module docstring)."""
    functions = entry.function
    names = [f["name"] for f in functions]
    if entry.ground_truth is None:  # irrelevance
        first = functions[0] if functions else {"name": "any_function"}
        props = first.get("parameters", {}).get("properties", {})
        yield []
        yield [{}]
        yield [{first["name"]: {}}]
        yield [{first["name"]: {p: "x" for p in props}}]
        yield [{first["name"]: "text"}]
        yield [{first["name"]: {}, "other": {}}]
        yield ["a sentence, not a call"]
        yield None
        return
    rights = [[_right(a, pick) for a in entry.ground_truth] for pick in range(3)]
    seen: list[Any] = []
    for outputs in rights:
        if outputs not in seen:
            seen.append(outputs)
            yield outputs
    base = rights[0]
    yield base[::-1]
    yield base[:-1]
    yield base + [copy.deepcopy(base[0])]
    yield []
    yield None
    yield [{name: "f(x=1)"} for name in names[:1]]
    yield [{"no_such_function": next(iter(base[0].values()))}] + base[1:]
    for other in names:
        if other not in base[0]:
            yield [{other: next(iter(base[0].values()))}] + base[1:]
            break
    for index, call in enumerate(base):
        name, params = next(iter(call.items()))
        for param in list(params):
            dropped = copy.deepcopy(base)
            del dropped[index][name][param]
            yield dropped
            for value in _variants(params[param]):
                changed = copy.deepcopy(base)
                if value is None:
                    changed[index][name][param] = None
                else:
                    changed[index][name][param] = value
                yield changed
        extra = copy.deepcopy(base)
        extra[index][name]["unexpected_parameter"] = 1
        yield extra
        function = next((f for f in functions if f["name"] == name), None)
        if function:
            for param, schema in function["parameters"].get("properties", {}).items():
                if param in params:
                    continue
                optional = copy.deepcopy(base)
                optional[index][name][param] = {"array": [], "tuple": (), "dict": {},
                                                "string": "", "integer": 0,
                                                "float": 0.0, "boolean": False
                                                }.get(schema.get("type"), "x")
                yield optional


def main() -> None:
    """Print the agreement figures described in the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gorilla", type=Path, required=True,
                        help="the gorilla mirror's git directory, or a checkout")
    parser.add_argument("--commit", default=DEFAULT_COMMIT)
    parser.add_argument("--data", type=Path, default=None,
                        help="BFCL data folder (default: the shared sample)")
    parser.add_argument("--show", type=int, default=20, help="disagreements to print")
    args = parser.parse_args()
    data = args.data or bfcl_sample_dir()
    if data is None or not data.is_dir():
        sys.exit("error: no BFCL data folder (give --data, or set BFCL_SAMPLE)")
    with tempfile.TemporaryDirectory() as tmp:
        bfcl = load_bfcl(args.gorilla, args.commit, Path(tmp))
        totals: Counter[str] = Counter()
        per_category: dict[str, Counter[str]] = {}
        shown: list[str] = []
        for category in CATEGORIES:
            if not (data / f"BFCL_v4_{category}.json").is_file():
                continue
            counts = per_category.setdefault(category, Counter())
            for entry in load_entries(data, category):
                for outputs in outputs_for(entry):
                    theirs = _safe_bfcl(bfcl, category, entry, outputs)
                    if theirs is None:
                        counts["bfcl_crashed"] += 1
                        continue
                    try:
                        mine = check_entry(category, entry.function, copy.deepcopy(outputs),
                                           entry.ground_truth)
                        ours = (mine.valid, mine.error_type)
                    except (ValueError, KeyError, TypeError, AttributeError) as exc:
                        ours = (None, f"raised {type(exc).__name__}")
                    counts["pairs"] += 1
                    counts["valid_agree"] += ours[0] == theirs[0]
                    counts["type_agree"] += ours == theirs
                    counts["bfcl_valid"] += theirs[0]
                    if ours != theirs and len(shown) < args.show:
                        shown.append(f"  {entry.id}: outputs {json.dumps(outputs, default=repr)[:160]}"
                                     f"\n    bench {ours}, BFCL {theirs}")
            totals.update(counts)
    print(f"BFCL checker: gorilla {args.commit[:12]} ({args.gorilla}); data {data}")
    print(f"{'category':<24}{'pairs':>8}{'BFCL valid':>12}{'valid agree':>14}"
          f"{'error type agree':>18}{'BFCL crashed':>14}")
    for category, counts in [*per_category.items(), ("all", totals)]:
        pairs = counts["pairs"] or 1
        print(f"{category:<24}{counts['pairs']:>8}{counts['bfcl_valid']:>12}"
              f"{counts['valid_agree'] / pairs:>13.2%} {counts['type_agree'] / pairs:>17.2%}"
              f"{counts['bfcl_crashed']:>14}")
    disagreements = totals["pairs"] - totals["type_agree"]
    print(f"disagreements (valid or error type): {disagreements}"
          + (f"; first {len(shown)}:" if shown else ""))
    for line in shown:
        print(line)


def _safe_bfcl(bfcl: types.SimpleNamespace, category: str, entry: Any,
               outputs: Any) -> tuple[bool, str | None] | None:
    """BFCL's verdict, or None when its checker raises (its data or our mutation is outside
    what it handles; such pairs are counted apart, not compared)."""
    try:
        return bfcl_verdict(bfcl, category, entry.function, outputs, entry.ground_truth)
    except Exception:  # noqa: BLE001 - any exception of BFCL's code
        return None


if __name__ == "__main__":
    main()
