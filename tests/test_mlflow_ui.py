"""The MLflow UI as a person uses it (issue 13 §6): a real browser opens the compare view of one stage's runs from a
`dvc repro` store and finds one `dev.rerank.map` row with a value for every run, and the runs table shows their dataset.

Headless Debian chromium (/usr/bin/chromium, offline), driven by Playwright; `mlflow server` on a copy of the store.
"""
import json
import shutil
import sys
import urllib.parse
from pathlib import Path

import mlflow
import pytest
from benchmarks.common import serving

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[test]' (playwright)")

pytestmark = pytest.mark.slow   # the bare-clone pipeline's store in an MLflow server and chromium

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
STARTUP_SECONDS = 90      # mlflow's imports alone take ~10 s on a busy 2-core box
KEY = "dev.rerank.map"

# The values of one metric row in the compare view's Metrics section. It is two virtualized grids side by side: the
# keys (cells linking to the metric's chart), and the values (one column per run); a row is the cells at the same top.
METRIC_ROW = """key => {
  const links = [...document.querySelectorAll('a[title="Plot chart"]')].filter(a => a.textContent.trim() === key);
  if (links.length !== 1) return {rows: links.length, values: []};
  const cell = links[0].parentElement, grids = [...document.querySelectorAll('[role="grid"]')];
  const values = grids[grids.indexOf(cell.closest('[role="grid"]')) + 1];
  const row = [...values.querySelectorAll('[role="rowgroup"] > div')].filter(d => d.style.top === cell.style.top);
  return {rows: 1, values: row.map(d => d.textContent.trim())};
}"""


@pytest.fixture
def ui(repro_workspace, tmp_path):
    """`mlflow server` on a copy of the workspace's store (the session's store stays untouched), answering.
    Yields (server URI, client of the copy)."""
    store = tmp_path / "mlflow.db"
    shutil.copy2(repro_workspace / "mlflow.db", store)
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", f"sqlite:///{store}", "--host", "127.0.0.1",
               "--port", "{port}", "--workers", "1"]
    with serving(command, tmp_path / "server.log", startup_seconds=STARTUP_SECONDS) as server:
        yield server.uri, mlflow.MlflowClient(f"sqlite:///{store}")


def close_assistant(page) -> None:
    """MLflow 3 opens its chat panel beside every page; it takes a third of the width the runs' columns need."""
    close = page.locator('[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()


def test_the_compare_view_of_the_siamese_runs_has_one_dev_map_row_with_a_value_for_every_run(ui, tmp_path):
    if not CHROMIUM.is_file():
        pytest.skip(f"no chromium at {CHROMIUM} (apt-get install chromium)")
    uri, store = ui
    experiment = store.get_experiment_by_name("ticketsim").experiment_id
    # what the docs tell a person to type into the runs table's search box
    query = "tags.stage = 'siamese' and tags.dataset = 'default'"
    runs = store.search_runs([experiment], query)
    assert len(runs) >= 2 and all(KEY in r.data.metrics for r in runs)
    ids = [r.info.run_id for r in runs]
    compare = (f"{uri}/#/compare-runs?runs={urllib.parse.quote(json.dumps(ids))}"
               f"&experiments={urllib.parse.quote(json.dumps([experiment]))}")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 2400, "height": 1350})    # eight runs' columns side by side
            page.goto(compare)
            key = page.locator('a[title="Plot chart"]', has_text=KEY).first
            key.wait_for(timeout=60_000)
            close_assistant(page)
            row = page.evaluate(METRIC_ROW, KEY)
            key.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "compare.png"))
            assert row["rows"] == 1, f"{KEY}: {row['rows']} rows in the compare view's metrics (one column for all runs expected)"
            assert len(row["values"]) == len(ids) and all(0 <= float(v) <= 1 for v in row["values"]), row
            expected = sorted(round(r.data.metrics[KEY], 3) for r in runs)
            assert sorted(round(float(v), 3) for v in row["values"]) == expected

            # the runs table of the experiment, filtered as the docs say: the Dataset column names each run's corpus
            page.goto(f"{uri}/#/experiments/{experiment}/runs?searchFilter={urllib.parse.quote(query)}")
            page.get_by_text(runs[0].info.run_name).first.wait_for(timeout=30_000)
            close_assistant(page)
            page.screenshot(path=str(tmp_path / "runs.png"))
            digest = runs[0].inputs.dataset_inputs[0].dataset.digest
            assert page.get_by_text(f"default ({digest})", exact=True).count() >= len(runs)
            assert page.get_by_text(f"{len(runs)} matching runs").count() == 1
        finally:
            browser.close()
    print(f"screenshots: {tmp_path / 'compare.png'} {tmp_path / 'runs.png'}")
