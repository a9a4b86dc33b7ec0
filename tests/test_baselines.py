"""Baselines through the one evaluation path: the organizers' IR figures on SemEval dev, and BM25 behaviour."""
import numpy as np
import polars as pl
import pytest

from ticketsim.config import BM25Config, DatasetConfig, EvaluationConfig
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.baselines import bm25_matrix, source_order_scores
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.text.tokenize import Tokens


def test_semeval_search_engine_order_gives_the_organizers_dev_figures(semeval_dir):
    cfg = DatasetConfig(name="semeval", source="semeval2016", raw=str(semeval_dir), dev="SemEval2016-Task3-CQA-QL-dev.xml")
    pairs = read_dataset(cfg, IntakeReport()).pairs
    results = evaluate_method(pairs, source_order_scores(pairs), None, EvaluationConfig())
    # The SemEval-2016 Task 3 subtask B IR baseline on dev, as published by the organizers.
    assert round(100 * results["dev"]["rerank"]["map"], 2) == 71.35
    assert round(100 * results["dev"]["rerank"]["mrr"], 2) == 76.67
    assert "similarity" not in results["dev"]  # no train split, so nothing to calibrate on


def test_source_order_is_absent_when_a_pair_has_no_rank():
    pairs = pl.DataFrame({"source_rank": [1, None]}, schema={"source_rank": pl.Int32})
    assert source_order_scores(pairs) is None


def tokens(tickets: dict[str, list[str]], queries: dict[str, list[str]]) -> Tokens:
    def frame(rows, id_column, fields):
        return pl.DataFrame([{id_column: i, fields[0]: words, **{f: [] for f in fields[1:]}} for i, words in rows.items()],
                            schema={id_column: pl.String, **{f: pl.List(pl.String) for f in fields}})
    return Tokens(frame(tickets, "ticket_id", ("subject", "description", "solution")),
                  frame(queries, "query_id", ("subject", "description")))


def test_bm25_ranks_the_lexical_match_first_and_scores_every_pool_ticket():
    matrix = bm25_matrix(tokens({"t1": ["pump", "leak"], "t2": ["motor", "overheat"], "t3": ["valve", "stuck"]},
                                {"q1": ["motor", "overheat"], "q2": ["leak"]}), BM25Config())
    assert matrix.values.shape == (2, 3)
    assert matrix.top_k(1)["ticket_id"].to_list() == ["t2", "t1"]
    assert matrix.values[1, 1] == 0.0 and matrix.values[1, 2] == 0.0


def test_evaluate_method_calibrates_on_train_and_scores_both_protocols():
    matrix = bm25_matrix(tokens({"t1": ["pump", "leak"], "t2": ["motor", "overheat"], "t3": ["valve", "stuck"]},
                                {"q1": ["motor", "overheat"], "q2": ["pump", "leak"], "q3": ["valve"]}), BM25Config())
    pairs = pl.DataFrame({"query_id": ["q1", "q1", "q3", "q3", "q2", "q2"], "ticket_id": ["t2", "t1", "t3", "t1", "t1", "t3"],
                          "label": [5, 1, 5, 1, 5, 1], "split": ["train"] * 4 + ["dev"] * 2})
    results = evaluate_method(pairs, matrix.pair_scores(pairs), matrix, EvaluationConfig(cutoffs=(1, 2)))
    assert set(results) == {"dev"}
    assert results["dev"]["rerank"]["map"] == 1.0 and results["dev"]["retrieve"]["acc@1"] == 1.0
    assert results["dev"]["similarity"]["mse"] == pytest.approx(0.0)  # isotonic fit maps matches to 5, misses to 1
    assert np.isfinite(results["dev"]["similarity"]["pearson"])
