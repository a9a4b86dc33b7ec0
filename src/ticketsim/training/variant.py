"""One Siamese variant on one dataset: what every variant reads, built once (TrainingInputs), and the one way to train a
variant on it (train_variant -> TrainedVariant), for the stages, the tuner, model selection and the benchmarks."""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import polars as pl
import torch

from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.registry import load_caches, word_files
from ticketsim.config import (
    ConfigError,
    MiningConfig,
    Params,
    SentenceConfig,
    SiameseParams,
    TrainConfig,
    VariantConfig,
)
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.model.branches import BRANCHES, STARTED, TOWERS, BranchStart, reads
from ticketsim.model.inputs import SCALE_LEVEL, Inputs, build_inputs, scaled
from ticketsim.model.losses import IN_BATCH, Loss, loss_of
from ticketsim.model.saved import CHECKPOINTS, build_model, save_model, write_inputs
from ticketsim.model.scores import in_batch_predictor, pair_predictor, pair_values, pool_values
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.scoring.weights import MetricConfig, metric_of
from ticketsim.text.tokenize import Tokens
from ticketsim.training.mining import Mined, as_mined_queries, judged_negatives, mine
from ticketsim.training.trainer import History, fit, rescale


def loss_and_groups(variant: VariantConfig, pairs: pl.DataFrame) -> tuple[Loss, torch.Tensor | None]:
    """The variant's training loss, and for a ranking loss the query index of every pair (batches of whole queries)."""
    if variant.loss == "mse":
        return loss_of("mse"), None
    options = {"rel": variant.rel} if variant.loss == "contrastive" else {}
    return loss_of(variant.loss, **options), torch.from_numpy(pairs["query_id"].rank("dense").to_numpy().astype(np.int64))


def fuses_after(variant: VariantConfig) -> bool:
    """An in-batch loss trains the branches (F, A, ...) alone; the fixed channels (L, S as cached) join after, in phase
    fuse."""
    return variant.labels and variant.loss in IN_BATCH and bool(variant.weighed - set(BRANCHES))


def trains_on_labels(variant: VariantConfig) -> bool:
    """Phase labels runs, except for an in-batch loss that weighs no branch: phase fuse alone learns its weights."""
    return variant.labels and (variant.loss not in IN_BATCH or bool(variant.weighed & set(BRANCHES)))


def threads_alone(siamese: SiameseParams, *variants: VariantConfig) -> int:
    """Torch threads of a process that trains models of these variants one at a time, alone (stages tune and final,
    `ticketsim select` and `curve`): siamese.encoder.threads when one fine-tunes an encoder (F, Fq), else
    siamese.threads (the rows' small matrices, which a second thread slows)."""
    return siamese.encoder.threads if any(v.weighed & set(TOWERS) for v in variants) else siamese.threads


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


CHOICE_SPLITS = ("train", "dev")   # what a configuration may be chosen on: the test split is never read to choose


@dataclass(frozen=True, eq=False)
class TrainingInputs:
    """What training any variant on one dataset reads, built once by `training_inputs`: the one input of the siamese and final
    stages, the tuner, cross-validated selection and the benchmarks (picklable: worker processes and tune's trials get a
    copy)."""

    params: Params
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
    labelled: bool = True                   # else tickets only: trained on mined pairs, nothing to evaluate
    rescore_vectors: tuple[dict, dict, dict] | None = None  # the tuner's (ticketsim.tuning.rescore)
    rescore_pools: tuple = ()              # the tuner's per-fold pools for cv_retrieve (ticketsim.tuning.rescore.Pool)

    @property
    def choice_pairs(self) -> pl.DataFrame:
        """The train + dev pairs: what a configuration is chosen on, what cross-validation deals into folds."""
        return self.pairs.filter(pl.col("split").is_in(CHOICE_SPLITS))

    @property
    def siamese(self) -> SiameseParams:
        return self.params.siamese

    @property
    def final(self) -> VariantConfig:
        """The paper's weights of the final variant: siamese.variants[siamese.final]."""
        return self.params.siamese.variant(self.params.siamese.final)


