"""What an agent reads on the search page and in `ticketsim search`: the score of a model with a calibration (1-5) and
of one without (the raw g, no 1-5 figure), a visible legend saying which, each ticket's description (collapsed), and a
judgment answered by POST-redirect-GET, so reloading the page sends nothing again. Through Flask's test client."""
import html
import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import polars as pl
import pytest
from benchmarks.common import make_bundle
from markupsafe import escape

from ticketsim.app.access import Access
from ticketsim.app.page import create_app
from ticketsim.bundle.loader import Scorer
from ticketsim.cli import OK, main
from ticketsim.config import ServeConfig
from ticketsim.data.feedback import Journal
from ticketsim.evaluate.calibrate import UNCALIBRATED
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.searcher import LEGEND, Searcher

QUERY = {"subject": "pump leaking", "description": "seal leaks, water under the feed pump", "k": "4"}


@pytest.fixture(scope="module")
def models(search_parts, tmp_path_factory) -> SimpleNamespace:
    """The same '22' bundle twice, indexed over the tiny corpus: as trained on labelled pairs (a fitted calibrator), and
    as a tickets-only model leaves it (UNCALIBRATED)."""
    root = tmp_path_factory.mktemp("page")
    calibrated = make_bundle(root / "calibrated", search_parts, "22")
    tickets_only = shutil.copytree(calibrated, root / "tickets-only")
    UNCALIBRATED.save(tickets_only / "calibrator.json")
    found = {}
    for name, bundle in (("calibrated", calibrated), ("tickets_only", tickets_only)):
        build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, out=root / f"{name}-index")
        found[name] = SimpleNamespace(bundle=bundle, index=root / f"{name}-index",
                                      searcher=Searcher.load(bundle, root / f"{name}-index"))
    return SimpleNamespace(**found, tickets=search_parts.corpus.tickets)


def page_client(model, tmp_path):
    return create_app(model.searcher, ServeConfig(), Journal(tmp_path / "judgments.jsonl"), Access("127.0.0.1", None)).test_client()


def test_without_a_calibration_the_page_shows_the_raw_g_and_a_legend_saying_so(models, tmp_path):
    for model, calibrated in ((models.calibrated, True), (models.tickets_only, False)):
        text = page_client(model, tmp_path).get("/", query_string=QUERY).get_data(as_text=True)
        answer = model.searcher.search(pl.DataFrame({"query_id": ["1"], "subject": [QUERY["subject"]],
                                                     "description": [QUERY["description"]]}), 4)[0]
        assert answer.calibrated is calibrated
        assert f'<p class="legend" id="legend">{escape(LEGEND[calibrated])}</p>' in text
        for hit, g in zip(answer.hits, answer.similarities()):
            assert f'<span class="similarity">g {g}</span>' in text
            assert (f'<span class="score">score {hit.calibrated:.2f} / 5</span>' in text) if calibrated else hit.calibrated is None
        assert text.count('<span class="score">') == (4 if calibrated else 0) and ("/ 5" in text) is calibrated


def test_the_json_api_and_the_served_answers_say_whether_there_is_a_calibration(models, tmp_path):
    found = page_client(models.tickets_only, tmp_path).get("/api/search", query_string=QUERY).get_json()
    assert found["calibrated"] is False and all(h["calibrated"] is None and 0 < h["score"] <= 1 for h in found["hits"])
    found = page_client(models.calibrated, tmp_path).get("/api/search", query_string=QUERY).get_json()
    assert found["calibrated"] is True and all(1 <= h["calibrated"] <= 5 for h in found["hits"])


def test_the_page_shows_each_tickets_description_collapsed(models, tmp_path):
    text = page_client(models.calibrated, tmp_path).get("/", query_string=QUERY).get_data(as_text=True)
    answer = models.calibrated.searcher.search(pl.DataFrame({"query_id": ["1"], "subject": [QUERY["subject"]],
                                                             "description": [QUERY["description"]]}), 4)[0]
    descriptions = dict(zip(models.tickets["ticket_id"], models.tickets["description"]))
    for hit in answer.hits:
        assert hit.description == descriptions[hit.ticket_id] and hit.description
        shown = f'<details class="description"><summary>description</summary><pre>{escape(hit.description)}</pre></details>'
        assert shown in text
    assert text.count("<details") == 4 and "<details open" not in text


