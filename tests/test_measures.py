"""Hand-computed checks of the evaluation measures and protocols."""
import math
import warnings

import numpy as np
import polars as pl
import pytest

from ticketsim.evaluate import protocols
from ticketsim.evaluate.measures import ranking, similarity_measures
from ticketsim.evaluate.protocols import ScoreMatrix, rerank, retrieve
from ticketsim.evaluate.report import semeval_predictions

YES, REL, NO = 5, 3, 1


def frame(rows, columns):
    return pl.DataFrame(rows, schema=columns, orient="row")


def run_of(rows):
    return frame(rows, ["query_id", "ticket_id", "score"])


def qrels_of(rows):
    return frame(rows, ["query_id", "ticket_id", "label"])


def test_ranking_by_hand():
    run = run_of([
        ("q1", "a", 5.0), ("q1", "b", 4.0), ("q1", "c", 3.0), ("q1", "d", 2.0), ("q1", "e", 1.0),
        ("q2", "f", 2.0), ("q2", "g", 1.0),
        ("q9", "z", 1.0),  # q9 has no qrels: ignored, not a fourth query
    ])
    qrels = qrels_of([
        ("q1", "a", NO), ("q1", "b", YES), ("q1", "c", NO), ("q1", "d", REL), ("q1", "e", NO),
        ("q2", "f", NO), ("q2", "g", NO),  # no relevant: counts 0
        ("q3", "h", YES),  # absent from the run: counts 0
    ])
    got = ranking(run, qrels, [1, 3, 5])
    # q1: relevant at ranks 2 and 4 of 5.
    assert got["map@5"] == pytest.approx((1 / 2 + 2 / 4) / 2 / 3)
    assert got["mrr@5"] == pytest.approx((1 / 2) / 3)
    assert got["acc@5"] == pytest.approx(1 / 3)
    # @3 sees only rank 2, but AP still divides by both relevant (trec_eval).
    assert got["map@3"] == pytest.approx((1 / 2) / 2 / 3)
    assert got["mrr@3"] == pytest.approx((1 / 2) / 3)
    assert got["acc@3"] == pytest.approx(1 / 3)
    assert got["map@1"] == got["mrr@1"] == got["acc@1"] == 0.0
    # nDCG: YES gains 2, REL 1; the ideal puts the YES first, the REL second
    assert got["ndcg@5"] == pytest.approx((2 / math.log2(3) + 1 / math.log2(5)) / (2 + 1 / math.log2(3)) / 3)
    assert set(got) == {f"{m}@{k}" for m in ("map", "mrr", "ndcg", "acc") for k in (1, 3, 5)}


def test_ranking_ties_by_ticket_id_ascending():
    # Rows out of order and all scores equal: the order is a, b, c for every measure
    # (trec_eval alone would give c, b, a for AP and Success).
    run = run_of([("q1", "b", 1.0), ("q1", "c", 1.0), ("q1", "a", 1.0), ("q2", "c", 0.5), ("q2", "a", 0.5), ("q2", "b", 0.5)])
    qrels = qrels_of([("q1", "a", YES), ("q2", "b", REL)])
    got = ranking(run, qrels, [1, 3])
    assert got["acc@1"] == pytest.approx((1 + 0) / 2)
    assert got["map@3"] == pytest.approx((1 + 1 / 2) / 2)
    assert got["mrr@3"] == pytest.approx((1 + 1 / 2) / 2)


def test_ranking_cutoff():
    run = run_of([("q1", t, 10.0 - i) for i, t in enumerate("abcdefg")])
    qrels = qrels_of([("q1", "f", YES), ("q1", "a", NO)])  # relevant at rank 6
    got = ranking(run, qrels, [5, 10])
    assert got["map@5"] == got["mrr@5"] == got["acc@5"] == 0.0
    assert got["map@10"] == pytest.approx(1 / 6)
    assert got["mrr@10"] == pytest.approx(1 / 6)
    assert got["acc@10"] == 1.0


def test_ranking_rejects_bad_cutoff():
    with pytest.raises(ValueError):
        ranking(run_of([("q1", "a", 1.0)]), qrels_of([("q1", "a", YES)]), [0])


def test_similarity():
    predicted = np.array([0.1, 0.4, 0.35, 0.8, 0.6])
    gold = np.array([1.0, 3.0, 5.0, 5.0, 3.0]) + np.array([0, 0, 0.1, 0.2, 0.3])  # distinct, so ranks are plain
    got = similarity_measures(predicted, gold)
    assert got["pearson"] == pytest.approx(np.corrcoef(predicted, gold)[0, 1])
    assert got["spearman"] == pytest.approx(np.corrcoef(ranks(predicted), ranks(gold))[0, 1])
    assert got["mse"] == pytest.approx(np.mean((predicted - gold) ** 2))


def test_similarity_constant_input_is_nan_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = similarity_measures(np.array([2.0, 2.0, 2.0]), np.array([1.0, 3.0, 5.0]))
    assert math.isnan(got["pearson"]) and math.isnan(got["spearman"])
    assert got["mse"] == pytest.approx((1 + 1 + 9) / 3)


