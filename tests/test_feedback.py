"""Feedback as training data, in-process: the journal (checked like every intake, repeats noted, contradictions kept
apart, concurrent writers, a torn line), `ticketsim feedback export` into a csv dataset, and the page, the JSON API and
the served model on a tiny real bundle: judgments, the token, cross-site posts, bounds, hostile ticket text."""
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import polars as pl
import pytest
from benchmarks.common import make_bundle

from ticketsim import cli
from ticketsim.app.access import TOKEN_VARIABLE, Access
from ticketsim.app.page import create_app
from ticketsim.app.pyfunc import JOURNAL_VARIABLE, TicketSimModel
from ticketsim.bundle.loader import Scorer
from ticketsim.config import ServeConfig
from ticketsim.data.csvsource import read_corpus
from ticketsim.data.feedback import Journal, Judgment, export
from ticketsim.data.intake import text_query_id
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.searcher import Searcher

NOW = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
TICKETS = {"T1": {"ticket_id": "T1", "subject": "Pump leak", "description": "Seal leaks", "solution": "Replace seal"},
           "T2": {"ticket_id": "T2", "subject": "Fan noise", "description": "Bearing noise", "solution": "Grease bearing"}}
HOSTILE = {"ticket_id": "EVIL1", "subject": "<script>alert('subject')</script> pump leak",
           "description": "\"><img src=x onerror=alert('description')>", "solution": "</pre><script>alert('solution')</script>"}


def judgment(ticket: str = "T1", label: str = "YES", subject: str = "pump wet", description: str = "water under pump"):
    return Judgment(subject, description, ticket, label, "api")


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_judgment_is_a_query_and_a_pair_repeats_are_noted_and_contradictions_kept_apart(tmp_path):
    journal = Journal(tmp_path / "fb" / "judgments.jsonl")
    first = journal.record(judgment(), TICKETS["T1"], NOW)
    assert first.status == "recorded" and first.where == f"{journal.path}:1"
    assert first.query_id == text_query_id("pump wet", "water under pump")
    again = journal.record(judgment(label="5"), TICKETS["T1"], NOW)        # 5 is YES
    assert again.status == "repeated" and again.where == first.where
    other = journal.record(judgment(label="NO"), TICKETS["T1"], NOW)
    assert other.status == "conflict" and "contradicts YES at" in other.message and other.where.endswith("conflicts.jsonl:1")
    assert [(r["ticket_id"], r["label"]) for r in lines(journal.path)] == [("T1", "YES")]     # the first stands
    kept = lines(journal.conflicts)
    assert len(kept) == 1 and kept[0]["label"] == "NO" and kept[0]["contradicts"] == f"YES at {journal.path}:1"
    assert journal.record(judgment("T2", "REL"), TICKETS["T2"], NOW).where == f"{journal.path}:2"

    # A second writer (another worker) sees what the first wrote.
    assert Journal(journal.path).record(judgment(label="YES"), TICKETS["T1"], NOW).status == "repeated"


def test_bad_judgments_are_refused_by_the_intake_rules_and_nothing_is_written(tmp_path):
    journal = Journal(tmp_path / "judgments.jsonl")
    for bad, ticket, message in ((judgment(label="MAYBE"), TICKETS["T1"], "unknown label 'MAYBE'"),
                                 (judgment("T9"), None, "unknown ticket_id 'T9'"),
                                 (judgment(subject=" ", description=""), TICKETS["T1"], "every text field is empty")):
        with pytest.raises(DataError) as refused:
            journal.record(bad, ticket, NOW)
        assert message in str(refused.value)
    assert lines(journal.path) == []


def test_concurrent_writers_lose_nothing_and_a_torn_last_line_is_dropped(tmp_path):
    path = tmp_path / "judgments.jsonl"
    journals = [Journal(path) for _ in range(4)]        # as four workers, each with its own view of the file
    judged = [judgment(f"T{i % 2 + 1}", "YES", subject=f"query {i}") for i in range(300)]
    with ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda i: journals[i % 4].record(judged[i], TICKETS[judged[i].ticket_id], NOW), range(300)))
    assert {o.status for o in outcomes} == {"recorded"}
    written = lines(path)
    assert sorted(r["subject"] for r in written) == sorted(j.subject for j in judged)
    assert sorted(int(o.where.rsplit(":", 1)[1]) for o in outcomes) == list(range(1, 301))   # each line named once

    with path.open("ab") as out:        # a crash in the middle of a write: never answered
        out.write(b'{"query_id": "q-1", "subj')
    assert journals[0].record(judgment(subject="after the crash"), TICKETS["T1"], NOW).where == f"{path}:301"
    assert len(lines(path)) == 301 and lines(path)[-1]["subject"] == "after the crash"


