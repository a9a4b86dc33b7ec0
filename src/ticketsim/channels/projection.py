"""A picture of a channel for people: ticket vectors projected to 2-D (PCA), coloured by the synthetic fault type."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ticketsim.data.synthetic import FAULTS

NO_FAULT = "other"


def fault_types(subjects: Sequence[Sequence[str]]) -> list[str]:
    """The fault type (HEAT, LEAK, ...) whose technical phrase a tokenized synthetic ticket subject names, else 'other'.

    The synthetic generator writes the fault's phrase into every ticket subject but keeps no fault column, so the
    phrase is the label; the longest matching phrase wins. Only for the synthetic corpus: elsewhere a 'trip' is a journey.
    """
    phrases = sorted(((phrase.strip(), key) for key, fault in FAULTS.items() for phrase in fault.np.split("|")),
                     key=lambda item: -len(item[0]))
    padded = [f" {' '.join(words)} " for words in subjects]
    return [next((key for phrase, key in phrases if f" {phrase} " in text), NO_FAULT) for text in padded]


def pca_2d(vectors: np.ndarray) -> np.ndarray:
    """(n, 2) coordinates on the first two principal axes of the length-normalised rows.

    Rows are scaled to unit length first: a sum of word vectors grows with the text, and its length would be the
    first axis. Each axis' sign is fixed (largest loading positive) so the same vectors always give the same picture.
    """
    rows = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    rows = rows - rows.mean(0)
    _, _, axes = np.linalg.svd(rows, full_matrices=False)
    k = min(2, len(axes))       # a knowledge base of one ticket has one axis: its point lies at the origin
    axes = axes[:k] * np.sign(axes[:k][np.arange(k), np.abs(axes[:k]).argmax(1)])[:, None]
    return np.pad(rows @ axes.T, ((0, 0), (0, 2 - k)))


def projection_plot(vectors: np.ndarray, labels: Sequence[str], path: str | Path, title: str) -> None:
    """A scatter plot of pca_2d(vectors), one colour per label (most frequent first in the legend)."""
    import matplotlib
    from matplotlib.figure import Figure  # only where a plot is drawn; no pyplot, no global state

    points = pca_2d(vectors)
    fig = Figure(figsize=(7, 5.5))
    ax = fig.subplots()
    colours = matplotlib.colormaps["tab20"]
    for i, (label, _) in enumerate(Counter(labels).most_common()):
        chosen = np.array([value == label for value in labels])
        # tab20 pairs a dark and a light shade of each hue: the dark ones of ten hues first, then the light ones
        colour = colours((2 * i) % 20 + (2 * i // 20) % 2)
        ax.scatter(points[chosen, 0], points[chosen, 1], s=8, alpha=0.7, color=colour, label=label)
    ax.set_xlabel("PC 1")
    ax.set_ylabel("PC 2")
    ax.set_title(title, fontsize="medium")
    ax.legend(fontsize="small", markerscale=2, loc="best")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
