"""One entry point from a dataset's params to its validated Corpus, whatever the source."""
from __future__ import annotations

import polars as pl

from ticketsim.config import DatasetConfig, Params
from ticketsim.data import csvsource, semeval
from ticketsim.data.columns import resolve
from ticketsim.data.source_record import csv_tables
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import ORIGIN, IntakeReport, validate


def read_dataset(cfg: DatasetConfig, report: IntakeReport, options: bool = False) -> Corpus:
    """A dataset's files: SemEval XML, or the CSV/JSONL layout (a user's export, read through its column mapping, in
    its encoding and delimiter). `options`: the command line gave the folder, so messages name its options (--columns,
    --encoding), not the params keys."""
    if cfg.source == "semeval2016":
        return semeval.read_corpus(cfg, report)
    named = (lambda key: f"--{key}") if options else (lambda key: f"datasets.{cfg.name}.{key}")
    return csvsource.read_corpus(cfg.raw, cfg.split, report, resolve(cfg.columns, named("columns")), csv_tables(cfg),
                                 csvsource.Dialect(cfg.encoding, cfg.delimiter, named("encoding")))


def load_corpus(params: Params, name: str, report: IntakeReport) -> Corpus:
    """The dataset `name` of params: read from its files, or generated (`source: synthetic`) and checked like them."""
    cfg = params.dataset(name)
    if cfg.source != "synthetic":
        return read_dataset(cfg, report)
    corpus = generate(params.synthetic, params.seed)
    stamped = [frame.with_columns(pl.format("generated:{}", pl.int_range(1, frame.height + 1)).alias(ORIGIN))
               for frame in (corpus.tickets, corpus.queries, corpus.pairs)]
    return validate(*stamped, cfg.split, report)