def labelled_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "labeled"
    folder.mkdir()
    pl.DataFrame(list(TICKETS.values())).write_csv(folder / "tickets.csv")
    fan = text_query_id("fan loud", "fan makes noise")      # a query that came in by its text, as judged queries do
    (folder / "queries.csv").write_text(f"query_id,subject,description\n{fan},fan loud,fan makes noise\n")
    (folder / "pairs.csv").write_text(f"query_id,ticket_id,label,split\n{fan},T2,YES,train\n")
    return folder


def test_export_hands_new_judgments_to_the_dataset_once_and_leaves_out_contradictions(tmp_path):
    folder, journal = labelled_folder(tmp_path), Journal(tmp_path / "fb" / "judgments.jsonl")
    journal.record(judgment("T1", "YES"), TICKETS["T1"], NOW)
    journal.record(judgment("T2", "NO"), TICKETS["T2"], NOW)
    fractions = {"train": 0.5, "dev": 0.5}
    done = export(journal.path, folder, fractions, NOW)
    assert done.intake.ok and done.present == 0 and not done.contradicting, done.render()
    corpus = read_corpus(folder, fractions, IntakeReport())
    query = text_query_id("pump wet", "water under pump")
    assert corpus.queries.filter(pl.col("query_id") == query)["subject"].to_list() == ["pump wet"]
    added = corpus.pairs.filter(pl.col("query_id") == query).sort("ticket_id")
    assert added["label"].to_list() == [5, 1] and added["split"].n_unique() == 1
    assert pl.read_csv(folder / "pairs.csv")["source_file"].to_list()[-2:] == ["judgments.jsonl"] * 2

    again = export(journal.path, folder, fractions, NOW)              # nothing new: nothing written
    assert again.present == 2 and not again.intake.written and again.intake.ok

    same_text = Judgment("fan loud", "fan makes noise", "T2", "NO", "page")     # the folder says YES for T2
    journal.record(same_text, TICKETS["T2"], NOW)
    before = (folder / "pairs.csv").read_text()
    third = export(journal.path, folder, fractions, NOW)
    assert third.intake.ok and third.present == 2 and (folder / "pairs.csv").read_text() == before
    assert len(third.contradicting) == 1 and "label 1 contradicts label 5 at" in third.contradicting[0]
    assert f"{journal.path}:3" in third.contradicting[0] and "left out 1 judgment(s)" in third.render()


def test_feedback_export_sets_aside_a_judgment_on_a_ticket_the_dataset_lacks_and_hands_it_over_once_it_has_it(
        tmp_path, capsys, monkeypatch):
    folder, journal = labelled_folder(tmp_path), Journal(tmp_path / "judgments.jsonl")
    journal.record(judgment("T1", "YES"), TICKETS["T1"], NOW)
    t3 = {**TICKETS["T1"], "ticket_id": "T3"}
    journal.record(judgment("T3", "REL"), t3, NOW)   # the index knew T3 (`index add`), the dataset not
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    (tmp_path / "params.yaml").write_text(params.read_text().replace("    source: synthetic", f"    source: csv\n    raw: {folder}"))
    monkeypatch.chdir(tmp_path)
    query = text_query_id("pump wet", "water under pump")
    assert cli.main(["feedback", "export", "--journal", str(journal.path)]) == 0
    printed = capsys.readouterr().out
    assert "set aside 1 judgment(s) on tickets or queries the dataset lacks" in printed
    assert f"  {journal.path}:2: pair ({query}, T3): ticket 'T3' is not in the dataset" in printed
    pairs = pl.read_csv(folder / "pairs.csv")
    assert pairs.filter(pl.col("query_id") == query)["ticket_id"].to_list() == ["T1"]
    assert len(lines(journal.path)) == 2          # kept in the journal for later

    pl.concat([pl.read_csv(folder / "tickets.csv"), pl.DataFrame([t3])]).write_csv(folder / "tickets.csv")   # pairs add --tickets
    assert cli.main(["feedback", "export", "--journal", str(journal.path)]) == 0
    assert "set aside" not in capsys.readouterr().out
    assert sorted(pl.read_csv(folder / "pairs.csv").filter(pl.col("query_id") == query)["ticket_id"]) == ["T1", "T3"]


@pytest.fixture(scope="module")
def served(search_parts, tmp_path_factory) -> SimpleNamespace:
    """A '22' bundle (no channel S: quick) and its index of the tiny corpus plus one ticket whose every text is hostile
    markup; the Searcher over them."""
    root = tmp_path_factory.mktemp("feedback")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    tickets = pl.concat([search_parts.corpus.tickets, pl.DataFrame([HOSTILE])])
    build_index(Scorer.load(bundle), model_hash(bundle), tickets, out=root / "index")
    return SimpleNamespace(bundle=bundle, index=root / "index", searcher=Searcher.load(bundle, root / "index"))