def training_inputs(params: Params, tokens: Tokens, channels: Sequence[ChannelVectors],
                    word_table: Callable[[list[str]], np.ndarray], char_dim: int, variants: Sequence[VariantConfig],
                    corpus: Corpus | None = None, pairs: pl.DataFrame | None = None, labelled: bool = True,
                    splits: Sequence[str] | None = None) -> TrainingInputs:
    """Everything the `variants` need beside their own weights: each channel's scale (the train pairs' or, without
    labels, the mined pairs'), their F and A branches' start (the encoder loaded once), the mined pairs, the word table
    (`word_table(words)`: sumemb.word_vectors in the stages). `pairs`: the corpus's by default; `splits`: only the
    pairs of those splits, and only their queries' tokens (the tuner's train and dev: no test query is seen)."""
    pairs = corpus.pairs if pairs is None else pairs
    if splits is not None:
        pairs = pairs.filter(pl.col("split").is_in(splits))
        tokens = Tokens(tokens.tickets, tokens.queries.filter(pl.col("query_id").is_in(pairs["query_id"].unique().implode())))
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
    return TrainingInputs(params, pairs, tokens, corpus, channels, scales, table, char_dim, start, mined,
                    inputs_digest(tokens, table, channels), labelled)


def training_inputs_from_files(params: Params, corpus: str, tokens: str, channels: str | Path, variants: Sequence[VariantConfig],
                  labelled: bool = True, splits: Sequence[str] | None = None, also: Iterable[str] = ()) -> TrainingInputs:
    """`training_inputs` over the pipeline's files (the prepared corpus, tokens, the channels folder: channel E's word models and
    the caches), with the cached channels the variants read and those named in `also` (of them, those written)."""
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.sumemb import word_vectors
    from ticketsim.channels.word2vec import load_vectors

    word2vec, char_blstm = word_files(channels)
    chars, vectors = load_checkpoint(char_blstm), load_vectors(word2vec)
    cached = load_caches(channels, set(also).union(*(reads(metric_of(v)) for v in variants)))
    return training_inputs(params, Tokens.read(tokens), cached, lambda words: word_vectors(words, vectors, chars), chars.dim,
                           variants, Corpus.read(corpus), labelled=labelled, splits=splits)


def inputs_digest(tokens: Tokens, word_table: np.ndarray, channels: Iterable[ChannelVectors]) -> str:
    """Changes when a token, a word vector or a cached channel's value changes (with `pairs_digest` of the pairs: what
    a checkpoint and a study name know of the data)."""
    digest = hashlib.sha1()
    for frame in (tokens.tickets, tokens.queries):
        digest.update(str(frame.hash_rows(seed=0).sum()).encode())
    for array in [word_table, *(a for v in channels for side in (v.queries, v.tickets) for a in side.values())]:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def branch_start(variants: Iterable[VariantConfig], siamese: SiameseParams, sentence: SentenceConfig,
                 s_vectors: ChannelVectors | None, scale: float | None) -> BranchStart | None:
    """What the variants' started branches (F, A) begin from (None when none weighs them), `scale` being channel S's;
    the encoder loaded once here."""
    started = set().union(*(v.weighed for v in variants)) & STARTED
    if not started:
        return None
    if s_vectors is None:
        raise ValueError(f"channels {sorted(started)} start from channel S: its cache (S.npz) is needed")
    if "Fq" in started and siamese.encoder.model not in (None, sentence.model):
        raise ConfigError(f"siamese.encoder.model: {siamese.encoder.model} is not sentence.model ({sentence.model}), whose "
                          "cached vectors are channel Fq's ticket side: set it to null, or train F instead")
    encoder = None
    if any(BRANCHES[c].pretrained for c in started):
        from ticketsim.channels.sentence import load_encoder  # sentence-transformers only when F is weighed

        # on the CPU: each model moves its own copy to the device (TransformerBranch)
        encoder = load_encoder(siamese.encoder.model or sentence.model, download=sentence.download, encoder_cache=sentence.cache,
                               device="cpu").model
    return BranchStart(encoder, siamese.encoder.on(sentence), scale, s_vectors.dim)


