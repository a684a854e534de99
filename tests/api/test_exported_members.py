"""The public API in ``bench/__init__.py``: every exported name resolves, is defined where the
export table says, is documented, and nothing else is exported (httpx keeps the same test,
tests/api/test_exported_members.py in encode/httpx)."""

import importlib
import subprocess
import sys

import pytest

import bench


def test_every_exported_name_resolves_to_a_documented_object_of_its_module():
    for name in bench.__all__:
        value = getattr(bench, name)
        module = importlib.import_module(bench._EXPORTS[name])
        assert getattr(module, name) is value, name
        assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_dir_lists_exactly_the_public_names():
    assert set(dir(bench)) == set(bench.__all__) | {"__version__"}


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        bench.Nope  # noqa: B018


def test_import_bench_loads_no_heavy_dependency():
    code = ("import sys, bench; heavy = {'pandas', 'openai', 'anthropic', 'llama_cpp', "
            "'scipy'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"

