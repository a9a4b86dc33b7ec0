"""The default road of `ticketsim retrain` (docs/retraining.md#two-roads): a registered model's channel F retrained as a
query tower (Fq, model/branches.py) on the labelled pairs as the dataset holds them now.

The ticket tower is the registered F, frozen, and the dense weights stay the registered ones (W and V fold into every
stored ticket vector: search/fold.py), so the registered index holds for the new model as it is: its files are taken
byte for byte (search.index.reuse_index) and no ticket is encoded again. Only the query side and the calibration
change; a knowledge base of 100k tickets, 1.3-2 h of re-encoding on 2 cores, is not touched."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from ticketsim.bundle.loader import FILES, OPTIONAL, Scorer, write_bundle
from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.config import EncoderConfig, Params, VariantConfig, build
from ticketsim.data.sources import load_corpus
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.calibrate import CALIBRATOR, fit_calibrator
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.model.branches import TOWERS, BranchStart, QueryTower, query_tower_refusal
from ticketsim.model.metric import metric_of
from ticketsim.model.saved import WEIGHTS
from ticketsim.search.index import reuse_index
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.variant import Prepared, train_variant


@dataclass(frozen=True)
class QueryTowerModel:
    """A query-tower retrain's output: the new bundle, the index it reuses, its figures on the dev (and test) pairs."""

    variant: VariantConfig
    bundle: Path
    index: Path
    results: dict           # split -> rerank and similarity -> measure, on the labelled pairs (no retrieve pool)


def query_tower_variant(scorer: Scorer, row: VariantConfig) -> VariantConfig:
    """What the road trains: the registered model's channels and levels at its weights in force (learned W and V read as
    numbers), F as Fq, fixed (learn: false, as they fold into the stored ticket vectors), with `row`'s loss and training."""
    with torch.no_grad():
        metric = scorer.model.metric(metric_of(scorer.variant))
    return VariantConfig({"Fq" if c == "F" else c: float(w) for c, w in metric.channels.items()},
                         {k: float(w) for k, w in metric.levels.items()}, loss=row.loss, train=dict(row.train))


def tower_start(scorer: Scorer, encoder: EncoderConfig) -> BranchStart:
    """Where the query tower starts: the registered query-side encoder, and its ticket-side one (the same for F) frozen."""
    branch = next(scorer.model.branches[c] for c in TOWERS if c in scorer.model.branches)
    query, ticket = (branch.query, branch.ticket) if isinstance(branch, QueryTower) else (branch, branch)
    return BranchStart(query.model, encoder.on(scorer.sentence), scorer.scales["S"], query.dim, ticket.model)


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
    # No channel reads words (F and L read raw text and tokens): the word table is a placeholder of the right height.
    words = np.zeros((tokens.vocabulary().height, 2), np.float32)
    data = Prepared(params, corpus.pairs, tokens, corpus, (), {"S": start.scale}, words, 1, start, None)
    trained = train_variant(data, variant, params.seed)
    model = out / "model"
    model.mkdir(parents=True, exist_ok=True)
    trained.save(model)
    # Pairs only: the retrieve protocol's pool would encode every ticket, what this road is for not doing (the gate
    # scores both versions on the same pairs, retrieve included: lifecycle.gate_pairs).
    scores, train = trained.pair_scores(), (corpus.pairs["split"] == "train").to_numpy()
    calibrator = fit_calibrator(scores[train], corpus.pairs["label"].to_numpy()[train])
    calibrator.save(model / CALIBRATOR)
    sources = {**{k: bundle / FILES[k] for k in ("word2vec", "char_blstm", "docnade")}, "weights": model / WEIGHTS,
               "calibrator": model / CALIBRATOR, **{k: model / name for k, name in OPTIONAL.items()}}
    new = write_bundle(out / "bundle", text=scorer.text, variant=variant, scales=scorer.scales, words=trained.inputs.words,
                       siamese=replace(params.siamese, max_tokens=scorer.max_tokens, encoder=encoder), sources=sources,
                       sentence=scorer.sentence, bm25=scorer.bm25)
    reuse_index(index, Scorer.load(new), new, out / "index")
    return QueryTowerModel(variant, new, out / "index", evaluate_method(corpus.pairs, scores, None, params.evaluation, calibrator))