def pairs_digest(pairs: pl.DataFrame) -> str:
    """Changes when any labelled pair, label or split changes: a checkpoint of other data is never resumed."""
    return str(pairs.select("query_id", "ticket_id", "label", "split").hash_rows(seed=0).sum())


def selfsup_variant(cfg: MiningConfig, level: str, channels: Iterable[str]) -> VariantConfig:
    """Phase 1's metric: the trained branches alone on the mined level pair, a softmax over each mined query's
    candidates; W = cfg.weight sharpens it (unit vectors at channel S's scale lie about 1 apart: too flat at W = 1)."""
    return VariantConfig(channels=dict.fromkeys(channels, cfg.weight), levels={level: 1.0}, loss="softmax")


def pretrain(model: SiameseLSTM, mined: Mined, cfg: MiningConfig, train: TrainConfig, seed: int, **fit_options) -> History:
    """Phase 1: the model's branches F and A trained on mined pairs (ticketsim.training.mining), through the one metric and
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


def fit_variant(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, variant: VariantConfig, siamese: SiameseParams,
                seed: int, mined: Mined | None = None, checkpoints: Path | None = None,
                on_epoch: Callable[[str, int, float, float], None] | None = None, inputs_digest: str = "",
                max_epochs: int | None = None, **overrides) -> dict[str, History]:
    """Every training phase of a variant: the mined pairs first (selfsup: true), then the labelled pairs (labels: true),
    then for an in-batch loss the pair channels' weights over the trained branches (fuse).
    checkpoints: a folder for each phase's resumable checkpoint, resumed only for the same variant, model, training,
    pairs, inputs (`inputs_digest`) and seed; on_epoch(phase, epoch, train loss, dev loss); max_epochs: a cap on each
    phase's own epochs; overrides: TrainConfig values over every phase's (e.g. epochs)."""
    histories = {}
    for phase, wanted in (("selfsup", variant.selfsup), ("labels", trains_on_labels(variant)), ("fuse", fuses_after(variant))):
        if not wanted:
            continue
        cfg = replace(siamese.training(variant, phase), **overrides)
        cfg = replace(cfg, epochs=min(cfg.epochs, max_epochs or cfg.epochs))
        options = {"on_epoch": (lambda e, t, d, p=phase: on_epoch(p, e, t, d)) if on_epoch else None}
        if checkpoints is not None:
            options |= {"checkpoint": checkpoints / CHECKPOINTS[phase],
                        "meta": {"variant": asdict(variant), "model": asdict(model.cfg), "train": asdict(cfg),
                                 "data": pairs_digest(pairs), "inputs": inputs_digest, "seed": seed}}
        if phase == "selfsup":
            if mined is None:
                raise ValueError("a variant with selfsup: true needs the mined pairs (ticketsim.training.mining.mine)")
            histories[phase] = pretrain(model, mined, siamese.selfsup, cfg, seed, **options)
        else:
            histories[phase] = train_model(model, inputs, pairs, variant, cfg, seed, fuse=phase == "fuse", **options)
    return histories


def train_model(model: SiameseLSTM, inputs: Inputs, pairs: pl.DataFrame, variant: VariantConfig, cfg: TrainConfig,
                seed: int, fuse: bool = False, **fit_options) -> History:
    """Fit the model to the train pairs with the variant's loss, early-stopped on dev (ticketsim.training.trainer.fit;
    `fit_options`: checkpoint, meta, on_epoch); `fuse`: an in-batch loss's second phase, the metric's weights alone."""
    split = pairs["split"].to_list()
    rows = {name: torch.tensor([i for i, s in enumerate(split) if s == name], dtype=torch.long) for name in ("train", "dev")}
    loss, groups = loss_and_groups(variant, pairs)
    predictor = partial(in_batch_predictor, fixed=fuse) if variant.loss in IN_BATCH else pair_predictor
    return fit(model, predictor(model, inputs, pairs, metric_of(variant)), rescale(torch.tensor(pairs["label"].to_list())),
               rows["train"], rows["dev"], cfg, seed, loss=loss, groups=groups, **fit_options)


@dataclass(frozen=True, eq=False)
class TrainedVariant:
    """One variant trained on TrainingInputs: its model (in eval mode), the inputs it reads, its training histories."""

    variant: VariantConfig
    model: SiameseLSTM
    inputs: Inputs
    pairs: pl.DataFrame                     # the pairs it trained and is scored on (train, dev, and any other split)
    scales: dict[str, float]                # of the cached channels it reads
    histories: dict[str, History]           # per training phase (selfsup, labels): each epoch's losses

    @property
    def metric(self) -> MetricConfig:
        return metric_of(self.variant)

    def pair_scores(self) -> np.ndarray:
        """g of every pair, in eval mode."""
        return pair_values(self.model, self.inputs, self.pairs, self.metric)

    def scores_on(self, data: TrainingInputs) -> np.ndarray:
        """g of every pair of `data`, in eval mode: other pairs, or the same ones seen otherwise (training.shift's
        views), read through the model's own words and the cached channels at `data`'s scales."""
        return replace(self, inputs=variant_inputs(data, self.variant, self.inputs.words), pairs=data.pairs).pair_scores()

    def pool_scores(self) -> ScoreMatrix:
        return ScoreMatrix(self.inputs.queries.ids, self.inputs.tickets.ids, pool_values(self.model, self.inputs, self.metric))

    def save(self, folder: Path) -> None:
        """The model's folder (ticketsim.model.saved): weights, F's encoder, the scales and words the bundle needs."""
        save_model(self.model, self.variant, folder)
        write_inputs(folder, self.scales, self.inputs.words)


def training_pairs(data: TrainingInputs, variant: VariantConfig) -> pl.DataFrame:
    """What the variant learns from: data's pairs, and with `negatives` each train query's hard negatives of the whole
    base (training.mining.judged_negatives); scored and evaluated on data's pairs alone."""
    if not variant.negatives:
        return data.pairs
    sentence = next((v for v in data.channels if v.channel == "S"), None)   # cosine: its scale changes nothing
    return pl.concat([data.pairs, judged_negatives(data.pairs, data.tokens, data.siamese.selfsup, data.params.bm25, sentence)])


