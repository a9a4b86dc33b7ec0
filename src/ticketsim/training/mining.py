"""Self-supervised training pairs mined from the tickets alone, for a help desk with no labelled pair yet.

The paper's asymmetry gives the signal: a ticket's subject is a short query for its own description and solution. Each
mined query (the subject; or subject and description with `query: sub+desc`) is labelled YES with its own ticket and
NO with hard negatives: the other tickets BM25 ranks highest for it and those nearest to it in channel S, past the
first `skip` of each ranking (in a knowledge base they often solve the same fault). Every ticket's view drops what the
mined queries read (its subject, or subject and description), so the positive never shares the query's text verbatim
and no view tells the positive apart by what is missing. A ticket is never its own negative, nor is a ticket whose
view has the same text as the positive's (a repeated thread).

Everything is built from the prepared corpus, its tokens and channel S's cache: no text is tokenized or encoded again.
Phase 1 compares the query with what its view keeps of one field (the description for `query: sub`, the solution for
`query: sub+desc`): a text S has cached exactly, so the adapter A trains on mined pairs in seconds, as F does in minutes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from ticketsim.channels.cache import ChannelVectors, component_tokens
from ticketsim.channels.lexical import LexicalIndex
from ticketsim.config import BM25Config, MiningConfig
from ticketsim.data.tables import PAIR_SCHEMA, Corpus, stable_split
from ticketsim.text.tokenize import Tokens

PREFIX = "mined:"               # mined query ids: PREFIX + the ticket's id
YES, NO = 5, 1
# query -> (phase 1's level pair, the cached S component of the ticket holding each view component's exact text)
LAYOUT = {"sub": ("sub+desc-sub+desc", {"sub+desc": "desc", "desc": "desc", "sol": "sol"}),
          "sub+desc": ("sub+desc-sub+desc+sol", {"sub+desc+sol": "sol", "sol": "sol"})}


@dataclass(frozen=True, eq=False)
class Mined:
    """The mined corpus (views as tickets, mined queries, YES/NO pairs split train/dev), its tokens, phase 1's level
    pair, and channel S of its texts where the cache has them exactly (None without a cache)."""

    corpus: Corpus
    tokens: Tokens
    level: str
    sentence: ChannelVectors | None = None


def hidden_fields(cfg: MiningConfig) -> tuple[str, ...]:
    """The ticket fields the mined query reads, blanked in every ticket's view."""
    return ("subject",) if cfg.query == "sub" else ("subject", "description")


def mine(corpus: Corpus, tokens: Tokens, cfg: MiningConfig, bm25: BM25Config = BM25Config(),
         sentence: ChannelVectors | None = None, seed: int = 0) -> Mined:
    """The self-supervised pairs of the tickets; `sentence`: channel S's cache of the corpus (dense negatives, and
    the vectors the adapter A reads)."""
    hidden = hidden_fields(cfg)
    kept = [f for f in ("subject", "description", "solution") if f not in hidden]
    nonblank = lambda field: pl.col(field).fill_null("").str.strip_chars() != ""  # noqa: E731
    tickets = corpus.tickets.join(tokens.tickets.select("ticket_id"), on="ticket_id", how="semi")
    eligible = tickets.filter(pl.all_horizontal(*map(nonblank, hidden)) & pl.any_horizontal(*map(nonblank, kept)))
    ids = eligible["ticket_id"].to_list()
    if len(ids) > cfg.max_queries:
        ids = sorted(np.random.default_rng(seed).choice(ids, cfg.max_queries, replace=False).tolist())
    if not ids:
        raise ValueError("mining: no ticket has both the fields a mined query reads and text left for its view")

    views = tickets.with_columns(pl.lit("").alias(f) for f in hidden)
    view_tokens = tokens.tickets.with_columns(pl.lit([], dtype=pl.List(pl.String)).alias(f) for f in hidden)
    order = pl.DataFrame({"ticket_id": ids})      # the mined queries' rows, in the order of ids
    raw, words = order.join(tickets, on="ticket_id", how="left"), order.join(tokens.tickets, on="ticket_id", how="left")
    with_description = "description" in hidden
    query_ids = [PREFIX + x for x in ids]
    query_frame = pl.DataFrame({"query_id": query_ids, "subject": raw["subject"],
                                "description": raw["description"] if with_description else [""] * len(ids)})
    query_tokens = pl.DataFrame({"query_id": query_ids, "subject": words["subject"],
                                 "description": words["description"] if with_description else [[]] * len(ids)},
                                schema={"query_id": pl.String, "subject": pl.List(pl.String), "description": pl.List(pl.String)})

    negatives = hard_negatives(ids, views, view_tokens, query_tokens, cfg, bm25, sentence)
    rows = [(PREFIX + t, t, YES) for t in ids] + [(PREFIX + t, n, NO) for t in ids for n in negatives[t]]
    pairs = pl.DataFrame(rows, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8}, orient="row")
    splits = {PREFIX + t: stable_split(PREFIX + t, {"dev": cfg.dev, "train": 1 - cfg.dev}) for t in ids}
    pairs = pairs.with_columns(split=pl.col("query_id").replace_strict(splits), source_rank=pl.lit(None, pl.Int32))
    mined = Corpus(views, query_frame, pairs.select(list(PAIR_SCHEMA)).cast(PAIR_SCHEMA))
    level, view_source = LAYOUT[cfg.query]
    return Mined(mined, Tokens(view_tokens, query_tokens), level,
                 None if sentence is None else mined_vectors(sentence, ids, cfg.query, view_source))


