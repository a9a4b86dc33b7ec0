"""Feedback batches judged on a champion's own search, as the gate and review tests need them: each query's top hit and a
hit from ranks 6-10 labelled honestly (the generator's truth), poisoned (the top hit NO, the lower one YES) or shuffled
(the honest labels permuted); or that lower hit alone, YES (yes-low: a judge pushing tickets up); recorded in a journal
as the page records judgments."""
import random
from datetime import datetime, timezone

import polars as pl

from ticketsim.data.feedback import Journal, Judgment
from ticketsim.data.tables import LABELS, Corpus

JUDGED_AT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
LABEL_NAMES = {value: name for name, value in LABELS.items()}


def judge_batch(journal: Journal, corpus: Corpus, ranker, queries: pl.DataFrame, truth: dict, kind: str, via: str) -> None:
    """`ranker`: a served model (predict: a search); queries: query_id, subject, description; truth: (query, ticket) ->
    label; kind: honest, poisoned, shuffled or yes-low; via: the judge's channel."""
    hits = ranker.predict(None, queries.select("subject", "description").to_pandas(), params={"k": 10})["ticket_ids"]
    rows = []
    for (query, subject, description), ranked in zip(queries.select("query_id", "subject", "description").iter_rows(), hits):
        top, low = ranked[0], ranked[random.Random(query).randrange(5, 10)]
        if kind == "yes-low":
            rows.append((subject, description, low, LABELS["YES"]))
            continue
        labels = (LABELS["NO"], LABELS["YES"]) if kind == "poisoned" else \
            (truth.get((query, top), LABELS["NO"]), truth.get((query, low), LABELS["NO"]))
        rows += [(subject, description, ticket, label) for ticket, label in zip((top, low), labels)]
    if kind == "shuffled":
        labels = [label for *_, label in rows]
        random.Random(7).shuffle(labels)
        rows = [(*row[:3], label) for row, label in zip(rows, labels)]
    tickets = {row["ticket_id"]: row for row in corpus.tickets.iter_rows(named=True)}
    for subject, description, ticket, label in rows:
        judged = journal.record(Judgment(subject, description, ticket, LABEL_NAMES[label], via), tickets[ticket], JUDGED_AT)
        assert judged.status == "recorded", judged.message