def variant_inputs(data: TrainingInputs, variant: VariantConfig, words: Sequence[str] | None = None) -> Inputs:
    """What the variant reads of `data`, the cached channels it weighs among them; `words`: build_inputs'."""
    metric = metric_of(variant)
    cached = reads(metric)
    return build_inputs(data.tokens, [v for v in data.channels if v.channel in cached], metric, data.siamese.max_tokens,
                        data.params.bm25, data.corpus, words)


def train_variant(data: TrainingInputs, variant: VariantConfig, seed: int, hidden: int | None = None, epochs: int | None = None,
                  checkpoints: Path | None = None,
                  on_epoch: Callable[[str, int, Callable[[], np.ndarray]], None] | None = None) -> TrainedVariant:
    """THE way to train a variant: its inputs from `data`, a model seeded by `seed`, every training phase (fit_variant).
    hidden: the LSTM size (default the variant's, else siamese.hidden); epochs: a cap on each phase's own (F's 4 stay 4
    where the tuner allows 10); checkpoints: a folder to resume from and save to; on_epoch(phase, epoch, scores): after
    each epoch, `scores()` giving g of every pair from the model as it stands (the tuner's pruning reads it)."""
    siamese = replace(data.siamese, hidden=hidden or variant.hidden or data.siamese.hidden)
    cached = reads(metric_of(variant))
    inputs = variant_inputs(data, variant)
    torch.manual_seed(seed)
    model = build_model(siamese, data.word_table, data.char_dim, variant, data.start)
    trained = TrainedVariant(variant, model, inputs, data.pairs, {c: s for c, s in data.scales.items() if c in cached}, {})
    report = (lambda phase, epoch, train_loss, dev_loss: on_epoch(phase, epoch, trained.pair_scores)) if on_epoch else None
    if checkpoints is not None:
        checkpoints.mkdir(parents=True, exist_ok=True)
    histories = fit_variant(model, inputs, training_pairs(data, variant), variant, siamese, seed, data.mined, checkpoints=checkpoints,
                            on_epoch=report, inputs_digest=data.digest, max_epochs=epochs)
    model.eval()
    return replace(trained, histories=histories)
