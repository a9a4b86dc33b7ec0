"""The comparators (DSSM, CDSSM, CGRU, RDE, HRDE, HRDE-LTC, MV-LSTM, aMV-LSTM): inputs, shapes, learning, determinism."""
import numpy as np
import polars as pl
import pytest
import torch
import torch.nn.functional as F

from ticketsim.config import SyntheticConfig, TextConfig, TrainConfig
from ticketsim.data.synthetic import generate
from ticketsim.model.comparators import REGISTRY, build_comparator, pair_predictor, query_groups, score_pool, training_texts
from ticketsim.model.comparators.inputs import chunked, letter_trigrams, sentence_chunks, trigram_index, word_trigrams
from ticketsim.model.inputs import padded, vocabulary_index
from ticketsim.model.losses import mse
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.trainer import fit, rescale

# Tiny sizes of every registered comparator, texts cut short: each trains in about a second.
TINY = {"query_tokens": 16, "ticket_tokens": 30}
SMALL = {
    "dssm": {"hidden": [16], "out": 8},
    "cdssm": {"filters": 8, "out": 8, "dropout": 0.0},
    "cgru": {"filters": 8, "out": 8, "gru": 4, "dropout": 0.0},
    "rde": {"hidden": 8, "dropout": 0.0},
    "hrde": {"hidden": 8, "dropout": 0.0, "chunk_tokens": 10, "max_chunks": 6},
    "hrde-ltc": {"hidden": 8, "topics": 3, "dropout": 0.0, "chunk_tokens": 10, "max_chunks": 6},
    "mvlstm": {"hidden": 8, "mlp": 8, "dropout": 0.0},
    "amvlstm": {"hidden": 8, "mlp": 8, "attention": 4, "dropout": 0.0},
}


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny matrices: a second torch thread on a shared 2-core box only waits (docs/model.md)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def corpus():
    corpus = generate(SyntheticConfig(n_tickets=30, n_labeled_queries=12, pairs_per_query=3, n_enduser_queries=2, n_lay_queries=0), seed=0)
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))
    pairs = corpus.pairs.head(12)                    # 4 queries x 3 candidates
    words = list(tokens.vocabulary()["token"])
    table = np.random.default_rng(0).normal(size=(len(words), 8)).astype(np.float32)
    return tokens, pairs, words, table


def tiny(name: str, corpus, seed: int = 0, **settings):
    tokens, pairs, words, table = corpus
    torch.manual_seed(seed)
    model = build_comparator(name, {**SMALL[name], **TINY, **settings}, words, table, training_texts(tokens, pairs))
    return model, pair_predictor(model, tokens, pairs, words), rescale(torch.tensor(pairs["label"].to_list()))


def test_letter_trigrams_of_known_words():
    assert letter_trigrams("good") == ["#go", "goo", "ood", "od#"]
    assert letter_trigrams("a") == ["#a#"]
    index = trigram_index([["good", "food"], ["good"]])
    assert index["od#"] == 1 and index["ood"] == 2 and index["#go"] == 3 and len(index) == 6   # most frequent first
    table = word_trigrams(["good", "goody", "xyz"], index)
    assert table.shape == (4, 4) and not table[0].any() and not table[3].any()       # row 0 pads; 'xyz' shares nothing
    assert [t for t in table[2].tolist() if t] == [index[t] for t in ["#go", "goo", "ood"]]   # 'goody' keeps known ones


