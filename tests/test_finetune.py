"""The trained branches beside h: the fine-tuned encoder F (a tiny random transformer built in code, no download) and the
adapter A, trained through the one metric by the one trainer; the self-supervised pairs mined from the tickets."""
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import torch
from benchmarks.common import tiny_encoder

from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors
from ticketsim.channels.sentence import load_encoder
from ticketsim.config import EncoderConfig, MiningConfig, SiameseParams, SyntheticConfig, TextConfig, VariantConfig
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.protocols import query_means
from ticketsim.model.branches import BranchStart
from ticketsim.model.inputs import build_inputs
from ticketsim.model.saved import build_model, load_model, save_model
from ticketsim.model.scores import pair_predictor, predict_all, side_channels
from ticketsim.scoring.weights import metric_of
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.mining import PREFIX, mine
from ticketsim.training.selection import per_query
from ticketsim.training.variant import fit_variant, threads_alone

# Faults said in words that no ticket uses: a query can find its ticket only by what training teaches the encoder.
FAULTS = [("pump", "seal leaks oil", "replace the seal"), ("fan", "blade wobbles", "balance the rotor"),
          ("valve", "stem sticks open", "clean the stem"), ("meter", "reading drifts", "recalibrate the meter"),
          ("motor", "winding overheats", "check the cooling"), ("belt", "slips under load", "tension the belt")]
SAYINGS = ["dripping mess", "shaking badly", "will not close", "shows nonsense", "gets too hot", "squeals loudly"]
F_ONLY = VariantConfig({"F": 1.0}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise",
                       train={"optimizer": "adamw", "lr": 3e-3, "weights_lr": 3, "epochs": 12, "batch_size": 12, "patience": 12})
SIAMESE = SiameseParams(hidden=4)


def fault_corpus() -> Corpus:
    """Six tickets; twelve queries (two per fault, train and dev) in lay words, each with its ticket YES and two others NO."""
    tickets = pl.DataFrame({"ticket_id": [f"t{i}" for i in range(6)], "subject": [f"{e} {d}" for e, d, _ in FAULTS],
                            "description": [d for _, d, _ in FAULTS], "solution": [s for _, _, s in FAULTS]})
    queries = pl.DataFrame({"query_id": [f"q{i}{k}" for k in "ab" for i in range(6)],
                            "subject": [f"{k} {s}" for k in ("my", "our") for s in SAYINGS], "description": [""] * 12})
    pairs = [(f"q{i}{k}", f"t{j}", 5 if j == i else 1, "train" if k == "a" else "dev", None)
             for k in "ab" for i in range(6) for j in (i, (i + 1) % 6, (i + 3) % 6)]
    pairs = pl.DataFrame(pairs, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8, "split": pl.String,
                                        "source_rank": pl.Int32}, orient="row")
    return Corpus(tickets, queries, pairs)


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    corpus = fault_corpus()
    texts = [t for frame in (corpus.tickets, corpus.queries) for c in ("subject", "description") for t in frame[c]]
    return tiny_encoder(tmp_path_factory.mktemp("encoder") / "tiny", [*texts, *(s for _, _, s in FAULTS)])


def setup(encoder_folder, variant: VariantConfig = F_ONLY, seed: int = 0):
    corpus = fault_corpus()
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
    start = BranchStart(load_encoder(str(encoder_folder)).model, EncoderConfig(max_tokens=16, frozen_layers=0), 1.0, 16)
    inputs = build_inputs(tokens, [], metric_of(variant), 8, corpus=corpus)
    torch.manual_seed(seed)
    model = build_model(SIAMESE, np.zeros((len(inputs.words), 6), np.float32), 2, variant, start)
    return corpus, tokens, inputs, model


def train_map(corpus, inputs, model, variant=F_ONLY) -> float:
    model.eval()
    scores = predict_all(pair_predictor(model, inputs, corpus.pairs, metric_of(variant)), corpus.pairs.height)
    train = (corpus.pairs["split"] == "train").to_numpy()
    return query_means(per_query(corpus.pairs.filter(train), scores[train], 10))["map"]


@pytest.mark.slow
def test_a_tiny_random_encoder_learns_a_tiny_set_through_the_metric(encoder_folder):
    corpus, _, inputs, model = setup(encoder_folder)
    before = train_map(corpus, inputs, model)
    fit_variant(model, inputs, corpus.pairs, F_ONLY, SIAMESE, seed=0)
    after = train_map(corpus, inputs, model)
    assert after == 1.0 and after > before + 0.1, (before, after)


