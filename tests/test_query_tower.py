"""Channel Fq, the query tower (model/branches.py): only the query side trains, the ticket side is channel S as cached,
so the index's ticket vectors hold; its model folder keeps the query tower."""
import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import yaml
from search_bundle import make_bundle, train_parts
from test_finetune import F_ONLY, SIAMESE, encoder_folder, fault_corpus  # noqa: F401 - encoder_folder: the module's fixture

import ticketsim.lifecycle.retrain as retrain_module
from ticketsim.app.pyfunc import log_bundle
from ticketsim.app.retrain_road import register_query_tower
from ticketsim.bundle.loader import Scorer
from ticketsim.bundle.manifest import MANIFEST
from ticketsim.channels.sentence import load_encoder, sentence_vectors
from ticketsim.config import (
    ConfigError,
    DatasetConfig,
    EncoderConfig,
    Params,
    SentenceConfig,
    SiameseParams,
    SyntheticConfig,
    TextConfig,
    TrackingConfig,
    VariantConfig,
)
from ticketsim.lifecycle.registry import ModelVersion, load_version, promote
from ticketsim.lifecycle.retrain import retrain
from ticketsim.lifecycle.tracking import stage_run
from ticketsim.model.branches import BranchStart, query_tower_refusal
from ticketsim.model.inputs import build_inputs
from ticketsim.model.metric import metric_of
from ticketsim.model.saved import ENCODER, build_model, load_model, save_model
from ticketsim.model.scores import side_channels
from ticketsim.search.index import TICKETS, VECTORS, IndexMismatch, TicketIndex, build_index, model_hash, reuse_index
from ticketsim.search.queries import ExportedQueries, query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.query_tower import retrain_query_tower
from ticketsim.training.variant import branch_start, fit_variant

FQ = replace(F_ONLY, channels={"Fq": 1.0}, train={**F_ONLY.train, "epochs": 1})
NEEDS_Q, NEEDS_T = {"Fq": ("sub+desc",)}, {"Fq": ("sub+desc+sol",)}
REPO = Path(__file__).resolve().parents[1]
PARTS = SyntheticConfig(n_tickets=80, n_labeled_queries=10, pairs_per_query=3, n_enduser_queries=10)   # train_parts' corpus


def test_the_query_tower_trains_the_query_side_and_its_ticket_side_is_s_as_cached(encoder_folder, tmp_path):  # noqa: F811
    corpus = fault_corpus()
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
    encoder = load_encoder(str(encoder_folder))
    s, _ = sentence_vectors(corpus, encoder, overlap=4, progress=False)
    inputs = build_inputs(tokens, [s], metric_of(FQ), 8, corpus=corpus)
    torch.manual_seed(0)
    model = build_model(SIAMESE, np.zeros((len(inputs.words), 6), np.float32), 2, FQ,
                        BranchStart(encoder.model, EncoderConfig(max_tokens=16, frozen_layers=0), 1.0, 16))
    queries = side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"]
    fit_variant(model, inputs, corpus.pairs, FQ, SIAMESE, seed=0)
    tickets = side_channels(model, inputs.tickets, NEEDS_T, tickets=True)["Fq"]["sub+desc+sol"]
    assert torch.equal(tickets, torch.from_numpy(s.tickets["sub+desc+sol"]).double())    # S's vectors, as the index holds
    assert not torch.allclose(side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"], queries, atol=1e-4)

    save_model(model, FQ, tmp_path)
    loaded = load_model(tmp_path, FQ, EncoderConfig(max_tokens=16, frozen_layers=0), {"S": 1.0})
    texts = list(corpus.queries["subject"])
    assert not np.allclose(load_encoder(str(tmp_path / ENCODER)).model.encode(texts), encoder.model.encode(texts), atol=1e-4)
    for needs, side in ((NEEDS_T, inputs.tickets), (NEEDS_Q, inputs.queries)):
        is_tickets = side is inputs.tickets
        assert torch.allclose(side_channels(loaded, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]],
                              side_channels(model, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]], atol=1e-6)


