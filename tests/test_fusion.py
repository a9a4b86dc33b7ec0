"""Beyond the paper: channel L (BM25 as a distance), pair channels in the metric, learned W and V, a ranking loss."""
import math

import numpy as np
import polars as pl
import pytest
import torch

from ticketsim.channels.bm25 import Lexicon, Postings
from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.lexical import lexical_scores
from ticketsim.config import TrainConfig, VariantConfig
from ticketsim.model.inputs import Inputs, encode_side, rank_distances, vocabulary_index
from ticketsim.model.scores import pair_predictor
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.weights import MetricConfig, metric_of
from ticketsim.text.tokenize import Tokens
from ticketsim.training.trainer import fit, rescale
from ticketsim.training.variant import loss_and_groups


def tokens_of(queries: list[list[str]], tickets: list[list[str]]) -> Tokens:
    return Tokens(pl.DataFrame({"ticket_id": [f"t{i}" for i in range(len(tickets))], "subject": [t[:1] for t in tickets],
                                "description": [t[1:] for t in tickets], "solution": [[] for _ in tickets]}),
                  pl.DataFrame({"query_id": [f"q{i}" for i in range(len(queries))], "subject": queries,
                                "description": [[] for _ in queries]}))


def test_lexical_distance_is_bm25_over_the_querys_ceiling():
    tickets = [["pump", "leak", "seal"], ["fan", "noise"], ["e4711", "pump", "fault", "fault"], ["pump"] * 40]
    queries = [["pump", "e4711"], ["unknownword"], ["fan", "fan"]]
    scores = lexical_scores(tokens_of(queries, tickets))
    weights = Postings.build(tickets, 1.5, 0.75).idf
    assert scores.ceilings[0] == pytest.approx(weights["pump"] + weights["e4711"])
    assert scores.ceilings[2] == pytest.approx(2 * weights["fan"])   # a repeated query word counts twice, as in BM25
    d = scores.distances()
    assert ((d >= 0) & (d <= 1)).all()
    assert d[0].argmin() == 2                       # the exact error code wins
    assert (d[1] == 1).all()                        # a query of words no ticket has: no lexical evidence
    assert d[0, 1] == 1 and d[0, 3] < d[0, 0]       # no shared word: 1; 40 x 'pump' nears the ceiling of 'pump'


def test_bm25_is_lucenes_formula_worked_by_hand():
    """Three tickets of lengths 3, 1 and 4 (mean 8/3), k1 1.2 and b .5: idf(pump) = log(1 + 1.5 / 2.5) (in 2 of 3),
    idf(seal) = log(1 + 2.5 / 1.5) (in 1), and each posting adds idf * tf / (tf + k1 (1 - b + b length / mean))."""
    postings = Postings.build([["pump", "leak", "pump"], ["fan"], ["pump", "fan", "seal", "seal"]], k1=1.2, b=0.5)
    pump, seal = math.log(1.6), math.log(1 + 2.5 / 1.5)
    norm = {3: 1.2 * (0.5 + 0.5 * 3 / (8 / 3)), 4: 1.2 * (0.5 + 0.5 * 4 / (8 / 3))}
    by_hand = [pump * 2 / (2 + norm[3]), 0.0, pump * 1 / (1 + norm[4]) + seal * 2 / (2 + norm[4])]
    assert postings.bm25(["pump", "seal", "unknownword"]).tolist() == pytest.approx(by_hand, rel=1e-6)
    assert postings.bm25(["seal", "seal"])[2] == pytest.approx(2 * seal * 2 / (2 + norm[4]), rel=1e-6)
    assert dict(postings.idf) == pytest.approx({"fan": pump, "leak": seal, "pump": pump, "seal": seal})
    assert postings.ceiling(["pump", "seal", "seal", "unknownword"]) == pytest.approx(pump + 2 * seal)


