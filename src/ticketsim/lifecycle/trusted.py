"""The pairs the gate decides on: a trusted set that feedback never changes.

When a version is promoted, the dev pairs of `retrain.dataset` as they stand then, with their queries' text, are frozen
with it in the registry: a CSV artifact of its run (FOLDER/FILE) whose sha256 is the version's tag TAG. The gate scores
the champion and the candidate on the champion's frozen pairs plus the pairs a maintainer marked trusted
(`gate.trusted_pairs`, in the layout of `ticketsim pairs add`), with every ticket of the dataset as the retrieve pool,
and decides on them alone: a batch cannot pass by labelling the pairs it is judged on. The dev pairs they lack (feedback
and batches added since) are scored too and shown, not deciding. A champion promoted without frozen pairs is judged on
the candidate's dev pairs, and the gate's Markdown says so.
"""
from __future__ import annotations

import hashlib
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

import mlflow
import polars as pl

from ticketsim.config import Params
from ticketsim.data.intake import read_batch
from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, Corpus, conform
from ticketsim.data.validate import ORIGIN, DataError, parse_label
from ticketsim.errors import StepError
from ticketsim.lifecycle.gate_pairs import SPLIT, GatePairs, dataset_corpus, dev_pairs, gate_pairs, on_pairs
from ticketsim.lifecycle.registry import ModelVersion, tag_version
from ticketsim.lifecycle.tracking import client, tracking_uri

FOLDER, FILE = "trusted", "pairs.csv"
TAG = "trusted_pairs"
KEY = ["query_id", "ticket_id"]
COLUMNS = (*QUERY_SCHEMA, "ticket_id", "label")   # a frozen pair: its query's text along


@dataclass(frozen=True)
class GateBasis:
    """What the gate scores: `decide`, the pairs it decides on; `new`, the dev pairs those lack (shown only); `current`,
    the dev pairs now (what a promotion freezes); `trusted`: False when the champion has no frozen pairs, so `decide` is
    `current`, feedback included."""

    decide: GatePairs
    new: GatePairs | None
    current: GatePairs
    trusted: bool

    def basis(self) -> str:
        if not self.trusted:
            return (f"Both scored in this run on the same pairs: {self.current.describe()}. The champion was promoted "
                    "without frozen pairs, so these are the candidate's dev pairs, new ones included.")
        return f"Decided on the trusted pairs, both scored in this run: {self.decide.describe()}."


def gate_basis(params: Params, champion: ModelVersion) -> GateBasis:
    corpus = dataset_corpus(params)
    current = gate_pairs(params, corpus)
    pairs = frozen(params, champion)
    if pairs is None:
        return GateBasis(current, None, current, trusted=False)
    marked = marked_pairs(params, corpus)
    trusted = pl.concat([marked, pairs]).unique(KEY, keep="first", maintain_order=True)   # a maintainer's label first
    source = f"the dev pairs frozen with {champion.model} v{champion.version} at its promotion" + (
        f" and {marked.height} marked trusted in {params.gate.trusted_pairs}" if marked.height else "")
    decide = on_pairs(params, corpus.tickets, trusted.unique("query_id", keep="first").select(*QUERY_SCHEMA),
                      conform(trusted.with_columns(split=pl.lit(SPLIT)), PAIR_SCHEMA), source)
    fresh = current.corpus.pairs.join(trusted.select(KEY), on=KEY, how="anti")
    new = on_pairs(params, corpus.tickets, corpus.queries, fresh, f"{current.source}, not among them") if fresh.height else None
    return GateBasis(decide, new, current, trusted=True)


def freeze(params: Params, version: ModelVersion, current: GatePairs | None) -> str:
    """Freeze the dev pairs (`current`, default: as the dataset holds them now) with a version just promoted; a line
    saying what was frozen."""
    current = dev_pairs(params, dataset_corpus(params)) if current is None else current
    who = f"{version.model} v{version.version}"
    if current.corpus.pairs.is_empty():
        return f"{who} has no frozen pairs: datasets.{params.retrain.dataset} has no {SPLIT} pairs to freeze.\n"
    data = current.corpus.pairs.join(current.corpus.queries, on="query_id").select(*COLUMNS).write_csv().encode()
    digest = hashlib.sha256(data).hexdigest()
    with tempfile.TemporaryDirectory(prefix="ticketsim-trusted-") as scratch:
        (Path(scratch) / FILE).write_bytes(data)
        client(params.tracking).log_artifact(version.run_id, str(Path(scratch) / FILE), FOLDER)
    tag_version(params.tracking, version.model, version.version, {TAG: digest})
    return f"Frozen with {who} as its trusted pairs: {current.describe()} (sha256 {digest[:12]}).\n"


def frozen(params: Params, version: ModelVersion) -> pl.DataFrame | None:
    """The pairs frozen with `version` at its promotion (COLUMNS, strings); None when it has none."""
    digest = version.tags.get(TAG)
    if not digest:
        return None
    who = f"{version.model} v{version.version}"
    with tempfile.TemporaryDirectory(prefix="ticketsim-trusted-") as scratch:
        try:
            data = Path(mlflow.artifacts.download_artifacts(run_id=version.run_id, artifact_path=f"{FOLDER}/{FILE}",
                                                            dst_path=scratch, tracking_uri=tracking_uri(params.tracking))).read_bytes()
        except Exception as error:   # noqa: BLE001 - whatever the store says, the gate cannot decide without them
            raise StepError(f"{who}: its trusted pairs ({FOLDER}/{FILE} of run {version.run_id}) could not be fetched "
                            f"({type(error).__name__}: {error}); restore the run's artifacts") from error
    if hashlib.sha256(data).hexdigest() != digest:
        raise StepError(f"{who}: its trusted pairs ({FOLDER}/{FILE} of run {version.run_id}) are not the ones frozen at its "
                        f"promotion (tag {TAG} {digest[:12]}); restore that file")
    return pl.read_csv(io.BytesIO(data), infer_schema=False).with_columns(pl.col(c).fill_null("") for c in QUERY_SCHEMA)


def marked_pairs(params: Params, corpus: Corpus) -> pl.DataFrame:
    """The pairs of `gate.trusted_pairs` (COLUMNS; none when it is ""): queries by id (of the dataset) or by text."""
    if not params.gate.trusted_pairs:
        return pl.DataFrame(schema=dict.fromkeys(COLUMNS, pl.String))
    path = Path(params.gate.trusted_pairs)
    if not path.is_file():
        raise StepError(f"gate.trusted_pairs: {path}: no such file; write the pairs a maintainer trusts there (layout of "
                        "`ticketsim pairs add`), or set it to \"\"")
    batch = read_batch(path, None, None, "")
    texts = pl.concat([batch["queries"].select(*QUERY_SCHEMA), corpus.queries.select(*QUERY_SCHEMA)]).unique("query_id", keep="first")
    rows = batch["pairs"].join(texts, on="query_id", how="left")
    tickets = set(corpus.tickets["ticket_id"])
    problems = [f"{origin}: " + (f"query {query!r} is not in datasets.{params.retrain.dataset} (give its subject and description)"
                                 if subject is None else f"ticket {ticket!r} is not in datasets.{params.retrain.dataset}"
                                 if ticket.strip() not in tickets else f"unknown label {label!r} (YES, REL, NO)")
                for query, ticket, label, origin, subject in rows.select(*KEY, "label", ORIGIN, "subject").iter_rows()
                if subject is None or ticket.strip() not in tickets or parse_label(label) is None]
    if problems:
        raise DataError(problems)
    return rows.with_columns(pl.col("ticket_id").str.strip_chars()).select(*COLUMNS)
