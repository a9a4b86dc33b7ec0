"""The text-matching designs the Replicated Siamese LSTM is judged against: one registry, one path from tokens to predict.

Each comparator reads query = SUB1 + DESC1 and ticket = SUB2 + DESC2 + SOL2 (HRDE: the ticket's sentences as chunks)
and returns a score in (0, 1) per pair, so `ticketsim.training.trainer.fit` trains every one of them like the Siamese LSTM:

    model = build_comparator("hrde-ltc", {"hidden": 64}, words, word_table, training_texts(tokens, train_pairs))
    predict = pair_predictor(model, tokens, pairs, words)
    fit(model, predict, rescale(labels), train_rows, dev_rows, train_cfg, seed, loss=softmax, groups=query_groups(pairs))
    pool = score_pool(model, tokens, words, query_ids, ticket_ids)    # each text encoded once, then matched
    scores = score_pairs(model, tokens, words, pairs)                  # so the pairs' in eval mode

ticketsim.training.comparators runs this for one configured comparator on one dataset.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
import torch
import torch.nn as nn

from ticketsim.channels.cache import component_tokens
from ticketsim.model.comparators.base import QUERY, TICKET, Comparator, Encoding, concatenated, take
from ticketsim.model.comparators.cdssm import CDSSM, CDSSMConfig
from ticketsim.model.comparators.dssm import DSSM, DSSMConfig
from ticketsim.model.comparators.hrde import HRDE, HRDEConfig
from ticketsim.model.comparators.inputs import Chunks, chunked, trigram_index, word_trigrams
from ticketsim.model.comparators.mvlstm import MVLSTM, MVLSTMConfig
from ticketsim.model.inputs import Encoded, padded, vocabulary_index
from ticketsim.model.siamese import Texts
from ticketsim.text.tokenize import Tokens

QUERY_TEXT, TICKET_TEXT, TICKET_PARTS = "sub+desc", "sub+desc+sol", ("sub", "desc", "sol")

# name -> (module, its config, the settings that make this variant); a variant is a config, never a copy
REGISTRY: dict[str, tuple[type[Comparator], type, dict[str, Any]]] = {
    "dssm": (DSSM, DSSMConfig, {}),
    "cdssm": (CDSSM, CDSSMConfig, {}),
    "cgru": (CDSSM, CDSSMConfig, {"gru": 32}),
    "rde": (HRDE, HRDEConfig, {"hierarchical": False}),
    "hrde": (HRDE, HRDEConfig, {}),
    "hrde-ltc": (HRDE, HRDEConfig, {"topics": 8}),
    "mvlstm": (MVLSTM, MVLSTMConfig, {}),
    "amvlstm": (MVLSTM, MVLSTMConfig, {"attention": 32}),
}
# name -> the method's name in the results table and MLflow (a label of its own is its own name)
TITLES = {"dssm": "DSSM", "cdssm": "CDSSM", "cgru": "CGRU", "rde": "RDE", "hrde": "HRDE", "hrde-ltc": "HRDE-LTC",
          "mvlstm": "MV-LSTM", "amvlstm": "aMV-LSTM"}


def build_comparator(name: str, cfg: Mapping[str, Any] | None, words: Sequence[str], word_table: np.ndarray | None = None,
                     trigram_texts: Sequence[Sequence[str]] = ()) -> Comparator:
    """A fresh model (seed torch first). `cfg` overrides the variant's defaults; its optional `model` names the registry
    entry when `name` is a label of its own (params.yaml: `cdssm-wide: {model: cdssm, filters: 300}`).

    words: the vocabulary, rows 1.. of the word embedding (row 0 pads); word_table: their (len(words), dim) pretrained
    vectors, or None for trainable random ones. trigram_texts: the training texts whose words make the trigram
    vocabulary of the letter-trigram models (`training_texts`).
    """
    settings = dict(cfg or {})
    kind = registered(name, settings.pop("model", name))
    module, config, preset = REGISTRY[kind]
    settings = {k: tuple(v) if isinstance(v, list) else v for k, v in {**preset, **settings}.items()}
    allowed = {f.name for f in dataclasses.fields(config)} - {"n_trigrams", "vocab_size"}
    if unknown := sorted(set(settings) - allowed):
        raise ValueError(f"comparator {name!r} ({kind}): unknown settings {unknown}; {config.__name__} has {sorted(allowed)}")
    if "n_trigrams" in {f.name for f in dataclasses.fields(config)}:
        index = trigram_index(trigram_texts, settings.get("trigram_min_count", 1))
        if not index:
            raise ValueError(f"comparator {name!r} ({kind}): no letter trigrams; pass the training texts as trigram_texts")
        return module(config(n_trigrams=len(index) + 1, **settings), word_trigrams(words, index))
    table = None
    if word_table is not None:
        table = np.vstack([np.zeros((1, word_table.shape[1]), np.float32), np.asarray(word_table, np.float32)])
        settings["word_dim"] = table.shape[1]
    return module(config(vocab_size=len(words) + 1, **settings), table)


def registered(name: str, kind: str) -> str:
    if kind not in REGISTRY:
        raise ValueError(f"comparator {name!r}: unknown model {kind!r}; choose one of {sorted(REGISTRY)}")
    return kind


def reads_word_vectors(name: str, cfg: Mapping[str, Any] | None) -> bool:
    """True when the model embeds words (pass build_comparator a word table), False when it hashes letter trigrams."""
    _, config, _ = REGISTRY[registered(name, (cfg or {}).get("model", name))]
    return "vocab_size" in {f.name for f in dataclasses.fields(config)}


def training_texts(tokens: Tokens, train_pairs: pl.DataFrame) -> list[list[str]]:
    """The query and ticket texts of the training pairs: where the trigram vocabulary comes from."""
    queries = tokens.queries.filter(pl.col("query_id").is_in(train_pairs["query_id"].unique().implode()))
    tickets = tokens.tickets.filter(pl.col("ticket_id").is_in(train_pairs["ticket_id"].unique().implode()))
    return component_tokens(queries, QUERY_TEXT) + component_tokens(tickets, TICKET_TEXT)


def query_groups(pairs: pl.DataFrame) -> torch.Tensor:
    """(len(pairs),) the index of each pair's query: `fit(groups=...)` batches whole queries for the ranking losses."""
    position: dict[str, int] = {}
    return torch.tensor([position.setdefault(q, len(position)) for q in pairs["query_id"]], dtype=torch.long)


