"""Query texts -> the top-k tickets of a knowledge base (exact; through its graph in a large index), with their
similarity (calibrated 1-5 where the model has a calibration, else the raw g) and the reasons for each.

One Searcher serves the command line, the MLflow model and the web page: a bundle (the model, its queries read by
search/queries.py) and a TicketIndex whose vectors that bundle's weights flattened (checked by hash when it loads): the
score of each hit is the bundle's fused score g (scoring/fused.py), its top k exact (scoring/topk.py).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.channels.cache import component_tokens
from ticketsim.channels.lexical import QUERY_LEVEL
from ticketsim.data.tables import QUERY_FIELDS, QUERY_SCHEMA
from ticketsim.data.validate import DataError, shorten
from ticketsim.scoring.topk import top_k, top_k_within
from ticketsim.search.encode import one_side
from ticketsim.search.generations import current
from ticketsim.search.index import TicketIndex, check_hash, check_whole, model_hash, read_generation_manifest
from ticketsim.search.queries import QueryEncoder, query_encoder
from ticketsim.search.reasons import part_phrases, reasons, similarity_labels, standardized
from ticketsim.text.stopwords import is_topical
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

PHRASES_CACHED = 10_000     # tickets whose phrases a searcher keeps
# Characters of a ticket's text that a hit carries unless the whole is asked for (`--full`, the API's `full=1`): a
# pasted log of a million characters in each hit's JSON cost the page's worker gigabytes for text nobody reads there.
EXCERPT = 2_000
# What the figures of a hit mean, in the words every reader gets (the page's legend, `ticketsim search`'s table): the
# 1-5 figure only where a calibration was fitted on labelled pairs, else g alone, so a figure means the same everywhere.
LEGEND = {
    True: "score: the similarity calibrated on labelled pairs to the labels' 1-5 scale (5 solved it, 3 related, "
          "1 not relevant); g: the model's raw similarity exp(-distance), in this model's own units, which orders equal "
          "scores",
    False: "g: the model's raw similarity exp(-distance), in this model's own units (higher is more alike); compare hits "
           "by it. No 1-5 score: this model was trained without labelled pairs, so nothing calibrates g to the labels' "
           "scale",
}


@dataclass(frozen=True)
class Hit:
    rank: int
    ticket_id: str
    score: float            # g, the model's similarity in (0, 1]
    calibrated: float | None    # g on the 1-5 label scale (the bundle's isotonic calibrator); None: no calibration fitted
    subject: str
    description: str
    solution: str
    reasons: dict           # reasons.reasons: the matched parts with their shared phrases, the coherent shared topics
    cut: dict = field(default_factory=dict)     # the texts cut to EXCERPT characters, each with its whole length


@dataclass(frozen=True)
class Answer:
    query_id: str
    hits: tuple[Hit, ...]
    warnings: tuple[str, ...] = ()
    calibrated: bool = True     # the hits have a calibrated 1-5 score (the bundle's calibrator was fitted on labels)
    matching: int | None = None     # how many tickets the filter (`where`) admits; None: no filter

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def legend(self) -> str:
        return LEGEND[self.calibrated]

    def similarities(self) -> list[str]:
        """Each hit's raw g as text, with the digits that order hits whose calibrated scores tie."""
        return similarity_labels([hit.score for hit in self.hits])

    def as_text(self, width: int = 60) -> str:
        """A table for people: rank, ticket, calibrated score (where there is one), raw g, subject, the solution's first
        line, the reasons. LEGEND says what the figures mean."""
        similarities = self.similarities()
        g_width = max(map(len, similarities), default=1)
        score_width = 7 if self.calibrated else 0     # "  3.71 " before g
        indent = " " * (21 + score_width + g_width)
        head = f"{'rank':>4}  {'ticket':<12} " + (f"{'score':>5}  " if self.calibrated else "")
        lines = [f"query {self.query_id}", *(f"  note: {w}" for w in self.warnings),
                 f"{head}{'g':<{g_width}}  {'subject':<{width}}  solution (first line)"]
        for hit, g in zip(self.hits, similarities):
            first = hit.solution.strip().splitlines()[0] if hit.solution.strip() else ""
            score = f"{hit.calibrated:5.2f}  " if self.calibrated else ""
            lines.append(f"{hit.rank:>4}  {hit.ticket_id:<12} {score}{g:<{g_width}}  {clip(hit.subject, width):<{width}}  "
                         f"{clip(first, width)}")
            parts = [f"query {p['query']} ~ ticket {p['ticket']}: {', '.join(p['phrases'])}" for p in hit.reasons["parts"]]
            lines += [f"{indent}{'why:' if i == 0 else '    '} {part}" for i, part in enumerate(parts or ["no shared words"])]
            if hit.reasons["topics"]:
                topics = "; ".join(f"#{t['topic']} ({' '.join(t['words'])})" for t in hit.reasons["topics"])
                lines.append(f"{indent}     topics {topics}")
        return "\n".join(lines)


def clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


