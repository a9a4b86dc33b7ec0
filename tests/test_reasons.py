"""Reasons a person can use (issue 22 part 5), on tiny real bundles: the parts of a constructed query and ticket that
match and the phrases they share, strongest first; a topic's NPMI coherence, with incoherent topics never named; the
raw similarity g that orders hits whose calibrated scores tie, in the table, the JSON, the page and the served model."""
import json
import math
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import polars as pl
import pytest
from benchmarks.common import make_bundle
from mlflow.pyfunc import PythonModelContext

from ticketsim.app.page import create_app
from ticketsim.app.pyfunc import TicketSimModel
from ticketsim.bundle.loader import Scorer
from ticketsim.channels.registry import models_folder
from ticketsim.channels.topics import (
    COHERENCE_WORDS,
    REASON_MODEL,
    coherence_summary,
    coherence_table,
    load_topic_models,
    npmi_coherence,
    topic_words_markdown,
)
from ticketsim.cli import OK, main
from ticketsim.config import ConfigError, TopicsConfig, build
from ticketsim.data.tables import QUERY_SCHEMA, TICKET_SCHEMA
from ticketsim.errors import StepError
from ticketsim.evaluate.calibrate import Calibrator
from ticketsim.search.index import TicketIndex, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.reasons import ABOUT, PARTS_SHOWN, TopicLabels, phrases, shared_topics, similarity_labels
from ticketsim.search.searcher import Searcher
from ticketsim.text.stopwords import is_topical
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

QUERY = {"subject": "Seal cooler blocked on feed pump P-253B",
         "description": "Loss of pressure at the outlet since Monday, and the bearing is noisy."}
TICKET = {"ticket_id": "T99999", "subject": "Feed pump P-253B: loss of pressure",
          "description": "Operator reported a noisy bearing and loss of pressure.",
          "solution": "Cleaned the blocked seal cooler and replaced the bearing."}
# What the constructed pair shares, part by part: the longest shared phrases only ('feed pump p-253b', not 'pump');
# 'noisy bearing' is the ticket's phrase, 'bearing is noisy' the query's, so they share the two words apart.
SHARED = {("subject", "subject"): {"feed pump p-253b"},
          ("subject", "solution"): {"seal cooler", "blocked"},
          ("description", "subject"): {"loss of pressure"},
          ("description", "description"): {"loss of pressure", "bearing", "noisy"},
          ("description", "solution"): {"bearing"}}


@pytest.fixture(scope="module")
def saturated(search_parts, tmp_path_factory):
    """A '22' bundle whose calibrator maps every g above 1e-9 to 5 (every hit ties at 5.00), indexed over the corpus's
    tickets and the constructed ticket; its bundle, index folder and searcher."""
    root = tmp_path_factory.mktemp("reasons")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    Calibrator((0.0, 1e-9), (1.0, 5.0)).save(bundle / "calibrator.json")
    scorer = Scorer.load(bundle)
    tickets = pl.concat([search_parts.corpus.tickets, pl.DataFrame([TICKET], schema=TICKET_SCHEMA)])
    index = build_index(scorer, model_hash(bundle), tickets, root / "index")
    return bundle, root / "index", Searcher(query_encoder(bundle, scorer), index, bundle)


def query_frame(query_id: str = "q") -> pl.DataFrame:
    return pl.DataFrame([{"query_id": query_id, **QUERY}], schema=QUERY_SCHEMA)


def test_a_phrase_is_words_between_topical_ends_and_never_crosses_punctuation_or_a_number():
    found = phrases("the feed pump , loss of pressure at <num> bar".split())
    assert found == {("feed",), ("pump",), ("feed", "pump"), ("loss",), ("pressure",), ("loss", "of", "pressure"), ("bar",)}