def client(served, tmp_path, host="127.0.0.1", token=None, **settings):
    app = create_app(served.searcher, ServeConfig(**settings), Journal(tmp_path / "judgments.jsonl"), Access(host, token))
    return app.test_client()


def search_args(k: int = 5) -> dict:
    return {"subject": "pump leak <script>", "description": "seal leaks\r\nwater under the pump", "k": str(k)}


def test_the_page_escapes_hostile_ticket_text_and_judges_hits_by_its_buttons(served, tmp_path):
    page = client(served, tmp_path)
    html = page.get("/", query_string={**search_args(), "k": "90"}).get_data(as_text=True)
    assert 'data-ticket="EVIL1"' in html
    for markup in ("<script>alert", "<img src=x", "</pre><script>"):
        assert markup not in html
    assert "&lt;script&gt;alert(&#39;subject&#39;)&lt;/script&gt;" in html and "&lt;/pre&gt;&lt;script&gt;" in html
    assert html.count('class="judge"') == 81 and html.count('value="YES"') == 81 and "not relevant" in html

    answer = page.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "REL"}, follow_redirects=True)
    assert answer.status_code == 200 and "recorded: REL for ticket EVIL1" in answer.get_data(as_text=True)
    assert 'value="REL" class="chosen"' in answer.get_data(as_text=True)
    [row] = lines(tmp_path / "judgments.jsonl")
    # The textarea's CRLF is the API's LF: one query, whichever way it was judged.
    assert row["description"] == "seal leaks\nwater under the pump" and row["via"] == "page"
    conflict = page.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "NO"}, follow_redirects=True)
    assert "NO for ticket EVIL1 contradicts REL at" in conflict.get_data(as_text=True)
    other_site = page.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "YES"},
                           headers={"Origin": "http://evil.example"})
    assert other_site.status_code == 403 and len(lines(tmp_path / "judgments.jsonl")) == 1
    rebound = page.post("/api/feedback", json={"subject": "a", "description": "", "ticket_id": "EVIL1", "label": "NO"},
                        headers={"Host": "evil.example:8000"})      # a name of another site resolved to 127.0.0.1
    assert rebound.status_code == 401 and len(lines(tmp_path / "judgments.jsonl")) == 1


def test_the_json_api_searches_and_judges_with_bounds_on_k_text_and_size(served, tmp_path):
    api = client(served, tmp_path, max_k=20, max_text=200, max_request_bytes=2000)
    found = api.get("/api/search", query_string=search_args(3)).get_json()
    assert len(found["hits"]) == 3 and {"ticket_id", "calibrated", "reasons"} <= set(found["hits"][0])
    body = {"subject": "pump leak", "description": "seal leaks", "ticket_id": found["hits"][0]["ticket_id"], "label": "YES"}
    answer = api.post("/api/feedback", json=body)
    assert answer.status_code == 200 and answer.get_json()["status"] == "recorded"
    for bad, status, message in (({"k": "21"}, 400, "from 1 to 20"), ({"k": "0"}, 400, "from 1 to 20"),
                                 ({"description": "x" * 300}, 400, "at most 200 are read")):
        response = api.get("/api/search", query_string={**search_args(), **bad})
        assert response.status_code == status and message in response.get_json()["problems"][0]
    assert api.get("/", query_string={**search_args(), "k": "21"}).status_code == 400
    assert api.post("/api/feedback", json={**body, "description": "x" * 3000}).status_code == 413
    assert api.post("/api/feedback", json={**body, "description": "x" * 300}).status_code == 400
    assert api.post("/api/feedback", data="subject=a", content_type="application/x-www-form-urlencoded").status_code == 400
    unknown = api.post("/api/feedback", json={**body, "ticket_id": "T-none"})
    assert unknown.status_code == 400 and "unknown ticket_id 'T-none'" in unknown.get_json()["problems"][0]
    assert len(lines(tmp_path / "judgments.jsonl")) == 1


