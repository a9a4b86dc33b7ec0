"""The synthetic ticket corpus: deterministic, well-formed, asymmetric, and not solvable by word overlap."""
from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

from ticketsim.config import SyntheticConfig
from ticketsim.data import synthetic
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import LABELS, PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, stable_split

SMALL = SyntheticConfig(n_tickets=240, n_labeled_queries=60, pairs_per_query=3, n_enduser_queries=8)


def tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def ticket_texts(corpus) -> list[str]:
    t = corpus.tickets
    return [" ".join(row) for row in zip(t["subject"], t["description"], t["solution"])]


def query_texts(corpus) -> dict[str, str]:
    q = corpus.queries
    return {qid: f"{s} {d}" for qid, s, d in zip(q["query_id"], q["subject"], q["description"])}


@pytest.fixture(scope="module")
def small():
    return generate(SMALL, seed=7)


@pytest.fixture(scope="module")
def default():
    return generate(SyntheticConfig(), seed=13)


def test_same_seed_same_frames_other_seed_other_frames(small):
    again = generate(SMALL, seed=7)
    for name, frame in small.frames().items():
        assert frame.equals(again.frames()[name]), name
    other = generate(SMALL, seed=8)
    assert not small.tickets.equals(other.tickets)
    assert not small.queries.equals(other.queries)


def test_sizes_schema_and_ids(small):
    assert dict(small.tickets.schema) == TICKET_SCHEMA
    assert dict(small.queries.schema) == QUERY_SCHEMA
    assert dict(small.pairs.schema) == PAIR_SCHEMA
    assert small.tickets.height == SMALL.n_tickets
    assert small.queries.height == SMALL.n_labeled_queries + SMALL.n_enduser_queries + SMALL.n_lay_queries
    assert small.tickets["ticket_id"].n_unique() == small.tickets.height
    assert small.queries["query_id"].n_unique() == small.queries.height
    assert small.tickets["ticket_id"].str.contains(r"^T\d{5}$").all()
    qids = small.queries["query_id"].to_list()
    assert sum(q.startswith("Q") for q in qids) == SMALL.n_labeled_queries
    assert sum(q.startswith("U") for q in qids) == SMALL.n_enduser_queries
    assert sum(q.startswith("L") for q in qids) == SMALL.n_lay_queries
    assert small.pairs["source_rank"].null_count() == small.pairs.height
    assert small.pairs.select("query_id", "ticket_id").is_unique().all()


# Words any sentence needs, whatever it says: the only ones the lay split may share with train/dev queries.
FUNCTION_WORDS = synthetic.STOPWORDS | {"about", "after", "off", "only", "out", "since", "up", "what", "when"}


def train_dev_query_templates() -> set[str]:
    """Every template and word list the train/dev queries are phrased from (synthetic._query)."""
    faults = [text for f in synthetic.FAULTS.values() for text in (f.lay_np, *f.lay, f.lay_meas)]
    return {*(lay for _, lay, *_ in synthetic.COMPONENTS.values()), *faults, *synthetic.PLACES, *synthetic.TIMES,
            *synthetic.VAGUE_SUBJECTS, *synthetic.CODE_MENTIONS, *synthetic.CLOSINGS}


def lay_templates() -> set[str]:
    return {*(t for things in synthetic.LAY_THINGS.values() for t in things),
            *(t for troubles in synthetic.LAY_TROUBLES.values() for t in troubles), *synthetic.LAY_SUBJECTS, *synthetic.LAY_SHAPES}


