"""docs/ is a reference, not a diary: no issue numbers and no dates in the pages or the README (history goes to
CHANGELOG.md), a README under README_LINES lines, and every relative link of a page leads to a file of the repository
and, with an anchor, to one of that page's headings. A page is as long as its one task needs: no byte cap. Pages are
sorted by the reader's task: the README's "Where to go next" lists every page under one kind (tutorial, how-to,
reference, explanation), the kind a page's `kind:` lead names."""
import re
from pathlib import Path

import pytest

from ticketsim.data.tables import LABELS, PAIR_SCHEMA, QUERY_SCHEMA, SPLITS, TICKET_SCHEMA

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted((REPO / "docs").glob("*.md"))
README = REPO / "README.md"
README_LINES = 80
GENERATED = {"docs/params.md", "docs/params-research.md"}   # written from the schema by `ticketsim params`
KINDS = ("tutorial", "how-to", "reference", "explanation")

MONTH = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
HISTORY = {
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a date": re.compile(rf"\b\d{{1,2}} {MONTH}\b|\b{MONTH} \d{{4}}\b|\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
}


def test_there_are_pages():
    assert len(PAGES) >= 5 and README.is_file()


@pytest.mark.parametrize("doc", [README, *PAGES], ids=lambda p: p.name)
def test_no_issue_number_and_no_date(doc):
    found = [f"{doc.relative_to(REPO)}:{doc.read_text().count(chr(10), 0, m.start()) + 1}: {what} ({m[0]!r})"
             for what, pattern in HISTORY.items() for m in pattern.finditer(doc.read_text())]
    assert not found, "history belongs in CHANGELOG.md, not in the reference:\n" + "\n".join(found)


def test_the_readme_is_short():
    lines = README.read_text().count("\n")
    assert lines < README_LINES, f"README.md has {lines} lines; keep it under {README_LINES} and link to docs/"


def listed_kinds() -> dict[str, str]:
    """docs page -> the kind the README's "Where to go next" lists it under (a `- **Kind**: links` item per kind)."""
    section = README.read_text().split("\n## Where to go next\n")[1].split("\n## ")[0]
    items = {m[1].lower(): m[2] for m in re.finditer(r"^- \*\*([\w-]+)\*\*:(.*(?:\n  .*)*)", section, re.M)}
    return {page: kind for kind, links in items.items() for page in re.findall(r"\]\(docs/([^)#]+)", links)}


def test_the_readme_lists_every_page_under_the_kind_its_lead_names():
    listed = listed_kinds()
    assert set(listed.values()) == set(KINDS) and sorted(listed) == [page.name for page in PAGES]
    leads = {page.name: m[1] for page in PAGES if (m := re.search(r"\A# .+\n\nkind: (\S+)\n", page.read_text()))}
    assert sorted(leads) == [page.name for page in PAGES if f"docs/{page.name}" not in GENERATED]   # each written page has one
    wrong = [f"docs/{page}: kind: {kind}, listed under {listed[page]}" for page, kind in leads.items() if listed[page] != kind]
    assert not wrong, "\n".join(wrong)


def test_the_data_model_of_the_datasets_page_is_the_tables_of_the_code():
    """docs/datasets.md's data model names each table's columns in the order ticketsim.data.tables declares them, the
    labels and the splits: the format reference cannot drift from the code that reads it."""
    model = (REPO / "docs/datasets.md").read_text().split("\n## Data model\n")[1].split("\n## ")[0]
    columns = {m[1]: re.findall(r"(\w+)(?: \([^)]*\))?(?:, |;|$| \()", m[2].split(";")[0])
               for m in re.finditer(r"^- `(\w+)`: (.*(?:\n  .*)*)", model, re.M)}
    assert columns == {"tickets": list(TICKET_SCHEMA), "queries": list(QUERY_SCHEMA), "pairs": list(PAIR_SCHEMA)}
    assert f"label ({', '.join(f'{value} {name}' for name, value in LABELS.items())})" in model
    assert f"split ({', '.join(SPLITS)})" in model


def slug(heading: str) -> str:
    """GitHub's anchor of a Markdown heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)     # a # inside a code block is no heading
    return {slug(m[1]) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("doc", [README, *PAGES], ids=lambda p: p.name)
def test_every_relative_link_leads_somewhere(doc):
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue                                    # http(s), mailto: not checked offline
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        name = file.relative_to(REPO).as_posix() if file.is_relative_to(REPO) else str(file)
        if name in GENERATED:
            continue
        if not file.exists():
            broken.append(f"{target}: no file {name}")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no heading of {name} has the anchor #{anchor}")
    assert not broken, f"{doc.relative_to(REPO)}:\n" + "\n".join(broken)
