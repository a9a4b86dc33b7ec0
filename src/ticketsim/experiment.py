"""One Siamese variant on one dataset: inputs from the caches, training with the one trainer, pool and pair scores."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.lexical import lexical_scores
from ticketsim.config import BM25Config, SiameseParams, TrainConfig, VariantConfig
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.model.inputs import Encoded, encode_side, vocabulary_index
from ticketsim.model.losses import Loss, loss_of
from ticketsim.model.metric import MetricConfig, PairDistances, similarity
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.text.tokenize import Tokens
from ticketsim.train import History, fit, rescale

# The merged components every channel has: their query-ticket distance sets a cached channel's scale.
SCALE_LEVEL = ("sub+desc", "sub+desc+sol")


def metric_of(variant: VariantConfig) -> MetricConfig:
    return MetricConfig(channels=dict(variant.channels), levels=dict(variant.levels))


def loss_and_groups(variant: VariantConfig, pairs: pl.DataFrame) -> tuple[Loss, torch.Tensor | None]:
    """The variant's training loss, and for a ranking loss the query index of every pair (batches of whole queries)."""
    if variant.loss == "mse":
        return loss_of("mse"), None
    return loss_of(variant.loss), torch.from_numpy(pairs["query_id"].rank("dense").to_numpy().astype(np.int64))


def rank_distances(pairs: pl.DataFrame) -> np.ndarray:
    """Channel R: 1 - 1/rank of the candidate order the source ships (0 for its first); 1 where it ships none."""
    rank = pairs["source_rank"].cast(pl.Float64).fill_null(float("inf")).to_numpy()
    return 1 - 1 / np.maximum(rank, 1)


def channel_scale(vectors: ChannelVectors, pairs: pl.DataFrame) -> float:
    """Mean L1 distance of the pairs' merged query and ticket vectors.

    Summed word vectors of a 400-token SemEval thread lie hundreds of L1 units from a short query, so exp(-W_E d)
    would vanish and so would its gradient; dividing each cached channel by this scale puts every channel's
    distances near 1, which keeps W comparable across channels (W_h .7, W_E .1, W_T .2 weigh like for like).
    """
    q_pos = {x: i for i, x in enumerate(vectors.query_ids)}
    t_pos = {x: i for i, x in enumerate(vectors.ticket_ids)}
    q = vectors.queries[SCALE_LEVEL[0]][[q_pos[x] for x in pairs["query_id"]]]
    t = vectors.tickets[SCALE_LEVEL[1]][[t_pos[x] for x in pairs["ticket_id"]]]
    return float(np.abs(q - t).sum(axis=1).mean()) or 1.0


def scaled(vectors: ChannelVectors, scale: float) -> ChannelVectors:
    return ChannelVectors(vectors.channel, vectors.query_ids, vectors.ticket_ids,
                          {c: v / scale for c, v in vectors.queries.items()}, {c: v / scale for c, v in vectors.tickets.items()})


@dataclass(frozen=True)
class Inputs:
    queries: Encoded
    tickets: Encoded
    words: tuple[str, ...]     # embedding rows 1..n (row 0 pads)
    lexical: torch.Tensor | None = None   # d_L of every query (rows) against every ticket, when the metric weighs L

    def pair_distances(self, metric: MetricConfig, pairs: pl.DataFrame | None = None) -> PairDistances:
        """The pair channels the metric weighs, for `pairs` (n,) or, without them, for the whole pool (n_q, n_t).

        The pool has no source order (R is 1 throughout): only given candidates have one, and ranking the pool by it
        would hand the labelled candidates to the retrieve protocol.
        """
        out = {}
        if metric.channels.get("L"):
            out["L"] = self.lexical if pairs is None else self.lexical[self.queries.row(pairs["query_id"]),
                                                                       self.tickets.row(pairs["ticket_id"])]
        if metric.channels.get("R"):
            out["R"] = (torch.ones(len(self.queries.ids), len(self.tickets.ids)) if pairs is None
                        else torch.from_numpy(rank_distances(pairs)).float())
        return out


def lexical_distances(tokens: Tokens, bm25: BM25Config) -> torch.Tensor:
    """Channel L of every query against every ticket (rows and columns in the tokens' order)."""
    return torch.from_numpy(lexical_scores(tokens, bm25.k1, bm25.b).distances()).float()