def test_the_lay_split_shares_no_template_and_no_word_with_the_train_and_dev_queries(small):
    assert set(synthetic.LAY_THINGS) == set(synthetic.COMPONENTS) and set(synthetic.LAY_TROUBLES) == set(synthetic.FAULTS)
    train_dev, lay = train_dev_query_templates(), lay_templates()
    assert not train_dev & lay
    assert not set(tokens(" ".join(train_dev))) & set(tokens(" ".join(lay))) - FUNCTION_WORDS
    # The generated text: no lay query says anything a train/dev query says (typos and codes included).
    texts, split = query_texts(small), dict(small.pairs.select("query_id", "split").unique().iter_rows())
    seen = {word for q, s in split.items() if s in ("train", "dev") for word in tokens(texts[q])}
    lay_ids = sorted(q for q, s in split.items() if s == "lay")
    assert lay_ids == [f"L{i:03d}" for i in range(1, SMALL.n_lay_queries + 1)]
    for q in lay_ids:
        assert not set(tokens(texts[q])) & seen - FUNCTION_WORDS, texts[q]
    # Labelled like the train/dev queries: the same number of candidates, a YES or REL one each, all three labels.
    lay = small.pairs.filter(pl.col("split") == "lay")
    assert (lay.group_by("query_id").len()["len"] == SMALL.pairs_per_query).all()
    assert (lay.group_by("query_id").agg(pl.col("label").max())["label"] >= LABELS["REL"]).all()
    assert set(lay["label"]) == set(LABELS.values())


def test_lay_queries_leave_every_other_record_as_it_was(small):
    without = generate(SyntheticConfig(**{**SMALL.__dict__, "n_lay_queries": 0}), seed=7)
    assert without.tickets.equals(small.tickets)
    assert without.queries.equals(small.queries.filter(~pl.col("query_id").str.starts_with("L")))
    assert without.pairs.equals(small.pairs.filter(pl.col("split") != "lay"))


def test_texts_not_empty(small):
    for frame, fields in ((small.tickets, ("subject", "description", "solution")), (small.queries, ("subject", "description"))):
        for field in fields:
            assert frame[field].str.strip_chars().str.len_chars().min() > 0, field


def test_ticket_sentences(default):
    sentences = default.tickets["description"].map_elements(lambda s: len(re.findall(r"[.!?](?:\s|$)", s)), return_dtype=pl.Int64)
    assert sentences.min() >= 3 and sentences.max() <= 6
    steps = default.tickets["solution"].map_elements(lambda s: len(re.findall(r"[.!?](?:\s|$)", s)), return_dtype=pl.Int64)
    assert steps.min() >= 2 and steps.max() <= 5


def test_pairs_reference_existing_ids_and_valid_labels(small):
    assert set(small.pairs["ticket_id"]) <= set(small.tickets["ticket_id"])
    assert set(small.pairs["query_id"]) <= set(small.queries["query_id"])
    assert set(small.pairs["label"].to_list()) <= set(LABELS.values())


def test_labelled_queries_pair_count_split_and_mix(default):
    cfg = SyntheticConfig()
    labelled = default.pairs.filter(pl.col("query_id").str.starts_with("Q"))
    per_query = labelled.group_by("query_id").agg(
        pl.len().alias("n"), pl.col("split").n_unique().alias("splits"), pl.col("split").first(),
        (pl.col("label") >= LABELS["REL"]).any().alias("hit"))
    assert per_query.height == cfg.n_labeled_queries
    assert (per_query["n"] == cfg.pairs_per_query).all()
    assert (per_query["splits"] == 1).all()
    assert per_query["hit"].all(), "every labelled query has at least one YES or REL candidate"
    assert all(split == stable_split(qid, cfg.split) for qid, split in zip(per_query["query_id"], per_query["split"]))
    assert set(per_query["split"]) == {"train", "dev"}
    share = {label: (labelled["label"] == value).mean() for label, value in LABELS.items()}
    assert 0.2 <= share["YES"] <= 0.4 and 0.2 <= share["REL"] <= 0.4 and 0.3 <= share["NO"] <= 0.5, share


def test_enduser_queries_are_test_with_gold(small):
    enduser = small.pairs.filter(pl.col("query_id").str.starts_with("U"))
    assert set(enduser["split"]) == {"test"}
    assert enduser["query_id"].n_unique() == SMALL.n_enduser_queries
    assert (enduser.group_by("query_id").agg((pl.col("label") == LABELS["YES"]).sum().alias("yes"))["yes"] >= 1).all()
    assert set(enduser["label"].to_list()) <= {LABELS["YES"], LABELS["REL"]}
    assert set(small.pairs.filter(pl.col("split") == "test")["query_id"]) == set(enduser["query_id"])