# Columns deliberately not in ticket_id order.
MATRIX = ScoreMatrix(
    query_ids=("q1", "q2"),
    ticket_ids=("t4", "t2", "t3", "t1"),
    values=np.array([[0.1, 0.9, 0.5, 0.9], [0.3, 0.3, 0.3, 0.2]]),
)


def test_top_k():
    got = MATRIX.top_k(2)
    # q1: t1 and t2 tie at 0.9; q2: t2, t3, t4 tie at 0.3 and only two fit.
    assert got.rows() == [("q1", "t1", 0.9, 1), ("q1", "t2", 0.9, 2), ("q2", "t2", 0.3, 1), ("q2", "t3", 0.3, 2)]
    assert MATRIX.top_k(3)["ticket_id"].to_list() == ["t1", "t2", "t3", "t2", "t3", "t4"]
    assert MATRIX.top_k(99).height == 8  # k is capped by the pool


@pytest.mark.parametrize("block", [1 << 22, 5])
def test_top_k_matches_full_sort(monkeypatch, block):
    monkeypatch.setattr(protocols, "_CELLS_PER_BLOCK", block)  # small: several row blocks
    rng = np.random.default_rng(0)
    tickets = tuple(f"t{i:02d}" for i in rng.permutation(30))
    matrix = ScoreMatrix(tuple(f"q{i}" for i in range(7)), tickets, rng.integers(0, 4, (7, 30)).astype(float))
    got = matrix.top_k(8)
    for i, query_id in enumerate(matrix.query_ids):
        expected = sorted(zip(tickets, matrix.values[i]), key=lambda pair: (-pair[1], pair[0]))[:8]
        rows = got.filter(pl.col("query_id") == query_id)
        assert list(zip(rows["ticket_id"], rows["score"])) == expected
        assert rows["rank"].to_list() == list(range(1, 9))


def test_pair_scores_and_restrict():
    pairs = pl.DataFrame({"query_id": ["q2", "q1"], "ticket_id": ["t1", "t3"]})
    assert MATRIX.pair_scores(pairs).tolist() == [0.2, 0.5]
    with pytest.raises(KeyError, match="t9"):
        MATRIX.pair_scores(pl.DataFrame({"query_id": ["q1"], "ticket_id": ["t9"]}))
    with pytest.raises(KeyError, match="q7"):
        MATRIX.restrict(["q7"])
    sub = MATRIX.restrict(["q2"])
    assert sub.query_ids == ("q2",) and sub.values.tolist() == [[0.3, 0.3, 0.3, 0.2]]


def test_bad_shape_rejected():
    with pytest.raises(ValueError):
        ScoreMatrix(("q1", "q2"), ("t1", "t2", "t3"), np.zeros((2, 2)))


def test_rerank_is_semeval_rule():
    rng = np.random.default_rng(1)
    rows = []
    # q1: relevant at ranks 1, 3, 6; q2: at ranks 4 and 10; q3: none. Scores fall with rank.
    for query_id, relevant_ranks in (("q1", {1, 3, 6}), ("q2", {4, 10}), ("q3", set())):
        for rank in range(1, 11):
            label = (YES if rank % 2 else REL) if rank in relevant_ranks else NO
            rows.append((query_id, f"{query_id}-t{rank}", label, 100.0 - rank))
    pairs = frame([rows[i] for i in rng.permutation(len(rows))], ["query_id", "ticket_id", "label", "score"])
    got = rerank(pairs, depth=10)
    ap1, ap2 = (1 / 1 + 2 / 3 + 3 / 6) / 3, (1 / 4 + 2 / 10) / 2
    assert got["map"] == pytest.approx((ap1 + ap2 + 0) / 3)
    assert got["mrr"] == pytest.approx((1 + 1 / 4 + 0) / 3)
    assert got["acc@1"] == pytest.approx(1 / 3)


def test_retrieve_ranks_whole_pool():
    matrix = ScoreMatrix(
        ("q1", "q2", "q3"),
        ("t1", "t2", "t3", "t4", "t5"),
        np.array([[0.9, 0.8, 0.1, 0.2, 0.3], [0.5, 0.4, 0.3, 0.2, 0.1], [1, 1, 1, 1, 1]]),
    )
    # t1 is unjudged for q1 yet ranks first: not relevant. q3 is not evaluated.
    pairs = qrels_of([("q1", "t2", YES), ("q1", "t3", NO), ("q2", "t5", REL)])
    got = retrieve(matrix, pairs, [1, 5])
    assert got["acc@1"] == 0.0
    assert got["mrr@5"] == pytest.approx((1 / 2 + 1 / 5) / 2)
    assert got["map@5"] == pytest.approx((1 / 2 + 1 / 5) / 2)
    assert got["acc@5"] == 1.0


def ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x)).astype(float)


def test_semeval_predictions_keep_the_order_of_scores_far_below_one_millionth():
    scored = pl.DataFrame({"query_id": ["Q1"] * 3, "ticket_id": ["R1", "R2", "R3"], "score": [3.2e-7, 1.1e-9, 0.5],
                           "calibrated": [3.0, 1.0, 5.0]})
    lines = [line.split("\t") for line in semeval_predictions(scored).splitlines()]
    assert [float(score) for *_, score, _ in lines] == pytest.approx([3.2e-7, 1.1e-9, 0.5], rel=1e-8)
    assert [label for *_, label in lines] == ["true", "false", "true"]
