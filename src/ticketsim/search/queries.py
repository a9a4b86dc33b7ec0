"""A search's queries through a bundle: each query's tokens and flat vector, and what its reasons read (the reason
model's topics, the calibrator). The one place that encodes a query for `ticketsim search`, the page and the served model.

Two runtimes to the same vectors:
- exported (no torch, sentence-transformers, gensim or scikit-learn): when the bundle holds a query export (QUERY, written
  by `export_queries` at bundle time), channel S and the fine-tuned encoders F and Fq run as ONNX
  (channels/onnx_encoder.py), the adapter A and the reason topics as numpy arrays. Only bundles whose variant weighs
  nothing beyond EXPORTABLE get one;
- through the Scorer (torch), as the index encodes tickets: every other bundle (channels E, T, h, an encoder whose export
  would differ) and every bundle without an export, e.g. one written before it existed.
"""
from __future__ import annotations

import shutil
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np
import polars as pl

from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.channels.cache import component_strings
from ticketsim.channels.onnx_encoder import OnnxEncoder, kept_export
from ticketsim.config import TextConfig, build
from ticketsim.evaluate.calibrate import CALIBRATOR, Calibrator
from ticketsim.scoring.weights import metric_of
from ticketsim.search.encode import flat_side, one_side
from ticketsim.search.reasons import ReasonTopics
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

if TYPE_CHECKING:
    from ticketsim.bundle.loader import Scorer
    from ticketsim.scoring.fused import FusedScore

QUERY = "query"                     # the export's folder inside the bundle
ENCODER, ADAPTER, TOPICS = "encoder", "adapter.npz", "topics.npz"
ENCODED = ("S", "F", "Fq")          # the channels a query reads through an exported encoder
EXPORTABLE = {*ENCODED, "A", "L", "R"}   # channels a query can compute without torch: A is a matrix, L and R have no vectors


class QueryEncoder(Protocol):
    """What a search needs of its bundle: ScorerQueries or ExportedQueries."""

    text: TextConfig
    calibrator: Calibrator
    topics: ReasonTopics
    runtime: str                    # 'exported' or 'torch': said by the benchmarks and the docs' figures

    def encode(self, queries: pl.DataFrame, score: FusedScore) -> tuple[pl.DataFrame, np.ndarray]:
        """(the queries' tokens, their flat vectors (n, dim) float64)."""

    @property
    def scorer(self) -> Scorer:
        """The whole model, for adding tickets (their every channel goes through it, as when the index was built)."""


class ScorerQueries:
    """Queries through the Scorer and torch, as the index encodes tickets."""

    runtime = "torch"

    def __init__(self, scorer: Scorer):
        self.scorer, self.text, self.calibrator = scorer, scorer.text, scorer.calibrator
        self.topics = ReasonTopics.of(scorer.topics)

    def encode(self, queries: pl.DataFrame, score: FusedScore) -> tuple[pl.DataFrame, np.ndarray]:
        return flat_side(self.scorer, score, queries, "queries")


