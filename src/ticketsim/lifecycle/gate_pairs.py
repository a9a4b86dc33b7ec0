"""The gate's common ground: labelled pairs with every ticket as the pool, and a registered version's figures on them,
scored in this run.

Figures stored at registration were each measured on the dev set of their own run; after new labelled pairs join the
dev set (feedback, a batch) a champion's stored figures describe easier or harder pairs than the candidate's, and the
gate would judge the data, not the models. So both versions are loaded from the registry and scored here, on the same
pairs (which ones: ticketsim.lifecycle.trusted), with the evaluation every stage uses. Channel S (the pretrained
encoder, the costly part) comes from the sentence_encoder stage's cache when it holds these texts and each model was
bundled with the same `sentence` params: the same vectors the model would compute, without encoding every ticket twice.
"""
from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import DatasetConfig, EvaluationConfig, Params, SentenceConfig, TrackingConfig, Workspace
from ticketsim.data.source_record import CSV_TABLES
from ticketsim.data.sources import load_corpus
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import IntakeReport
from ticketsim.errors import StepError
from ticketsim.lifecycle.registry import ModelVersion, load_version
from ticketsim.lifecycle.tracking import metric_values

SPLIT = "dev"


@dataclass(frozen=True)
class GatePairs:
    """Labelled dev pairs with their queries, and every ticket of the dataset (the pool the retrieve protocol searches)."""

    corpus: Corpus
    source: str         # where the pairs are read from, for people: a file, or how they were generated
    sentence: SentenceConfig                # the params channel S is computed with
    cached: tuple[ChannelVectors, ...] = ()  # channel S of these texts, computed with `sentence`

    def describe(self) -> str:
        pairs = self.corpus.pairs
        return (f"{pairs.height} {SPLIT} pairs of {pairs['query_id'].n_unique()} queries from {self.source}, "
                f"{self.corpus.tickets.height} tickets in the pool")


def dataset_corpus(params: Params) -> Corpus:
    """`retrain.dataset` as its files hold it now."""
    return load_corpus(params, params.retrain.dataset, IntakeReport())


def gate_pairs(params: Params, corpus: Corpus | None = None) -> GatePairs:
    """The dev pairs of `retrain.dataset` (`corpus`, default: as its files hold it now), i.e. the candidate's dev set."""
    found = dev_pairs(params, dataset_corpus(params) if corpus is None else corpus)
    if found.corpus.pairs.is_empty():
        raise StepError(f"datasets.{params.retrain.dataset} has no {SPLIT} pairs ({found.source}): the gate has nothing "
                        f"to score the champion and the candidate on; label more queries (`ticketsim pairs add`)")
    return found


def dev_pairs(params: Params, corpus: Corpus) -> GatePairs:
    """The dev pairs of `corpus` (a corpus of `retrain.dataset`), maybe none."""
    cfg = params.dataset(params.retrain.dataset)
    return on_pairs(params, corpus.tickets, corpus.queries, corpus.split(SPLIT), pairs_source(cfg, params.seed))


def on_pairs(params: Params, tickets: pl.DataFrame, queries: pl.DataFrame, pairs: pl.DataFrame, source: str) -> GatePairs:
    """`pairs` (split dev) with their queries of `queries` and every ticket of `tickets` as the pool."""
    # The other queries are left out: they change no dev figure (the pool is the tickets; BM25 counts tickets only).
    gate = Corpus(tickets, queries.filter(pl.col("query_id").is_in(pairs["query_id"].unique().implode())), pairs)
    return GatePairs(gate, source, params.sentence, cached_sentences(gate, params.retrain.dataset))


def cached_sentences(corpus: Corpus, dataset: str) -> tuple[ChannelVectors, ...]:
    """The sentence_encoder stage's channel S when it holds every ticket and query of `corpus` (the intake only appends,
    so a text under a known id is the one encoded), else nothing: the models encode the texts themselves."""
    path = Workspace(dataset).channel("S")
    if not path.is_file():
        return ()
    vectors = ChannelVectors.load(path)
    held = set(corpus.tickets["ticket_id"]) <= set(vectors.ticket_ids) and set(corpus.queries["query_id"]) <= set(vectors.query_ids)
    return (vectors,) if held else ()


def pairs_source(cfg: DatasetConfig, seed: int) -> str:
    if cfg.source == "synthetic":
        return f"the synthetic corpus (params synthetic, seed {seed})"
    if cfg.source == "semeval2016":
        return str(cfg.path(cfg.dev)) if cfg.dev else f"the SemEval files in {cfg.raw}"
    name = CSV_TABLES[2]
    return next((str(cfg.path(f"{name}.{ext}")) for ext in ("csv", "jsonl") if cfg.path(f"{name}.{ext}").is_file()),
                str(cfg.path(f"{name}.csv")))


def version_figures(cfg: TrackingConfig, version: ModelVersion, sets: Sequence[GatePairs],
                    evaluation: EvaluationConfig) -> list[dict[str, float]]:
    """The version's dev figures on each of `sets`, keyed as MLflow holds a run's metrics (`dev.rerank.map`, ...): its
    model is downloaded from the registry (once) and evaluates itself (ticketsim.app.pyfunc.TicketSimModel.evaluate)."""
    with tempfile.TemporaryDirectory(prefix="ticketsim-gate-") as scratch:
        model = load_version(cfg, version, Path(scratch), f"to score it on the {SPLIT} pairs")
        if not hasattr(model, "evaluate"):
            raise StepError(f"{version.model} v{version.version}: its model ({type(model).__name__}) cannot score labelled "
                            "pairs, so the gate cannot compare it on the same pairs; register it again (`dvc repro`)")
        return [metric_values({SPLIT: model.evaluate(pairs.corpus, evaluation, pairs.cached, pairs.sentence).get(SPLIT, {})})
                for pairs in sets]
