"""A topic's coherence: the NPMI of its top words' co-occurrence in documents (the topics stage's tables and the
search's reasons, which name a topic only when it is coherent on the knowledge base). Numpy only: a search measures it
from the counts its index stores, updated as tickets are added, and a cold search should not wait for scipy."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice

import numpy as np

COHERENCE_WORDS = 5   # a topic's coherence is that of its top 5 words: the words a search hit shows
CHUNK = 4096    # documents per dense block of the co-occurrence count: bounds the memory at a million tickets


def cooccurrence(words: Sequence[str], documents: Iterable[Sequence[str]]) -> tuple[np.ndarray, int]:
    """(counts, n): counts[a, b] the number of `documents` holding words[a] and words[b] (the diagonal: holding one),
    n the number of documents. Counts of two sets of documents add up: an index adds those of its new tickets."""
    column = {word: j for j, word in enumerate(words)}
    counts, n, documents = np.zeros((len(column), len(column))), 0, iter(documents)
    while chunk := list(islice(documents, CHUNK)):
        holds = np.zeros((len(chunk), len(column)))
        for row, doc in enumerate(chunk):
            holds[row, [column[w] for w in set(doc) if w in column]] = 1.0
        counts += holds.T @ holds       # exact: sums of ones
        n += len(chunk)
    return counts, n


def topic_word_list(topics: Sequence[Sequence[str]]) -> list[str]:
    """Every word of the topics once, in order: the rows and columns of their cooccurrence counts."""
    return list(dict.fromkeys(w for topic in topics for w in topic))


def npmi_coherence(topics: Sequence[Sequence[str]], documents: Iterable[Sequence[str]]) -> np.ndarray:
    """Each topic's coherence on `documents` (npmi_of_counts)."""
    return npmi_of_counts(topics, *cooccurrence(topic_word_list(topics), documents))


def npmi_of_counts(topics: Sequence[Sequence[str]], counts: np.ndarray, n: int) -> np.ndarray:
    """Each topic's coherence: the mean over every pair of its words of the normalised PMI of their document
    co-occurrence (Bouma 2009; Lau et al. 2014), NPMI(a, b) = log(P(a, b) / (P(a) P(b))) / -log P(a, b) with P(.) the
    share of documents holding the words, in [-1, 1]. Words that never meet score -1 (the limit), a pair in every
    document 1. Words a topic model ranks high but that rarely share a ticket read as noise to a person.
    counts, n: `cooccurrence` of topic_word_list(topics)."""
    column = {word: j for j, word in enumerate(topic_word_list(topics))}
    if not n:
        raise ValueError("NPMI coherence needs at least one document")
    p = counts / n          # p[a, b]: share of documents holding a and b; p[a, a]: holding a
    with np.errstate(divide="ignore", invalid="ignore"):
        npmi = np.log(p / np.outer(p.diagonal(), p.diagonal())) / -np.log(p)
    npmi = np.where(p == 0, -1.0, np.where(p == 1, 1.0, npmi))
    coherence = []
    for topic in topics:
        ids = [column[w] for w in topic]
        pairs = [npmi[a, b] for i, a in enumerate(ids) for b in ids[i + 1:]]
        coherence.append(float(np.mean(pairs)) if pairs else float("nan"))
    return np.array(coherence)