class ExportedQueries:
    """Queries through the bundle's export (QUERY): no torch."""

    runtime = "exported"

    def __init__(self, bundle: Path):
        manifest = bundle_manifest(bundle)
        folder = bundle / QUERY
        self.bundle, self.text = bundle, build(TextConfig, manifest["text"], "manifest.text")
        self.calibrator = Calibrator.load(bundle / CALIBRATOR)
        # F and Fq start as S and keep its scale (model/saved.py: load_model)
        self.scale = float(manifest["scales"].get("S", 1.0))
        # One thread: a query is a few dozen word pieces, and the server's workers are the parallelism (sentence.threads
        # is the stages' bulk encoding).
        self.encoders = {c: OnnxEncoder.load(folder / export_folder(c)) for c in ENCODED if (folder / export_folder(c)).is_dir()}
        with np.load(folder / ADAPTER) as adapter:
            self.adapter = {channel: adapter[channel] for channel in adapter.files}    # channel A: x -> x + x M
        self.topics = ReasonTopics.load(folder / TOPICS)

    @cached_property
    def scorer(self) -> Scorer:
        from ticketsim.bundle.loader import Scorer

        return Scorer.load(self.bundle)

    def encode(self, queries: pl.DataFrame, score: FusedScore) -> tuple[pl.DataFrame, np.ndarray]:
        corpus = one_side(queries, "queries")
        tokens = tokenize_corpus(corpus, make_tokenizer(self.text, corpus), progress=False).queries
        strings = {c: component_strings(corpus.queries, c) for c in {block.query for block in score.blocks}}
        vectors = {channel: {c: encoder.encode(texts) / self.scale for c, texts in strings.items()}
                   for channel, encoder in self.encoders.items()}
        vectors |= {channel: {c: x + x @ matrix for c, x in vectors["S"].items()} for channel, matrix in self.adapter.items()}
        return tokens, score.flatten(vectors, "queries")


def query_encoder(bundle: str | Path, scorer: Scorer | None = None) -> QueryEncoder:
    """The bundle's export when it has one, else the Scorer (`scorer`, when loaded already)."""
    bundle = Path(bundle)
    if (bundle / QUERY).is_dir():
        return ExportedQueries(bundle)
    from ticketsim.bundle.loader import Scorer

    return ScorerQueries(scorer or Scorer.load(bundle))


def export_folder(channel: str) -> str:
    """Where QUERY holds the export of an ENCODED channel: S's in ENCODER (as bundles from before F's export have it)."""
    return ENCODER if channel == "S" else f"{ENCODER}-{channel}"


def export_queries(bundle: str | Path, scorer: Scorer | None = None) -> str | None:
    """Write the bundle's query export (QUERY); None when written, else why the bundle searches through torch. `scorer`:
    the bundle's, when loaded already (the export leaves it as it is)."""
    from ticketsim.bundle.loader import Scorer
    from ticketsim.model.branches import BRANCHES, reads

    bundle = Path(bundle)
    folder, scratch = bundle / QUERY, bundle.parent / f".{bundle.name}-{QUERY}"
    shutil.rmtree(folder, ignore_errors=True)
    scorer = scorer or Scorer.load(bundle)
    beyond = sorted(scorer.variant.weighed - EXPORTABLE)
    if beyond:
        return f"its variant weighs {', '.join(beyond)}, which a query computes with torch"
    metric = metric_of(scorer.variant)
    if "S" in reads(metric) and scorer.sentence.quantize != "none":
        return f"its sentence encoder runs {scorer.sentence.quantize} weights (sentence.quantize), not an export's float32"
    # the query side's channels and what their branches read there (A: S; Fq's ticket side, S, is the index's alone)
    needs = set(metric.needs()[0])
    encoded = sorted((needs | {BRANCHES[c].source(False) for c in needs & BRANCHES.keys()}) & set(ENCODED))
    # Written aside, then renamed into the bundle: a query folder that exists is complete.
    shutil.rmtree(scratch, ignore_errors=True)
    for channel in encoded:
        # torch's encoder is the one exported, whichever backend encodes the tickets (onnx: the same float32 graph),
        # traced on the CPU where a query runs it and compared with float32 vectors
        target = scratch / export_folder(channel)
        why = kept_export(scorer.sentence, target) if channel == "S" else scorer.model.branches[channel].export(target)
        if why:
            shutil.rmtree(scratch, ignore_errors=True)
            return f"its {'sentence' if channel == 'S' else channel} encoder was not exported: {why}"
    scratch.mkdir(parents=True, exist_ok=True)
    np.savez(scratch / ADAPTER, **{c: b.map.detach().numpy() for c, b in scorer.model.branches.items() if c == "A"})
    ReasonTopics.of(scorer.topics).save(scratch / TOPICS)
    scratch.rename(folder)
    return None