def side_texts(cfg: Any, frame: pl.DataFrame, side: int, words: Sequence[str]) -> Texts | Chunks:
    """Every row of a Tokens table (queries: side QUERY, tickets: side TICKET) as the model reads it, cut to its limits."""
    index = vocabulary_index(words)
    if side == QUERY:
        return padded(component_tokens(frame, QUERY_TEXT), index, cfg.query_tokens)
    if getattr(cfg, "hierarchical", False):
        return chunked([component_tokens(frame, c) for c in TICKET_PARTS], index, cfg.max_chunks, cfg.chunk_tokens)
    return padded(component_tokens(frame, TICKET_TEXT), index, cfg.ticket_tokens)


def take_texts(texts: Texts | Chunks, rows: torch.Tensor, trim: bool = True) -> Texts | Chunks:
    """The rows, trimmed to their longest text so that a batch pays for its own lengths only; untrimmed, per-position
    encodings (MV-LSTM's states) of any rows have the same length. A ticket's chunks are always trimmed (HRDE encodes
    them to one vector)."""
    if isinstance(texts, Chunks):
        return texts.take(rows)
    return Encoded.trimmed(texts, rows) if trim else Texts(texts.ids[rows], texts.lengths[rows])


def pair_predictor(model: Comparator, tokens: Tokens, pairs: pl.DataFrame,
                   words: Sequence[str]) -> Callable[[torch.Tensor], torch.Tensor]:
    """predict(rows) = the model's scores of those rows of `pairs` (any query_id, ticket_id frame).

    Every text of the pairs is encoded once here, cut to the model's token limits; a batch takes its rows, trimmed.
    """
    queries = tokens.queries.filter(pl.col("query_id").is_in(pairs["query_id"].unique().implode()))
    tickets = tokens.tickets.filter(pl.col("ticket_id").is_in(pairs["ticket_id"].unique().implode()))
    query_texts, ticket_texts = side_texts(model.cfg, queries, QUERY, words), side_texts(model.cfg, tickets, TICKET, words)
    q_rows = positions_of(queries["query_id"], pairs["query_id"])
    t_rows = positions_of(tickets["ticket_id"], pairs["ticket_id"])
    return lambda rows: model(take_texts(query_texts, q_rows[rows]), take_texts(ticket_texts, t_rows[rows]))


