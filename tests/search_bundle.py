"""Tiny real bundles for the search tests, built in-process in seconds: channel E, T and the tokenizer trained briefly on a
small synthetic corpus, S the packaged MiniLM, the LSTM and its learned W and V left random, a linear calibrator."""
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tiny_encoder import tiny_encoder

from ticketsim.bundle.writer import write_bundle
from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.sentence import load_encoder
from ticketsim.channels.sumemb import word_vectors
from ticketsim.channels.topics import fit_topic_models
from ticketsim.channels.word2vec import corpus_sentences, save_vectors, train_word2vec
from ticketsim.config import (
    CharBLSTMConfig,
    DocNADETrainConfig,
    EncoderConfig,
    LDAConfig,
    SentenceConfig,
    SiameseParams,
    SyntheticConfig,
    TextConfig,
    TopicsConfig,
    TopicVocabularyConfig,
    VariantConfig,
    Word2VecConfig,
)
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import Calibrator
from ticketsim.model.branches import BranchStart
from ticketsim.model.saved import ENCODER, WEIGHTS, build_model, save_model
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

CROSS = {"sub-sub": 0.3, "desc-desc": 0.3, "sub-desc": 0.2, "sub-sol": 0.1, "desc-sol": 0.1}
VARIANTS = {  # every channel with learned W and V and a ranking loss (a superset of the best configuration), the paper's #22,
            # the best configuration (benchmarks/search_cold_start.py)
    "all": VariantConfig({"h": 0.7, "E": 0.1, "T": 0.2, "S": 0.5, "L": 0.5}, {**CROSS, "sub+desc-sub+desc+sol": 0.3},
                          learn=True, loss="pairwise"),
    "22": VariantConfig({"h": 0.7, "E": 0.1, "T": 0.2}, CROSS),
    "best": VariantConfig({"S": 1.0, "L": 0.5}, {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3,   # params' `best`
                                                 "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}, learn=True, loss="pairwise"),
    # the trained branches: F (a tiny encoder built in code) and A (an adapter over S), with L
    "FA": VariantConfig({"F": 0.8, "A": 0.5, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # F and BM25 alone: both towers fine-tuned, an index folded by F
    "FL": VariantConfig({"F": 0.8, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # a query tower over S and BM25: a registered model whose query tower `ticketsim retrain` trains alone
    # (training/query_tower.py); its S is the tiny encoder the tower starts from
    "FqL": VariantConfig({"Fq": 0.8, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # S+L on one level pair: F+L's index layout (384 dims) with S in F's place
    "SL": VariantConfig({"S": 1.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise"),
    # the registered default (params' siamese.final, Ac+L-relpos): its queries need no torch once exported (search/queries.py)
    "AL": VariantConfig({"A": 5.0, "L": 0.5}, {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3,
                                               "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}, learn=True,
                        loss="contrastive", rel="positive"),
}
SCALES = {"E": 40.0, "T": 4.0, "S": 1.0}
ENCODER_CONFIG = EncoderConfig(max_tokens=48, frozen_layers=1)    # F's: one of the tiny encoder's two layers trains
# MiniLM reading 32 tokens: the same code path at an eighth of the cost; one thread, as the suite's processes fill the cores
SENTENCE = SentenceConfig(max_tokens=32, overlap=4, threads=1)


@dataclass(frozen=True)
class Parts:
    corpus: Corpus
    words: tuple[str, ...]
    sources: dict[str, Path]


def train_parts(root: Path, n_tickets: int = 80, seed: int = 3, n_enduser: int = 10) -> Parts:
    corpus = generate(SyntheticConfig(n_tickets=n_tickets, n_labeled_queries=10, pairs_per_query=3, n_enduser_queries=n_enduser,
                                      n_lay_queries=0),
                      seed)
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))
    word2vec, _ = train_word2vec(corpus_sentences(tokens), Word2VecConfig(dim=16, epochs=1, min_count=1), seed)
    chars, _ = train_char_blstm(word2vec.index_to_key, word2vec.vectors, CharBLSTMConfig(hidden=4, char_dim=8, epochs=1), seed,
                                progress=False)
    topics = fit_topic_models(tokens, TopicsConfig(n_topics=6, heldout=5, vocabulary=TopicVocabularyConfig(min_documents=2),
                                                   docnade=DocNADETrainConfig(epochs=2), lda=LDAConfig(passes=1, iterations=5),
                                                   workers=1), seed)   # tiny: faster than starting a worker
    sources = {"word2vec": root / "word2vec.kv", "char_blstm": root / "char_blstm.pt", "docnade": root / "docnade"}
    save_vectors(word2vec, sources["word2vec"])
    save_checkpoint(chars, sources["char_blstm"])
    sources["docnade"].mkdir()
    for model in topics.values():
        model.save(sources["docnade"])
    return Parts(corpus, tuple(tokens.vocabulary()["token"]), sources)


def make_bundle(directory: Path, parts: Parts, variant: str, seed: int = 0, tower: str | None = None) -> Path:
    """A bundle of `variant` (a VARIANTS key) with a random LSTM (and random learned W, V) drawn from `seed`.

    `tower` (FqL only): a pretrained encoder (sentence.model's form, e.g. SENTENCE.model, the packaged MiniLM) that channel
    S is and the query tower starts from, instead of a tiny random one: a model that ranks like a real one before any
    training, with W and V as the variant gives them and the lowest two layers kept pretrained (params' siamese.encoder)."""
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.word2vec import load_vectors

    cfg, chars = SiameseParams(hidden=8), load_checkpoint(parts.sources["char_blstm"])
    scratch = directory.parent / f".{directory.name}-parts"
    scratch.mkdir(parents=True)
    start, sentence, weighed, encoder_config = None, SENTENCE, VARIANTS[variant].weighed, ENCODER_CONFIG
    assert tower is None or weighed == {"Fq", "L"}, "a pretrained tower is FqL's"
    if tower:
        pretrained = load_encoder(tower, max_tokens=SENTENCE.max_tokens).model
        sentence, encoder_config = replace(SENTENCE, model=tower), replace(ENCODER_CONFIG, frozen_layers=2)
        start = BranchStart(pretrained, encoder_config, SCALES["S"], pretrained.get_embedding_dimension())
    elif weighed & {"F", "Fq", "A"}:  # F and Fq from a random tiny encoder (S's scale 1), A over MiniLM's 384-d S
        texts = [text for frame in (parts.corpus.tickets, parts.corpus.queries) for column in ("subject", "description")
                 for text in frame[column]]
        folder = tiny_encoder(scratch / "tiny", texts, seed) if weighed & {"F", "Fq"} else None
        tiny = load_encoder(str(folder)).model if folder else None
        if "Fq" in weighed:         # the tower's ticket side is S: the encoder it starts from
            sentence = replace(SENTENCE, model=str(folder))
        start = BranchStart(tiny, ENCODER_CONFIG, SCALES["S"], tiny.get_embedding_dimension() if "Fq" in weighed else 384)
    torch.manual_seed(seed)
    model = build_model(cfg, word_vectors(list(parts.words), load_vectors(parts.sources["word2vec"]), chars), chars.dim,
                        VARIANTS[variant], start)
    with torch.no_grad():   # learned weights unlike the starting ones; an adapter that is not the identity
        if model.weights is not None and not tower:
            model.weights.w += 0.3 * torch.randn_like(model.weights.w)
            model.weights.v += 0.3 * torch.randn_like(model.weights.v)
        if "A" in model.branches:
            model.branches["A"].map += 0.05 * torch.randn_like(model.branches["A"].map)
    save_model(model, VARIANTS[variant], scratch)
    Calibrator((0.0, 1.0), (1.0, 5.0)).save(scratch / "calibrator.json")
    encoder = {"encoder": scratch / ENCODER} if (scratch / ENCODER).is_dir() else {}
    return write_bundle(directory, text=TextConfig(), variant=VARIANTS[variant], siamese=replace(cfg, encoder=encoder_config),
                        scales=SCALES, words=parts.words,
                        sources={**parts.sources, "weights": scratch / WEIGHTS, "calibrator": scratch / "calibrator.json", **encoder},
                        sentence=sentence)
