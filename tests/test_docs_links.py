"""Every relative link of the README, docs/ and benchmarks/RESULTS.md resolves, anchors included,
and every ``docs/<page>.md[#anchor]`` named in code, tests and settings exists.

Anchors follow GitHub's heading ids: lower-cased, punctuation other than ``-`` and ``_``
dropped, spaces turned into ``-``, a repeated id suffixed ``-1``, ``-2``...
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "benchmarks" / "RESULTS.md",
         *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\]\(([^()\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """Markdown without fenced blocks and inline code (links there are not links)."""
    return _CODE.sub("", _FENCE.sub("", text))


def github_anchors(text: str) -> set[str]:
    """The heading ids GitHub gives a Markdown page."""
    seen: dict[str, int] = {}
    anchors = set()
    for title in _HEADING.findall(_FENCE.sub("", text)):
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title)  # a link's text only
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_the_slugs_match_githubs():
    text = "# A `bench compare A B`\n## Why the portable build\n## Size\n## Size\n" \
           "## HTML report size (`benchmarks/report_scale.py`, 2026-12-01)\n"
    assert github_anchors(text) == {
        "a-bench-compare-a-b", "why-the-portable-build", "size", "size-1",
        "html-report-size-benchmarksreport_scalepy-2026-12-01"}


def _check(target: str, base: Path) -> str | None:
    """None when ``target`` (a relative link, maybe with #anchor) resolves from ``base``."""
    path, _, anchor = target.partition("#")
    file = (base.parent / path).resolve() if path else base
    if not file.exists():
        return f"{target}: no such file"
    if anchor and file.suffix == ".md" and \
            anchor not in github_anchors(file.read_text(encoding="utf-8")):
        return f"{target}: no heading #{anchor} in {file.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    links = [t for t in _LINK.findall(_prose(page.read_text(encoding="utf-8")))
             if not re.match(r"[a-z][a-z0-9+.-]*:", t)]
    assert links or page.name == "RESULTS.md", "a page without links to the others"
    broken = [problem for t in links if (problem := _check(t, page))]
    assert not broken, "\n".join(broken)


def test_docs_named_in_code_exist():
    """Docstrings, messages and settings that send the reader to docs/ name real pages and
    headings."""
    broken = []
    sources = [*ROOT.joinpath("bench").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py"),
               *ROOT.joinpath("benchmarks").glob("*.py"), ROOT / "pyproject.toml",
               ROOT / ".ci" / "run"]
    for source in sources:
        text = source.read_text(encoding="utf-8")
        for target in re.findall(r"(?<![\w/.])docs/[\w-]+\.md(?:#[\w-]+)?", text):
            problem = _check(target, ROOT / "README.md")
            if problem:
                broken.append(f"{source.relative_to(ROOT)}: {problem}")
    assert not broken, "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if f"(docs/{p.name}" not in readme]
    assert not missing, missing


def test_the_readme_keeps_its_sample_block():
    """benchmarks/readme_sample.py rewrites what lies between these markers."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    begin, end = "<!-- sample:begin -->", "<!-- sample:end -->"
    assert readme.count(begin) == readme.count(end) == 1
    assert "\n```\nrun " in readme[readme.index(begin):readme.index(end)]
