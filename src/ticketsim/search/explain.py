"""Why a ticket was found, as in the paper's Tables 7-8: the topics query and ticket share, with their top words, and
the words they share, rarest first (error codes and part names before 'pump')."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ticketsim.channels.docnade import is_topical, represent, top_words
from ticketsim.channels.topics import TopicModel

REASON_MODEL = "m2"   # DocNADE M2 read SUB+DESC+SOL: every word a query may share with a ticket
ABOUT = 1.0           # a text is about a topic when its activity is this many standard deviations above the tickets' mean
TOP_TOPICS = 3        # shared topics shown per hit
TOPIC_WORDS = 5       # words shown per topic
SHARED_WORDS = 8      # overlapping words shown per hit


def topic_activity(model: TopicModel, documents: Sequence[Sequence[str]]) -> np.ndarray:
    """(n, topics): DocNADE's hidden layer after each whole document (channel T of that text)."""
    return represent(model.docnade, [model.vocabulary.encode(doc) for doc in documents])


def standardized(activity: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """Activity in standard deviations from the knowledge base's mean, per topic: a unit that is on for every ticket
    says nothing about this one. (Measured against the tickets of the first build; added tickets keep that yardstick.)"""
    return ((activity - mean) / np.maximum(std, 1e-6)).astype(np.float32)


def topic_words(model: TopicModel) -> list[list[str]]:
    return top_words(model.docnade.W.detach().numpy(), model.vocabulary, TOPIC_WORDS)


def reasons(query_topics: np.ndarray, ticket_topics: Sequence[float], query_words: Sequence[str],
            ticket_words: Sequence[str], words_of_topic: Sequence[Sequence[str]], idf: Mapping[str, float]) -> dict:
    """{'topics': [{'topic': j, 'words': [...]}, ...]: the topics both texts are about (standardized activities above
    ABOUT), most shared first; 'words': the topical words both contain, rarest first}."""
    shared = np.minimum(query_topics, np.asarray(ticket_topics))
    topics = [int(j) for j in np.argsort(-shared, kind="stable")[:TOP_TOPICS] if shared[j] > ABOUT]
    in_ticket = set(ticket_words)
    words = sorted({w for w in query_words if w in in_ticket and is_topical(w)}, key=lambda w: (-idf.get(w, 0.0), w))
    return {"topics": [{"topic": j, "words": list(words_of_topic[j])} for j in topics], "words": words[:SHARED_WORDS]}
