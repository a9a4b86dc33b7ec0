"""The default road of `ticketsim retrain` (docs/retraining.md#two-roads): a registered model's query tower (channel
Fq, model/branches.py) trained again on the labelled pairs as the dataset holds them now.

The ticket side is channel S, which the index holds, and the dense weights stay the registered ones (W and V are in
every stored flat ticket vector: scoring/fused.py), so the registered index holds for the new model as it is: its files are
taken byte for byte (search.index.reuse_index). Only the query side and the calibration change; S is encoded for the
labelled pairs' tickets alone, and a knowledge base of 100k tickets, 1.3-2 h of encoding on 2 cores, is not touched."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import torch

from ticketsim.bundle.loader import OPTIONAL, Scorer
from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.bundle.writer import write_bundle
from ticketsim.channels.cache import ChannelVectors, component_strings
from ticketsim.channels.registry import bundled_files
from ticketsim.channels.sentence import encode_groups
from ticketsim.config import EncoderConfig, Params, VariantConfig, build
from ticketsim.data.sources import load_corpus
from ticketsim.data.tables import Corpus
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.calibrate import CALIBRATOR, fit_calibrator
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.model.branches import BranchStart, query_tower_refusal
from ticketsim.model.inputs import scaled
from ticketsim.model.saved import WEIGHTS
from ticketsim.scoring.weights import metric_of
from ticketsim.search.index import reuse_index
from ticketsim.search.queries import export_queries
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.variant import TrainingInputs, train_variant


@dataclass(frozen=True)
class QueryTowerModel:
    """A query-tower retrain's output: the new bundle, the index it reuses, its figures on the dev (and test) pairs."""

    variant: VariantConfig
    bundle: Path
    index: Path
    results: dict           # split -> rerank and similarity -> measure, on the labelled pairs (no retrieve pool)
    torch_query: str | None  # why a query of the new bundle goes through torch; None: its query export was written


def query_tower_variant(scorer: Scorer, row: VariantConfig) -> VariantConfig:
    """What the road trains: the registered model's channels and levels at its weights in force (learned W and V read as
    numbers), fixed (learn: false, as they fold into the stored ticket vectors), with `row`'s loss and training."""
    with torch.no_grad():
        metric = scorer.model.metric(metric_of(scorer.variant))
    return VariantConfig({c: float(w) for c, w in metric.channels.items()},
                         {k: float(w) for k, w in metric.levels.items()}, loss=row.loss, train=dict(row.train))


def tower_start(scorer: Scorer, encoder: EncoderConfig) -> BranchStart:
    """Where the query tower starts: the registered one."""
    query = scorer.model.branches["Fq"].query
    return BranchStart(query.model, encoder.on(scorer.sentence), scorer.scales["S"], query.dim)


def pair_tickets_s(scorer: Scorer, corpus: Corpus, components: set[str]) -> ChannelVectors:
    """Channel S of the labelled pairs' tickets, the `components` the query tower's levels read, as the bundle encodes
    them (its sentence config). Every other ticket's row is NaN: this road scores pairs only, and a row read by mistake
    would show."""
    cfg, ids = scorer.sentence, tuple(corpus.tickets["ticket_id"])
    paired = corpus.tickets.filter(pl.col("ticket_id").is_in(corpus.pairs["ticket_id"].unique().implode()))
    groups = {c: component_strings(paired, c) for c in sorted(components)}
    vectors, _ = encode_groups(scorer.sentence_encoder, groups, cfg.pooling, cfg.overlap, cfg.normalize, cfg.batch_size,
                               cfg.threads, progress=False)
    position = {x: i for i, x in enumerate(ids)}
    rows = [position[x] for x in paired["ticket_id"]]
    tickets = {}
    for c, array in vectors.items():
        tickets[c] = np.full((len(ids), array.shape[1]), np.nan, np.float32)
        tickets[c][rows] = array
    return ChannelVectors("S", (), ids, {}, tickets)


def retrain_query_tower(params: Params, bundle: Path, index: Path, out: Path) -> QueryTowerModel:
    """Train the query tower of the registered `bundle` (its `index` beside it) on retrain.dataset's labelled pairs with
    retrain.query_tower's loss and training; the trained model in out/model, its bundle in out/bundle and the reused
    index in out/index."""
    scorer = Scorer.load(bundle)
    refusal = query_tower_refusal(scorer.variant.weighed)
    if refusal:
        raise ValueError(f"{bundle}: its query tower cannot be retrained alone: {refusal}")
    variant = query_tower_variant(scorer, params.siamese.variant(params.retrain.query_tower))
    encoder = build(EncoderConfig, bundle_manifest(bundle).get("encoder", {}), "manifest.encoder")
    corpus = load_corpus(params, params.retrain.dataset, IntakeReport())
    tokens = tokenize_corpus(corpus, make_tokenizer(scorer.text, corpus), progress=False)
    start = tower_start(scorer, encoder)
    tickets = pair_tickets_s(scorer, corpus, set(metric_of(variant).needs()[1]["Fq"]))
    # No channel reads words (Fq and L read raw text, S and tokens): the word table is a placeholder of the right height.
    words = np.zeros((tokens.vocabulary().height, 2), np.float32)
    data = TrainingInputs(params, corpus.pairs, tokens, corpus, (scaled(tickets, start.scale),), {"S": start.scale}, words, 1,
                    start, None)
    trained = train_variant(data, variant, params.seed)
    model = out / "model"
    model.mkdir(parents=True, exist_ok=True)
    trained.save(model)
    # Pairs only: the retrieve protocol's pool would encode every ticket, what this road is for not doing (the gate
    # scores both versions on the same pairs, retrieve included: lifecycle.gate_pairs).
    scores, train = trained.pair_scores(), (corpus.pairs["split"] == "train").to_numpy()
    calibrator = fit_calibrator(scores[train], corpus.pairs["label"].to_numpy()[train])
    calibrator.save(model / CALIBRATOR)
    sources = {"weights": model / WEIGHTS, "calibrator": model / CALIBRATOR, **{k: model / name for k, name in OPTIONAL.items()}}
    new = write_bundle(out / "bundle", text=scorer.text, variant=variant, scales=scorer.scales, words=trained.inputs.words,
                       siamese=replace(params.siamese, max_tokens=scorer.max_tokens, encoder=encoder), sources=sources,
                       channels=bundled_files(bundle), sentence=scorer.sentence, bm25=scorer.bm25)
    loaded = Scorer.load(new)
    torch_query = export_queries(new, loaded)     # the new tower's: the champion's export is of the old one
    reuse_index(index, loaded, new, out / "index")
    return QueryTowerModel(variant, new, out / "index", evaluate_method(corpus.pairs, scores, None, params.evaluation, calibrator),
                           torch_query)
