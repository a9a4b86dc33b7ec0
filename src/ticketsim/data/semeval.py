"""SemEval-2016/2017 Task 3 English CQA XML (subtask B) and its .relevancy gold files -> raw tables.

OrgQuestion -> query (OrgQSubject, OrgQBody); RelQuestion -> ticket (RelQSubject, RelQBody, solution = the
thread's RelComment texts in order; comment labels are never read: they are absent at test time);
RELQ_RELEVANCE2ORGQ PerfectMatch/Relevant/Irrelevant -> YES/REL/NO; RELQ_RANKING_ORDER -> source_rank.
Each original question is repeated once per related question: the repeats are merged (and checked identical).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl
from lxml import etree

from ticketsim.config import DatasetConfig
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, read_utf8, validate

RELEVANCE = {"PerfectMatch": "YES", "Relevant": "REL", "Irrelevant": "NO"}
# A .relevancy gold file only says true/false: PerfectMatch and Relevant are no longer told apart.
GOLD = {"true": "REL", "false": "NO"}


@dataclass(frozen=True)
class Gold:
    """A .relevancy file: (ORGQ_ID, RELQ_ID) -> (label, 'file:line')."""

    path: Path
    labels: dict[tuple[str, str], tuple[str, str]]


def read_corpus(cfg: DatasetConfig, report: IntakeReport) -> Corpus:
    files = [(name, "train") for name in cfg.train] + [(name, split) for name, split in ((cfg.dev, "dev"), (cfg.test, "test")) if name]
    if not files:
        raise DataError([f"params datasets.{cfg.name}: name at least one of train, dev, test"])
    tickets, queries, pairs = [], [], []
    for name, split in files:
        gold = read_gold(cfg.path(cfg.test_gold)) if split == "test" and cfg.test_gold else None
        t, q, p = read_xml(cfg.path(name), split, gold, report)
        tickets += t
        queries += q
        pairs += p
    tickets, queries = merge_repeats(tickets, "ticket_id", report), merge_repeats(queries, "query_id", report)
    frames = [pl.DataFrame(rows, infer_schema_length=None) for rows in (tickets, queries, pairs)]
    return validate(*frames, split_fractions={}, report=report)


def read_xml(path: Path, split: str, gold: Gold | None, report: IntakeReport):
    """Rows of tickets, queries and pairs of one XML file, each with its origin 'file:line'."""
    root = parse(path)
    tickets, queries, pairs, problems = [], [], [], []
    for org in root.iter("OrgQuestion"):
        origin = f"{path}:{org.sourceline}"
        query_id = org.get("ORGQ_ID")
        related = org.find("Thread/RelQuestion")
        missing = [what for what, found in (("ORGQ_ID", query_id), ("OrgQSubject", org.find("OrgQSubject")),
                                            ("OrgQBody", org.find("OrgQBody")), ("Thread/RelQuestion", related)) if found is None]
        if related is not None:
            missing += [f"RelQuestion/{tag}" for tag in ("RelQSubject", "RelQBody") if related.find(tag) is None]
            missing += [f"RelQuestion@{a}" for a in ("RELQ_ID", "RELQ_RANKING_ORDER") if related.get(a) is None]
        if missing:
            problems.append(f"{origin}: OrgQuestion {query_id or '?'}: missing {', '.join(missing)}")
            continue
        ticket_id = related.get("RELQ_ID")
        thread = org.find("Thread")
        if thread.get("SubtaskA_Skip_Because_Same_As_RelQuestion_ID"):
            report.add("threads repeated from another original question (kept: valid subtask-B pairs)")
        label = relevance(related, query_id, ticket_id, gold, origin, problems)
        comments = [text(c) for c in thread.iterfind("RelComment/RelCText")]
        queries.append({"query_id": query_id, "subject": text(org.find("OrgQSubject")),
                        "description": text(org.find("OrgQBody")), ORIGIN: origin})
        tickets.append({"ticket_id": ticket_id, "subject": text(related.find("RelQSubject")),
                        "description": text(related.find("RelQBody")), "solution": "\n".join(c for c in comments if c),
                        ORIGIN: f"{path}:{related.sourceline}"})
        pairs.append({"query_id": query_id, "ticket_id": ticket_id, "label": label, "split": split,
                      "source_rank": related.get("RELQ_RANKING_ORDER"), ORIGIN: f"{path}:{related.sourceline}"})
    if gold is not None:
        unmatched = sorted(set(gold.labels) - {(p["query_id"], p["ticket_id"]) for p in pairs})
        problems += [f"{gold.labels[key][1]}: pair {key[0]} {key[1]} has no OrgQuestion/RelQuestion in {path}" for key in unmatched]
    if problems:
        raise DataError(problems)
    return tickets, queries, pairs


def relevance(related, query_id: str, ticket_id: str, gold: Gold | None, origin: str, problems: list[str]) -> str | None:
    if gold is not None:
        if (query_id, ticket_id) not in gold.labels:
            problems.append(f"{origin}: pair {query_id} {ticket_id} has no line in the gold file {gold.path}")
            return None
        return gold.labels[(query_id, ticket_id)][0]
    value = related.get("RELQ_RELEVANCE2ORGQ")
    if value not in RELEVANCE:
        problems.append(f"{origin}: RelQuestion {ticket_id}: RELQ_RELEVANCE2ORGQ={value!r}, expected one of "
                        f"{list(RELEVANCE)}; for an unlabelled test file set test_gold to its .relevancy file")
    return RELEVANCE.get(value)


def read_gold(path: Path) -> Gold:
    """The official `.relevancy` format: 'ORGQ_ID RELQ_ID rank score true|false' per line."""
    if not path.is_file():
        raise DataError([f"{path}: gold file not found"])
    labels, problems = {}, []
    for number, line in enumerate(read_utf8(path).splitlines(), start=1):
        fields, origin = line.split(), f"{path}:{number}"
        if not fields:
            continue
        if len(fields) != 5 or fields[4] not in GOLD:
            problems.append(f"{origin}: expected 'ORGQ_ID RELQ_ID rank score true|false', got {line!r}")
            continue
        key, label = (fields[0], fields[1]), GOLD[fields[4]]
        if labels.setdefault(key, (label, origin))[0] != label:
            problems.append(f"{origin}: pair {key[0]} {key[1]} is {fields[4]} here but not at {labels[key][1]}")
    if problems:
        raise DataError(problems)
    return Gold(path, labels)


def parse(path: Path) -> etree._Element:
    if not path.is_file():
        raise DataError([f"{path}: file not found (check datasets.*.raw and the file names in params.yaml)"])
    try:
        return etree.parse(str(path), etree.XMLParser(resolve_entities=False, huge_tree=True)).getroot()
    except etree.XMLSyntaxError as error:
        raise DataError([f"{path}:{error.lineno}: not well-formed XML: {error.msg}"]) from None


def text(element) -> str:
    return (element.text or "").strip() if element is not None else ""


def merge_repeats(rows: list[dict], id_column: str, report: IntakeReport) -> list[dict]:
    """Drop exact repeats of a record (same id, same texts), counting them; differing repeats stay for validate to flag."""
    kept, seen = [], set()
    for row in rows:
        key = tuple(v for k, v in row.items() if k != ORIGIN)
        if key in seen:
            report.add(f"repeated {id_column} records merged")
            continue
        seen.add(key)
        kept.append(row)
    return kept
