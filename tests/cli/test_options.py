"""bench/cli/options.py: the one parser of comma-separated, repeatable list options that
every command uses (``--variants a,b --variants c``)."""

from __future__ import annotations

import pytest

from bench.cli.options import split_list
from bench.errors import BenchError


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
