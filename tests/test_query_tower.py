"""Channel Fq, the query tower (model/branches.py): only the query side trains, the ticket side stays the encoder it
started from, so the index's ticket vectors hold; its model folder keeps both towers."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from search_bundle import make_bundle, train_parts
from test_finetune import F_ONLY, SIAMESE, encoder_folder, setup  # noqa: F401 - encoder_folder: the module's fixture

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.sentence import load_encoder
from ticketsim.config import DatasetConfig, EncoderConfig, Params, SiameseParams, SyntheticConfig, VariantConfig
from ticketsim.model.branches import query_tower_refusal
from ticketsim.model.saved import ENCODER, TICKET_ENCODER, load_model, save_model
from ticketsim.model.scores import side_channels
from ticketsim.search.index import TICKETS, VECTORS, IndexMismatch, TicketIndex, build_index, model_hash, reuse_index
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.training.query_tower import retrain_query_tower
from ticketsim.training.variant import fit_variant

FQ = replace(F_ONLY, channels={"Fq": 1.0}, train={**F_ONLY.train, "epochs": 2})
NEEDS_Q, NEEDS_T = {"Fq": ("sub+desc",)}, {"Fq": ("sub+desc+sol",)}
PARTS = SyntheticConfig(n_tickets=80, n_labeled_queries=10, pairs_per_query=3, n_enduser_queries=10)   # train_parts' corpus


def test_the_query_tower_trains_the_query_side_and_leaves_every_ticket_vector_as_it_was(encoder_folder, tmp_path):  # noqa: F811
    corpus, _, inputs, model = setup(encoder_folder, FQ)
    tickets, queries = (side_channels(model, inputs.tickets, NEEDS_T, tickets=True)["Fq"]["sub+desc+sol"],
                        side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"])
    fit_variant(model, inputs, corpus.pairs, FQ, SIAMESE, seed=0)
    assert torch.equal(side_channels(model, inputs.tickets, NEEDS_T, tickets=True)["Fq"]["sub+desc+sol"], tickets)
    assert not torch.allclose(side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"], queries, atol=1e-4)

    save_model(model, FQ, tmp_path)
    loaded = load_model(tmp_path, FQ, EncoderConfig(max_tokens=16, frozen_layers=0), {"S": 1.0})
    texts = list(corpus.tickets["subject"])
    plain = load_encoder(str(encoder_folder)).model   # the ticket tower is the starting encoder, saved as an ordinary folder
    assert np.allclose(load_encoder(str(tmp_path / TICKET_ENCODER)).model.encode(texts), plain.encode(texts), atol=1e-6)
    assert not np.allclose(load_encoder(str(tmp_path / ENCODER)).model.encode(texts), plain.encode(texts), atol=1e-4)
    for needs, side in ((NEEDS_T, inputs.tickets), (NEEDS_Q, inputs.queries)):
        is_tickets = side is inputs.tickets
        assert torch.allclose(side_channels(loaded, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]],
                              side_channels(model, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]], atol=1e-6)


ROW = VariantConfig({"Fq": 1.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise",
                    train={"optimizer": "adamw", "lr": 3e-3, "epochs": 1, "batch_size": 8})


def road_params(parts_seed: int = 3) -> Params:
    """Params whose default dataset is the search bundles' corpus (tests/search_bundle.py: train_parts' synthetic one)."""
    return Params(seed=parts_seed, datasets={"default": DatasetConfig("default", "synthetic")}, synthetic=PARTS,
                  siamese=SiameseParams(finetuned={"Fq+L": ROW}))


@pytest.fixture(scope="module")
def champion(tmp_path_factory):
    """A registered F+L model's bundle and index, as the register stage leaves them."""
    root = tmp_path_factory.mktemp("champion")
    parts = train_parts(root / "parts", n_tickets=PARTS.n_tickets, n_enduser=PARTS.n_enduser_queries)
    bundle = make_bundle(root / "bundle", parts, "FL")
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets).save(root / "index")
    return bundle, root / "index", parts


def rankings(bundle: Path, index: Path, queries) -> list[tuple[str, ...]]:
    answers = Searcher(query_encoder(bundle), TicketIndex.load(index), bundle).search(queries, k=10)
    return [tuple(hit.ticket_id for hit in answer.hits) for answer in answers]


def test_the_query_tower_road_keeps_the_index_vectors_byte_for_byte_and_changes_the_ranking(champion, tmp_path):
    bundle, index, parts = champion
    trained = retrain_query_tower(road_params(), bundle, index, tmp_path)
    assert (trained.index / VECTORS).read_bytes() == (index / VECTORS).read_bytes()
    assert (trained.index / TICKETS).read_bytes() == (index / TICKETS).read_bytes()
    assert trained.variant.weighed == {"Fq", "L"} and not trained.variant.learn and "dev" in trained.results
    queries = parts.corpus.queries.head(8)
    assert rankings(trained.bundle, trained.index, queries) != rankings(bundle, index, queries)
    with pytest.raises(IndexMismatch):      # the champion's index names the champion: the new bundle is refused there
        rankings(trained.bundle, index, queries)


def test_an_index_folded_by_another_ticket_side_is_never_reused(champion, tmp_path):
    bundle, index, parts = champion
    other = make_bundle(tmp_path / "other", parts, "FL", seed=1)     # another ticket encoder
    with pytest.raises(IndexMismatch, match="otherwise than the model that built it"):
        reuse_index(index, Scorer.load(other), other, tmp_path / "index")
    assert query_tower_refusal({"A", "L"}) == "it weighs no channel F"
    assert "A" in query_tower_refusal({"F", "A", "L"}) and query_tower_refusal({"F", "L", "R"}) is None
