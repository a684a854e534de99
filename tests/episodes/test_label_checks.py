"""Episode labels that could never be met are refused when they load, and every episode label
error names its field as written in the file (a hostile review of the dataset labels)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.datasets.labels import check_against_tools
from bench.datasets.loader import load_dataset
from bench.descriptions import load_variant
from bench.episodes.state import EpisodeDatabase, StateError, check_label_state
from bench.errors import BenchError
from bench.runner.plan import check_episodes
from tests.episodes.test_episodes import PAID, STATUS, episode

OTHER = "ORD20250143"


def _write(tmp_path: Path, bad: dict[str, Any] | str) -> Path:
    """A two-line dataset: a good episode, then ``bad`` (a case, or a raw line)."""
    path = tmp_path / "bad.jsonl"
    line = bad if isinstance(bad, str) else json.dumps(bad, ensure_ascii=False)
    path.write_text(json.dumps(dict(episode(), id="ep-0")) + "\n" + line + "\n",
                    encoding="utf-8")
    return path


def _label_error(path: Path) -> BenchError:
    """The first error of every load-time label check ``bench run`` makes (format, tools,
    state), or a failure when the labels pass."""
    with pytest.raises(BenchError) as refused:
        dataset = load_dataset(str(path))
        check_against_tools(dataset, "ecommerce", load_variant("ecommerce", "l3").tools)
        check_episodes(dataset, dataset.cases, execute=True)
    return refused.value


# -- a call both required and forbidden -------------------------------------------------------


@pytest.mark.parametrize("forbidden, replies", [
    ({"name": "cancel_order"}, []),  # any call of the tool
    ({"name": "cancel_order", "arguments": {"order_id": [PAID]}}, []),  # the required one
    ({"name": "cancel_order", "arguments": {"order_id": [OTHER, PAID]}}, []),
    ({"name": "cancel_order", "arguments": {"order_id": [{"$regex": "^ORD"}]}}, []),
    ({"name": "cancel_order", "arguments": {"order_id": [{"$any": True}]}}, []),
    # no scripted reply ever confirms: forbidden for the whole episode
    ({"name": "cancel_order", "until_confirmed": True}, []),
])
def test_a_required_call_that_every_matching_call_breaks_a_forbidden_one_is_refused(
        tmp_path, forbidden, replies):
    bad = dict(episode(forbidden_calls=[{"name": "request_refund"}, forbidden],
                       user_replies=replies), id="ep-1")
    error = _label_error(_write(tmp_path, bad))
    assert (error.line, error.field) == (2, "forbidden_calls.1")
    assert "required_calls.1 ('cancel_order')" in error.message
    assert "never be met" in error.message


@pytest.mark.parametrize("forbidden, replies, required_args", [
    # ask first, then write: forbidden only before the user's reply
    ({"name": "cancel_order", "until_confirmed": True}, ["Yes, cancel it."], {"order_id": [PAID]}),
    # another order than the required one
    ({"name": "cancel_order", "arguments": {"order_id": [OTHER]}}, [], {"order_id": [PAID]}),
    # forbidden with one reason only: the required call may send another
    ({"name": "cancel_order", "arguments": {"reason": ["other"]}}, [], {"order_id": [PAID]}),
    # the required call may omit the reason, the forbidden one needs it sent
    ({"name": "cancel_order", "arguments": {"reason": [{"$any": True}]}}, [],
     {"order_id": [PAID], "reason": [None, "changed_mind"]}),
    # a pattern that one accepted value escapes
    ({"name": "cancel_order", "arguments": {"order_id": [{"$regex": "143$"}]}}, [],
     {"order_id": [PAID, OTHER]}),
])
def test_a_required_call_with_an_allowed_way_to_make_it_loads(tmp_path, forbidden, replies,
                                                               required_args):
    required = [{"name": "get_order_status", "arguments": {"order_id": [PAID]}},
                {"name": "cancel_order", "arguments": required_args, "after": [0]}]
    case = dict(episode(forbidden_calls=[forbidden], user_replies=replies,
                        required_calls=required), id="ep-1")
    dataset = load_dataset(str(_write(tmp_path, case)))
    assert [c.id for c in dataset.cases] == ["ep-0", "ep-1"]


# -- numbers JSON does not have ---------------------------------------------------------------


@pytest.mark.parametrize("literal, shown", [
    ("NaN", "NaN"), ("Infinity", "Infinity"), ("-Infinity", "-Infinity"),
    ("1e400", "Infinity"),  # Python's json overflows it to inf
])
def test_a_state_check_expecting_a_non_finite_number_is_refused(tmp_path, literal, shown):
    line = json.dumps(dict(episode(success={"state_checks": [
        {"sql": "SELECT count(*) FROM orders", "expect": [[1]]}]}), id="ep-1"))
    line = line.replace('"expect": [[1]]', f'"expect": [[{literal}]]')
    error = _label_error(_write(tmp_path, line))
    assert (error.line, error.field) == (2, "success.state_checks.0.expect.0.0")
    assert error.message.startswith(f"{shown} is not a JSON number")


def test_a_non_finite_acceptable_value_is_refused_with_its_field(tmp_path):
    line = json.dumps(dict(episode(), id="ep-1")).replace(f'"order_id": ["{PAID}"]}}, "after"',
                                                          '"order_id": [NaN]}, "after"')
    error = _label_error(_write(tmp_path, line))
    assert (error.line, error.field) == (2, "required_calls.1.arguments.order_id.0")


def test_a_non_finite_number_in_a_hub_row_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def case(case_id: str, value: float) -> dict:
        return dict(episode(success={"state_checks": [{"sql": "SELECT 0.5",
                                                       "expect": [[value]]}]}), id=case_id)

    folder = tmp_path / "hub"
    folder.mkdir()
    # pyarrow keeps a NaN a NaN (pandas would store it as null)
    pq.write_table(pa.Table.from_pylist([case("ep-0", 0.5), case("ep-1", float("nan"))]),
                   folder / "test.parquet")
    with pytest.raises(BenchError, match="NaN is not a JSON number") as refused:
        load_dataset(f"hf:{folder}:test")
    assert (refused.value.line, refused.value.field) == (2, "success.state_checks.0.expect.0.0")


def test_an_integer_beyond_pythons_digit_limit_is_one_line_error(tmp_path):
    line = json.dumps(dict(episode(), id="ep-1")).replace('"max_steps": 6',
                                                          f'"max_steps": {"9" * 5000}')
    with pytest.raises(BenchError, match="malformed JSON: .*4300 digits") as refused:
        load_dataset(str(_write(tmp_path, line)))
    assert refused.value.line == 2 and "\n" not in str(refused.value)


# -- the signed-in customer -------------------------------------------------------------------


def test_an_unknown_signed_in_customer_is_refused_at_load(tmp_path):
    with pytest.raises(StateError, match="unknown customer 'C9999'") as refused:
        check_label_state([], [], user_id="C9999")
    assert refused.value.field == "state.user_id"
    check_label_state([], [], user_id="C0001")
    # a customer the label's own override adds exists in the episode's copy
    check_label_state(["INSERT INTO customers SELECT 'C9999', name, email, city, language, "
                       "created_at, phone, vip_level, growth_value, birthday FROM customers "
                       "WHERE customer_id = 'C0001'"], [], user_id="C9999")
    error = _label_error(_write(tmp_path, dict(episode(state={"user_id": "C9999"}), id="ep-1")))
    assert (error.line, error.field) == (2, "state.user_id")


# -- virtual tables ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", ["fts5(x)", "fts4(x)", "rtree(id, lo, hi)"])
def test_a_virtual_table_in_an_override_is_refused_by_name(module):
    sql = f"CREATE VIRTUAL TABLE f USING {module}"
    with pytest.raises(StateError) as at_load:
        check_label_state([sql], [])
    assert at_load.value.field == "state.overrides.0"
    assert "CREATE VIRTUAL TABLE is refused" in at_load.value.message
    with pytest.raises(StateError) as in_episode:
        with EpisodeDatabase([sql]):
            pass
    assert in_episode.value.message == at_load.value.message


# -- every episode label error names a field of the file --------------------------------------


def _path_exists(obj: Any, dotted: str) -> bool:
    for part in dotted.split("."):
        if isinstance(obj, dict) and part in obj:
            obj = obj[part]
        elif isinstance(obj, list) and part.isdigit() and int(part) < len(obj):
            obj = obj[int(part)]
        else:
            return False
    return True


def _required(*calls: dict) -> dict:
    return {"required_calls": list(calls)}


CANCEL = {"name": "cancel_order", "arguments": {"order_id": [PAID]}}
BAD_EPISODES = {
    "required name type": _required({"name": 5}),
    "required arguments type": _required({"name": "cancel_order", "arguments": {"order_id": PAID}}),
    "required unknown key": _required({**CANCEL, "bogus": 1}),
    "required not an object": _required("cancel_order"),
    "required unknown tool": _required({"name": "launch_rocket"}),
    "required unknown argument": _required({"name": "cancel_order", "arguments": {"oid": [PAID]}}),
    "required value breaks schema": _required({"name": "cancel_order",
                                               "arguments": {"order_id": [42]}}),
    "required empty values": _required({"name": "cancel_order", "arguments": {"order_id": []}}),
    "required bad matcher": _required({"name": "cancel_order",
                                       "arguments": {"order_id": [{"$regexp": "x"}]}}),
    "required bad regex": _required({"name": "cancel_order",
                                     "arguments": {"order_id": [{"$regex": "("}]}}),
    "required after out of range": _required(CANCEL, {**CANCEL, "after": [0, 7]}),
    "required after itself": _required({**CANCEL, "after": [0]}),
    "required after cycle": _required({**CANCEL, "after": [1]}, {**CANCEL, "after": [0]}),
    "required after type": _required(CANCEL, {**CANCEL, "after": [True]}),
    "forbidden unknown tool": {"forbidden_calls": [{"name": "launch_rocket"}]},
    "forbidden unknown argument": {"forbidden_calls": [{"name": "request_refund",
                                                        "arguments": {"oid": ["x"]}}]},
    "forbidden type": {"forbidden_calls": [{"name": "request_refund", "until_confirmed": "y"}]},
    "forbidden bad regex": {"forbidden_calls": [{"name": "request_refund",
                                                 "arguments": {"order_id": [{"$regex": "["}]}}]},
    "forbidden also required": {"forbidden_calls": [CANCEL]},
    "state check sql": {"success": {"state_checks": [{"sql": "SELECT nope FROM orders",
                                                      "expect": []}]}},
    "state check writes": {"success": {"state_checks": [{"sql": "DELETE FROM orders",
                                                         "expect": []}]}},
    "state check expect type": {"success": {"state_checks": [{"sql": STATUS, "expect": 3}]}},
    "state check empty sql": {"success": {"state_checks": [{"sql": "", "expect": []}]}},
    "success empty": {"success": {"state_checks": [], "answer_facts": []}},
    "answer fact empty": {"success": {"answer_facts": [["cancelled"], []]}},
    "answer fact blank": {"success": {"answer_facts": [["cancelled", "  "]]}},
    "override fails": {"state": {"overrides": ["UPDATE nowhere SET x = 1"]}},
    "override virtual table": {"state": {"overrides": ["CREATE VIRTUAL TABLE f USING fts5(x)"]}},
    "override pragma": {"state": {"overrides": ["PRAGMA journal_mode = wal"]}},
    "overrides type": {"state": {"overrides": "DELETE FROM orders"}},
    "user id type": {"state": {"user_id": 7}},
    "user id unknown": {"state": {"user_id": "C9999"}},
    "state unknown key": {"state": {"user": "C0001"}},
    "user replies type": {"user_replies": [1]},
    "max steps range": {"max_steps": 99},
    "max steps type": {"max_steps": "6"},
    "kind": {"kind": "Episode"},
    "expected given": {"expected": {"no_call": True}},
    "toolset pattern": {"toolset": "../x"},
    "non-finite expect": {"success": {"state_checks": [{"sql": STATUS,
                                                        "expect": [[float("inf")]]}]}},
}


@pytest.mark.parametrize("fields", BAD_EPISODES.values(), ids=BAD_EPISODES.keys())
def test_every_episode_label_error_names_a_field_of_the_bad_line(tmp_path, fields):
    bad = dict(episode(**fields), id="ep-1")
    error = _label_error(_write(tmp_path, bad))
    assert error.line == 2 and error.field, str(error)
    assert _path_exists(bad, error.field), f"'{error.field}' is not in the line: {error}"
