"""Channel T: DocNADE's NLL against a brute-force loop, training, seeding, LDA's likelihood estimate, the T cache."""
import itertools
import math
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.special import gammaln

from ticketsim.channels import topics as channel_t
from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors, component_tokens
from ticketsim.channels.docnade import (
    DocNADE,
    DocNADEConfig,
    build_vocabulary,
    document_nll,
    document_perplexity,
    pad,
    perplexity,
    represent,
    train,
)
from ticketsim.channels.lda import LDATopics, left_to_right_nll, train_lda, variational_nll
from ticketsim.channels.topics import fit_topic_models, heldout_perplexity, load_topic_models, model_of, topic_vectors
from ticketsim.config import DocNADETrainConfig, LDAConfig, SyntheticConfig, TextConfig, TopicsConfig, TopicVocabularyConfig
from ticketsim.data.synthetic import generate
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

TINY = TopicsConfig(n_topics=8, heldout=20, vocabulary=TopicVocabularyConfig(max_size=300, min_documents=3),
                    docnade=DocNADETrainConfig(epochs=3, batch_size=16), lda=LDAConfig(passes=2, iterations=20, particles=4))


def random_model(vocab_size: int = 4, n_topics: int = 3) -> DocNADE:
    model = DocNADE(DocNADEConfig(vocab_size, n_topics))
    generator = torch.Generator().manual_seed(0)
    for parameter in model.parameters():
        torch.nn.init.normal_(parameter, std=1.0, generator=generator)
    return model


def test_nll_matches_a_brute_force_loop_with_an_explicit_softmax():
    model, documents = random_model(), [[0, 3, 3], [2], [1, 0, 2, 3]]
    W, c, U, b = (p.detach().double() for p in (model.W, model.c, model.U, model.b))
    expected = []
    for doc in documents:
        nll = 0.0
        for i, word in enumerate(doc):
            hidden = torch.sigmoid(c + sum((W[:, v] for v in doc[:i]), torch.zeros_like(c)))
            scores = torch.exp(b + U @ hidden)
            nll -= math.log(scores[word] / scores.sum())
        expected.append(nll)
    assert document_nll(model, documents, batch_size=2) == pytest.approx(expected, rel=1e-5)
    lengths = np.array([3, 1, 4])
    assert perplexity(model, documents) == pytest.approx(math.exp(np.mean(np.array(expected) / lengths)), rel=1e-5)


def test_represent_is_the_hidden_layer_after_the_whole_document():
    model, documents = random_model(), [[0, 3, 3], [], [1, 0, 2, 3]]
    W, c = model.W.detach(), model.c.detach()
    expected = torch.stack([torch.sigmoid(c + W[:, doc].sum(1)) for doc in documents])
    assert represent(model, documents) == pytest.approx(expected.numpy(), abs=1e-6)
    # ... which is the state that would predict one more word
    words, mask = pad([doc + [0] for doc in documents])
    with torch.no_grad():
        states = model.hidden_states(words, mask)
    last = torch.stack([states[i, len(doc)] for i, doc in enumerate(documents)])
    assert represent(model, documents) == pytest.approx(last.numpy(), abs=1e-6)


def test_vocabulary_drops_stopwords_punctuation_numbers_and_rare_words():
    documents = [["the", "pump", "leaks", ".", "<num>"], ["pump", "seal", ",", "the"], ["pump", "seal", "leaks"], ["motor"]]
    vocabulary = build_vocabulary(documents, TopicVocabularyConfig(max_size=2, min_documents=2))
    assert vocabulary.words == ("pump", "leaks")  # seal ties leaks at 2 documents and loses the tie alphabetically
    assert vocabulary.encode(["the", "seal", "leaks", "pump", "x"]) == [1, 0]
    assert build_vocabulary(documents, TopicVocabularyConfig(max_size=10, min_documents=1, stopwords=False)).words[0] == "pump"


@pytest.fixture(scope="module")
def synthetic_tokens():
    corpus = generate(SyntheticConfig(n_tickets=200, n_labeled_queries=30, pairs_per_query=3, n_enduser_queries=5,
                                      n_lay_queries=0), seed=5)
    return tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))


@pytest.fixture(scope="module")
def synthetic_documents(synthetic_tokens):
    texts = component_tokens(synthetic_tokens.tickets, "sub+desc")
    vocabulary = build_vocabulary(texts[40:], TopicVocabularyConfig(max_size=300, min_documents=3))
    encoded = [vocabulary.encode(doc) for doc in texts]
    return vocabulary, encoded[40:], encoded[:40]


def test_perplexity_decreases_with_training_on_the_synthetic_corpus(synthetic_documents):
    vocabulary, training, heldout = synthetic_documents
    cfg = DocNADEConfig(len(vocabulary.words), n_topics=16)
    scores = [perplexity(train(training, cfg, DocNADETrainConfig(epochs=epochs, lr=0.02, validation=0.0), seed=3)[0], heldout)
              for epochs in (1, 5, 30)]
    assert scores[0] > scores[1] > scores[2]
    assert scores[2] < 0.5 * len(vocabulary.words)  # far better than a uniform guess


def test_seeded_runs_are_identical(synthetic_documents):
    vocabulary, training, heldout = synthetic_documents
    cfg, train_cfg = DocNADEConfig(len(vocabulary.words), n_topics=8), DocNADETrainConfig(epochs=2)
    (first, first_history), (second, second_history) = (train(training, cfg, train_cfg, seed=11) for _ in range(2))
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    assert first_history == second_history
    assert np.array_equal(represent(first, heldout), represent(second, heldout))
    third, _ = train(training, cfg, train_cfg, seed=12)
    assert not torch.equal(first.W, third.W)