def build_inputs(tokens: Tokens, channels: Sequence[ChannelVectors], metric: MetricConfig, max_tokens: int,
                 bm25: BM25Config = BM25Config()) -> Inputs:
    words = tuple(tokens.vocabulary()["token"])
    index = vocabulary_index(words)
    needs_q, needs_t = metric.needs()
    lexical = lexical_distances(tokens, bm25) if metric.channels.get("L") else None
    return Inputs(encode_side(tokens.queries, "query_id", sorted(needs_q.get("h", ())), index, max_tokens, channels, "queries"),
                  encode_side(tokens.tickets, "ticket_id", sorted(needs_t.get("h", ())), index, max_tokens, channels, "tickets"),
                  words, lexical)


def build_model(cfg: SiameseParams, word_table: np.ndarray, char_dim: int, variant: VariantConfig | None = None) -> SiameseLSTM:
    """word_table: (n_words, word_dim + char_dim) rows for Inputs.words, the char-BLSTM part last; a variant with
    learn: true gives the model its W and V to learn."""
    table = torch.cat([torch.zeros(1, word_table.shape[1]), torch.from_numpy(np.asarray(word_table, dtype=np.float32))])
    model_cfg = SiameseConfig(vocab_size=table.shape[0], word_dim=table.shape[1] - char_dim, char_dim=char_dim,
                              hidden=cfg.hidden, dropout=cfg.dropout, finetune=cfg.finetune,
                              pooling=cfg.pooling)
    return SiameseLSTM(model_cfg, table, metric_of(variant) if variant is not None and variant.learn else None)


def fingerprint(pairs: pl.DataFrame) -> str:
    """Changes when any labelled pair, label or split changes: a checkpoint of other data is never resumed."""
    return str(pairs.select("query_id", "ticket_id", "label", "split").hash_rows(seed=0).sum())


def pair_predictor(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame,
                   metric: MetricConfig) -> Callable[[torch.Tensor], torch.Tensor]:
    """predict(rows) = g of those rows of `pairs`."""
    q_rows, t_rows = inputs.queries.row(pairs["query_id"]), inputs.tickets.row(pairs["ticket_id"])
    needs_q, needs_t = metric.needs()
    pair = inputs.pair_distances(metric, pairs)
    return lambda rows: model(inputs.queries.take(q_rows[rows], needs_q), inputs.tickets.take(t_rows[rows], needs_t), metric,
                              pair={c: d[rows] for c, d in pair.items()})


def train_model(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, variant: VariantConfig, cfg: TrainConfig,
                seed: int, **fit_options) -> History:
    """Fit the model to the train pairs with the variant's loss, early-stopped on dev (ticketsim.train.fit;
    `fit_options`: checkpoint, meta, on_epoch)."""
    split = pairs["split"].to_list()
    rows = {name: torch.tensor([i for i, s in enumerate(split) if s == name], dtype=torch.long) for name in ("train", "dev")}
    loss, groups = loss_and_groups(variant, pairs)
    return fit(model, pair_predictor(model, inputs, pairs, metric_of(variant)), rescale(torch.tensor(pairs["label"].to_list())),
               rows["train"], rows["dev"], cfg, seed, loss=loss, groups=groups, **fit_options)


@torch.no_grad()
def predict_all(predict: Callable[[torch.Tensor], torch.Tensor], n: int, batch_size: int = 256) -> np.ndarray:
    """predict() of rows 0..n-1 in batches, as float64 scores."""
    parts = [predict(rows) for rows in torch.arange(n).split(batch_size)]
    return torch.cat(parts).double().numpy() if parts else np.zeros(0)


@torch.no_grad()
def pool_scores(model: SiameseLSTM, inputs: Inputs, metric: MetricConfig, batch_size: int = 256) -> ScoreMatrix:
    """g of every query against every ticket of the pool (channels computed once per text, in eval mode)."""
    needs_q, needs_t = metric.needs()
    values = similarity(side_channels(model, inputs.queries, needs_q, batch_size),
                        side_channels(model, inputs.tickets, needs_t, batch_size), model.metric(metric), pool=True,
                        pair={c: d.double() for c, d in inputs.pair_distances(metric).items()})
    return ScoreMatrix(inputs.queries.ids, inputs.tickets.ids, values.numpy())


@torch.no_grad()
def side_channels(model: SiameseLSTM, side: Encoded, needs: dict[str, tuple[str, ...]],
                  batch_size: int = 256) -> dict[str, dict[str, torch.Tensor]]:
    """Every row's vectors of the needed channels and components (h computed once per text, in eval mode), float64."""
    was_training = model.training
    model.eval()
    parts = [model.channels(side.take(rows, needs)) for rows in torch.arange(len(side.ids)).split(batch_size)]
    model.train(was_training)
    return {c: {k: torch.cat([p[c][k] for p in parts]).double() for k in needs[c]} for c in needs}