def test_sentence_chunks_follow_sentences_components_and_limits():
    assert sentence_chunks(["a", "b", ".", "c", "d", "e", "f", "g"], 3) == [["a", "b", "."], ["c", "d", "e"], ["f", "g"]]
    index = vocabulary_index(["pump", "leak", ".", "fixed"])
    chunks = chunked([[["pump"], []], [["pump", "leak", ".", "leak"], ["leak"]], [["fixed"], []]], index, 3, 10)
    assert chunks.ids.shape == (2, 3, 3) and chunks.counts.tolist() == [3, 1]       # sub, 2 sentences, sol: the first 3
    assert chunks.lengths.tolist() == [[1, 3, 1], [1, 0, 0]]
    assert chunks.ids[0, 1].tolist() == [1, 2, 3] and not chunks.ids[1, 1:].any()


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_forward_gives_one_score_in_0_1_per_pair_whatever_the_batch(name, corpus):
    model, predict, _ = tiny(name, corpus)
    model.eval()
    with torch.no_grad():
        scores = predict(torch.arange(12))
        assert scores.shape == (12,) and ((scores > 0) & (scores < 1)).all()
        alone = torch.cat([predict(torch.tensor([i])) for i in range(12)])    # no padding, no other rows
    assert torch.allclose(scores, alone, atol=1e-5)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_pool_scores_are_the_pair_scores_of_every_query_with_every_ticket(name, corpus):
    tokens, pairs, words, _ = corpus
    model, _, _ = tiny(name, corpus)
    query_ids, ticket_ids = pairs["query_id"].unique(maintain_order=True).to_list(), tokens.tickets["ticket_id"][:7].to_list()
    pool = score_pool(model, tokens, words, query_ids, ticket_ids, batch_size=5)    # batches cut across queries and texts
    assert model.training                                                          # scored in eval mode, then back
    cross = pl.DataFrame({"query_id": query_ids}).join(pl.DataFrame({"ticket_id": ticket_ids}), how="cross")
    model.eval()
    with torch.no_grad():
        pairwise = pair_predictor(model, tokens, cross, words)(torch.arange(cross.height))
    assert pool.shape == (len(query_ids), 7) and np.allclose(pool.ravel(), pairwise.numpy(), atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_a_tiny_model_overfits_a_tiny_set(name, corpus):
    model, predict, targets = tiny(name, corpus)
    rows = torch.arange(len(targets))
    # Adadelta at 5x its usual scale: MV-LSTM's k largest cosines start nearly equal and take long to pull apart
    fit(model, predict, targets, rows, rows, TrainConfig(epochs=100, batch_size=12, lr=5.0, patience=100), seed=0)
    model.eval()
    with torch.no_grad():
        after = mse(predict(rows), targets).item()
    assert after < targets.var(unbiased=False).item() / 10


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_same_seed_same_weights_and_scores(name, corpus):
    runs = []
    for _ in range(2):
        model, predict, targets = tiny(name, corpus, seed=3, **({"dropout": 0.3} if name not in ("dssm",) else {}))
        rows = torch.arange(len(targets))
        fit(model, predict, targets, rows[:9], rows[9:], TrainConfig(epochs=2, batch_size=6), seed=3)
        with torch.no_grad():
            runs.append((model.state_dict(), predict(rows)))
    (first, scores), (second, again) = runs
    assert torch.equal(scores, again)
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_ltc_topic_probabilities_sum_to_one(corpus):
    model, _, _ = tiny("hrde-ltc", corpus)
    p = model.topic_weights(torch.randn(5, 8))
    assert p.shape == (5, 3) and (p > 0).all() and torch.allclose(p.sum(1), torch.ones(5))


def test_attention_weights_sum_to_one_over_a_text_and_vanish_on_padding(corpus):
    model, _, _ = tiny("amvlstm", corpus)
    ids, lengths = torch.tensor([[1, 2, 3, 0, 0], [4, 0, 0, 0, 0]]), torch.tensor([3, 1])
    weights = model.attention_weights(model.embed(ids), lengths)
    assert torch.allclose(weights.sum(1), torch.ones(2))
    assert (weights[0, 3:] == 0).all() and (weights[1, 1:] == 0).all() and (weights[0, :3] > 0).all()


def test_hashing_and_convolution_equal_dense_trigram_layers(corpus):
    """DSSM's first layer is a Linear on the text's trigram counts; CDSSM's convolution a Conv1d on 3-word windows."""
    model, _, _ = tiny("cdssm", corpus)
    words = corpus[2]
    texts = padded([words[3:9], words[10:12]], vocabulary_index(words), 10)
    counts = F.one_hot(model.word_trigrams[texts.ids], model.cfg.n_trigrams).sum(2).float()   # (n, L, V)
    counts[..., 0] = 0                                                                         # id 0 pads
    weight = model.hashing[0].bag.weight.view(model.cfg.n_trigrams, 3, model.cfg.filters)       # (V, window, filters)
    conv = F.conv1d(counts.transpose(1, 2), weight.permute(2, 0, 1), model.conv_bias[0], padding=1).transpose(1, 2)
    assert torch.allclose(model.convolved(texts, 0), torch.tanh(conv), atol=1e-5)
    dssm, _, _ = tiny("dssm", corpus)
    bag = dssm.hashing[0](texts.ids, dssm.word_trigrams).sum(1)
    assert torch.allclose(bag, counts.sum(1) @ dssm.hashing[0].bag.weight, atol=1e-5)


def test_pretrained_word_vectors_are_copied_and_frozen_unless_finetuned(corpus):
    tokens, pairs, words, table = corpus
    model = build_comparator("mvlstm", {"hidden": 4}, words, table)
    assert model.cfg.word_dim == 8 and not model.embed.weight.requires_grad
    assert torch.equal(model.embed.weight[1:], torch.from_numpy(table)) and not model.embed.weight[0].any()
    assert build_comparator("rde", {"finetune": True}, words, table).embed.weight.requires_grad
    assert build_comparator("rde", {"word_dim": 6}, words).embed.weight.shape == (len(words) + 1, 6)


def test_bad_settings_name_the_comparator_and_the_fix(corpus):
    words = corpus[2]
    with pytest.raises(ValueError, match=r"'wide' \(cdssm\): unknown settings \['hiden'\]"):
        build_comparator("wide", {"model": "cdssm", "hiden": 3}, words, trigram_texts=[["pump"]])
    with pytest.raises(ValueError, match="unknown model 'bert'"):
        build_comparator("bert", {}, words)
    with pytest.raises(ValueError, match="trigram_texts"):
        build_comparator("dssm", {}, words)


def test_query_groups_number_queries_in_order_of_appearance():
    pairs = pl.DataFrame({"query_id": ["q7", "q7", "q2", "q7", "q2"]})
    assert query_groups(pairs).tolist() == [0, 0, 1, 0, 1]
