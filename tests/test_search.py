"""Search (issue 15): the index of flat vectors is exact, top-k and scores equal the model's own pool scores for every ticket
with the lexical channel on and off, tickets are added without a rebuild, and bad input gets a clear answer."""
import numpy as np
import polars as pl
import pytest
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.sentence import sentence_channel
from ticketsim.data.tables import QUERY_SCHEMA
from ticketsim.data.validate import DataError
from ticketsim.scoring import topk as topk_module
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.topk import top_k
from ticketsim.search import vectors as vectors_module
from ticketsim.search.index import IndexMismatch, TicketIndex, add_tickets, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.vectors import TicketVectors


@pytest.fixture(scope="module")
def parts(search_parts):
    return search_parts


@pytest.fixture(scope="module")
def searchers(parts, tmp_path_factory):     # a minute or more with channel S: its tests are marked slow
    """variant -> (bundle, scorer, searcher over every ticket, the model's own pool matrix, channel S of the corpus).

    The index takes S from the model's own pass (as the index stage takes the sentence_encoder stage's S.npz): encoding
    is the slow part, and the pool matrix checks that a cached S flattens to the same scores as a recomputed one."""
    root, built = tmp_path_factory.mktemp("bundles"), {}
    for variant in ("all", "22", "FA"):
        bundle = make_bundle(root / variant, parts, variant)
        scorer = Scorer.load(bundle)
        _, matrix = scorer.score(parts.corpus)
        sentence = [sentence_channel(parts.corpus, scorer.sentence, False, scorer.sentence_encoder)[0]] if variant != "22" else []
        index = build_index(scorer, model_hash(bundle), parts.corpus.tickets, root / f"{variant}-index", cached=sentence,
                            precision="float32")
        built[variant] = bundle, scorer, Searcher(query_encoder(bundle, scorer), index, bundle), matrix, sentence
    return built


def ranked(values: np.ndarray, ids: tuple[str, ...]) -> list[str]:
    """Ticket ids best first, equal scores by id: ScoreMatrix.top_k's order."""
    return [ids[j] for j in np.lexsort((np.asarray(ids), -values))]


@pytest.mark.parametrize(("precision", "torch_from"), [("float32", 0), ("float16", 0), ("float16", 2**40)])
@pytest.mark.parametrize("lexical_weight", [0.0, 0.3, 5.0])
@pytest.mark.parametrize("k", [1, 7, 300])
@pytest.mark.parametrize("prescored_from", [1, topk_module.PRESCORED_FROM])
def test_the_threshold_algorithm_finds_the_exact_top_k_of_dense_plus_lexical(lexical_weight, k, precision, torch_from,
                                                                              prescored_from, monkeypatch):
    monkeypatch.setattr(vectors_module, "SCAN", 64)     # the scan's blocks merged: 300 tickets in 5 blocks
    monkeypatch.setattr(topk_module, "PRESCORED_FROM", prescored_from)  # 1: every rescoring through FAISS's float32 first
    monkeypatch.setattr(vectors_module, "TORCH_FROM", torch_from)   # float16 converted by torch, and by numpy
    rng = np.random.default_rng(k)
    index = TicketVectors.of(rng.normal(size=(300, 12)), precision)
    index.array[150:160] = index.array[140:150]                      # exact ties: broken by `order`
    vectors = index.array.astype(np.float32)                          # the stored values: the search is exact for them
    lexical = np.where(rng.random(300) < 0.7, 1.0, rng.random(300))   # most tickets share no word with the query
    order = rng.permutation(300)
    for i, query in enumerate(rng.normal(size=(6, 12))):
        dense = np.abs(vectors.astype(np.float64) - query).sum(1)
        if i % 2:   # the words disagree with the meaning: the 100 densest share no word, so the first scan is too short
            lexical = np.where(np.argsort(np.argsort(dense)) < 100, 1.0, rng.random(300) / 10)
        rows, totals = top_k(index, query, k, order.__getitem__, FusedScore((), {"L": lexical_weight} if lexical_weight else {}), lexical)
        brute = dense + lexical_weight * lexical
        best = np.lexsort((order, brute))[:k]
        assert rows.tolist() == best.tolist() and np.allclose(totals, brute[best])


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["all", "22", "FA"])
def test_top_k_and_scores_from_the_index_equal_the_models_own_pool_scores_for_every_ticket(searchers, parts, variant):
    """'all' weighs every channel, L (BM25: the threshold algorithm) among them, with learned W and V; '22' is the paper's
    dense-only optimum; 'FA' the trained branches: the fine-tuned encoder F (loaded from the bundle's folder) and the
    adapter A over S."""
    _, scorer, searcher, matrix, _ = searchers[variant]
    assert bool(searcher.index.score.lexical_weight) == (variant != "22")
    queries, n = parts.corpus.queries, len(matrix.ticket_ids)
    for k in (n, 3):    # every ticket in order; the top 3 (fewer candidates than tickets: the threshold algorithm stops early)
        for answer, values in zip(searcher.search(queries, k), matrix.values):
            expected = ranked(values, matrix.ticket_ids)[:k]
            assert [h.ticket_id for h in answer.hits] == expected, answer.query_id
            scores = np.array([h.score for h in answer.hits])
            assert np.allclose(scores, np.sort(values)[::-1][:k], rtol=1e-5, atol=1e-9)
            assert np.allclose([h.calibrated for h in answer.hits], scorer.calibrator(scores))