def exact_lda_log_likelihood(topics: LDATopics, doc: list[int]) -> float:
    """log p(doc) by summing over every topic assignment: Dirichlet-multinomial prior times phi."""
    alpha, total = topics.alpha, 0.0
    for z in itertools.product(range(len(alpha)), repeat=len(doc)):
        counts = np.bincount(z, minlength=len(alpha))
        prior = gammaln(alpha.sum()) - gammaln(alpha.sum() + len(doc)) + np.sum(gammaln(alpha + counts) - gammaln(alpha))
        total += math.exp(prior + sum(math.log(topics.topic_word[t, w]) for t, w in zip(z, doc)))
    return math.log(total)


def test_lda_left_to_right_estimate_matches_the_exact_likelihood_and_sits_below_the_bound():
    topics = LDATopics(np.array([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]), np.array([0.5, 0.3]))
    documents = [[0, 2, 1, 0, 2], [1], [2, 2, 0]]
    exact = -np.array([exact_lda_log_likelihood(topics, doc) for doc in documents])
    estimate = left_to_right_nll(topics, documents, particles=4000, seed=0)
    assert estimate == pytest.approx(exact, rel=0.01)
    assert np.all(variational_nll(topics, documents) >= exact - 1e-9)
    lengths = np.array([len(d) for d in documents])
    assert document_perplexity(estimate, lengths) == pytest.approx(math.exp(np.mean(exact / lengths)), rel=0.01)


def test_lda_perplexity_on_the_synthetic_corpus_is_finite_and_uses_the_same_definition(synthetic_documents):
    vocabulary, training, heldout = synthetic_documents
    topics = train_lda(training, len(vocabulary.words), 8, LDAConfig(passes=3, iterations=20), seed=1)
    assert topics.topic_word.shape == (8, len(vocabulary.words)) and np.allclose(topics.topic_word.sum(1), 1)
    lengths = np.array([len(d) for d in heldout])
    estimate, bound = left_to_right_nll(topics, heldout, particles=5, seed=2), variational_nll(topics, heldout)
    assert 1 < document_perplexity(estimate, lengths) < len(vocabulary.words)
    assert document_perplexity(estimate, lengths) <= document_perplexity(bound, lengths) * 1.05


def test_topic_models_fit_side_by_side_from_side_by_side_tickets_and_in_this_process_below(monkeypatch):
    seen = []

    def spy(work, shared, jobs, workers, threads):
        seen.append(workers)
        raise StopIteration

    monkeypatch.setattr(channel_t, "side_by_side", spy)
    for height in (1, channel_t.SIDE_BY_SIDE_TICKETS - 1, channel_t.SIDE_BY_SIDE_TICKETS):
        with pytest.raises(StopIteration):
            fit_topic_models(SimpleNamespace(tickets=SimpleNamespace(height=height)), TINY, seed=2)
    assert seen == [1, 1, TINY.workers] and TINY.workers == 2


def test_topic_models_give_a_t_cache_that_round_trips(synthetic_tokens, tmp_path, monkeypatch):
    monkeypatch.setattr(channel_t, "SIDE_BY_SIDE_TICKETS", 0)
    models = fit_topic_models(synthetic_tokens, TINY, seed=2)      # M1 and M2 on two worker processes
    alone = fit_topic_models(synthetic_tokens, replace(TINY, workers=1), seed=2)
    assert all(np.array_equal(alone[m].docnade.W.detach(), models[m].docnade.W.detach()) and
               np.array_equal(alone[m].lda.topic_word, models[m].lda.topic_word) for m in models)   # the same, side by side
    assert alone["m2"].perplexity == models["m2"].perplexity      # measured in each worker, as in one process
    assert all(np.isfinite(models["m1"].perplexity[kind][c]) for kind in ("docnade", "lda", "lda_bound") for c in TICKET_COMPONENTS)
    assert heldout_perplexity(synthetic_tokens, models["m1"], TINY, seed=2) == models["m1"].perplexity
    vectors = topic_vectors(synthetic_tokens, models)
    assert set(vectors.queries) == set(QUERY_COMPONENTS) and set(vectors.tickets) == set(TICKET_COMPONENTS)
    assert vectors.dim == TINY.n_topics and vectors.tickets["sol"].shape == (synthetic_tokens.tickets.height, TINY.n_topics)
    vectors.save(tmp_path / "T.npz")
    loaded = ChannelVectors.load(tmp_path / "T.npz")
    assert loaded.channel == "T" and loaded.query_ids == vectors.query_ids
    assert all(np.array_equal(loaded.tickets[c], vectors.tickets[c]) for c in TICKET_COMPONENTS)
    for model in models.values():  # checkpoints of plain data give the same vectors back
        model.save(tmp_path / "models")
    reloaded = topic_vectors(synthetic_tokens, load_topic_models(tmp_path / "models"))
    assert all(np.array_equal(reloaded.queries[c], vectors.queries[c]) for c in QUERY_COMPONENTS)
    paper = topic_vectors(synthetic_tokens, models, space="paper")  # M1 for SUB, DESC, SUB+DESC; M2 for SOL, SUB+DESC+SOL
    assert np.array_equal(paper.tickets["sol"], vectors.tickets["sol"]) and not np.array_equal(paper.tickets["sub"], vectors.tickets["sub"])
    assert [model_of(c, "m1") for c in TICKET_COMPONENTS] == ["m1"] * 5

