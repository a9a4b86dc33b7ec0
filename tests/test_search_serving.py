"""The search over HTTP, from the pipeline's own outputs (conftest's repro_workspace): the registered model under
`mlflow models serve` (JSON in, top-k ids, scores and reasons out; 4xx with a message for bad requests, and it keeps
serving), and `ticketsim serve`'s page in headless Debian chromium driven by Playwright."""
import json
import re
import shutil
import sys
import urllib.error
import urllib.request

import mlflow
import polars as pl
import pytest
from benchmarks.common import serving

from ticketsim.search.searcher import Searcher

pytestmark = pytest.mark.slow   # the bare-clone pipeline's model served over HTTP, and chromium

MODEL = "ticketsim-siamese-default"
QUERY = {"subject": "pump getting hot", "description": "the feed pump runs at 95 C since monday, bearing noise"}


def post(uri: str, body: bytes) -> tuple[int, dict]:
    request = urllib.request.Request(f"{uri}/invocations", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def search_body(rows: list[dict], k: int) -> bytes:
    return json.dumps({"dataframe_records": rows, "params": {"k": k}}).encode()


@pytest.fixture
def champion_store(repro_workspace, tmp_path) -> str:
    """A copy of the workspace's registry with version 1 as champion (the workspace itself is never modified)."""
    shutil.copy2(repro_workspace / "mlflow.db", tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    mlflow.MlflowClient(uri, uri).set_registered_model_alias(MODEL, "champion", "1")
    return uri


def test_the_served_champion_searches_and_answers_bad_requests_with_a_4xx_and_keeps_serving(repro_workspace, champion_store,
                                                                                             tmp_path):
    command = [sys.executable, "-m", "mlflow", "models", "serve", "-m", f"models:/{MODEL}@champion", "--env-manager", "local",
               "--host", "127.0.0.1", "--port", "{port}", "--workers", "1"]
    with serving(command, tmp_path / "serve.log", {"MLFLOW_TRACKING_URI": champion_store}) as server:
        status, body = post(server.uri, search_body([QUERY, {"subject": "plc offline", "description": ""}], k=3))
        assert status == 200, body
        rows = body["predictions"]
        local = Searcher.load(repro_workspace / "models/default/bundle", repro_workspace / "models/default/index")
        expected = local.search(pl.DataFrame([{"query_id": "0", **QUERY}, {"query_id": "1", "subject": "plc offline",
                                                                            "description": ""}]), 3)
        assert [r["ticket_ids"] for r in rows] == [[h.ticket_id for h in a.hits] for a in expected]
        assert all(len(r["scores"]) == 3 and all(1 <= s <= 5 for s in r["scores"]) and len(r["reasons"]) == 3 for r in rows)
        assert {"parts", "topics"} <= set(rows[0]["reasons"][0])
        assert all(r["raw_scores"] == pytest.approx([h.score for h in a.hits]) for r, a in zip(rows, expected))

        for bad, message in ((b'{"dataframe_records": [{"subject": "pump"', "Invalid input"),
                             (search_body([{"subject": "pump"}], 3), "expected ['subject', 'description']"),
                             (search_body([{"subject": " ", "description": ""}], 3), "subject and description are both empty")):
            status, body = post(server.uri, bad)
            assert 400 <= status < 500 and message in body.get("message", ""), (status, body)
        status, body = post(server.uri, search_body([QUERY], k=1))       # still serving
        assert status == 200 and len(body["predictions"][0]["ticket_ids"]) == 1
        pairs = {"query_subject": "pump getting hot", "query_description": "", "ticket_subject": "Pump overtemperature",
                 "ticket_description": "Bearing alarm E4711.", "ticket_solution": "Replaced the bearing."}
        status, body = post(server.uri, json.dumps({"dataframe_records": [pairs]}).encode())   # the pair-scoring callers
        assert status == 200 and 1 <= body["predictions"][0]["score"] <= 5


def test_the_search_page_answers_a_query_in_a_real_browser(repro_workspace, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' (playwright)")
    from test_mlflow_ui import CHROMIUM, CHROMIUM_ARGS

    if not CHROMIUM.is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    command = [sys.executable, "-m", "ticketsim.cli", "serve", "--model", str(repro_workspace / "models/default/bundle"),
               "--index", str(repro_workspace / "models/default/index"), "--port", "{port}"]
    with serving(command, tmp_path / "page.log") as server, sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(server.uri)
            page.fill("#subject", QUERY["subject"])
            page.fill("#description", QUERY["description"])
            page.click("button[type=submit]")
            page.locator("#results li.hit").first.wait_for(timeout=60_000)
            hits = page.locator("#results li.hit")
            assert hits.count() == 10
            first = hits.first
            score = re.fullmatch(r"score (\d+\.\d\d) / 5", first.locator(".score").inner_text())   # calibrated, labelled as such
            assert score and 1 <= float(score.group(1)) <= 5 and first.locator(".solution").inner_text().strip()
            assert "why:" in first.locator(".why").inner_text()
            page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

            page.fill("#subject", "")
            page.fill("#description", "")
            page.click("button[type=submit]")
            page.locator(".error").wait_for(timeout=30_000)
            assert "subject and description are both empty" in page.locator(".error").inner_text()
            assert page.locator("#results").count() == 0
        finally:
            browser.close()
    print(f"screenshot: {tmp_path / 'search.png'}")