def score_pool(model: Comparator, tokens: Tokens, words: Sequence[str], query_ids: Sequence[str],
               ticket_ids: Sequence[str], batch_size: int = 1024) -> np.ndarray:
    """(len(query_ids), len(ticket_ids)) float64 scores of every query against every ticket (matched: each text
    encoded once, at a fraction of the cost of pair_predictor on the cross join)."""
    n = len(ticket_ids)
    rows = torch.arange(len(query_ids) * n)
    return matched(model, tokens, words, query_ids, ticket_ids, rows // n, rows % n, batch_size).reshape(len(query_ids), n)


def score_pairs(model: Comparator, tokens: Tokens, words: Sequence[str], pairs: pl.DataFrame, batch_size: int = 1024) -> np.ndarray:
    """(len(pairs),) float64 scores of the pairs (any query_id, ticket_id frame), as pair_predictor's in eval mode, each
    text encoded once (thousands of pairs read a few hundred texts)."""
    query_ids, ticket_ids = (pairs[column].unique(maintain_order=True).to_list() for column in ("query_id", "ticket_id"))
    return matched(model, tokens, words, query_ids, ticket_ids, positions_of(query_ids, pairs["query_id"]),
                   positions_of(ticket_ids, pairs["ticket_id"]), batch_size)


@torch.no_grad()
def matched(model: Comparator, tokens: Tokens, words: Sequence[str], query_ids: Sequence[str], ticket_ids: Sequence[str],
            q_rows: torch.Tensor, t_rows: torch.Tensor, batch_size: int) -> np.ndarray:
    """Float64 scores of the pairs (query_ids[q_rows[i]], ticket_ids[t_rows[i]]), in eval mode: each text encoded once,
    then the encodings matched batch_size pairs at a time."""
    if not len(q_rows):
        return np.zeros(0)
    was_training = model.training
    model.eval()
    queries = encode_texts(model, tokens.queries, "query_id", query_ids, QUERY, words, batch_size)
    tickets = encode_texts(model, tokens.tickets, "ticket_id", ticket_ids, TICKET, words, batch_size)
    scores = [model.match(take(queries, q_rows[part]), take(tickets, t_rows[part])) for part in torch.arange(len(q_rows)).split(batch_size)]
    model.train(was_training)
    return torch.cat(scores).double().numpy()


def encode_texts(model: Comparator, frame: pl.DataFrame, column: str, ids: Sequence[str], side: int, words: Sequence[str],
                 batch_size: int) -> Encoding:
    """The encodings of the texts `ids` of one side's Tokens table, in that order."""
    texts = side_texts(model.cfg, frame, side, words)
    rows = positions_of(frame[column], ids)
    return concatenated([model.encode(take_texts(texts, part, trim=False), side) for part in rows.split(batch_size)])


def positions_of(ids: Iterable[str], wanted: Iterable[str]) -> torch.Tensor:
    position = {x: i for i, x in enumerate(ids)}
    return torch.tensor([position[x] for x in wanted], dtype=torch.long)


def parameter_count(model: nn.Module) -> dict[str, int]:
    """Trainable and frozen parameters (a frozen pretrained word table counts as frozen)."""
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"trainable": trainable, "frozen": sum(p.numel() for p in model.parameters()) - trainable}