def test_the_parts_that_match_and_their_shared_phrases_strongest_first(saturated):
    _, _, searcher = saturated
    answer, = searcher.search(query_frame(), k=len(searcher.index))
    hit, = [h for h in answer.hits if h.ticket_id == TICKET["ticket_id"]]
    idf = searcher.index.postings.idf

    def weight(phrase: str) -> float:
        return sum(idf[w] for w in phrase.split() if is_topical(w))

    strength = {pair: sum(map(weight, shared)) for pair, shared in SHARED.items()}
    strongest = sorted(SHARED, key=lambda pair: -strength[pair])[:PARTS_SHOWN]
    assert [(p["query"], p["ticket"]) for p in hit.reasons["parts"]] == strongest
    for part in hit.reasons["parts"]:
        shared = SHARED[part["query"], part["ticket"]]
        assert set(part["phrases"]) == shared and part["strength"] == pytest.approx(strength[part["query"], part["ticket"]], abs=1e-3)
        assert part["phrases"] == sorted(shared, key=lambda phrase: (-weight(phrase), phrase))


def test_npmi_is_the_normalised_pmi_of_document_co_occurrence():
    documents = [["a", "b", "x"], ["a", "b"], ["a"], ["c"], ["b", "d"]]
    npmi = npmi_coherence([["a", "b"], ["a", "c"], ["a", "b", "d"], ["b", "zzz"]], documents)
    p_a, p_b, p_ab, p_d, p_bd = 3 / 5, 3 / 5, 2 / 5, 1 / 5, 1 / 5
    ab = math.log(p_ab / (p_a * p_b)) / -math.log(p_ab)
    bd = math.log(p_bd / (p_b * p_d)) / -math.log(p_bd)
    # a and c never share a document (-1); a word absent from every document meets none (-1)
    assert npmi == pytest.approx([ab, -1.0, (ab + -1.0 + bd) / 3, -1.0])


def test_an_incoherent_topic_is_hidden_and_a_coherent_one_is_shown(saturated, search_parts):
    _, _, searcher = saturated
    documents = searcher.index.words()
    # the coherence the index stores counts of (updated as tickets are added) is that of its tickets
    assert searcher.topic_labels.coherence == pytest.approx(tuple(npmi_coherence(searcher.queries.topics.words, documents)))
    vocabulary = sorted({w for doc in documents for w in doc if is_topical(w)})
    coherent = ("insulation", "resistance", "megger", "earth", "fault")      # one fault's words in the synthetic corpus
    scattered = tuple(np.random.default_rng(0).choice(vocabulary, COHERENCE_WORDS, replace=False))
    assert set(coherent) <= set(vocabulary)
    labels = TopicLabels((coherent, scattered), tuple(npmi_coherence([coherent, scattered], documents)), TopicsConfig.coherence)
    assert labels.coherence[0] >= labels.threshold > labels.coherence[1]
    both = np.array([2 * ABOUT, 3 * ABOUT])       # query and ticket are both about both topics, the scattered one most
    assert shared_topics(both, both, labels) == [{"topic": 0, "words": list(coherent), "coherence": round(labels.coherence[0], 3)}]

    # The searcher names only topics of its model that reach the index's threshold: every topic at -1, none above the best.
    named = {}
    for threshold in (-1.0, TopicsConfig.coherence, max(searcher.topic_labels.coherence) + 0.01):
        at = Searcher(searcher.queries, replace(searcher.index, coherence=threshold), saturated[0])
        named[threshold] = [t for a in at.search(search_parts.corpus.queries, 10) for h in a.hits for t in h.reasons["topics"]]
        assert all(t["coherence"] >= threshold and t["words"] == list(at.topic_labels.words[t["topic"]]) for t in named[threshold])
    assert named[-1.0] and not named[max(searcher.topic_labels.coherence) + 0.01]


