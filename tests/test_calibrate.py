"""Isotonic calibration: monotone, within [1, 5], persisted as JSON; ranking results do not depend on it."""
import numpy as np
import polars as pl
import pytest
from sklearn.isotonic import IsotonicRegression

from ticketsim.config import EvaluationConfig
from ticketsim.evaluate.calibrate import Calibrator, fit_calibrator
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.evaluate.suite import evaluate_method


def noisy_scores(rng: np.random.Generator, labels: np.ndarray) -> np.ndarray:
    return labels / 5 + rng.normal(0, 0.3, len(labels))


def test_calibrated_scores_are_monotone_within_1_to_5_and_survive_a_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.choice([1, 3, 5], 300)
    calibrator = fit_calibrator(noisy_scores(rng, labels), labels)
    grid = np.linspace(-3, 3, 1001)  # far beyond the training range on both sides
    calibrated = calibrator(grid)
    assert calibrated.min() >= 1 and calibrated.max() <= 5
    assert np.all(np.diff(calibrated) >= 0)
    scores = noisy_scores(rng, labels)
    sklearn = IsotonicRegression(y_min=1, y_max=5, out_of_bounds="clip").fit(scores, labels)
    assert fit_calibrator(scores, labels)(grid) == pytest.approx(sklearn.predict(grid))
    calibrator.save(tmp_path / "calibrator.json")
    assert Calibrator.load(tmp_path / "calibrator.json") == calibrator


def test_ranking_measures_are_unchanged_by_a_strictly_monotone_map_of_the_scores():
    rng = np.random.default_rng(1)
    queries, tickets = [f"q{i}" for i in range(12)], [f"t{j}" for j in range(30)]
    raw = rng.normal(size=(12, 30))
    pairs = pl.DataFrame([{"query_id": q, "ticket_id": tickets[(3 * i + k) % 30], "label": int(rng.choice([1, 3, 5])),
                           "split": "train" if i < 8 else "dev"} for i, q in enumerate(queries) for k in range(5)])

    def ranking(values: np.ndarray) -> dict:
        matrix = ScoreMatrix(tuple(queries), tuple(tickets), values)
        dev = evaluate_method(pairs, matrix.pair_scores(pairs), matrix, EvaluationConfig(cutoffs=(1, 5)))["dev"]
        return {"rerank": dev["rerank"], "retrieve": dev["retrieve"]}

    # Calibration is such a map (monotone), so ranking is measured on raw scores and calibration cannot move it.
    assert ranking(raw) == ranking(np.exp(2 * raw) + 7)
    assert ranking(raw) != ranking(-raw)  # the measures do see the order


def test_the_fitted_map_is_scikit_learns_isotonic_regression():
    rng = np.random.default_rng(0)
    grid = np.linspace(-0.1, 1.1, 2001)
    for _ in range(300):
        n = int(rng.integers(1, 300))
        scores, labels = np.round(rng.random(n), int(rng.integers(1, 4))), rng.choice([1, 3, 5], n)   # with ties
        expected = IsotonicRegression(y_min=1.0, y_max=5.0, out_of_bounds="clip").fit(scores, labels)
        assert np.abs(fit_calibrator(scores, labels)(grid) - expected.predict(grid)).max() < 1e-9
