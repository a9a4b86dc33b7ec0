"""Isotonic calibration: raw similarity scores -> the [1, 5] label scale, fitted on training pairs, stored as JSON."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

CALIBRATOR = "calibrator.json"   # a calibrator's file, in a trained model's folder and in a bundle


@dataclass(frozen=True)
class Calibrator:
    """The fitted monotone step-and-ramp map: linear between thresholds, clipped outside them (as scikit-learn's).

    `fitted` False: nothing was fitted (UNCALIBRATED), so the 1-5 figure it gives is g stretched, not a label's meaning;
    a search then shows g itself (ticketsim.search.searcher)."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    fitted: bool = True

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        return np.interp(np.asarray(scores, dtype=np.float64), self.x, self.y)

    def save(self, path: str | Path) -> None:
        data = asdict(self)
        if self.fitted:     # a fitted calibrator's file as before the flag: the bundles' bytes (and index hashes) unchanged
            del data["fitted"]
        Path(path).write_text(json.dumps(data) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        data = json.loads(Path(path).read_text())
        return cls(tuple(data["x"]), tuple(data["y"]), bool(data.get("fitted", True)))


# Without labelled pairs there is nothing to fit: g in [0, 1] is stretched onto the scale, 1 + 4g, and marked unfitted.
UNCALIBRATED = Calibrator((0.0, 1.0), (1.0, 5.0), fitted=False)


def fit_calibrator(scores: np.ndarray, labels: np.ndarray) -> Calibrator:
    """Isotonic regression of labels on scores, clipped to [1, 5]: the thresholds scikit-learn's IsotonicRegression keeps.

    Pool-adjacent-violators on the mean label of each distinct score, in a few lines of numpy: importing scikit-learn
    for this cost every stage that calibrates two seconds.
    """
    x, inverse, counts = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True, return_counts=True)
    y = np.bincount(inverse, weights=np.asarray(labels, dtype=np.float64)) / counts
    blocks: list[list[float]] = []   # [mean, weight, length] of each pooled block, increasing means
    for value, weight in zip(y, counts.astype(np.float64)):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] >= blocks[-1][0]:
            (m2, w2, n2), (m1, w1, n1) = blocks.pop(), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    fitted = np.clip(np.repeat([b[0] for b in blocks], [b[2] for b in blocks]), 1.0, 5.0)
    keep = np.ones(len(x), dtype=bool)   # inner points of a flat run add nothing to the interpolation
    keep[1:-1] = ~np.isclose(fitted[:-2], fitted[1:-1]) | ~np.isclose(fitted[1:-1], fitted[2:])
    return Calibrator(tuple(x[keep].tolist()), tuple(fitted[keep].tolist()))
