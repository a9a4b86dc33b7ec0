"""Channel Fq, the query tower (model/branches.py): only the query side trains, the ticket side stays the encoder it
started from, so the index's ticket vectors hold; its model folder keeps both towers."""
from dataclasses import replace

import numpy as np
import torch
from test_finetune import F_ONLY, SIAMESE, encoder_folder, setup  # noqa: F401 - encoder_folder: the module's fixture

from ticketsim.channels.sentence import load_encoder
from ticketsim.config import EncoderConfig
from ticketsim.model.saved import ENCODER, TICKET_ENCODER, load_model, save_model
from ticketsim.model.scores import side_channels
from ticketsim.training.variant import fit_variant

FQ = replace(F_ONLY, channels={"Fq": 1.0}, train={**F_ONLY.train, "epochs": 2})
NEEDS_Q, NEEDS_T = {"Fq": ("sub+desc",)}, {"Fq": ("sub+desc+sol",)}


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
