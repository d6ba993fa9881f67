"""The two measurement pages stay what they are: docs/results.md a results page of at most 500 lines (one section per
protocol; investigations belong in docs/benchmarks.md), and every link into either page, from the README or docs/,
points at a heading that exists, every image they show is in the repository."""

from __future__ import annotations

import re
from pathlib import Path

from support import REPO

DOCS = REPO / "docs"
RESULTS = DOCS / "results.md"
RESULTS_MAX_LINES = 500
LINK = re.compile(r"\]\(([^)\s]*?)(?:#([^)\s]+))?\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"#{1,6} (.+)", line)
        if m:
            slug = _slug(m.group(1))
            out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
            seen[slug] = seen.get(slug, 0) + 1
    return out


def _pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.glob("*.md"))]


def test_results_page_is_at_most_500_lines():
    n = len(RESULTS.read_text().splitlines())
    assert n <= RESULTS_MAX_LINES, (
        f"docs/results.md has {n} lines (at most {RESULTS_MAX_LINES}): one section per protocol, each a table with its "
        "command, commit, machine and date; investigations go to docs/benchmarks.md, superseded runs leave (git keeps "
        "them)")


def test_results_page_tells_of_runs_not_of_sessions():
    text = RESULTS.read_text()
    found = [w for w in ("this session", "next GPU session", "Next:", "we recall") if w.lower() in text.lower()]
    assert found == [], f"docs/results.md speaks of who ran what when: {found}"


def test_links_into_the_measurement_pages_reach_a_heading():
    broken = []
    for page in _pages():
        for target, anchor in LINK.findall(page.read_text()):
            if not anchor:
                continue
            dest = page if target == "" else (page.parent / target).resolve()
            if dest.name not in ("results.md", "benchmarks.md") or not dest.is_file():
                continue
            if anchor not in _anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target}#{anchor}")
    assert broken == [], "links to headings that do not exist:\n" + "\n".join(broken)


def test_images_of_the_measurement_pages_exist():
    missing = [f"{page.name}: {src}" for page in (RESULTS, DOCS / "benchmarks.md")
               for src in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text())
               if not (page.parent / src).is_file()]
    assert missing == [], f"images that are not in the repository: {missing}"


def test_slug_follows_github():
    assert _slug("How far to trust the `--dry-run` estimate") == "how-far-to-trust-the---dry-run-estimate"
    assert _slug("Building mamba_ssm's scan") == "building-mamba_ssms-scan"
    assert _slug("Recall tasks, quick preset: six models on a 2-core CPU") == \
        "recall-tasks-quick-preset-six-models-on-a-2-core-cpu"
