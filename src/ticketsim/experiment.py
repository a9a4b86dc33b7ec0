"""One Siamese variant on one dataset: inputs from the caches, training with the one trainer, pool and pair scores."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.lexical import lexical_scores
from ticketsim.config import (
    BM25Config,
    EncoderConfig,
    MiningConfig,
    Params,
    SentenceConfig,
    SiameseParams,
    TrainConfig,
    VariantConfig,
)
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.mining import Mined, as_mined_queries, mine
from ticketsim.model.branches import BRANCHES, STARTED, BranchStart
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


def mined_scale(vectors: ChannelVectors, mined: Mined, query: str) -> float:
    """channel_scale for a dataset without labelled pairs: over the pairs mined from its tickets, a mined query being
    its ticket's `query` component (siamese.selfsup.query)."""
    return channel_scale(as_mined_queries(vectors, query), mined.corpus.pairs)


def scaled(vectors: ChannelVectors, scale: float) -> ChannelVectors:
    return ChannelVectors(vectors.channel, vectors.query_ids, vectors.ticket_ids,
                          {c: v / scale for c, v in vectors.queries.items()}, {c: v / scale for c, v in vectors.tickets.items()})


@dataclass(frozen=True, eq=False)
class Prepared:
    """What training any variant on one dataset reads, built once by `prepare` (picklable: worker processes and tune's
    trials get a copy)."""

    pairs: pl.DataFrame                     # the labelled pairs the variants train and are evaluated on
    tokens: Tokens
    corpus: Corpus | None                   # the prepared texts: channel F reads them, mining needs them
    channels: tuple[ChannelVectors, ...]    # the cached channels in channel order, each divided by its scale
    scales: dict[str, float]                # channel -> the scale it was divided by
    word_table: np.ndarray                  # rows for tokens.vocabulary() (build_inputs' words), char-BLSTM part last
    char_dim: int
    start: BranchStart | None               # where branches F and A start (None when no variant weighs them)
    mined: Mined | None                     # the self-supervised pairs (variants with selfsup: true; no labels)
    digest: str = ""                        # inputs_digest of tokens, word table and channels: in every checkpoint's meta


def prepare(params: Params, tokens: Tokens, channels: Sequence[ChannelVectors], word_table: Callable[[list[str]], np.ndarray],
            char_dim: int, variants: Sequence[VariantConfig], corpus: Corpus | None = None, pairs: pl.DataFrame | None = None,
            labelled: bool = True) -> Prepared:
    """Everything the `variants` need beside their own weights: each channel's scale (the train pairs' or, without
    labels, the mined pairs'), their F and A branches' start (the encoder loaded once), the mined pairs, the word table
    (`word_table(words)`: sumemb.word_vectors in the stages). `pairs`: the corpus's by default (tune passes train and dev)."""
    pairs = corpus.pairs if pairs is None else pairs
    sentence = next((v for v in channels if v.channel == "S"), None)
    mined = None
    if any(v.selfsup for v in variants) or not labelled:
        if corpus is None:
            raise ValueError("mining self-supervised pairs needs the prepared corpus")
        mined = mine(corpus, tokens, params.siamese.selfsup, params.bm25, sentence, params.seed)
    train = pairs.filter(pl.col("split") == "train")
    scales = {v.channel: channel_scale(v, train) if labelled else mined_scale(v, mined, params.siamese.selfsup.query)
              for v in channels}
    start = branch_start(variants, params.siamese, params.sentence, sentence, scales.get("S"))
    if mined is not None and mined.sentence is not None:   # the adapter reads the mined texts' S at S's scale
        mined = replace(mined, sentence=scaled(mined.sentence, scales["S"]))
    # In channel order, however the caches were listed: tune's study name hashes them.
    channels = tuple(scaled(v, scales[v.channel]) for v in sorted(channels, key=lambda v: v.channel))
    table = np.asarray(word_table(list(tokens.vocabulary()["token"])), dtype=np.float32)
    return Prepared(pairs, tokens, corpus, channels, scales, table, char_dim, start, mined, inputs_digest(tokens, table, channels))


def inputs_digest(tokens: Tokens, word_table: np.ndarray, channels: Iterable[ChannelVectors]) -> str:
    """Changes when a token, a word vector or a cached channel's value changes (with `fingerprint` of the pairs: what
    a checkpoint and a study name know of the data)."""
    digest = hashlib.sha1()
    for frame in (tokens.tickets, tokens.queries):
        digest.update(str(frame.hash_rows(seed=0).sum()).encode())
    for array in [word_table, *(a for v in channels for side in (v.queries, v.tickets) for a in side.values())]:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


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
                 bm25: BM25Config = BM25Config(), corpus: Corpus | None = None) -> Inputs:
    """`corpus`: the prepared texts of the tokens' rows, which channel F reads (required when the metric weighs F)."""
    words = tuple(tokens.vocabulary()["token"])
    index = vocabulary_index(words)
    needs_q, needs_t = metric.needs()
    lexical = lexical_distances(tokens, bm25) if metric.channels.get("L") else None
    raw = (None, None) if corpus is None else (aligned(corpus.queries, tokens.queries, "query_id"),
                                               aligned(corpus.tickets, tokens.tickets, "ticket_id"))
    return Inputs(encode_side(tokens.queries, "query_id", read_as(needs_q, "words"), index, max_tokens, channels, "queries",
                              raw[0], read_as(needs_q, "strings")),
                  encode_side(tokens.tickets, "ticket_id", read_as(needs_t, "words"), index, max_tokens, channels, "tickets",
                              raw[1], read_as(needs_t, "strings")),
                  words, lexical)


