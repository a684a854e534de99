"""Messages bench prints are cut to a sane length (issue 19a): a 100 KB exception message from a
function provider, a provider or an SDK was printed whole. The cut keeps the head, the original
length and the tail (where bench says how to go on); stored texts keep everything."""

from __future__ import annotations

import json

import pytest

from bench.errors import MESSAGE_CHARS, shorten_message

LONG = 100_000


def test_a_short_message_is_kept_and_a_long_one_is_cut_with_its_length():
    assert shorten_message("unknown dataset 'x'") == "unknown dataset 'x'"
    assert shorten_message("two\nlines") == "two lines"
    text = "provider p: the function raised ValueError: " + "x" * LONG + "; continue with: bench"
    cut = shorten_message(text)
    assert len(cut) <= MESSAGE_CHARS + 40
    assert cut.startswith("provider p: the function raised ValueError: xxx")
    assert f"[{len(text):,} characters; cut]" in cut
    assert cut.endswith("xxx; continue with: bench")


@pytest.mark.slow
@pytest.mark.parametrize("where", ["answer", "import"])
def test_a_function_providers_100_kb_exception_is_printed_cut(run_bench, project, where):
    # raised when answering (the run fails) or when the module is imported (bad input)
    raising = f"raise ValueError('start ' + 'x' * {LONG} + ' end')"
    (project / "huge_error.py").write_text(
        (raising + "\n" if where == "import" else "")
        + "def answer(messages, tools, trial):\n    " + raising + "\n")
    result = run_bench("run", "--provider", "function:huge_error:answer", "--dataset",
                       "ecommerce", "--limit", "1", "--variants", "l3", "--run-id", "huge")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [x for x in result.stderr.splitlines() if x.startswith("error: ")]
    assert len(line) <= MESSAGE_CHARS + 60, len(line)
    assert "ValueError: start xxx" in line and "characters; cut] … xxx" in line
    assert line.endswith("xxx end")
    assert len(result.stderr) < 2_000
    if where == "answer":  # the manifest keeps the whole message: nothing is lost
        manifest = json.loads((project / "reports/runs/huge/manifest.json").read_text())
        assert manifest["status"] == "failed" and len(manifest["error"]) > LONG
