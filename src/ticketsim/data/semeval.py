"""SemEval-2016/2017 Task 3 English CQA XML (subtask B) and its .relevancy gold files -> raw tables.

OrgQuestion -> query (OrgQSubject, OrgQBody); RelQuestion -> ticket (RelQSubject, RelQBody, solution = the
thread's RelComment texts in order; comment labels are never read: they are absent at test time);
RELQ_RELEVANCE2ORGQ PerfectMatch/Relevant/Irrelevant -> YES/REL/NO; RELQ_RANKING_ORDER -> source_rank.

Each original question is repeated once per related question (and a related question may come again under another
original question): the copies of one id are merged into one record, field by field. Copies must agree, with one
exception: a field that is empty in some copies and has text in others takes that text, and the merge is counted in
the IntakeReport ("<table> with an empty <field> in a repeated copy, filled from another"), like the other tolerated
empty components. Two copies with different texts in one field are refused, naming the field, both values and both
places; so is a file that is not well-formed in its declared encoding (invalid bytes), with its file:line.
"""
from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
from lxml import etree

from ticketsim.config import DatasetConfig
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import ORIGIN, DataError, IntakeReport, read_bytes, read_text, shorten, validate

RELEVANCE = {"PerfectMatch": "YES", "Relevant": "REL", "Irrelevant": "NO"}
# A .relevancy gold file only says true/false: PerfectMatch and Relevant are no longer told apart.
GOLD = {"true": "REL", "false": "NO"}
# Where each field of a record comes from in the XML, for messages.
ELEMENT = {"query_id": {"subject": "OrgQSubject", "description": "OrgQBody"},
           "ticket_id": {"subject": "RelQSubject", "description": "RelQBody", "solution": "RelComment/RelCText"}}
# The encoding an XML file declares (after an optional UTF-8 BOM); UTF-8 when it declares none.
DECLARED = re.compile(rb'^(?:\xef\xbb\xbf)?<\?xml[^>]*?\sencoding\s*=\s*["\']([A-Za-z][A-Za-z0-9._-]*)["\']')
BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
NOT_XML = {"idna", "punycode", "unicode-escape", "raw-unicode-escape", "undefined"}   # Python codecs, no XML encoding
COLUMNS = {"tickets": ("ticket_id", "subject", "description", "solution", ORIGIN),
           "queries": ("query_id", "subject", "description", ORIGIN),
           "pairs": ("query_id", "ticket_id", "label", "split", "source_rank", ORIGIN)}


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
    problems: list[str] = []
    tickets, queries = merge_repeats(tickets, "ticket_id", report, problems), merge_repeats(queries, "query_id", report, problems)
    frames = [pl.DataFrame(rows, schema={c: pl.String for c in COLUMNS[table]})
              for table, rows in (("tickets", tickets), ("queries", queries), ("pairs", pairs))]
    try:
        corpus = validate(*frames, split_fractions={}, report=report)
    except DataError as error:
        problems += error.problems
    if problems:
        raise DataError(problems)
    return corpus


def train_parts(cfg: DatasetConfig) -> dict[str, set[str]]:
    """Each train file's original-question ids (file name -> ids): the parts a model can be trained on one of and
    scored on another (training.shift.cross_part). An id in more than one file belongs to none."""
    ids = {name: {org.get("ORGQ_ID") for org in parse(cfg.path(name)).iter("OrgQuestion")} - {None} for name in cfg.train}
    return {name: own - set().union(*(other for key, other in ids.items() if key != name)) for name, own in ids.items()}


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
    if not tickets and not problems:
        problems.append(f"{path}:{root.sourceline}: no OrgQuestion element under <{root.tag}>: not a SemEval Task 3 subtask B file")
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
    for number, line in enumerate(read_text(path).splitlines(), start=1):
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
    """The root element, or a DataError with the file:line of the first problem (bytes invalid in the encoding too)."""
    if not path.is_file():
        raise DataError([f"{path}: file not found (check datasets.*.raw and the file names in params.yaml)"])
    # From bytes, not from the file name: reading the file, libxml2 reports invalid bytes as an OSError without a line.
    data = read_bytes(path)
    check_encoding(path, data)
    try:
        return etree.fromstring(data, etree.XMLParser(resolve_entities=False, huge_tree=True), base_url=str(path))
    except etree.XMLSyntaxError as error:
        raise DataError([f"{path}:{error.lineno or 1}: not well-formed XML: {error.msg}"]) from None


def check_encoding(path: Path, data: bytes) -> None:
    """A DataError at the line of the first bytes invalid in the file's encoding.

    libxml2 finds them too, but gives their line only for UTF-8 (other encodings are converted a block at a time).
    An encoding Python does not know is left to libxml2, which reports it.
    """
    bom = next((name for mark, name in BOMS if data.startswith(mark)), None)
    declared = DECLARED.match(data[:1024])
    encoding = bom or (declared.group(1).decode() if declared else "utf-8")
    try:
        if codecs.lookup(encoding).name in NOT_XML:
            return
        data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data[:error.start].decode(encoding, errors="replace").count("\n") + 1
        said = "its byte order mark" if bom else "its XML declaration" if declared else "XML without an encoding declaration"
        raise DataError([f"{path}:{line}: bytes that are not {encoding} ({data[error.start:error.end][:8]!r} at byte "
                         f"{error.start}), the encoding {said} implies; re-export the file"]) from None
    except (UnicodeError, LookupError):
        return


def text(element) -> str:
    return (element.text or "").strip() if element is not None else ""


def merge_repeats(rows: list[dict], id_column: str, report: IntakeReport, problems: list[str]) -> list[dict]:
    """One record per id: repeats merged field by field (an empty field takes another copy's text, counted).

    A copy whose text differs in a field is a problem naming the field, both values and both places.
    """
    table, fields = ("queries" if id_column == "query_id" else "tickets"), ELEMENT[id_column]
    first: dict[str, dict] = {}
    for row in rows:
        kept = first.get(row[id_column])
        if kept is None:
            first[row[id_column]] = dict(row)
            continue
        conflicts = [f for f in fields if kept[f] and row[f] and kept[f] != row[f]]
        for f in conflicts:
            problems.append(f"{row[ORIGIN]}: {id_column} {row[id_column]!r} is repeated with another {f} ({fields[f]}): "
                            f"{shorten(row[f])} here, {shorten(kept[f])} at {kept[ORIGIN]}")
        if conflicts:
            continue
        for f in fields:
            if kept[f] != row[f]:  # empty in one of the two copies
                report.add(f"{table} with an empty {f} in a repeated copy, filled from another")
                kept[f] = kept[f] or row[f]
        report.add(f"repeated {id_column} records merged")
    return list(first.values())