class Searcher:
    def __init__(self, queries: QueryEncoder, index: TicketIndex, bundle: str | Path, where: str | Path = "the index"):
        """`queries`: query_encoder(bundle). Refuses an index flattened with other weights than the bundle's (IndexMismatch)."""
        self.queries, self.bundle, self.bundle_hash, self.where = queries, bundle, model_hash(bundle), where
        # Each ticket's phrases, once per process for the tickets found most (cleared when another generation loads).
        self.ticket_phrases = lru_cache(maxsize=PHRASES_CACHED)(lambda row: part_phrases(self.index.tokens(row)))
        self.use(index)

    def use(self, index: TicketIndex) -> None:
        index.check(self.bundle_hash, self.bundle, self.where)
        self.index, self.topic_labels = index, index.topic_labels(self.queries.topics)
        self.ticket_phrases.cache_clear()

    def follow(self) -> bool:
        """Load the index's generation in force if a writer made a new one since this searcher loaded (a server calls
        this between requests: one small read); True if it did. A generation of other weights is refused
        (IndexMismatch) and the one loaded stays."""
        if current(self.index.folder) in (None, self.index.generation):
            return False
        self.use(TicketIndex.load(self.index.folder))
        return True

    @classmethod
    def load(cls, bundle: str | Path, index: str | Path) -> Searcher:
        return cls(query_encoder(bundle), TicketIndex.load(index), bundle, index)

    def search(self, queries: pl.DataFrame, k: int = 10, full: bool = False, where: dict[str, str] | None = None) -> list[Answer]:
        """The top k tickets of each query (query_id, subject, description), best first, their texts whole with `full`
        (else cut to EXCERPT characters, as each hit's `cut` says); DataError on an empty query. where: field -> value,
        the tickets searched (all must hold; an exact top k of them); a StepError naming a field the index lacks."""
        within = None if not where else self.index.matching(where)
        queries = queries.select(list(QUERY_SCHEMA)).with_columns(pl.col(QUERY_FIELDS).fill_null(""))
        problems = [f"query {shorten(q)}: subject and description are both empty; describe the problem in at least one"
                    for q, s, d in queries.iter_rows() if not (s.strip() or d.strip())]
        if k < 1:
            problems.append(f"k = {k}: ask for at least 1 ticket")
        if problems:
            raise DataError(problems)
        score, index = self.index.score, self.index
        tokens, flat = self.queries.encode(queries, score)
        words, parts = component_tokens(tokens, QUERY_LEVEL), [part_phrases(p) for p in tokens.select(QUERY_FIELDS).to_dicts()]
        query_topics = standardized(self.queries.topics.activity(words), *index.topic_scale)
        answers = []
        for i, query_id in enumerate(queries["query_id"]):
            lexical = index.postings.query(words[i]) if score.lexical_weight else None
            rows, totals = top_k(index.vectors, flat[i], k, index.ids_at, score, lexical) if within is None \
                else top_k_within(index.vectors, within, flat[i], k, index.ids_at, score, lexical)
            scores = score.flat_similarity(totals)
            found = index.rows(rows.tolist(), None if full else EXCERPT)
            fitted = self.queries.calibrator.fitted
            calibrated = self.queries.calibrator(scores) if fitted else [None] * len(scores)
            hits = tuple(self.hit(rank, *hit, query_topics[i], parts[i])
                         for rank, hit in enumerate(zip(rows, found, scores, calibrated), start=1))
            answers.append(Answer(query_id, hits, self.warnings(words[i], k, where, within), fitted,
                                  None if within is None else len(within)))
        return answers

    def hit(self, rank: int, row: int, ticket: dict, score: float, calibrated: float | None, query_topics: np.ndarray,
            query_phrases: dict) -> Hit:
        """ticket: the row's ticket_id, subject, description, solution and topics; query_phrases: the query's part_phrases."""
        why = reasons(query_phrases, self.ticket_phrases(int(row)), query_topics, ticket["topics"], self.topic_labels,
                      self.index.postings.idf)
        return Hit(rank, ticket["ticket_id"], float(score), None if calibrated is None else float(calibrated),
                   ticket["subject"] or "", ticket["description"] or "", ticket["solution"] or "", why, ticket["cut"])

    def warnings(self, words: list[str], k: int, where: dict[str, str] | None = None, within: np.ndarray | None = None
                 ) -> tuple[str, ...]:
        notes = []
        if within is not None and k > len(within):
            said = " and ".join(f"{field}={value}" for field, value in where.items())
            notes.append(f"k = {k}, but {len(within)} tickets have {said}: all of them are listed")
        elif k > len(self.index):
            notes.append(f"k = {k}, but the knowledge base holds {len(self.index)} tickets: all of them are listed")
        topical = [w for w in dict.fromkeys(words) if is_topical(w)]
        if not any(w in self.index.postings.idf for w in topical):
            said = ", ".join(topical[:5]) if topical else "only stopwords, numbers and punctuation"
            notes.append(f"no word of the query ({said}) occurs in the knowledge base: the tickets are ranked by spelling and "
                         "meaning alone, with no shared word; check the spelling or describe the fault in other words")
        return tuple(notes)

    def query_words(self, queries: pl.DataFrame) -> list[list[str]]:
        """Each query's SUB+DESC tokens (channel L's words) by the bundle's tokenizer."""
        corpus = one_side(queries, "queries")
        return component_tokens(tokenize_corpus(corpus, make_tokenizer(self.queries.text, corpus), progress=False).queries, QUERY_LEVEL)

    def ticket(self, ticket_id: str) -> dict | None:
        """A ticket of the knowledge base as indexed (its id and texts), or None when there is no such id."""
        return self.index.ticket(ticket_id)


def check_folders(bundle: str | Path, index: str | Path) -> None:
    """Searcher.load's checks that load no model (for ticketsim.app.worker, which must not load one before it forks):
    the bundle's manifest, the index's files whole and flattened with the bundle's weights."""
    bundle_manifest(Path(bundle))
    check_whole(index)
    check_hash(read_generation_manifest(Path(index))["model_hash"], model_hash(bundle), bundle, index)
