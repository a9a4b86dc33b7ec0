"""Channel E's word2vec vectors: trained with gensim on the corpus' own text, optionally on top of a pretrained file."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gensim.models import KeyedVectors, Word2Vec

from ticketsim.config import Word2VecConfig
from ticketsim.data.tables import QUERY_FIELDS, TICKET_FIELDS
from ticketsim.text.tokenize import Tokens


def corpus_sentences(tokens: Tokens) -> list[list[str]]:
    """Every non-empty text field of every ticket and query (labelled or not): word2vec's training text."""
    return [words for frame, fields in ((tokens.tickets, TICKET_FIELDS), (tokens.queries, QUERY_FIELDS))
            for field in fields for words in frame[field].to_list() if words]


def load_pretrained(path: str | Path) -> KeyedVectors:
    """A word2vec-format file; binary when it ends in .bin or .bin.gz (the C tool's convention), else text."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"embedding.word2vec.pretrained: {path} does not exist; point it at a word2vec "
                                f"text or binary file, or set it to null to train on the corpus alone")
    return KeyedVectors.load_word2vec_format(str(path), binary=path.name.endswith((".bin", ".bin.gz")))


@dataclass(frozen=True)
class Word2VecReport:
    vocabulary: int         # words with a vector
    pretrained: int         # of them, taken from the pretrained file
    trained: int            # of them, learned from the corpus alone
    min_count: int          # the count a word needed: cfg.min_count, or 1 where no word reached it (a small knowledge base)


def train_word2vec(sentences: Iterable[list[str]], cfg: Word2VecConfig, seed: int,
                   pretrained: KeyedVectors | None = None) -> tuple[KeyedVectors, Word2VecReport]:
    """Word vectors for the corpus vocabulary (words seen min_count times).

    With `pretrained`, its vectors are copied in and locked (gensim's lock factor 0), so training only moves the
    words it lacks, and moves them into the pretrained space rather than an unrelated one of their own.
    """
    sentences = list(sentences)
    if pretrained is not None and pretrained.vector_size != cfg.dim:
        raise ValueError(f"embedding.word2vec: the pretrained vectors have {pretrained.vector_size} dimensions, "
                         f"dim is {cfg.dim}; set dim to {pretrained.vector_size}")
    # workers=1 and a fixed seed make the vectors bit-identical across runs: with more threads the order in which
    # updates land depends on the OS scheduler. gensim 4 seeds the initial vectors from `seed`, not from hash().
    model = Word2Vec(vector_size=cfg.dim, window=cfg.window, min_count=cfg.min_count, sg=int(cfg.sg),
                     epochs=cfg.epochs, seed=seed, workers=1)
    model.build_vocab(sentences)
    if not len(model.wv) and sentences:    # a knowledge base of a ticket or two: no word seen min_count times
        model.min_count = 1
        model.build_vocab(sentences)
    known = [word for word in model.wv.index_to_key if word in pretrained.key_to_index] if pretrained is not None else []
    if known:
        rows = [model.wv.key_to_index[word] for word in known]
        model.wv.vectors[rows] = pretrained[known]
        model.wv.vectors_lockf = np.ones(len(model.wv), dtype=np.float32)
        model.wv.vectors_lockf[rows] = 0.0
    model.train(sentences, total_examples=model.corpus_count, epochs=model.epochs)
    vectors = model.wv
    if pretrained is not None:
        # Corpus words below min_count get no trained vector, but the pretrained file may well know them.
        corpus_words = {word for words in sentences for word in words}
        rare = sorted((corpus_words - set(vectors.key_to_index)) & set(pretrained.key_to_index))
        if rare:
            vectors.add_vectors(rare, pretrained[rare])
        known += rare
    return vectors, Word2VecReport(vocabulary=len(vectors), pretrained=len(known), trained=len(vectors) - len(known),
                                   min_count=model.min_count)


def save_vectors(vectors: KeyedVectors, path: str | Path) -> None:
    """One .kv file (gensim's own format; separately=[] keeps large arrays inside it, so DVC tracks one file).

    gensim stamps a time and the platform into every object's `lifecycle_events`, saving included; without them the
    same vectors give the same bytes, so DVC sees an unchanged output and does not rerun the stages downstream.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    vectors.lifecycle_events = None
    vectors.save(str(path), separately=[])


def load_vectors(path: str | Path) -> KeyedVectors:
    return KeyedVectors.load(str(path))


def neighbours(vectors: KeyedVectors, words: Iterable[str], n: int = 5) -> dict[str, list[str]]:
    """The n nearest words (cosine) of each given word it knows: a summary people can read."""
    return {word: [other for other, _ in vectors.most_similar(word, topn=n)] for word in words if word in vectors.key_to_index}
