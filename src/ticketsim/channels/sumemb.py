"""Channel E (SumEMB): word vector = word2vec (zeros for words it lacks) ++ char-BLSTM; a component's E = their sum.
CHANNEL declares it (ticketsim.channels.registry): word2vec and the char-BLSTM fitted on the dataset, then E cached."""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ticketsim.channels.cache import ChannelVectors, component_texts
from ticketsim.channels.channel import Channel, Fitted, Fitting, Texts
from ticketsim.channels.char_blstm import CharEncoder, encode, save_checkpoint, train_char_blstm
from ticketsim.text.tokenize import Tokens

if TYPE_CHECKING:
    from gensim.models import KeyedVectors


def word_vectors(words: Sequence[str], word2vec: KeyedVectors, chars: CharEncoder) -> np.ndarray:
    """(len(words), word2vec dim + char dim): the word2vec part is zero for a word word2vec does not know."""
    semantic = np.zeros((len(words), word2vec.vector_size), dtype=np.float32)
    known = [i for i, word in enumerate(words) if word in word2vec.key_to_index]
    if known:
        semantic[known] = word2vec[[words[i] for i in known]]
    return np.hstack([semantic, encode(chars, words)])


def summed(texts: Sequence[Sequence[str]], index: dict[str, int], table: np.ndarray) -> np.ndarray:
    """Row i = the sum of table rows of text i's words (a word counts as often as it occurs; no words -> zeros)."""
    columns = [index[word] for words in texts for word in words]
    pointers = np.cumsum([0, *map(len, texts)])
    counts = sp.csr_matrix((np.ones(len(columns)), columns, pointers), shape=(len(texts), len(index)))
    return (counts @ table).astype(np.float32)


@dataclass(frozen=True)
class SumembReport:
    words: int              # distinct words over every ticket and query
    word2vec_words: float   # share of them word2vec knows
    word2vec_tokens: float  # share of running tokens word2vec knows
    dim: int


def sumemb_vectors(tokens: Tokens, word2vec: KeyedVectors, chars: CharEncoder,
                   table: np.ndarray | None = None) -> tuple[ChannelVectors, SumembReport]:
    """E of every component of every ticket and query; each distinct word is encoded once.

    `table`: word_vectors of tokens.vocabulary()'s words, when the caller has them already (the scorer reuses them).
    """
    vocabulary = tokens.vocabulary()
    words = vocabulary["token"].to_list()
    index = {word: i for i, word in enumerate(words)}
    # Summed in float64: over a 400-word SemEval comment thread float32 would drift, and a merged component then
    # equals the sum of its parts up to the final float32 rounding.
    table = (word_vectors(words, word2vec, chars) if table is None else table).astype(np.float64)
    query_texts, ticket_texts = component_texts(tokens)
    vectors = ChannelVectors(
        channel="E", query_ids=tuple(tokens.queries["query_id"]), ticket_ids=tuple(tokens.tickets["ticket_id"]),
        queries={component: summed(texts, index, table) for component, texts in query_texts.items()},
        tickets={component: summed(texts, index, table) for component, texts in ticket_texts.items()})
    known = np.array([word in word2vec.key_to_index for word in words], dtype=bool)
    counts = vocabulary["count"].to_numpy()
    report = SumembReport(words=len(words), word2vec_words=float(known.mean()) if words else 0.0,
                          word2vec_tokens=float(counts[known].sum() / max(counts.sum(), 1)), dim=table.shape[1])
    return vectors, report


def spelling_neighbours(words: Sequence[str], word2vec: KeyedVectors, chars: CharEncoder, n: int = 30) -> dict[str, str]:
    """The first n of `words` that word2vec lacks -> the word2vec word whose char vector is nearest (cosine)."""
    unknown = [word for word in words if word not in word2vec.key_to_index][:n]
    known = word2vec.index_to_key
    if not unknown or not known:
        return {}
    unit = lambda vectors: vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # noqa: E731
    nearest = (unit(encode(chars, unknown)) @ unit(encode(chars, known)).T).argmax(1)
    return {word: known[j] for word, j in zip(unknown, nearest)}


# E's models, by these names in its models folder and in a bundle: the LSTM's word table (channel h) and the comparators'
WORD2VEC, CHAR_BLSTM = "word2vec.kv", "char_blstm.pt"


def fit_embedding(fitting: Fitting) -> Fitted:
    """word2vec trained with gensim on every ticket and query text, the char-BLSTM trained to predict each word2vec
    word's vector from its spelling, then E of every component. MLflow gets summaries people can read: neighbours of
    frequent words, and what the char part is for: words word2vec lacks and the known word each is spelt most like."""
    from ticketsim.channels.word2vec import corpus_sentences, load_pretrained, neighbours, save_vectors, train_word2vec

    cfg, seed, tokens = fitting.params.embedding, fitting.params.seed, fitting.tokens
    seconds = lambda started: round(time.perf_counter() - started, 1)  # noqa: E731
    started = time.perf_counter()
    pretrained = load_pretrained(cfg.word2vec.pretrained) if cfg.word2vec.pretrained else None
    word2vec, word2vec_report = train_word2vec(corpus_sentences(tokens), cfg.word2vec, seed, pretrained)
    save_vectors(word2vec, fitting.models / WORD2VEC)
    said = [] if word2vec_report.min_count >= cfg.word2vec.min_count else [
        f"no word occurs embedding.word2vec.min_count ({cfg.word2vec.min_count}) times in the tickets, so word2vec learns "
        f"every word ({word2vec_report.vocabulary})"]
    figures: dict[str, Any] = {"word2vec": {**asdict(word2vec_report), "seconds": seconds(started)}}
    started = time.perf_counter()
    chars, chars_report = train_char_blstm(word2vec.index_to_key, word2vec.vectors, cfg.char_blstm, seed)
    save_checkpoint(chars, fitting.models / CHAR_BLSTM)
    figures["char_blstm"] = {**{key: round(value, 4) if isinstance(value, float) else value
                                for key, value in asdict(chars_report).items() if key != "epoch_loss"}, "seconds": seconds(started)}
    started = time.perf_counter()
    vectors, report = sumemb_vectors(tokens, word2vec, chars)
    figures["sumemb"] = {**asdict(report), "seconds": seconds(started)}
    vocabulary = tokens.vocabulary()["token"].to_list()
    frequent = [word for word in vocabulary if word.isalpha() and len(word) > 4][:25]
    summaries = {"word2vec_summary.json": {"dim": word2vec.vector_size, **figures["word2vec"],
                                           "neighbours": neighbours(word2vec, frequent)},
                 "unknown_words.json": spelling_neighbours([word for word in vocabulary if word.isalpha()], word2vec, chars,
                                                           n=50)}   # not dates, codes
    return Fitted(vectors, figures, series=[("char_blstm", epoch, {"loss": loss}) for epoch, loss in enumerate(chars_report.epoch_loss)],
                  summaries=summaries, said=said)


def embedding_of(scorer: Any, texts: Texts) -> ChannelVectors:
    """E of new texts from a bundle's word2vec and char-BLSTM, with the word table the scorer computed for them."""
    return sumemb_vectors(texts.tokens, scorer.word2vec, scorer.chars, texts.table)[0]


CHANNEL = Channel("E", "embedding", "embedding", "params-research.yaml", fit_embedding, embedding_of,
                  bundle={WORD2VEC: WORD2VEC, CHAR_BLSTM: CHAR_BLSTM})