def test_a_query_tower_refuses_another_encoder_than_s():
    """Fq's ticket side is S's cache: a query tower started from another encoder would compare two vector spaces."""
    siamese = SiameseParams(encoder=EncoderConfig(model="other-encoder"))
    with pytest.raises(ConfigError, match="siamese.encoder.model: other-encoder is not sentence.model"):
        branch_start([FQ], siamese, SentenceConfig(), SimpleNamespace(dim=384), 1.0)


ROW = VariantConfig({"Fq": 1.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise",
                    train={"optimizer": "adamw", "lr": 3e-3, "epochs": 1, "batch_size": 8})


def road_params(parts_seed: int = 3) -> Params:
    """Params whose default dataset is the search bundles' corpus (tests/search_bundle.py: train_parts' synthetic one)."""
    return Params(seed=parts_seed, datasets={"default": DatasetConfig("default", "synthetic")}, synthetic=PARTS,
                  siamese=SiameseParams(finetuned={"Fq+L": ROW}))


@pytest.fixture(scope="module")
def champion(tmp_path_factory):
    """A registered Fq+L model's bundle and index, as the register stage leaves them."""
    root = tmp_path_factory.mktemp("champion")
    parts = train_parts(root / "parts", n_tickets=PARTS.n_tickets, n_enduser=PARTS.n_enduser_queries)
    bundle = make_bundle(root / "bundle", parts, "FqL")
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets, out=root / "index")
    return bundle, root / "index", parts


def rankings(bundle: Path, index: Path, queries) -> list[tuple[str, ...]]:
    answers = Searcher(query_encoder(bundle), TicketIndex.load(index), bundle).search(queries, k=10)
    return [tuple(hit.ticket_id for hit in answer.hits) for answer in answers]


@pytest.mark.slow    # the champion's parts and index: a minute and a half on 2 busy cores, the road itself under one
def test_the_query_tower_road_keeps_the_index_vectors_byte_for_byte_and_changes_the_ranking(champion, tmp_path):
    bundle, index, parts = champion
    trained = retrain_query_tower(road_params(), bundle, index, tmp_path)
    before, after = TicketIndex.load(index).generation, TicketIndex.load(trained.index).generation
    assert (after / VECTORS).read_bytes() == (before / VECTORS).read_bytes()
    assert (after / TICKETS).read_bytes() == (before / TICKETS).read_bytes()
    assert trained.variant.weighed == {"Fq", "L"} and not trained.variant.learn and "dev" in trained.results
    # the new tower's query export, which the rankings below search by: the champion's (none here) is of the old tower
    assert trained.torch_query is None and isinstance(query_encoder(trained.bundle), ExportedQueries)
    queries = parts.corpus.queries.head(8)
    assert rankings(trained.bundle, trained.index, queries) != rankings(bundle, index, queries)
    with pytest.raises(IndexMismatch):      # the champion's index names the champion: the new bundle is refused there
        rankings(trained.bundle, index, queries)


@pytest.mark.slow
def test_an_index_folded_by_another_ticket_side_is_never_reused(champion, tmp_path):
    bundle, index, parts = champion
    other = make_bundle(tmp_path / "other", parts, "FqL", seed=1)     # another ticket encoder (S)
    with pytest.raises(IndexMismatch, match="otherwise than the model that built it"):
        reuse_index(index, Scorer.load(other), other, tmp_path / "index")
    assert query_tower_refusal({"A", "L"}) == "it weighs no query tower (channel Fq)"
    assert "full road" in query_tower_refusal({"F", "L"})       # F's ticket side trains: its index is encoded again
    assert "A" in query_tower_refusal({"Fq", "A", "L"}) and query_tower_refusal({"Fq", "L", "R"}) is None