def test_a_judgment_redirects_to_the_page_so_a_reload_sends_nothing_again(models, tmp_path):
    page, journal = page_client(models.calibrated, tmp_path), tmp_path / "judgments.jsonl"
    ticket = page.get("/api/search", query_string=QUERY).get_json()["hits"][1]["ticket_id"]   # a hit the page lists
    posted = page.post("/feedback", data={**QUERY, "ticket_id": ticket, "label": "REL"})
    assert posted.status_code == 303 and len(journal.read_text().splitlines()) == 1
    shown = parse_qs(urlsplit(posted.headers["Location"]).query)
    assert shown["subject"] == [QUERY["subject"]] and shown["judged"] == [ticket] and shown["label"] == ["REL"]
    for _ in range(2):      # the page the redirect names, then a reload of it
        again = page.get(posted.headers["Location"])
        assert again.status_code == 200 and f"recorded: REL for ticket {ticket}" in again.get_data(as_text=True)
        assert 'value="REL" class="chosen"' in again.get_data(as_text=True)
    assert len(journal.read_text().splitlines()) == 1

    conflict = page.post("/feedback", data={**QUERY, "ticket_id": ticket, "label": "NO"})   # kept apart: no button marked
    assert conflict.status_code == 303 and "judged" not in parse_qs(urlsplit(conflict.headers["Location"]).query)
    assert "contradicts REL at" in page.get(conflict.headers["Location"]).get_data(as_text=True)
    refused = page.post("/feedback", data={**QUERY, "ticket_id": ticket, "label": "MAYBE"})   # nothing written: its status
    assert refused.status_code == 400 and "unknown label 'MAYBE'" in html.unescape(refused.get_data(as_text=True))
    assert len(journal.read_text().splitlines()) == 1


def test_a_notice_shows_only_as_the_servers_own_redirect_signed_it(models, tmp_path):
    page = page_client(models.calibrated, tmp_path)
    planted = "Your password expired: call +1 555 0100 and read it out"
    for signed in ("", "0" * 64, "ü"):
        shown = page.get("/", query_string={**QUERY, "notice": planted, "signed": signed})
        assert shown.status_code == 200 and planted not in shown.get_data(as_text=True)
        assert 'id="notice"' not in shown.get_data(as_text=True) and 'id="results"' in shown.get_data(as_text=True)
    ticket = page.get("/api/search", query_string=QUERY).get_json()["hits"][0]["ticket_id"]
    posted = page.post("/feedback", data={**QUERY, "ticket_id": ticket, "label": "YES"})
    own = parse_qs(urlsplit(posted.headers["Location"]).query)
    assert f'id="notice" role="status">recorded: YES for ticket {ticket}</p>' in page.get(posted.headers["Location"]).get_data(as_text=True)
    forged = page.get("/", query_string={**QUERY, "notice": planted, "signed": own["signed"][0]})    # another text's signature
    assert planted not in forged.get_data(as_text=True)
    other_server = page_client(models.calibrated, tmp_path / "other")     # another key: the link of this one says nothing
    assert 'id="notice"' not in other_server.get(posted.headers["Location"]).get_data(as_text=True)


@pytest.mark.parametrize("k", ["²", "٣", "9" * 5000, "1e3", "-1"])
def test_a_k_that_is_no_plain_number_is_refused_like_any_bad_k(models, tmp_path, k):
    page = page_client(models.calibrated, tmp_path)
    answer = page.get("/api/search", query_string={**QUERY, "k": k})
    assert answer.status_code == 400 and answer.get_json()["problems"] == [
        f"tickets: {k[:20]!r} is not a whole number from 1 to {ServeConfig().max_k}"]
    shown = page.get("/", query_string={**QUERY, "k": k})
    assert shown.status_code == 400 and "is not a whole number from 1 to" in shown.get_data(as_text=True)


def test_ticketsim_search_prints_the_same_legend_and_a_score_column_only_with_a_calibration(models, capsys):
    for model, calibrated in ((models.calibrated, True), (models.tickets_only, False)):
        where = ["--model", str(model.bundle), "--index", str(model.index)]
        assert main(["search", *where, "--subject", QUERY["subject"], "--description", QUERY["description"], "-k", "3"]) == OK
        out = capsys.readouterr().out.splitlines()
        assert out[0] == LEGEND[calibrated]
        header = next(line for line in out if line.startswith("rank"))
        assert header.split()[:4] == (["rank", "ticket", "score", "g"] if calibrated else ["rank", "ticket", "g", "subject"])
        assert main(["search", *where, "--subject", QUERY["subject"], "--json"]) == OK
        assert json.loads(capsys.readouterr().out)[0]["calibrated"] is calibrated