def test_postings_joined_without_some_rows_are_those_built_from_the_rows_kept():
    """A merge (a delete, a compaction) joins segments' postings without reading a document: array for array a build's
    of the tickets kept, and a word only the dropped tickets held leaves the vocabulary."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)] + ["é", "secret"]
    documents = [list(rng.choice(words[:-1], rng.integers(0, 12))) for _ in range(200)]
    documents[150] = ["secret", "pump"]
    parts = [documents[:90], documents[90:160], documents[160:]]
    keeps = [np.sort(rng.choice(90, 60, replace=False)), np.delete(np.arange(70), 60), None]     # row 150 dropped
    joined = Postings.joined([(Postings.build(p, 1.2, 0.75), k) for p, k in zip(parts, keeps)], 1.2, 0.75)
    kept = [d for part, keep in zip(parts, keeps) for d in (part if keep is None else [part[i] for i in keep])]
    built = Postings.build(kept, 1.2, 0.75)
    assert joined.vocabulary.strings() == built.vocabulary.strings() and joined.word_id("secret") is None
    for name in ("indptr", "docs", "tf", "lengths"):
        assert getattr(joined, name).dtype == getattr(built, name).dtype
        assert np.array_equal(getattr(joined, name), getattr(built, name)), name


def test_a_querys_distances_by_row_and_by_bound_are_those_of_every_ticket_bit_for_bit(monkeypatch):
    """QueryDistances reads BM25 of some rows (`at`) or of the tickets that may reach a bound (`within`, MaxScore) over
    three segments: each value bit for bit the whole array's, and a first `within` holds every ticket at or below its
    bound and none far above it, without reading the postings of the common words for every ticket; a second bound (the
    search went deeper) is answered from every ticket's d_L, computed once."""
    rng = np.random.default_rng(1)
    words = [f"w{i}" for i in range(300)]
    weights = 1 / np.arange(1, 301) ** 1.1      # Zipf: a few common words, many rare ones
    documents = [list(rng.choice(words, rng.integers(1, 30), p=weights / weights.sum())) for _ in range(900)]
    lexicon = Lexicon(tuple(Postings.build(part, 1.5, 0.75) for part in (documents[:500], documents[500:800], documents[800:])))
    read, add_scores = [], Postings.add_scores     # the words whose postings a search reads whole
    monkeypatch.setattr(Postings, "add_scores", lambda part, scores, word_id, idf, average: (
        read.append(part.vocabulary.strings()[word_id]), add_scores(part, scores, word_id, idf, average)))
    for query in (["w0", "w1", "w120", "w250", "w0"], ["w3", "w200", "nosuchword"], ["nosuchword"], ["w0"], ["w0", "w250"]):
        every, rows = lexicon.distances(query), rng.choice(900, 50)
        assert lexicon.query(query).at(rows).tobytes() == every[rows].tobytes()
        for bound in (-0.1, 0.0, 0.3, 0.6, 0.9, 0.99, 1.0):
            read.clear()
            found = lexicon.query(query).within(bound)
            if found is None:
                assert bound >= 1
                continue
            assert np.isin(np.flatnonzero(every <= bound), found).all() and (np.diff(found) > 0).all(), (query, bound)
            assert (every[found] <= bound + 1e-3).all(), (query, bound)
            if query == ["w0", "w250"] and bound == 0.6:
                assert read and "w0" not in read    # w0 alone cannot reach 40 % of the ceiling: looked up for w250's tickets
        deeper = lexicon.query(query)
        if deeper.ceiling > 0:
            deeper.within(0.5)
            assert np.array_equal(deeper.within(0.7), np.flatnonzero(every <= 0.7)), query
            assert deeper.scored is not None and deeper.at(rows).tobytes() == every[rows].tobytes()


def test_pair_channels_add_their_weighted_distance_outside_the_level_sum():
    q = {"S": {"sub": torch.tensor([[0.0, 1.0], [1.0, 1.0]])}}
    t = {"S": {"sol": torch.tensor([[0.0, 0.0], [2.0, 1.0]])}}
    cfg = MetricConfig(channels={"S": 2.0, "L": 0.5, "R": 0.0}, levels={"sub-sol": 0.5})
    score, pair = FusedScore.of(cfg), {"L": torch.tensor([0.2, 1.0])}
    assert score.total(q, t, pair=pair).tolist() == pytest.approx([0.5 * 2 * 1 + 0.5 * 0.2, 0.5 * 2 * 1 + 0.5 * 1.0])
    assert score.total(q, t, pool=True, pair={"L": torch.zeros(2, 2)}).shape == (2, 2)
    assert cfg.needs() == ({"S": ("sub",)}, {"S": ("sol",)})    # no vectors for L
    with pytest.raises(ValueError, match="pair channel L"):
        score.total(q, t)


def test_rank_distance_is_zero_for_the_first_candidate_and_one_without_a_rank():
    pairs = pl.DataFrame({"source_rank": [1, 2, 10, None]}, schema={"source_rank": pl.Int32})
    assert rank_distances(pairs).tolist() == pytest.approx([0.0, 0.5, 0.9, 1.0])


