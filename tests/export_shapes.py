"""Synthetic tickets written as each ready-made mapping's system exports them, at any size: a help desk's day-one export
for the tests (reports/studies/dayone_exports.md ran day one on each; tests/fixtures/exports holds small hand-written
files of the same shapes).

A shape is the system's file as it comes out: Jira's CSV with HTML descriptions and repeated Comment columns or its
"current fields" export (no Comment, no Resolution), a ServiceNow incident list with or without work notes, Zendesk's
JSON export with or without its comments inline, OTRS's TicketGet with all articles. Ticket ids are the system's own.
"""
from __future__ import annotations

import csv
import html
import json
from collections.abc import Callable
from pathlib import Path

from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate

RESOLUTIONS = ("Fixed", "Done", "Won't Fix")


def jira_html(tickets: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Jira Cloud's "Export CSV (all fields)" of rich-text issues: HTML in Description and comments, two Comment columns."""
    header = ["Summary", "Issue key", "Issue id", "Status", "Resolution", "Labels", "Labels", "Description", "Comment", "Comment"]
    rows = []
    for i, t in enumerate(tickets):
        description = "<p>" + "<br/>".join(map(html.escape, t["description"].splitlines())) + " (about 80&deg;C)</p>"
        comments = [f"0{1 + i % 9}/Nov/26 9:0{i % 10} AM;5b10ac8d82e05b22cc7d4ef5;<p>{html.escape(t['solution'])}</p>",
                    "" if i % 2 else f"1{i % 9}/Nov/26 2:31 PM;712020:8f3a2c1e;<p>Checked again &amp; closed.</p>"]
        rows.append([t["subject"], f"OPS-{i + 1}", str(10000 + i), "Done", RESOLUTIONS[i % 3], "plant", "", description, *comments])
    return header, rows


def jira_current_fields(tickets: list[dict]) -> tuple[list[str], list[list[str]]]:
    """Jira's "current fields" export with Description in the view: wiki markup, no Comment and no Resolution column."""
    header = ["Issue Type", "Issue key", "Issue id", "Summary", "Status", "Description"]
    return header, [["Incident", f"OPS-{i + 1}", str(10000 + i), t["subject"], "Open", t["description"]]
                    for i, t in enumerate(tickets)]


def servicenow(tickets: list[dict], work_notes: bool = True) -> tuple[list[str], list[list[str]]]:
    """A ServiceNow incident list exported as CSV, with the work notes journal or without it."""
    header = ["number", "short_description", "description", "state", "close_code", "close_notes"] + (["work_notes"] * work_notes)
    rows = []
    for i, t in enumerate(tickets):
        note = f"2026-10-0{1 + i % 9} 09:40:11 - Tom Berg (Work notes)\nReproduced the fault on site, ticket {i + 1}."
        rows.append([f"INC{20000 + i:07d}", t["subject"], t["description"], "Closed", "Solved (Permanently)", t["solution"]]
                    + ([note] * work_notes))
    return header, rows


def zendesk(tickets: list[dict], comments: bool = True) -> list[dict]:
    """Zendesk's JSON export, one ticket per line: the first comment repeats the description, the later ones answer."""
    records = []
    for i, t in enumerate(tickets):
        record = {"id": 4000 + i, "subject": t["subject"], "description": t["description"], "status": "solved", "tags": []}
        if comments:
            record["comments"] = [{"id": 90000 + 2 * i, "body": t["description"], "plain_body": t["description"],
                                   "html_body": f"<div class=\"zd-comment\"><p>{html.escape(t['description'])}</p></div>"},
                                  {"id": 90001 + 2 * i, "body": t["solution"], "plain_body": t["solution"],
                                   "html_body": f"<div class=\"zd-comment\"><p>{html.escape(t['solution'])}</p></div>"}]
        records.append(record)
    return records


def otrs(tickets: list[dict]) -> list[dict]:
    """OTRS / Znuny TicketGet with all articles: the customer's request, then the agent's answer."""
    return [{"TicketNumber": f"2026101410{i:06d}", "TicketID": i + 1, "Title": t["subject"], "State": "closed successful",
             "Article": [{"ArticleNumber": 1, "SenderType": "customer", "Body": t["description"]},
                         {"ArticleNumber": 2, "SenderType": "agent", "Body": t["solution"]}]} for i, t in enumerate(tickets)]


# shape -> (its ready-made mapping, its writer of the tickets as CSV (header, rows) or JSONL records)
SHAPES: dict[str, tuple[str, Callable[[list[dict]], object]]] = {
    "jira-html": ("jira", jira_html),
    "jira-current-fields": ("jira", jira_current_fields),
    "servicenow": ("servicenow", servicenow),
    "servicenow-no-work-notes": ("servicenow", lambda tickets: servicenow(tickets, work_notes=False)),
    "zendesk": ("zendesk", zendesk),
    "zendesk-no-comments": ("zendesk", lambda tickets: zendesk(tickets, comments=False)),
    "otrs": ("otrs", otrs),
}


def synthetic_tickets(n_tickets: int, seed: int = 13) -> list[dict]:
    """n synthetic tickets (the generator's first n of at least two: it needs two to draw classes from)."""
    config = SyntheticConfig(n_tickets=max(n_tickets, 2), n_labeled_queries=1, n_enduser_queries=0, n_lay_queries=0)
    return generate(config, seed).tickets.head(n_tickets).select("subject", "description", "solution").to_dicts()


def write_export(folder: Path, shape: str, n_tickets: int, seed: int = 13) -> Path:
    """A tickets-only export folder (tickets.csv or tickets.jsonl in `shape`) of n synthetic tickets; returns the file."""
    _, writer = SHAPES[shape]
    written = writer(synthetic_tickets(n_tickets, seed))
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(written, tuple):
        path = folder / "tickets.csv"
        with path.open("w", encoding="utf-8", newline="") as handle:
            csv.writer(handle).writerows([written[0], *written[1]])
    else:
        path = folder / "tickets.jsonl"
        path.write_text("".join(json.dumps(record) + "\n" for record in written), encoding="utf-8")
    return path
