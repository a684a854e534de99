"""bench/cli/options.py: the one parser of comma-separated, repeatable list options that
every command uses (``--variants a,b --variants c``)."""

from __future__ import annotations

import pytest

from bench.cli.options import option_value, split_list
from bench.errors import BenchError
from bench.toolspace.space import MAX_TOOLS
from tests.toolspace.test_toolspace import one_line_error


def test_list_options_are_split_on_commas_stripped_and_empty_items_dropped():
    assert split_list(["l3, l10", " ,l30,", "l50"]) == ["l3", "l10", "l30", "l50"]
    assert split_list(None) == []
    assert split_list([",", " "]) == []  # no option named: an empty list, the default


def test_a_named_option_given_with_no_item_is_refused_naming_it():
    assert split_list(None, "--variants") == []  # not given: the default applies
    with pytest.raises(BenchError, match=r"--variants needs at least one name \(got ', '\)"):
        split_list([", "], "--variants")
    with pytest.raises(BenchError, match=r"--top-k needs at least one value \(got ''\)"):
        split_list([""], "--top-k", "value")


# -- counts: str.isdigit() takes digits int() refuses; int() refuses 4,300+ digits -------------


@pytest.mark.parametrize("option, value, fragment", [
    ("tools", "²", "'²' is not a whole number"),            # isdigit() True, int() raises
    ("top_k", "13²", "'13²' is not a whole number"),
    ("tools", "１３", "is not a whole number"),               # full-width: not taken as 13
    ("tools", "9" * 5000, "(5000 characters)' is more than 5000"),  # int(): 4,300-digit cap
    ("tools", "5001", "'5001' is more than 5000"),
    ("top_k", "5001", "'5001' is more than 5000"),
    ("tools", "0000", "'0000' is not a whole number of at least 1"),
])
def test_counts_int_cannot_read_are_refused_in_one_line(option, value, fragment):
    with pytest.raises(BenchError, match="^--") as caught:
        option_value(option, [value])
    assert fragment in str(caught.value) and len(str(caught.value)) < 200


def test_counts_with_leading_zeros_are_the_number():
    assert option_value("tools", ["0040", "13"]) == [40, 13]
    assert option_value("top_k", ["0" * 5000 + "7"]) == [7]  # int() of 5,001 digits raised
    assert option_value("top_k", [f"{MAX_TOOLS}"]) == [MAX_TOOLS]


@pytest.mark.slow  # subprocesses
def test_bad_counts_on_the_command_line_are_one_line_not_a_traceback(run_bench):
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--tools", "²"),
                   "--tools: '²' is not a whole number")
    one_line_error(run_bench("run", "--provider", "oracle", "--variants", "l3", "--limit", "1",
                             "--no-execute", "--retriever", "bm25", "--top-k", "9" * 5000),
                   "--top-k: ", "is more than 5000")
