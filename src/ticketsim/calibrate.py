"""Isotonic calibration: raw similarity scores -> the [1, 5] label scale, fitted on training pairs."""
from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression


def fit_calibrator(scores: np.ndarray, labels: np.ndarray) -> IsotonicRegression:
    """Monotone increasing map; scores outside the training range clip to its ends."""
    return IsotonicRegression(y_min=1.0, y_max=5.0, increasing=True, out_of_bounds="clip").fit(scores, labels)