def test_docs_search_shows_the_legend_in_the_words_the_page_and_the_table_print():
    shown = (Path(__file__).resolve().parents[1] / "docs" / "search.md").read_text().splitlines()
    assert LEGEND[True] in shown and LEGEND[False] in shown


@pytest.fixture(scope="module")
def facets(models, tmp_path_factory) -> SimpleNamespace:
    """An index of the tiny corpus whose tickets have a product (every third a pump) and a site, and its searcher."""
    tickets = models.tickets.with_row_index().with_columns(
        product=pl.when(pl.col("index") % 3 == 0).then(pl.lit("pump")).otherwise(pl.lit("fan")),
        site=pl.when(pl.col("index") % 2 == 0).then(pl.lit("north")).otherwise(pl.lit("south"))).drop("index")
    folder = tmp_path_factory.mktemp("facets") / "index"
    build_index(Scorer.load(models.calibrated.bundle), model_hash(models.calibrated.bundle), tickets, out=folder)
    return SimpleNamespace(bundle=models.calibrated.bundle, index=folder, tickets=tickets,
                           searcher=Searcher.load(models.calibrated.bundle, folder))


def test_the_page_has_a_filter_box_per_facet_the_index_keeps_and_says_the_filter_in_force(facets, models, tmp_path):
    page = page_client(facets, tmp_path)
    assert 'name="product"' in page.get("/").get_data(as_text=True) and 'name="site"' in page.get("/").get_data(as_text=True)
    assert 'name="queue"' not in page.get("/").get_data(as_text=True)
    assert 'name="product"' not in page_client(models.calibrated, tmp_path).get("/").get_data(as_text=True)
    pumps = facets.tickets.filter((pl.col("product") == "pump") & (pl.col("site") == "north"))
    asked = {**QUERY, "k": "50", "product": "pump", "site": " north"}     # a box's spaces are not the value
    shown = page.get("/", query_string=asked)
    text = html.unescape(shown.get_data(as_text=True))
    api = page.get("/api/search", query_string={**QUERY, "k": "50", "where": ["product=pump", "site=north"]}).get_json()
    assert shown.status_code == 200 and api["matching"] == pumps.height < 50
    hits = [line.split('data-ticket="')[1].split('"')[0] for line in text.splitlines() if 'class="hit"' in line]
    assert hits == [h["ticket_id"] for h in api["hits"]] and set(hits) == set(pumps["ticket_id"])
    said = " ".join(text.split('id="filter">')[1].split("</p>")[0].split())
    assert said == f"Only the tickets with product = pump and site = north: {pumps.height} of {facets.tickets.height}"
    assert f"k = 50, but {pumps.height} tickets have product=pump and site=north: all of them are listed" in text
    assert 'id="where-product" name="product" value="pump"' in " ".join(text.split())
    # a judgment keeps the filter: the page it redirects to is the filtered one
    posted = page.post("/feedback", data={**asked, "ticket_id": hits[0], "label": "YES"})
    assert parse_qs(urlsplit(posted.headers["Location"]).query)["product"] == ["pump"]
    assert 'id="filter">' in page.get(posted.headers["Location"]).get_data(as_text=True)
    assert text.count('<input type="hidden" name="product" value="pump">') == len(hits)     # each hit's judge form


def test_a_filter_on_a_field_the_index_lacks_is_one_line_on_the_page(facets, models, tmp_path):
    for model, held in ((facets, "product, site"), (models.calibrated, "none (an index keeps product, site, queue")):
        shown = page_client(model, tmp_path).get("/", query_string={**QUERY, "queue": "l2"})
        text = html.unescape(shown.get_data(as_text=True))
        error = text.split('<p class="error" role="alert">')[1].split("</p>")[0]
        assert shown.status_code == 400 and "\n" not in error and 'id="results"' not in text and "Traceback" not in text
        assert error.startswith(f"the index's tickets have no field 'queue' to filter on; the fields they have: {held}")
