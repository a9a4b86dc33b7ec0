"""A bundle measured: every measure of a trained bundle on a labelled corpus, as `ticketsim evaluate` and the retraining
gate give it, with its pairs' raw and calibrated scores."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import EvaluationConfig
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import Calibrator
from ticketsim.evaluate.suite import evaluate_method


def scored_pairs(pairs: pl.DataFrame, scores: np.ndarray, calibrator: Calibrator) -> pl.DataFrame:
    """pairs with the raw score g and its calibrated value on the 1-5 label scale."""
    return pairs.with_columns(score=pl.Series(scores), calibrated=pl.Series(calibrator(scores)))


def evaluate_bundle(directory: str | Path, corpus: Corpus, cfg: EvaluationConfig) -> tuple[dict, pl.DataFrame]:
    """Every measure of a trained bundle on a corpus (calibrated with the bundle's own calibrator), and the scored pairs."""
    return evaluate_scorer(Scorer.load(directory), corpus, cfg)


def evaluate_scorer(scorer: Scorer, corpus: Corpus, cfg: EvaluationConfig,
                    cached: Sequence[ChannelVectors] = ()) -> tuple[dict, pl.DataFrame]:
    """evaluate_bundle of a bundle already loaded (a registered model's, which the retraining gate scores); `cached`: as
    Scorer.encode."""
    scores, matrix = scorer.score(corpus, cached=cached)
    results = evaluate_method(corpus.pairs, scores, matrix, cfg, scorer.calibrator)
    return results, scored_pairs(corpus.pairs, scores, scorer.calibrator)
