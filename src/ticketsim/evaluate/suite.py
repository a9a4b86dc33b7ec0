"""One method's scores -> every measure of both protocols on each evaluation split (calibrated on train), and each
query's AP, which a paired test compares."""
from __future__ import annotations

import numpy as np
import polars as pl

from ticketsim.config import EvaluationConfig
from ticketsim.data.tables import LAY
from ticketsim.evaluate.calibrate import Calibrator, fit_calibrator
from ticketsim.evaluate.measures import similarity_measures
from ticketsim.evaluate.protocols import ScoreMatrix, rerank, rerank_by_query, retrieve

EVALUATION_SPLITS = ("dev", "test", LAY)     # lay: where a dataset has it (data.synthetic), a shift beside dev


def evaluate_method(pairs: pl.DataFrame, pair_scores: np.ndarray, matrix: ScoreMatrix | None,
                    cfg: EvaluationConfig, calibrator: Calibrator | None = None) -> dict[str, dict[str, dict[str, float]]]:
    """{split: {"rerank": ..., "retrieve": ..., "similarity": ...}} for the evaluation splits present.

    `matrix` (every query against the whole ticket pool) is None for methods that only order given
    candidates; similarity is measured on scores mapped to [1, 5] by `calibrator`, by default an isotonic
    regression fitted on the train split (a trained model brings its own to a dataset without one).
    """
    scored = pairs.with_columns(score=pl.Series(np.asarray(pair_scores, dtype=np.float64)))
    train = scored.filter(pl.col("split") == "train")
    if calibrator is None and train.height:
        calibrator = fit_calibrator(train["score"].to_numpy(), train["label"].to_numpy())
    results = {}
    for split in EVALUATION_SPLITS:
        part = scored.filter(pl.col("split") == split)
        if part.is_empty():
            continue
        result = {"rerank": rerank(part, cfg.depth)}
        if matrix is not None:
            result["retrieve"] = retrieve(matrix, part, cfg.cutoffs)
        if calibrator is not None:
            result["similarity"] = similarity_measures(calibrator(part["score"].to_numpy()), part["label"].to_numpy().astype(float))
        results[split] = result
    return results


def query_ap(pairs: pl.DataFrame, pair_scores: np.ndarray, depth: int) -> dict[str, list[list]]:
    """Each evaluation split's [[query_id, AP], ...] in the rerank protocol (as `dvc metrics` skips lists); a query with
    no relevant candidate has no AP and is left out."""
    scored = pairs.with_columns(score=pl.Series(np.asarray(pair_scores, dtype=np.float64)))
    found = {}
    for split in EVALUATION_SPLITS:
        if (part := scored.filter(pl.col("split") == split)).height:
            found[split] = [[query, ap] for query, ap in rerank_by_query(part, depth).select("query_id", "ap").iter_rows()
                            if ap is not None]
    return found
