"""Why a ticket was found, in terms a person can check: which parts of query and ticket matched (the query's subject
and the ticket's solution, ...) with the words and phrases they share, strongest first; the topics both texts are about
(the paper's Tables 7-8), named only when the topic is coherent on the knowledge base; and the raw similarity g printed
with the digits that keep hits whose calibrated scores tie visibly ordered.

Phrases come from the tokens the model reads (the bundle's tokenizer: lowercased, numbers masked), weighed by the
knowledge base's idf (channel L's), so a reason names exactly what the model saw.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ticketsim.channels.coherence import COHERENCE_WORDS
from ticketsim.data.tables import QUERY_FIELDS, TICKET_FIELDS
from ticketsim.text.stopwords import ALPHANUMERIC, is_topical
from ticketsim.text.tokenize import NUMBER_TOKEN

if TYPE_CHECKING:
    from ticketsim.channels.topics import TopicModel

ABOUT = 1.0           # a text is about a topic when its activity is this many standard deviations above the tickets' mean
TOP_TOPICS = 3        # shared topics shown per hit
LONGEST_PHRASE = 3    # words in a shared phrase: 'seal cooler', 'loss of pressure'
PARTS_SHOWN = 3       # matched query part - ticket part pairs shown per hit
PHRASES_SHOWN = 5     # shared phrases shown per matched pair of parts


# A long ticket can push DocNADE's hidden units far below zero, where exp(-x) overflows float32 (x below -88.7: numpy's
# "overflow encountered in exp"); clipped there, sigmoid is below 1e-38 as it should be, and unchanged everywhere else.
ACTIVATIONS = {"sigmoid": lambda x: 1 / (1 + np.exp(-np.maximum(x, -88.0))), "tanh": np.tanh,
               "relu": lambda x: np.maximum(x, 0)}


@dataclass(frozen=True, eq=False)
class ReasonTopics:
    """The reason model's DocNADE (channels.topics.REASON_MODEL) as arrays: its hidden layer after a whole document,
    g(c + sum_k W[:, v_k]), and each topic's top words, in numpy, so a search needs no torch for its reasons. Taken from
    the bundle's DocNADE (`of`) or from the arrays a bundle's query export keeps (`load`)."""

    vocabulary: tuple[str, ...]
    W: np.ndarray               # (topics, words) float32
    c: np.ndarray               # (topics,) float32
    activation: str             # DocNADE's g: sigmoid, tanh, relu
    words: tuple[tuple[str, ...], ...]   # each topic's COHERENCE_WORDS top words (docnade.top_words of W)

    @cached_property
    def ids(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.vocabulary)}

    @classmethod
    def of(cls, models: Mapping[str, TopicModel]) -> ReasonTopics:
        """From a bundle's topic models (Scorer.topics: M1, M2)."""
        from ticketsim.channels.topics import REASON_MODEL, topic_words

        model = models[REASON_MODEL]
        docnade = model.docnade
        return cls(model.vocabulary.words, docnade.W.detach().numpy().copy(), docnade.c.detach().numpy().copy(),
                   docnade.cfg.activation, tuple(map(tuple, topic_words(model, COHERENCE_WORDS))))

    def save(self, path: str | Path) -> None:
        np.savez(path, vocabulary=np.array(self.vocabulary), W=self.W, c=self.c, activation=self.activation,
                 words=np.array(self.words))

    @classmethod
    def load(cls, path: str | Path) -> ReasonTopics:
        with np.load(path) as saved:
            return cls(tuple(saved["vocabulary"].tolist()), saved["W"], saved["c"], str(saved["activation"]),
                       tuple(map(tuple, saved["words"].tolist())))

    def activity(self, documents: Sequence[Sequence[str]]) -> np.ndarray:
        """(n, topics) float32: DocNADE's hidden layer after each whole document (channel T of that text)."""
        pushes = np.zeros((len(documents), len(self.c)), dtype=np.float32)
        for row, doc in enumerate(documents):
            ids = [self.ids[t] for t in doc if t in self.ids]
            if ids:
                pushes[row] = self.W[:, ids].sum(1)
        return ACTIVATIONS[self.activation](self.c + pushes).astype(np.float32)


