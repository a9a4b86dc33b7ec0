"""Channel T's baseline: LDA (gensim) on DocNADE's vocabulary and split, and its held-out perplexity by DocNADE's definition.

Perplexity is exp(mean over documents of NLL_d / |d|) for both models (ticketsim.channels.docnade.document_perplexity).
DocNADE's NLL_d is exact; LDA's p(v_d) = integral of Dir(theta | alpha) prod_i sum_t theta_t phi_t,v_i has no closed form
and is estimated by the left-to-right algorithm (Wallach, Murray, Salakhutdinov & Mimno 2009, Algorithm 3). It factorises
p(v_d) = prod_i p(v_i | v_<i) exactly as DocNADE does and estimates each conditional with particles that Gibbs-resample
the topics of the words before i, so both models are scored on the same quantity: the probability of the document's
words in the same order (LDA's is the same for every order). Here the particles are also resampled in proportion to
how well they predicted each word (a particle filter), which makes the product of the per-word averages an unbiased
estimate of p(v_d); by Jensen its log errs low on average, so LDA's perplexity is, if anything, overstated: on the
default data 100 particles with 10 moves read about 3% above 1,000 particles. The tests check the estimate against an
exact sum over all topic assignments.

`variational_nll` is the per-document evidence lower bound (the q(theta) = Dir(gamma) of LDA's variational inference),
which bounds LDA's NLL from above; it is reported beside the left-to-right figure as a cross-check: the estimate should
lie below the bound. phi is the posterior mean of the topics and alpha the prior gensim learned.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln, logsumexp, psi

from ticketsim.channels.docnade import Documents
from ticketsim.config import LDAConfig


@dataclass(frozen=True, eq=False)
class LDATopics:
    topic_word: np.ndarray  # (K, V) phi: each row a distribution over the vocabulary
    alpha: np.ndarray       # (K,) Dirichlet prior of a document's topic proportions

    def __post_init__(self) -> None:
        assert self.topic_word.ndim == 2 and self.alpha.shape == (self.topic_word.shape[0],), \
            f"phi {self.topic_word.shape}, alpha {self.alpha.shape}"


def train_lda(documents: Documents, vocab_size: int, n_topics: int, cfg: LDAConfig, seed: int) -> LDATopics:
    corpus = [sorted(Counter(doc).items()) for doc in documents if doc]
    from gensim.models import LdaModel  # gensim only to train: a search loads topics without it

    model = LdaModel(corpus, num_topics=n_topics, id2word={i: str(i) for i in range(vocab_size)}, passes=cfg.passes,
                     iterations=cfg.iterations, alpha=cfg.alpha, random_state=seed, eval_every=None)
    return LDATopics(model.get_topics().astype(np.float64), np.asarray(model.alpha, dtype=np.float64))


def left_to_right_nll(topics: LDATopics, documents: Documents, particles: int, seed: int, moves: int | None = None) -> np.ndarray:
    """-log p(v_d) per document, estimated left to right; every document and particle advances in one array step.

    Before each word, `moves` randomly chosen earlier words (all of them when None, as in Wallach's algorithm) have
    their topics Gibbs-resampled. The resampling step keeps the estimate unbiased with any number of moves: moves only
    lower its variance, while their cost grows with the document length squared when all earlier words move.
    Documents are sorted longest first, so at position n the documents still running are a prefix of the arrays.
    """
    rng = np.random.default_rng(seed)
    order = sorted(range(len(documents)), key=lambda d: -len(documents[d]))
    lengths = np.array([len(documents[d]) for d in order])
    longest, (n_topics, _) = int(lengths.max(initial=0)), topics.topic_word.shape
    word_topic = np.zeros((len(order), longest, n_topics))  # phi[:, v_n] of each position
    for row, d in enumerate(order):
        word_topic[row, : lengths[row]] = topics.topic_word[:, documents[d]].T
    z = np.zeros((len(order), particles, longest), dtype=np.int64)
    counts = np.zeros((len(order), particles, n_topics))
    nll = np.zeros(len(order))
    for n in range(longest):
        running = int((lengths > n).sum())
        doc, particle = np.indices((running, particles))
        seen = counts[:running]  # a view: updates land in counts
        earlier = range(n) if moves is None or n <= moves else np.sort(rng.choice(n, size=moves, replace=False))
        for m in earlier:  # Gibbs-resample the topic of earlier words given all the others
            seen[doc, particle, z[:running, :, m]] -= 1
            z[:running, :, m] = sample(word_topic[:running, m, None, :] * (seen + topics.alpha), rng)
            seen[doc, particle, z[:running, :, m]] += 1
        weights = word_topic[:running, n, None, :] * (seen + topics.alpha)  # (running, particles, K)
        predictive = weights.sum(-1) / (n + topics.alpha.sum())  # p(v_n | z_<n) of each particle
        nll[:running] -= np.log(predictive.mean(-1))
        # resample the particles in proportion to how well they predicted v_n: without this step (Wallach's original)
        # the particles drift from p(z_<n | v_<n) and the estimate of p(v_d) errs high (the test against exact sums shows it)
        survivors = resample(predictive, rng)
        z[:running] = np.take_along_axis(z[:running], survivors[..., None], axis=1)
        seen[:] = np.take_along_axis(seen, survivors[..., None], axis=1)
        weights = np.take_along_axis(weights, survivors[..., None], axis=1)
        z[:running, :, n] = sample(weights, rng)
        seen[doc, particle, z[:running, :, n]] += 1
    result = np.zeros(len(documents))
    result[order] = nll
    return result


def sample(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One category per row of unnormalised weights (..., K)."""
    cumulative = np.cumsum(weights, axis=-1)
    draws = rng.random(weights.shape[:-1] + (1,)) * cumulative[..., -1:]
    return np.minimum((cumulative < draws).sum(-1), weights.shape[-1] - 1)


def resample(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Particle indices (rows, particles) drawn in proportion to each row of weights, every row in one search."""
    rows, particles = weights.shape
    offset = np.arange(rows)[:, None]
    cumulative = np.cumsum(weights, axis=1)
    cumulative = cumulative / cumulative[:, -1:] + offset  # row r's distribution function lives in (r, r + 1]
    found = np.searchsorted(cumulative.ravel(), (rng.random((rows, particles)) + offset).ravel(), side="right")
    return np.minimum(found.reshape(rows, particles) - offset * particles, particles - 1)


def variational_nll(topics: LDATopics, documents: Documents, iterations: int = 200) -> np.ndarray:
    """-ELBO per document, an upper bound on -log p(v_d): the fixed point of q(theta) = Dir(gamma), with z summed out."""
    alpha, log_phi = topics.alpha, np.log(topics.topic_word)
    bounds = np.zeros(len(documents))
    for i, doc in enumerate(documents):
        words, counts = np.unique(np.asarray(doc, dtype=np.int64), return_counts=True)
        gamma = alpha + len(doc) / len(alpha)
        for _ in range(iterations):
            expected_log_theta = psi(gamma) - psi(gamma.sum())
            responsibility = np.exp(expected_log_theta[:, None] + log_phi[:, words])  # (K, words)
            gamma = alpha + (responsibility / responsibility.sum(0)) @ counts
        expected_log_theta = psi(gamma) - psi(gamma.sum())
        elbo = counts @ logsumexp(expected_log_theta[:, None] + log_phi[:, words], axis=0)
        elbo += (alpha - gamma) @ expected_log_theta + gammaln(gamma).sum() - gammaln(alpha).sum()
        elbo += gammaln(alpha.sum()) - gammaln(gamma.sum())
        bounds[i] = -elbo
    return bounds
