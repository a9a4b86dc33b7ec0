"""Isotonic calibration: raw similarity scores -> the [1, 5] label scale, fitted on training pairs, stored as JSON."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from sklearn.isotonic import IsotonicRegression


@dataclass(frozen=True)
class Calibrator:
    """The fitted monotone step-and-ramp map: linear between thresholds, clipped outside them (as scikit-learn's)."""

    x: tuple[float, ...]
    y: tuple[float, ...]

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.x, self.y)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(asdict(self)) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        data = json.loads(Path(path).read_text())
        return cls(tuple(data["x"]), tuple(data["y"]))


def fit_calibrator(scores: np.ndarray, labels: np.ndarray) -> Calibrator:
    iso = IsotonicRegression(y_min=1.0, y_max=5.0, increasing=True, out_of_bounds="clip").fit(scores, labels)
    return Calibrator(tuple(iso.X_thresholds_.tolist()), tuple(iso.y_thresholds_.tolist()))