@pytest.mark.slow
def test_added_tickets_are_searched_as_if_the_index_had_been_built_with_them(searchers, parts, tmp_path):
    bundle, scorer, whole, _, sentence = searchers["all"]
    tickets = parts.corpus.tickets
    build_index(scorer, model_hash(bundle), tickets.head(60), tmp_path / "index", cached=sentence, precision="float32")
    added, index = add_tickets(tmp_path / "index", scorer, bundle, tickets.slice(60, 12))
    added_too, index = add_tickets(tmp_path / "index", scorer, bundle, tickets.slice(72))
    assert (added, added_too, len(index)) == (12, tickets.height - 72, tickets.height)
    # three segments (60, 12 and the 8 after: none joined, each larger than the one after it), whose BM25 is a
    # rebuild's: every word's idf, every ticket's score of every query, bit for bit
    rebuilt = whole.index
    assert [len(s) for s in index.segments] == [60, 12, tickets.height - 72] == [60, 12, 8] and len(rebuilt.segments) == 1
    assert dict(index.postings.idf) == dict(rebuilt.postings.idf)
    for words in whole.query_words(parts.corpus.queries):
        assert np.array_equal(index.postings.bm25(words), rebuilt.postings.bm25(words))
    assert np.array_equal(index.cooccurrence, rebuilt.cooccurrence)
    grown = Searcher(query_encoder(bundle, scorer), TicketIndex.load(tmp_path / "index"), bundle)
    for a, b in zip(grown.search(parts.corpus.queries, 10), whole.search(parts.corpus.queries, 10)):
        assert [h.ticket_id for h in a.hits] == [h.ticket_id for h in b.hits]       # BM25's statistics moved with the pool
        assert np.allclose([h.score for h in a.hits], [h.score for h in b.hits], rtol=1e-5)
        assert [h.reasons for h in a.hits] == [h.reasons for h in b.hits]          # idf and coherence too
    with pytest.raises(DataError, match="'T00001' is already in the index"):
        add_tickets(tmp_path / "index", scorer, bundle, tickets.head(1))
    assert TicketIndex.load(tmp_path / "index").generation == index.generation     # refused: nothing written


def queries(*texts: tuple[str, str]) -> pl.DataFrame:
    return pl.DataFrame([(f"q{i}", s, d) for i, (s, d) in enumerate(texts)], schema=QUERY_SCHEMA, orient="row")


@pytest.mark.slow
def test_bad_queries_get_clear_answers_never_a_crash_or_a_silent_wrong_answer(searchers, parts):
    searcher = searchers["all"][2]
    with pytest.raises(DataError, match="subject and description are both empty"):
        searcher.search(queries(("pump leaks", ""), ("  ", "")))
    with pytest.raises(DataError, match="k = 0: ask for at least 1"):
        searcher.search(queries(("pump leaks", "")), k=0)
    unknown, = searcher.search(queries(("xqzzv wrrbl", "plonkish gfrt")), k=3)
    assert len(unknown.hits) == 3 and "no word of the query (xqzzv, wrrbl, plonkish, gfrt)" in unknown.warnings[0]
    everything, = searcher.search(queries(("pump leaking oil", "")), k=1000)
    n = parts.corpus.tickets.height
    assert len(everything.hits) == n and everything.warnings == (f"k = 1000, but the knowledge base holds {n} tickets: "
                                                                 "all of them are listed",)
    assert any("pump" in phrase.split() for part in everything.hits[0].reasons["parts"] for phrase in part["phrases"])


@pytest.mark.slow
def test_an_index_built_with_other_weights_is_refused_by_its_hash(searchers, parts, tmp_path):
    searcher = searchers["all"][2]
    retrained = make_bundle(tmp_path / "retrained", parts, "all", seed=1)   # the same configuration, other weights
    with pytest.raises(IndexMismatch, match=r"built with other model weights .* Rebuild it"):
        Searcher(query_encoder(retrained), searcher.index, retrained)


def test_the_end_user_shares_count_queries_with_at_least_n_correct_tickets():
    from ticketsim.search.enduser import shares

    gold = pl.DataFrame({"query_id": ["a", "a", "a", "b", "b"], "ticket_id": ["t1", "t2", "t3", "t1", "t4"],
                         "label": [5, 5, 3, 3, 3]})
    result = shares({"a": ["t1", "t3", "t9", "t2"], "b": ["t9", "t4"], "c": []}, gold)
    assert result["yes"] == pytest.approx({"at_least_1": 1 / 3, "at_least_2": 1 / 3, "at_least_3": 0.0})
    assert result["yes_or_rel"] == pytest.approx({"at_least_1": 2 / 3, "at_least_2": 1 / 3, "at_least_3": 1 / 3})