def test_retrain_takes_the_query_tower_road_for_a_champion_with_fq_and_the_full_road_otherwise(monkeypatch, tmp_path):
    """The road chosen, with the registry and DVC stood in for: --full (no query road), no champion or one without Fq
    run `dvc repro` of retrain.targets, which rebuilds the index (register's deps hold the index stage's folder);
    a champion with Fq goes to the query road with its bundle and index, and nothing is reproduced or pushed."""
    calls, roads = [], []
    monkeypatch.setattr(retrain_module, "check_reachable", lambda cfg: None)
    monkeypatch.setattr(retrain_module, "dvc_remote", lambda: "local")
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: calls.append(args[0]))
    monkeypatch.setattr(retrain_module, "run_gate", lambda params: SimpleNamespace(promoted=True))
    bundles = {}
    for name, channels in (("Fq+L", {"Fq": 1.0, "L": 0.5}), ("F+L", {"F": 1.0, "L": 0.5}), ("A+L", {"A": 1.0, "L": 0.5})):
        (tmp_path / name).mkdir()
        (tmp_path / name / MANIFEST).write_text(json.dumps({"variant": {"channels": channels}}))
        bundles[name] = SimpleNamespace(bundle=str(tmp_path / name), index=str(tmp_path / "index"))
    monkeypatch.setattr(retrain_module, "load_version", lambda cfg, version, scratch, why: bundles[version.version])
    road = lambda params, bundle, index: roads.append((bundle.name, index.name))  # noqa: E731
    params = road_params()
    for champion, query_road, expected_calls, expected_roads in (
            ("Fq+L", None, ["pull", "repro", "push"], []),       # --full
            (None, road, ["pull", "repro", "push"], []),          # no champion yet
            ("A+L", road, ["pull", "repro", "push"], []),         # no query tower
            ("F+L", road, ["pull", "repro", "push"], []),         # both towers trained: the index is encoded again
            ("Fq+L", road, ["pull"], [("Fq+L", "index")])):
        calls.clear(), roads.clear()
        version = ModelVersion("m", champion, "run", {}, {}) if champion else None
        monkeypatch.setattr(retrain_module, "version_by_alias", lambda cfg, model, alias, v=version: v)
        retrain(params, query_road)
        assert (calls, roads) == (expected_calls, expected_roads), champion
    register = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["register"]["do"]
    assert "models/${key}/index" in register["deps"] and params.retrain.targets == ("register@default",)


@pytest.mark.slow    # two models registered, loaded and scored by the gate: minutes on 2 busy cores
def test_ticketsim_retrain_registers_the_query_tower_on_the_champions_index_and_gates_it(champion, tmp_path, monkeypatch,
                                                                                          capsys):
    """The default road end to end against a real MLflow registry (DVC stood in for: nothing of it runs on this road):
    the champion's bundle and index are fetched, its query tower trained, the new version registered with an index
    whose vectors are the champion's bytes, and gated against the champion."""
    bundle, index, _ = champion
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(retrain_module, "dvc_remote", lambda: None)
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: pytest.fail(f"dvc {' '.join(args)} ran on the query road"))
    params = replace(road_params(), tracking=TrackingConfig(f"sqlite:///{tmp_path / 'mlflow.db'}", "t", str(tmp_path / "art")))
    name = params.siamese.registered_name("default")
    with stage_run(params.tracking, "register", "default"):
        promote(params.tracking, name, log_bundle(str(bundle), name, str(index)))
    outcome = retrain(params, register_query_tower)
    assert outcome.candidate.version == "2" and outcome.result is not None, outcome.markdown
    assert "==> the query-tower road" in capsys.readouterr().out
    new = load_version(params.tracking, outcome.candidate, tmp_path / "v2", "in the test")
    assert (TicketIndex.load(new.index).generation / VECTORS).read_bytes() == (TicketIndex.load(index).generation / VECTORS).read_bytes()
    assert Scorer.load(new.bundle).variant.weighed == {"Fq", "L"}