def standardized(activity: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Activity in standard deviations from the knowledge base's mean, per topic: a unit that is on for every ticket
    says nothing about this one. (Measured against the tickets of the first build; added tickets keep that yardstick.)"""
    return ((activity - mean) / np.maximum(std, 1e-6)).astype(np.float32)


@dataclass(frozen=True)
class TopicLabels:
    """Each topic's top words, as a hit shows them, and their NPMI coherence on the knowledge base's tickets: a topic
    below `threshold` is a list of words that rarely share a ticket, noise to a person, so no hit names it."""

    words: tuple[tuple[str, ...], ...]
    coherence: tuple[float, ...]
    threshold: float

    def coherent(self, topic: int) -> bool:
        return self.coherence[topic] >= self.threshold


def is_word(token: str) -> bool:
    return bool(ALPHANUMERIC.search(token)) and token != NUMBER_TOKEN


def phrases(tokens: Sequence[str], longest: int = LONGEST_PHRASE) -> set[tuple[str, ...]]:
    """Every run of 1 to `longest` tokens that reads as a phrase: words only (punctuation and masked numbers end it,
    so no phrase crosses a sentence) that begins and ends with a topical word ('the pump' is 'pump'; 'loss of
    pressure' stays whole)."""
    found = set()
    for start in range(len(tokens)):
        for end in range(start + 1, min(start + longest, len(tokens)) + 1):
            if not is_word(tokens[end - 1]):
                break
            if is_topical(tokens[start]) and is_topical(tokens[end - 1]):
                found.add(tuple(tokens[start:end]))
    return found


def inside(short: tuple[str, ...], long: tuple[str, ...]) -> bool:
    return len(short) < len(long) and any(long[i:i + len(short)] == short for i in range(len(long) - len(short) + 1))


def shared_phrases(query: set[tuple[str, ...]], ticket: set[tuple[str, ...]], idf: Mapping[str, float]) -> list[tuple[str, float]]:
    """The phrases in both sets (of `phrases`), none inside a longer shared one, as (text, weight), strongest first: the
    weight is the sum of its topical words' idf, so error codes and part names lead and 'feed pump' outweighs 'pump'."""
    common = query & ticket
    kept = [p for p in common if not any(inside(p, other) for other in common)]
    weighed = [(" ".join(p), sum(idf.get(w, 0.0) for w in p if is_topical(w))) for p in kept]
    return sorted(weighed, key=lambda item: (-item[1], item[0]))


def part_phrases(parts: Mapping[str, Sequence[str]]) -> dict[str, set[tuple[str, ...]]]:
    """part -> its `phrases`, of a query's or a ticket's parts (part -> tokens): computed once per query and per ticket,
    not once per pair."""
    return {part: phrases(tokens) for part, tokens in parts.items() if part in QUERY_FIELDS + TICKET_FIELDS}


def matched_parts(query: Mapping[str, set], ticket: Mapping[str, set], idf: Mapping[str, float]) -> list[dict]:
    """[{'query': 'subject', 'ticket': 'solution', 'phrases': [...], 'strength': s}, ...]: each query part (subject,
    description) and ticket part (subject, description, solution) that share a phrase, strongest first (s: the sum of
    their shared phrases' weights); `query`, `ticket`: part_phrases."""
    found = []
    for query_part in QUERY_FIELDS:
        for ticket_part in TICKET_FIELDS:
            shared = shared_phrases(query[query_part], ticket[ticket_part], idf)
            if shared:
                found.append({"query": query_part, "ticket": ticket_part, "phrases": [text for text, _ in shared[:PHRASES_SHOWN]],
                              "strength": round(sum(weight for _, weight in shared), 3)})
    return sorted(found, key=lambda part: -part["strength"])[:PARTS_SHOWN]


def shared_topics(query_topics: np.ndarray, ticket_topics: Sequence[float], labels: TopicLabels) -> list[dict]:
    """[{'topic': j, 'words': [...], 'coherence': npmi}, ...]: the coherent topics both texts are about (standardized
    activities above ABOUT), most shared first."""
    shared = np.minimum(query_topics, np.asarray(ticket_topics))
    about = [int(j) for j in np.argsort(-shared, kind="stable") if shared[j] > ABOUT and labels.coherent(int(j))]
    return [{"topic": j, "words": list(labels.words[j]), "coherence": round(labels.coherence[j], 3)} for j in about[:TOP_TOPICS]]


def reasons(query: Mapping[str, set], ticket: Mapping[str, set], query_topics: np.ndarray,
            ticket_topics: Sequence[float], labels: TopicLabels, idf: Mapping[str, float]) -> dict:
    """{'parts': matched_parts, 'topics': shared_topics} of one query and one ticket (part_phrases, standardized
    topic activities)."""
    return {"parts": matched_parts(query, ticket, idf), "topics": shared_topics(query_topics, ticket_topics, labels)}


def similarity_labels(scores: Sequence[float], fewest: int = 3) -> list[str]:
    """The raw similarities g of a ranked list as text, all with the fewest significant digits (at least `fewest`) that
    print every two different neighbours differently: hits whose calibrated scores tie at 5.00 still read in order.
    Equal g (identical tickets) stay equal; 17 digits tell any two floats apart."""
    def printed(digits: int) -> list[str]:
        return [f"{score:#.{digits}g}" for score in scores]   # '#' keeps trailing zeros: the column stays aligned

    for digits in range(fewest, 17):
        labels = printed(digits)
        if all(x != y for x, y, a, b in zip(labels, labels[1:], scores, scores[1:]) if a != b):
            return labels
    return printed(17)