def toy(seed: int = 0):
    """12 queries x 3 candidates; channel S separates good from bad candidates, channel E is noise."""
    g = torch.Generator().manual_seed(seed)
    n_q, labels = 12, (5, 3, 1)
    query_ids, ticket_ids = [f"q{i}" for i in range(n_q)], [f"t{i}-{k}" for i in range(n_q) for k in range(3)]
    base = torch.randn(n_q, 4, generator=g)
    s_tickets = torch.cat([base[i:i + 1] + torch.tensor([[0.0], [0.1], [0.3]]) for i in range(n_q)])
    e_tickets = torch.randn(3 * n_q, 4, generator=g)
    q_vectors = {"S": {"sub": base}, "E": {"sub": torch.randn(n_q, 4, generator=g)}}
    channels = [ChannelVectors(c, tuple(query_ids), tuple(ticket_ids), {"sub": q_vectors[c]["sub"].numpy()},
                               {"sub": v.numpy()}) for c, v in (("S", s_tickets), ("E", e_tickets))]
    pairs = pl.DataFrame({"query_id": [query_ids[i] for i in range(n_q) for _ in range(3)], "ticket_id": ticket_ids,
                          "label": [label for _ in range(n_q) for label in labels],
                          "split": ["train" if i < 8 else "dev" for i in range(n_q) for _ in range(3)],
                          "source_rank": [None] * (3 * n_q)}, schema_overrides={"source_rank": pl.Int32})
    queries = pl.DataFrame({"query_id": query_ids, "subject": [[]] * n_q, "description": [[]] * n_q})
    tickets = pl.DataFrame({"ticket_id": ticket_ids, "subject": [[]] * (3 * n_q)})
    inputs = Inputs(encode_side(queries, "query_id", [], vocabulary_index([]), 1, channels, "queries"),
                    encode_side(tickets, "ticket_id", [], vocabulary_index([]), 1, channels, "tickets"), ())
    return inputs, pairs


def train_fusion(variant: VariantConfig, seed: int = 0) -> tuple[SiameseLSTM, list[float]]:
    inputs, pairs = toy()
    torch.manual_seed(seed)
    model = SiameseLSTM(SiameseConfig(vocab_size=1, word_dim=2, char_dim=2, hidden=2), learn=metric_of(variant))
    predict = pair_predictor(model, inputs, pairs, metric_of(variant))
    split = pairs["split"].to_list()
    rows = {s: torch.tensor([i for i, x in enumerate(split) if x == s]) for s in ("train", "dev")}
    loss, groups = loss_and_groups(variant, pairs)
    history = fit(model, predict, rescale(torch.tensor(pairs["label"].to_list())), rows["train"], rows["dev"],
                  TrainConfig(epochs=200, batch_size=6, patience=200), seed, loss=loss, groups=groups)
    return model, history.dev_loss


@pytest.mark.slow
@pytest.mark.parametrize("loss", ["mse", "pairwise", "softmax"])
def test_learned_weights_move_to_the_informative_channel_and_stay_positive(loss):
    variant = VariantConfig(channels={"S": 0.5, "E": 0.5}, levels={"sub-sub": 1.0}, learn=True, loss=loss)
    model, dev_loss = train_fusion(variant)
    learned = model.metric(MetricConfig({}, {}))
    w_s, w_e = float(learned.channels["S"].detach()), float(learned.channels["E"].detach())
    assert w_e > 0 and w_s > 0                       # softplus: never negative
    assert w_s / w_e > 2                             # started equal; the noise channel lost its weight
    assert min(dev_loss) < dev_loss[0]


@pytest.mark.slow
def test_a_ranking_loss_needs_whole_queries_and_training_is_deterministic():
    _, pairs = toy()
    _, groups = loss_and_groups(VariantConfig({"S": 1.0}, {"sub-sub": 1.0}, loss="pairwise"), pairs)
    ids = pairs["query_id"].to_list()
    assert all((groups[i] == groups[j]) == (ids[i] == ids[j]) for i in range(len(ids)) for j in range(len(ids)))
    assert loss_and_groups(VariantConfig({"S": 1.0}, {"sub-sub": 1.0}), pairs)[1] is None
    variant = VariantConfig(channels={"S": 0.5, "E": 0.5}, levels={"sub-sub": 1.0}, learn=True, loss="pairwise")
    first, second = train_fusion(variant)[0], train_fusion(variant)[0]
    assert torch.equal(first.weights.w, second.weights.w) and torch.equal(first.weights.v, second.weights.v)