def read_as(needs: dict[str, tuple[str, ...]], kind: str) -> list[str]:
    """The components that the needed trained branches read as `kind` ("words" or "strings", model/branches.py)."""
    return sorted({c for channel, components in needs.items() if channel in BRANCHES and BRANCHES[channel].reads == kind
                   for c in components})


def aligned(raw: pl.DataFrame, tokens: pl.DataFrame, id_column: str) -> pl.DataFrame:
    """The prepared rows of `raw` in the order of the tokens' rows."""
    return tokens.select(id_column).join(raw, on=id_column, how="left", maintain_order="left")


def branch_start(variants: Iterable[VariantConfig], siamese: SiameseParams, sentence: SentenceConfig,
                 s_vectors: ChannelVectors | None, scale: float | None) -> BranchStart | None:
    """What the variants' started branches (F, A) begin from (None when none weighs them), `scale` being channel S's;
    the encoder loaded once here."""
    started = set().union(*(v.weighed for v in variants)) & STARTED
    if not started:
        return None
    if s_vectors is None:
        raise ValueError(f"channels {sorted(started)} start from channel S: its cache (S.npz) is needed")
    encoder = None
    if any(BRANCHES[c].pretrained for c in started):
        from ticketsim.channels.sentence import load_encoder  # sentence-transformers only when F is weighed

        # on the CPU: each model moves its own copy to the device (TransformerBranch)
        encoder = load_encoder(siamese.encoder.model or sentence.model, download=sentence.download, cache=sentence.cache,
                               device="cpu").model
    return BranchStart(encoder, siamese.encoder.on(sentence), scale, s_vectors.dim)


def build_branches(variant: VariantConfig, start: BranchStart | None, own: bool = False) -> dict[str, torch.nn.Module]:
    """The variant's started branches (model/branches.py), built from `start`. A pretrained branch trains its own copy
    of start's encoder, which several models start from, unless the encoder is its `own` already (a saved model's)."""
    started = sorted(variant.weighed & STARTED)
    if started and start is None:
        raise ValueError(f"channels {started} start from channel S: build_model needs a BranchStart")
    return {c: BRANCHES[c].build(start, own) for c in started}


def build_model(cfg: SiameseParams, word_table: np.ndarray, char_dim: int, variant: VariantConfig | None = None,
                start: BranchStart | None = None) -> SiameseLSTM:
    """word_table: (n_words, word_dim + char_dim) rows for Inputs.words, the char-BLSTM part last; a variant with
    learn: true gives the model its W and V to learn; one that weighs F or A gets those branches, from `start`."""
    table = torch.cat([torch.zeros(1, word_table.shape[1]), torch.from_numpy(np.asarray(word_table, dtype=np.float32))])
    model_cfg = SiameseConfig(vocab_size=table.shape[0], word_dim=table.shape[1] - char_dim, char_dim=char_dim,
                              hidden=cfg.hidden, dropout=cfg.dropout, finetune=cfg.finetune,
                              pooling=cfg.pooling)
    learn = metric_of(variant) if variant is not None and variant.learn else None
    return SiameseLSTM(model_cfg, table, learn, build_branches(variant, start) if variant is not None else None)


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


def reads(metric: MetricConfig) -> set[str]:
    """The cached channels a metric needs: those it weighs and those its trained branches start from (S for F and A)."""
    weighed = {c for c, w in metric.channels.items() if w}
    return weighed | {BRANCHES[c].starts_from for c in weighed & STARTED}


def selfsup_variant(cfg: MiningConfig, level: str, channels: Iterable[str]) -> VariantConfig:
    """Phase 1's metric: the trained branches alone on the mined level pair, a softmax over each mined query's
    candidates; W = cfg.weight sharpens it (unit vectors at channel S's scale lie about 1 apart: too flat at W = 1)."""
    return VariantConfig(channels=dict.fromkeys(channels, cfg.weight), levels={level: 1.0}, loss="softmax")


