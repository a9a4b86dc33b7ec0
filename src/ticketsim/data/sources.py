"""One entry point from a dataset's params to its validated Corpus, whatever the source."""
from __future__ import annotations

from ticketsim.config import DatasetConfig
from ticketsim.data import csvsource, semeval
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import IntakeReport


def read_dataset(cfg: DatasetConfig, report: IntakeReport) -> Corpus:
    """synthetic and csv both read the CSV/JSONL layout (the generate stage writes the synthetic one)."""
    if cfg.source == "semeval2016":
        return semeval.read_corpus(cfg, report)
    return csvsource.read_corpus(cfg.raw, cfg.split, report)
