"""From clicks to a model version, as a help desk lives it: an agent searches on the page of `ticketsim serve` in a real
browser (headless Debian chromium, Playwright) and clicks "solved it", "related", "not relevant" on the hits;
`ticketsim feedback export` holds them, too few to check against the champion, until `ticketsim feedback review
--accept` hands them to the DVC-tracked labelled data; `ticketsim retrain` trains a new version from it and the quality
gate judges it against the champion.

It runs in the retraining tests' throwaway repo (tests/retrain_workspace.py) with their stand-in for the Siamese stage
(tests/retrain_standin.py: scores are the generator's true labels, blurred as far as its train labels are false), so a
retrain takes seconds; the page serves a tiny
real bundle (benchmarks/common.py) indexed over the workspace's own tickets.
"""
import sys

import polars as pl
import pytest
from benchmarks.common import make_bundle, serving
from retrain_workspace import make_workspace

from ticketsim.bundle.loader import Scorer
from ticketsim.data.csvsource import read_records
from ticketsim.data.intake import text_query_id
from ticketsim.search.index import build_index, model_hash

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' (playwright)")

pytestmark = pytest.mark.slow   # chromium through feedback export to a retrained version (about 2 minutes)

CLICKS = {"YES": "solved it", "REL": "related", "NO": "not relevant"}
VALUES = {"YES": 5, "REL": 3, "NO": 1}


def test_clicks_on_the_page_become_labelled_pairs_and_a_model_version_the_gate_judges(search_parts, tmp_path):
    from test_mlflow_ui import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    ws = make_workspace(tmp_path / "repo", params={"serve": {"max_k": 200}})
    first = ws.ticketsim("retrain")
    assert first.returncode == 0 and "is the champion since its registration" in first.stdout, first.stdout + first.stderr

    # The agent's query: one of the generator's labelled queries that the folder does not hold yet, typed in by its text.
    batch = pl.read_csv(ws.good, schema_overrides={"query_id": pl.String})
    asked = batch.filter(pl.col("query_id") == batch["query_id"][0])
    subject, description = asked["subject"][0], asked["description"][0]
    judged = dict(zip(asked["ticket_id"], asked["label"]))
    query_id = text_query_id(subject, description)
    # The stand-in scores a pair by its true label: the same truth, under the id the query gets from its text.
    reference = ws.root / "reference.csv"
    reference.write_text(reference.read_text() + "".join(f"{query_id},{ticket},{VALUES[label]}\n" for ticket, label in judged.items()))

    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    tickets = read_records(ws.root / "data" / "labeled" / "tickets.csv", "tickets")
    build_index(Scorer.load(bundle), model_hash(bundle), tickets, out=tmp_path / "index")
    journal = ws.root / "feedback" / "judgments.jsonl"      # where `feedback export` in the workspace looks (serve.feedback)
    command = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(bundle), "--index", str(tmp_path / "index"),
               "--port", "{port}", "--params", str(ws.root / "params.yaml"), "--feedback", str(journal)]
    with serving(command, tmp_path / "serve.log", ws.env) as server, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(server.uri)
            page.fill("#subject", subject)
            page.fill("#description", description)
            page.fill("#k", str(tickets.height))        # every ticket, so the agent finds the ones that matter
            page.click("button[type=submit]")
            page.locator("#results li.hit").first.wait_for(timeout=60_000)
            for ticket, label in judged.items():
                hit = page.locator(f'#results li.hit[data-ticket="{ticket}"]')
                hit.get_by_role("button", name=CLICKS[label], exact=True).click()
                page.locator("#notice").wait_for(timeout=60_000)
                assert page.locator("#notice").inner_text() == f"recorded: {label} for ticket {ticket}"
                chosen = page.locator(f'#results li.hit[data-ticket="{ticket}"] button.chosen')
                assert chosen.inner_text() == CLICKS[label]
            page.screenshot(path=str(tmp_path / "judged.png"), full_page=True)
        finally:
            browser.close()

    exported = ws.ticketsim("feedback", "export")     # a few clicks: too few to check, held for a person
    assert exported.returncode == 0, exported.stderr
    assert f"unchecked: its {len(judged)} judgment(s) are too few to check against the champion" in exported.stdout
    accepted = ws.ticketsim("feedback", "review", "--accept", "1")
    assert accepted.returncode == 0, accepted.stderr
    assert "added from feedback/judgments.jsonl: queries 1" in accepted.stdout
    assert "updated data/labeled.dvc" in accepted.stdout
    pairs = pl.read_csv(ws.root / "data" / "labeled" / "pairs.csv", schema_overrides={"query_id": pl.String, "label": pl.String})
    labelled = pairs.filter(pl.col("query_id") == query_id)
    assert dict(zip(labelled["ticket_id"], labelled["label"])) == {ticket: str(VALUES[label]) for ticket, label in judged.items()}
    assert set(labelled["source_file"]) == {"judgments.jsonl"}

    second = ws.ticketsim("retrain")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "### Quality gate passed" in second.stdout and "vs champion" in second.stdout and "model_version: 2" in second.stdout