def test_one_set_of_encoder_weights_serves_every_component_and_both_sides(encoder_folder):
    corpus, _, inputs, model = setup(encoder_folder)
    vocabulary = load_encoder(str(encoder_folder)).model.tokenizer.vocab_size
    assert sum(isinstance(m, torch.nn.Embedding) and m.num_embeddings == vocabulary for m in model.modules()) == 1   # one table
    query = {"F": {"sub+desc": ["pump seal leaks oil"]}}
    ticket = {"F": {"sub+desc+sol": ["pump seal leaks oil"], "sub": ["pump seal leaks oil"]}}
    q, t = model.eval().channels(query)["F"], model.channels(ticket)["F"]
    assert torch.equal(q["sub+desc"], t["sub+desc+sol"]) and torch.equal(t["sub"], t["sub+desc+sol"])
    params = {name.split(".")[0] for name, p in model.named_parameters() if p.requires_grad and "branches.F" in name}
    assert params == {"branches"}


@pytest.mark.slow
def test_fine_tuning_is_deterministic_under_a_seed_and_resumes_from_its_checkpoint(encoder_folder, tmp_path):
    short = replace(F_ONLY, train={**F_ONLY.train, "epochs": 4})
    states = []
    for _ in range(2):
        corpus, _, inputs, model = setup(encoder_folder, short)
        fit_variant(model, inputs, corpus.pairs, short, SIAMESE, seed=1)
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])

    corpus, _, inputs, model = setup(encoder_folder, short)    # killed after 2 epochs, then run again to the end
    fit_variant(model, inputs, corpus.pairs, short, SIAMESE, seed=1, checkpoints=tmp_path, epochs=2)
    assert (tmp_path / "checkpoint.pt").is_file()
    corpus, _, inputs, model = setup(encoder_folder, short)
    fit_variant(model, inputs, corpus.pairs, short, SIAMESE, seed=1, checkpoints=tmp_path, epochs=4)
    resumed = model.state_dict()
    assert all(torch.allclose(resumed[k], states[0][k]) for k in states[0])


def test_a_saved_model_loads_as_an_ordinary_encoder_folder_and_scores_alike(encoder_folder, tmp_path):
    corpus, _, inputs, model = setup(encoder_folder)
    fit_variant(model, inputs, corpus.pairs, replace(F_ONLY, train={**F_ONLY.train, "epochs": 2}), SIAMESE, seed=0)
    save_model(model, F_ONLY, tmp_path)
    loaded = load_model(tmp_path, F_ONLY, EncoderConfig(max_tokens=16, frozen_layers=0), {"S": 1.0})
    plain = load_encoder(str(tmp_path / "encoder")).model     # sentence-transformers alone reads the fine-tuned weights
    texts = ["pump seal leaks oil", "my shaking badly"]
    assert np.allclose(plain.encode(texts), loaded.branches["F"](texts).detach().numpy(), atol=1e-5)
    needs = {"F": ("sub+desc+sol",)}
    assert torch.allclose(side_channels(loaded, inputs.tickets, needs)["F"]["sub+desc+sol"],
                          side_channels(model, inputs.tickets, needs)["F"]["sub+desc+sol"], atol=1e-6)


def with_random_s(encoder_folder, variant: VariantConfig):
    """A random channel S (8 wide) of the fault corpus, the inputs of `variant` with it, and a model of `variant`."""
    corpus, tokens, _, _ = setup(encoder_folder)
    rng = np.random.default_rng(0)
    vectors = ChannelVectors("S", tuple(corpus.queries["query_id"]), tuple(corpus.tickets["ticket_id"]),
                             {c: rng.normal(size=(12, 8)).astype(np.float32) for c in QUERY_COMPONENTS},
                             {c: rng.normal(size=(6, 8)).astype(np.float32) for c in TICKET_COMPONENTS})
    inputs = build_inputs(tokens, [vectors], metric_of(variant), 8)
    return vectors, inputs, build_model(SIAMESE, np.zeros((len(inputs.words), 6), np.float32), 2, variant,
                                        BranchStart(None, EncoderConfig(), 1.0, 8))


def test_the_adapter_starts_as_channel_s_and_learns(encoder_folder):
    variant = VariantConfig({"A": 1.0}, {"sub+desc-sub+desc+sol": 1.0}, loss="pairwise",
                            train={"optimizer": "adamw", "lr": 0.05, "epochs": 30, "patience": 30, "batch_size": 12})
    vectors, inputs, model = with_random_s(encoder_folder, variant)
    corpus = fault_corpus()
    needs = {"A": ("sub+desc+sol",)}
    assert torch.allclose(side_channels(model, inputs.tickets, needs)["A"]["sub+desc+sol"],
                          torch.from_numpy(vectors.tickets["sub+desc+sol"]).double())
    before = train_map(corpus, inputs, model, variant)
    fit_variant(model, inputs, corpus.pairs, variant, SIAMESE, seed=0)
    assert train_map(corpus, inputs, model, variant) > before