def test_the_report_gives_each_topic_the_coherence_the_search_uses(saturated, search_parts):
    _, _, searcher = saturated
    models = load_topic_models(models_folder(search_parts.channels, "T"))
    corpus = search_parts.corpus
    indexed = replace(corpus, tickets=searcher.index.tickets.select(list(TICKET_SCHEMA)))
    tokens = tokenize_corpus(indexed, make_tokenizer(searcher.queries.text, indexed), progress=False)
    table = coherence_table(tokens, models, 10)
    assert table[REASON_MODEL]["docnade"] == pytest.approx(searcher.topic_labels.coherence)
    report = topic_words_markdown(models, 10, "tiny", table, 0.0)
    shown = [line for line in report.split(f"## {REASON_MODEL.upper()}")[1].splitlines() if "*shown*" in line]
    assert len(shown) == int(np.sum(table[REASON_MODEL]["docnade"] >= 0.0))
    summary = coherence_summary(table, 0.0)
    assert summary[REASON_MODEL]["docnade"]["coherent"] == len(shown)
    assert summary["m1"]["lda"]["npmi_mean"] == pytest.approx(float(np.mean(table["m1"]["lda"])), abs=1e-4)


def test_similarity_labels_use_the_fewest_digits_that_tell_neighbours_apart():
    assert similarity_labels([0.81234, 0.81231, 0.8, 0.8, 0.5]) == ["0.81234", "0.81231", "0.80000", "0.80000", "0.50000"]
    assert similarity_labels([0.9, 0.5]) == ["0.900", "0.500"]


def test_the_raw_score_orders_equal_calibrated_scores_everywhere(saturated, capsys):
    bundle, index, searcher = saturated
    answer, = searcher.search(query_frame(), k=6)
    scores = [h.score for h in answer.hits]
    assert all(h.calibrated == 5.0 for h in answer.hits) and scores == sorted(scores, reverse=True) and len(set(scores)) > 1
    labels = answer.similarities()
    assert [float(g) for g in labels] == sorted(map(float, labels), reverse=True)
    assert all(x != y for x, y, a, b in zip(labels, labels[1:], scores, scores[1:]) if a != b)

    where = ["--model", str(bundle), "--index", str(index), "--subject", QUERY["subject"], "--description", QUERY["description"], "-k", "6"]
    assert main(["search", *where]) == OK
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line[:4].strip().isdigit()]
    assert [(r[1], r[2], r[3]) for r in rows] == [(h.ticket_id, "5.00", g) for h, g in zip(answer.hits, labels)]
    assert main(["search", *where, "--json"]) == OK
    hits = json.loads(capsys.readouterr().out)[0]["hits"]
    assert [(h["ticket_id"], h["calibrated"], h["score"]) for h in hits] == [(h.ticket_id, 5.0, h.score) for h in answer.hits]

    page = create_app(searcher).test_client().get("/", query_string={**QUERY, "k": 6}).get_data(as_text=True)
    shown = [page.index(f'data-ticket="{h.ticket_id}"') for h in answer.hits]
    assert shown == sorted(shown) and all(f"g {g}</span>" in page for g in labels)

    served = TicketSimModel()
    served.load_context(PythonModelContext({"bundle": str(bundle), "index": str(index)}, None))
    row = served.predict(None, pd.DataFrame([QUERY]), {"k": 6}).iloc[0]
    assert list(row["ticket_ids"]) == [h.ticket_id for h in answer.hits] and list(row["scores"]) == [5.0] * 6
    assert list(row["raw_scores"]) == pytest.approx(scores)


def test_a_threshold_that_is_no_npmi_and_an_index_without_tokens_per_part_are_refused(saturated, tmp_path):
    with pytest.raises(ConfigError, match=r"topics.coherence: 1.5 is no NPMI; give a threshold in \[-1, 1\]"):
        build(TopicsConfig, {"coherence": 1.5}, "topics")
    old = shutil.copytree(TicketIndex.load(saturated[1]).generation, tmp_path / "index")   # a folder of one generation's files
    with pytest.raises(StepError, match="an index of an older ticketsim .* rebuild it"):
        TicketIndex.load(old)
