"""README.md and the pages of docs/ say what the code does.

Every fenced ``python`` block runs, the blocks of one page in order in one
namespace (a page reads as one session), and what a block prints is compared
with the fenced ``text`` block written directly under it; a python block with
no such block must print nothing. Relative links point to files that exist,
every page of docs/ is reachable from the README, and the README stays a
landing page (it is also the PyPI long description)."""
import contextlib
import difflib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
HEADING = re.compile(r"^#+[ \t]+(.+?)[ \t]*$", re.M)
README_MAX_BYTES = 15_000
# pages of figures and commands, with nothing to run in Python
WITHOUT_EXAMPLES = {"development.md", "results.md", "scaling.md", "workflows.md"}


def python_blocks(page: Path):
    """(first line, code, expected output or None) of every python block of a page."""
    text = page.read_text(encoding="utf8")
    fences = list(FENCE.finditer(text))
    found = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        after = fences[i + 1] if i + 1 < len(fences) else None
        shown = after is not None and after.group(1) == "text" and not text[fence.end():after.start()].strip()
        line = text.count("\n", 0, fence.start(2)) + 1
        found.append((line, fence.group(2), after.group(2) if shown else None))
    return found


def normalised(output: str) -> str:
    return "\n".join(line.rstrip() for line in output.strip("\n").splitlines())


def test_readme_is_a_landing_page():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, f"README.md is {size:,} bytes; move detail to docs/ (at most {README_MAX_BYTES:,})"


def test_every_page_has_runnable_examples():
    bare = [page.name for page in PAGES if not python_blocks(page) and page.name not in WITHOUT_EXAMPLES]
    assert not bare, f"pages without a python example: {bare}"


def anchors(page: Path) -> set:
    """The anchors GitHub gives a page's headings: lower case, punctuation
    dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf8"))
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in HEADING.findall(text)}


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text(encoding="utf8"))
    broken = []
    for target, anchor in LINK.findall(text):
        if "://" in target or target.startswith("mailto:"):
            continue
        path = page.parent / target if target else page
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
            broken.append(f"{target}#{anchor}" if anchor else target)
    assert not broken, f"{page.name} links to missing files or headings: {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / t).resolve() for t, _ in LINK.findall(README.read_text(encoding="utf8")) if t}
    unlinked = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link to: {unlinked}"


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_page_prints_what_it_shows(page):
    namespace = {"__name__": "__main__"}
    for line, code, expected in python_blocks(page):
        where = f"{page.relative_to(ROOT)}:{line}"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, where, "exec"), namespace)
        got, want = normalised(out.getvalue()), normalised(expected or "")
        if got != want:
            diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "shown", "printed", lineterm=""))
            pytest.fail(f"{where}: the block prints other than the page shows\n{diff}")