def pretrain(model: SiameseLSTM, mined: Mined, cfg: MiningConfig, train: TrainConfig, seed: int, **fit_options) -> History:
    """Phase 1: the model's branches F and A trained on mined pairs (ticketsim.mining), through the one metric and
    trainer. They are shared with a model of fixed weights, so the variant's own learned W and V wait for the labels.
    `mined.sentence` (channel S of the mined texts, which A reads) must be divided by the scale S has in `model`."""
    branches = {c: b for c, b in model.branches.items() if c in STARTED}
    if not branches:
        raise ValueError(f"selfsup: true trains the branches {sorted(STARTED)}: the variant weighs none")
    variant = selfsup_variant(cfg, mined.level, branches)
    reads_s = any(BRANCHES[c].reads == "S" for c in branches)
    if reads_s and mined.sentence is None:
        raise ValueError(f"channels {sorted(branches)} learn from mined pairs through channel S: mine them with S's cache")
    inputs = build_inputs(mined.tokens, [mined.sentence] if reads_s else [], metric_of(variant), 1, corpus=mined.corpus)
    branches_only = SiameseLSTM(SiameseConfig(vocab_size=1), branches=branches)
    return train_model(branches_only, inputs, mined.corpus.pairs, variant, train, seed, **fit_options)


# Each training phase's resumable checkpoint (ticketsim.train.fit) in a model's folder.
CHECKPOINTS = {"selfsup": "selfsup.pt", "labels": "checkpoint.pt"}
WEIGHTS, ENCODER = "weights.pt", "encoder"      # a trained model: weights (F's transformer apart) and F's encoder folder


def save_model(model: SiameseLSTM, variant: VariantConfig, folder: Path) -> None:
    """The trained model of `variant` in `folder`: WEIGHTS (its config, variant and state, F's transformer apart) and,
    when it has channel F, the fine-tuned encoder as an ordinary sentence-transformers folder (ENCODER)."""
    pretrained = [c for c in model.branches if BRANCHES[c].pretrained]
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(tuple(f"branches.{c}." for c in pretrained))}
    torch.save({"model_config": asdict(model.cfg), "variant": asdict(variant), "state_dict": state}, folder / WEIGHTS)
    for c in pretrained:
        model.branches[c].save(folder / ENCODER)


def load_model(folder: Path, variant: VariantConfig, encoder: EncoderConfig, scales: dict[str, float]) -> SiameseLSTM:
    """A model save_model wrote, for `variant` (the one it was trained as), in eval mode. F takes channel S's scale and
    runs on encoder.device (named: EncoderConfig.on)."""
    saved = torch.load(folder / WEIGHTS, weights_only=True)
    if saved["variant"] != asdict(variant):
        raise ValueError(f"{folder / WEIGHTS}: trained as {saved['variant']}, not as {asdict(variant)}")
    started = variant.weighed & STARTED
    pretrained = tuple(f"branches.{c}." for c in started if BRANCHES[c].pretrained)
    start = None
    if started:
        fine_tuned = None
        if pretrained:
            from ticketsim.channels.sentence import load_encoder  # sentence-transformers only when F is weighed

            fine_tuned = load_encoder(str(folder / ENCODER), device="cpu").model     # TransformerBranch moves it
        # S's width, as the saved started branches have it (A's map is dim x dim)
        dim = next((v.shape[-1] for k, v in saved["state_dict"].items() if k.startswith("branches.")), 0)
        start = BranchStart(fine_tuned, encoder, scales["S"], dim)
    model = SiameseLSTM(SiameseConfig(**saved["model_config"]), learn=metric_of(variant) if variant.learn else None,
                        branches=build_branches(variant, start, own=True))
    missing, unexpected = model.load_state_dict(saved["state_dict"], strict=False)
    if unexpected or any(not key.startswith(pretrained) for key in missing):
        raise ValueError(f"{folder / WEIGHTS}: its state does not fit the variant (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()


def fit_variant(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, variant: VariantConfig, siamese: SiameseParams,
                seed: int, mined: Mined | None = None, checkpoints: Path | None = None,
                on_epoch: Callable[[str, int, float, float], None] | None = None, inputs_digest: str = "",
                **overrides) -> dict[str, History]:
    """Every training phase of a variant: the mined pairs first (selfsup: true), then the labelled pairs (labels: true).
    checkpoints: a folder for each phase's resumable checkpoint, resumed only for the same variant, model, training,
    pairs, inputs (`inputs_digest`) and seed; on_epoch(phase, epoch, train loss, dev loss); overrides: TrainConfig
    values over both phases' (e.g. epochs)."""
    histories = {}
    for phase, wanted in (("selfsup", variant.selfsup), ("labels", variant.labels)):
        if not wanted:
            continue
        cfg = replace(siamese.training(variant, phase), **overrides)
        options = {"on_epoch": (lambda e, t, d, p=phase: on_epoch(p, e, t, d)) if on_epoch else None}
        if checkpoints is not None:
            options |= {"checkpoint": checkpoints / CHECKPOINTS[phase],
                        "meta": {"variant": asdict(variant), "model": asdict(model.cfg), "train": asdict(cfg),
                                 "data": fingerprint(pairs), "inputs": inputs_digest, "seed": seed}}
        if phase == "selfsup":
            if mined is None:
                raise ValueError("a variant with selfsup: true needs the mined pairs (ticketsim.mining.mine)")
            histories[phase] = pretrain(model, mined, siamese.selfsup, cfg, seed, **options)
        else:
            histories[phase] = train_model(model, inputs, pairs, variant, cfg, seed, **options)
    return histories


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