def test_mined_pairs_never_pair_a_ticket_with_itself_or_its_copy_as_a_negative():
    corpus = generate(SyntheticConfig(n_tickets=120, n_labeled_queries=4, pairs_per_query=2, n_enduser_queries=2, n_lay_queries=0), 5)
    copy = corpus.tickets.head(1).with_columns(ticket_id=pl.lit("copy-of-first"))   # a repeated thread under another id
    corpus = replace(corpus, tickets=pl.concat([corpus.tickets, copy]))
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
    rng = np.random.default_rng(1)
    sentence = ChannelVectors("S", tuple(tokens.queries["query_id"]), tuple(tokens.tickets["ticket_id"]),
                              {c: rng.normal(size=(tokens.queries.height, 8)).astype(np.float32) for c in QUERY_COMPONENTS},
                              {c: rng.normal(size=(tokens.tickets.height, 8)).astype(np.float32) for c in TICKET_COMPONENTS})
    cfg = MiningConfig(bm25_negatives=3, dense_negatives=3, skip=0)
    mined = mine(corpus, tokens, cfg, sentence=sentence)
    pairs = mined.corpus.pairs
    own = pairs["query_id"].str.strip_prefix(PREFIX)
    negatives = pairs.filter(pl.col("label") == 1)
    assert negatives.height > 0 and not (negatives["ticket_id"] == own.filter(pairs["label"] == 1)).any()
    positives = pairs.filter(pl.col("label") == 5)
    assert (positives["ticket_id"] == positives["query_id"].str.strip_prefix(PREFIX)).all()
    assert positives.height == tokens.tickets.height
    first = corpus.tickets["ticket_id"][0]
    for ticket, twin in ((first, "copy-of-first"), ("copy-of-first", first)):
        assert twin not in negatives.filter(pl.col("query_id") == PREFIX + ticket)["ticket_id"].to_list()
    assert negatives.group_by("query_id").len()["len"].max() <= 6
    # the views hide what the mined query reads: no ticket keeps its subject
    assert (mined.corpus.tickets["subject"] == "").all() and (mined.tokens.tickets["subject"].list.len() == 0).all()
    # channel S of the mined texts is the cache's vector of the very same text: the query's is its ticket's subject's
    row = {x: i for i, x in enumerate(sentence.ticket_ids)}
    query = {x: i for i, x in enumerate(mined.sentence.query_ids)}
    assert np.array_equal(mined.sentence.queries["sub+desc"][query[PREFIX + first]], sentence.tickets["sub"][row[first]])
    assert mined.level == "sub+desc-sub+desc" and mined.sentence.tickets["sub+desc"] is sentence.tickets["desc"]
    assert set(pairs["split"]) <= {"train", "dev"}


def test_a_self_supervised_phase_runs_before_the_labels_and_needs_no_label(encoder_folder):
    corpus, tokens, inputs, model = setup(encoder_folder)
    selfsup_only = replace(F_ONLY, selfsup=True, labels=False, learn=False)
    mined = mine(corpus, tokens, MiningConfig(bm25_negatives=2, dense_negatives=0, skip=0, dev=0.3))
    siamese = replace(SIAMESE, selfsup=replace(SIAMESE.selfsup, bm25_negatives=2, dense_negatives=0, skip=0,
                                               train={"optimizer": "adamw", "lr": 3e-3, "epochs": 3, "batch_size": 9}))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    histories = fit_variant(model, inputs, corpus.pairs.with_columns(label=pl.lit(3, pl.Int8)), selfsup_only, siamese, 0, mined)
    assert set(histories) == {"selfsup"} and len(histories["selfsup"].train_loss) == 3
    changed = [k for k in before if not torch.equal(before[k], model.state_dict()[k])]
    assert changed and all(k.startswith("branches.F.") for k in changed)
    with pytest.raises(ValueError, match="mined pairs"):
        fit_variant(model, inputs, corpus.pairs, selfsup_only, siamese, 0, None)


def test_a_model_that_fine_tunes_an_encoder_trains_alone_on_the_encoders_threads_the_lstm_rows_on_their_own():
    siamese = replace(SIAMESE, threads=1, encoder=EncoderConfig(threads=3))
    merged = {"sub+desc-sub+desc+sol": 1.0}
    for channels in ({"F": 1.0, "L": 0.5}, {"F": 5.0, "S": 1.0, "L": 0.5}, {"Fq": 5.0, "L": 0.5}):
        assert threads_alone(siamese, VariantConfig(channels, merged)) == 3, channels
    for channels in ({"A": 5.0, "L": 0.5}, {"h": 1.0, "E": 0.5}, {"S": 1.0, "L": 0.5}, {"F": 0.0, "S": 1.0}):
        assert threads_alone(siamese, VariantConfig(channels, merged)) == 1, channels
    # a process that trains several variants one model at a time (`ticketsim select`, `curve`): F's threads if one has F
    rows = VariantConfig({"A": 5.0, "L": 0.5}, merged), VariantConfig({"F": 5.0, "L": 0.5}, merged)
    assert threads_alone(siamese, *rows) == 3 and threads_alone(siamese, rows[0]) == 1