def test_queries_are_much_shorter_than_tickets(default):
    query_words = np.mean([len(tokens(text)) for text in query_texts(default).values()])
    ticket_words = np.mean([len(tokens(text)) for text in ticket_texts(default)])
    assert query_words < 0.35 * ticket_words, (query_words, ticket_words)
    subject_words = np.mean([len(tokens(s)) for s in default.queries["subject"]])
    assert subject_words <= 6


def lay_vocabulary() -> set[str]:
    """Words of the module's lay register: equipment nicknames and fault paraphrases."""
    words: set[str] = set()
    for _, lay, *_ in synthetic.COMPONENTS.values():
        words.update(tokens(lay))
    for fault in synthetic.FAULTS.values():
        words.update(tokens(" ".join((fault.lay_np, *fault.lay, fault.lay_meas))))
    return words - synthetic.FILLER


def test_term_mismatch(default):
    vocabulary = {word for text in ticket_texts(default) for word in tokens(text)}
    lay = lay_vocabulary()
    templates = lay | synthetic.FILLER
    unseen = [set(tokens(text)) - vocabulary for text in query_texts(default).values()]
    with_lay = np.mean([bool(words & lay) for words in unseen])
    misspelled = np.mean([any(w not in templates and not any(ch.isdigit() for ch in w) for w in words) for words in unseen])
    print(f"queries with a lay word no ticket has: {with_lay:.2f}; with a misspelling: {misspelled:.2f}")
    assert with_lay > 0.6
    assert misspelled > 0.3


def bm25_figures(corpus) -> dict[str, float]:
    from ticketsim.channels.bm25 import Postings

    ids = corpus.tickets["ticket_id"].to_list()
    position = {ticket: i for i, ticket in enumerate(ids)}
    postings = Postings.build([tokens(text) for text in ticket_texts(corpus)], k1=1.5, b=0.75)
    queries = query_texts(corpus)
    rng = np.random.default_rng(0)

    def average_precision(relevant: np.ndarray) -> float:
        hits = np.cumsum(relevant)
        return float((hits / np.arange(1, len(relevant) + 1))[relevant].sum() / max(relevant.sum(), 1))

    aps, random_aps, by_label = [], [], {value: [] for value in LABELS.values()}
    for (query_id,), group in corpus.pairs.filter(pl.col("split").is_in(("train", "dev"))).group_by("query_id", maintain_order=True):
        scores = postings.bm25(tokens(queries[query_id]))
        candidate = np.array([scores[position[t]] for t in group["ticket_id"]])
        relevant = group["label"].to_numpy() >= LABELS["REL"]
        aps.append(average_precision(relevant[np.argsort(-candidate, kind="stable")]))
        random_aps.append(np.mean([average_precision(relevant[rng.permutation(len(relevant))]) for _ in range(50)]))
        for score, label in zip(candidate, group["label"]):
            by_label[label].append(score)
    pool_aps = []
    for (query_id,), group in corpus.pairs.filter(pl.col("split") == "test").group_by("query_id", maintain_order=True):
        top = np.argsort(-postings.bm25(tokens(queries[query_id])))[:10]
        gold = set(group["ticket_id"])
        relevant = np.array([ids[i] in gold for i in top])
        pool_aps.append(average_precision(relevant) * relevant.sum() / min(len(gold), 10))
    return {"map": float(np.mean(aps)), "random_map": float(np.mean(random_aps)),
            "yes": float(np.mean(by_label[LABELS["YES"]])), "rel": float(np.mean(by_label[LABELS["REL"]])),
            "no": float(np.mean(by_label[LABELS["NO"]])), "pool_map10": float(np.mean(pool_aps))}


def test_bag_of_words_does_not_solve_it(default):
    figures = bm25_figures(default)
    print("BM25 on the default corpus (seed 13):", {k: round(v, 3) for k, v in figures.items()})
    assert figures["map"] < 0.9, "BM25 ranks the labelled candidates almost perfectly: the term mismatch is too weak"
    assert figures["map"] - figures["random_map"] < 0.15
    assert figures["pool_map10"] < 0.65
    # ... but it is not noise: tickets of the query's fault class share codes and equipment words with it
    assert figures["yes"] > 1.3 * figures["no"]
    assert figures["map"] >= figures["random_map"]