def mined_vectors(sentence: ChannelVectors, ids: list[str], query: str, view_source: dict[str, str]) -> ChannelVectors:
    """Channel S of the mined texts, taken from the cache where it holds the very same text: a mined query's
    components are its ticket's subject (and description): the ticket's component named by `query`; a view's are what
    it keeps of one field."""
    row = {x: i for i, x in enumerate(sentence.ticket_ids)}
    mine_rows = [row[t] for t in ids]
    queries = {"sub": sentence.tickets["sub"][mine_rows], "sub+desc": sentence.tickets[query][mine_rows],
               "desc": (sentence.tickets["desc"][mine_rows] if query == "sub+desc"
                        else np.zeros_like(sentence.tickets["desc"][mine_rows]))}
    return ChannelVectors("S", tuple(PREFIX + t for t in ids), sentence.ticket_ids, queries,
                          {view: sentence.tickets[source] for view, source in view_source.items()})


def as_mined_queries(vectors: ChannelVectors, query: str) -> ChannelVectors:
    """A channel's cache with every ticket's `query` component as the merged text (sub+desc) of its mined query, and
    the tickets as they are: what compares a mined query with any whole ticket."""
    return ChannelVectors(vectors.channel, tuple(PREFIX + t for t in vectors.ticket_ids), vectors.ticket_ids,
                          {"sub+desc": vectors.tickets[query]}, vectors.tickets)


def hard_negatives(ids: list[str], views: pl.DataFrame, view_tokens: pl.DataFrame, query_tokens: pl.DataFrame,
                   cfg: MiningConfig, bm25: BM25Config, sentence: ChannelVectors | None) -> dict[str, list[str]]:
    """Mined query (by its ticket id) -> its negatives: BM25's, then channel S's, each past its first `skip` others."""
    pool_ids = tuple(view_tokens["ticket_id"])
    position = {x: i for i, x in enumerate(pool_ids)}
    text = views.select(pl.concat_str([pl.col(c).fill_null("") for c in ("subject", "description", "solution")],
                                      separator="\n")).to_series().to_list()
    rankings = []
    if cfg.bm25_negatives:
        lexical = LexicalIndex.build(pool_ids, component_tokens(view_tokens, "sub+desc+sol"), bm25.k1, bm25.b)
        scores = lexical.scores(tuple(query_tokens["query_id"]), component_tokens(query_tokens, "sub+desc")).bm25
        rankings.append((scores, cfg.bm25_negatives))
    if cfg.dense_negatives and sentence is not None:
        cached = {x: i for i, x in enumerate(sentence.ticket_ids)}
        rows = np.array([cached[x] for x in pool_ids])
        q = unit(sentence.tickets[cfg.query][[cached[t] for t in ids]])   # the ticket's component the query is
        rankings.append((q @ unit(sentence.tickets["sub+desc+sol"][rows]).T, cfg.dense_negatives))
    out = {}
    for row, ticket in enumerate(ids):
        own = text[position[ticket]]
        chosen: list[str] = []
        for scores, count in rankings:
            others = [i for i in np.argsort(-scores[row], kind="stable") if pool_ids[i] != ticket and text[i] != own]
            chosen += [pool_ids[i] for i in others[cfg.skip:] if pool_ids[i] not in chosen][:count]
        out[ticket] = chosen
    return out


def judged_negatives(pairs: pl.DataFrame, tokens: Tokens, cfg: MiningConfig, bm25: BM25Config,
                     sentence: ChannelVectors | None) -> pl.DataFrame:
    """The knowledge base's hard negatives of labelled queries: for each train query, the tickets BM25 ranks highest
    for it and those nearest to it in channel S (its SUB+DESC against the ticket's SUB+DESC+SOL), past the first `skip`
    of each ranking and none it judges, as NO pairs of the train split. What a contrastive loss must push below the
    YES: the tickets a search would show first, not the batch's random others."""
    train = pairs.filter(pl.col("split") == "train")
    queries = train["query_id"].unique(maintain_order=True).to_list()
    judged = {q: set(ts) for q, ts in train.group_by("query_id").agg("ticket_id").iter_rows()}
    pool_ids = tuple(tokens.tickets["ticket_id"])
    query_tokens = pl.DataFrame({"query_id": queries}).join(tokens.queries, on="query_id", how="left")
    rankings = []
    if cfg.bm25_negatives:
        lexical = LexicalIndex.build(pool_ids, component_tokens(tokens.tickets, "sub+desc+sol"), bm25.k1, bm25.b)
        rankings.append((lexical.scores(tuple(queries), component_tokens(query_tokens, "sub+desc")).bm25, cfg.bm25_negatives))
    if cfg.dense_negatives and sentence is not None:
        q_rows = {x: i for i, x in enumerate(sentence.query_ids)}
        t_rows = {x: i for i, x in enumerate(sentence.ticket_ids)}
        q = unit(sentence.queries["sub+desc"][[q_rows[x] for x in queries]])
        rankings.append((q @ unit(sentence.tickets["sub+desc+sol"][[t_rows[x] for x in pool_ids]]).T, cfg.dense_negatives))
    rows = []
    for row, query in enumerate(queries):
        chosen: list[str] = []
        for scores, count in rankings:
            others = [pool_ids[i] for i in np.argsort(-scores[row], kind="stable") if pool_ids[i] not in judged[query]]
            chosen += [t for t in others[cfg.skip:] if t not in chosen][:count]
        rows += [(query, t) for t in chosen]
    mined = pl.DataFrame(rows, schema={"query_id": pl.String, "ticket_id": pl.String}, orient="row")
    return mined.with_columns(label=pl.lit(NO), split=pl.lit("train"), source_rank=pl.lit(None, pl.Int32)).select(
        list(PAIR_SCHEMA)).cast(PAIR_SCHEMA)


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