def test_a_journal_line_that_is_no_judgment_is_skipped_and_named_and_every_later_write_goes_on(served, tmp_path):
    path, page = tmp_path / "judgments.jsonl", client(served, tmp_path)
    body = {"subject": "pump leak", "description": "seal\u2028leaks", "ticket_id": "EVIL1", "label": "YES"}
    assert page.post("/api/feedback", json=body).status_code == 200      # U+2028 is no line break of the journal
    with path.open("ab") as out:        # edits by hand: not JSON, an object that is no judgment, bytes not UTF-8
        out.write(b"pump leak, EVIL1, YES\n" + b'{"query_id": "q-1"}\n' + b'{"\xff": 1}\n')
    skipped = [f"{path}:2: skipped, not valid JSON (Expecting value)", f"{path}:3: skipped, not a judgment",
               f"{path}:4: skipped, bytes that are not UTF-8"]

    recorded = page.post("/api/feedback", json={**body, "subject": "fan loud", "label": "NO"})
    conflict = page.post("/api/feedback", json={**body, "subject": "fan loud", "label": "REL"})
    assert (recorded.status_code, recorded.get_json()["where"], conflict.status_code) == (200, f"{path}:5", 409)
    for answer in (recorded, conflict):
        named = answer.get_json()["skipped"]
        assert len(named) == len(skipped) and all(line.startswith(start) for line, start in zip(named, skipped))
    assert "`ticketsim feedback export` refuses the journal until this line is fixed or removed" in conflict.get_json()["skipped"][0]
    form = page.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "REL"}, follow_redirects=True)
    assert form.status_code == 200 and f"the first: {path}:2: skipped, not valid JSON" in form.get_data(as_text=True)

    restarted = client(served, tmp_path).post("/api/feedback", json=body)   # a new worker reads the journal from the start
    assert restarted.status_code == 200 and restarted.get_json()["status"] == "repeated"
    assert restarted.get_json()["where"] == f"{path}:1" and len(restarted.get_json()["skipped"]) == 3
    assert [json.loads(line)["label"] for line in path.read_bytes().split(b"\n")[4:-1]] == ["NO", "REL"]
    with pytest.raises(DataError, match=f"{path}:4: not UTF-8 .*; re-export the file as UTF-8"):   # the export names the line
        export(path, labelled_folder(tmp_path), {"train": 1.0}, NOW)


def test_writing_feedback_needs_the_token_off_loopback_and_whenever_there_is_one(served, tmp_path):
    body = {"subject": "pump leak", "description": "", "ticket_id": "EVIL1", "label": "YES"}
    closed = client(served, tmp_path, host="0.0.0.0")
    refused = closed.post("/api/feedback", json=body)
    assert refused.status_code == 401 and "started without a feedback token" in refused.get_json()["problems"][0]
    assert closed.get("/api/search", query_string=search_args()).status_code == 200        # searching stays open

    guarded = client(served, tmp_path, host="0.0.0.0", token="s3cret")
    assert guarded.post("/api/feedback", json=body).status_code == 401
    assert guarded.post("/api/feedback", json=body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "YES"}).status_code == 401
    assert lines(tmp_path / "judgments.jsonl") == []
    assert guarded.post("/api/feedback", json=body, headers={"Authorization": "Bearer s3cret"}).status_code == 200

    assert 'action="/token"' in guarded.get("/", query_string=search_args()).get_data(as_text=True)
    assert guarded.post("/token", data={**search_args(), "token": "nope"}).status_code == 401
    signed_in = guarded.post("/token", data={**search_args(), "token": "s3cret"})
    assert signed_in.status_code == 303 and "HttpOnly" in signed_in.headers["Set-Cookie"]
    assert 'action="/token"' not in guarded.get("/", query_string=search_args()).get_data(as_text=True)
    page_click = guarded.post("/feedback", data={**search_args(), "ticket_id": "EVIL1", "label": "NO"})
    assert page_click.status_code == 303 and [r["label"] for r in lines(tmp_path / "judgments.jsonl")] == ["YES", "NO"]


def test_the_served_model_takes_judgments_only_with_its_journal_and_token(served, tmp_path, monkeypatch):
    model = TicketSimModel()
    model.load_context(SimpleNamespace(artifacts={"bundle": str(served.bundle), "index": str(served.index)}))
    rows = pd.DataFrame([{"subject": "pump leak", "description": "", "ticket_id": "EVIL1", "label": "YES"},
                         {"subject": "pump leak", "description": "", "ticket_id": "EVIL1", "label": "NO"}])
    monkeypatch.delenv(JOURNAL_VARIABLE, raising=False)
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    with pytest.raises(Exception, match="this server takes no feedback") as closed:
        model.predict(None, rows, {"token": ""})
    assert closed.value.get_http_status_code() == 403
    monkeypatch.setenv(JOURNAL_VARIABLE, str(tmp_path / "served.jsonl"))
    monkeypatch.setenv(TOKEN_VARIABLE, "s3cret")
    with pytest.raises(Exception, match="none was given") as anonymous:
        model.predict(None, rows, {})
    assert anonymous.value.get_http_status_code() == 401
    answer = model.predict(None, rows, {"token": "s3cret"})
    assert answer["status"].to_list() == ["recorded", "conflict"]
    assert [r["via"] for r in lines(tmp_path / "served.jsonl")] == ["model"] and len(lines(tmp_path / "conflicts.jsonl")) == 1
    with pytest.raises(Exception, match="at most 100 tickets"):
        model.predict(None, rows[["subject", "description"]], {"k": 101})
