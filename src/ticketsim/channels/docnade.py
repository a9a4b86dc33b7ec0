"""Channel T's topic model: DocNADE (Larochelle & Lauly 2012) in PyTorch, its vocabulary, exact NLL, training and T vectors.

p(v) = prod_i p(v_i | v_<i) with h_i = g(c + sum_{k<i} W[:, v_k]) and p(v_i = w | v_<i) = softmax(b + U h_i)_w. The
softmax is the full one, not the paper's binary tree: the tree makes a word O(H log V) instead of O(H V) but its
likelihood depends on the tree; at the capped vocabulary (a few thousand words) the full softmax trains in seconds to
minutes on a CPU and gives the exact NLL that the perplexity table and the tests compare.

Perplexity, for DocNADE and LDA alike (ticketsim.channels.lda): exp(mean over documents d of NLL_d / |d|), the
per-document average of Larochelle & Lauly (2012) and Salakhutdinov & Hinton (2009). |d| counts the in-vocabulary words
of d; a document without any has nothing to predict and is skipped.
"""
from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from ticketsim.config import DocNADETrainConfig, TopicVocabularyConfig
from ticketsim.text.stopwords import is_topical
from ticketsim.threads import torch_threads

Documents = Sequence[Sequence[int]]  # word ids of each document, in text order
ACTIVATIONS = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}


@dataclass(frozen=True)
class Vocabulary:
    """The topic model's words, most frequent first; a word's id is its position."""

    words: tuple[str, ...]

    @cached_property
    def ids(self) -> dict[str, int]:
        return {word: i for i, word in enumerate(self.words)}

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """Word ids in text order; out-of-vocabulary tokens (stopwords, rare words) are skipped."""
        return [self.ids[t] for t in tokens if t in self.ids]


def build_vocabulary(documents: Sequence[Sequence[str]], cfg: TopicVocabularyConfig) -> Vocabulary:
    """The max_size words found in the most documents, each in at least min_documents of them.

    Document frequency, not the token count: a ticket's equipment tag repeats within the ticket but names no topic.
    """
    frequency = Counter(t for doc in documents for t in set(doc) if not cfg.stopwords or is_topical(t))
    kept = sorted((item for item in frequency.items() if item[1] >= cfg.min_documents), key=lambda item: (-item[1], item[0]))
    return Vocabulary(tuple(word for word, _ in kept[: cfg.max_size]))


@dataclass
class DocNADEConfig:
    vocab_size: int
    n_topics: int = 100
    activation: str = "sigmoid"


class DocNADE(nn.Module):
    def __init__(self, cfg: DocNADEConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.W = nn.Parameter(torch.zeros(cfg.n_topics, cfg.vocab_size))  # column W[:, w]: word w's push on each topic
        self.c = nn.Parameter(torch.zeros(cfg.n_topics))
        self.U = nn.Parameter(torch.zeros(cfg.vocab_size, cfg.n_topics))
        self.b = nn.Parameter(torch.zeros(cfg.vocab_size))
        self.g = ACTIVATIONS[cfg.activation]

    def init_weights(self, generator: torch.Generator, word_counts: torch.Tensor) -> None:
        nn.init.normal_(self.W, std=0.01, generator=generator)
        nn.init.normal_(self.U, std=0.01, generator=generator)
        with torch.no_grad():  # the output bias starts at the unigram log-frequencies: the first epochs learn topics, not counts
            self.b.copy_(torch.log((word_counts + 1) / (word_counts + 1).sum()))

    def pushes(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """W[:, v_k] of every position, zero on padding. (B, L) -> (B, L, H)."""
        assert words.shape == mask.shape and words.dim() == 2, f"words {tuple(words.shape)} and mask {tuple(mask.shape)}"
        return self.W.t()[words] * mask.unsqueeze(-1)

    def hidden_states(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """h_i at every position, from the words before i only. (B, L) -> (B, L, H)."""
        pushes = self.pushes(words, mask)
        before = torch.cumsum(F.pad(pushes, (0, 0, 1, 0))[:, :-1], dim=1)  # shifted: position i sums words 0..i-1
        return self.g(self.c + before)

    def forward(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """NLL_d = -sum_i log p(v_i | v_<i), exact, of each document. (B, L) -> (B,)."""
        hidden = self.hidden_states(words, mask)[mask]  # (N, H): only real words pay for the softmax
        token_nll = F.cross_entropy(F.linear(hidden, self.U, self.b), words[mask], reduction="none")
        document = torch.arange(words.shape[0]).unsqueeze(1).expand_as(words)[mask]
        return torch.zeros(words.shape[0]).index_add_(0, document, token_nll)

    def represent(self, words: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """T = h(v) = g(c + sum_k W[:, v_k]): the hidden layer after the whole document. (B, L) -> (B, H)."""
        return self.g(self.c + self.pushes(words, mask).sum(1))


def pad(documents: Documents) -> tuple[torch.Tensor, torch.Tensor]:
    """(words, mask), both (n, longest document); padding has id 0 and mask False."""
    longest = max([1, *map(len, documents)])
    words, mask = torch.zeros(len(documents), longest, dtype=torch.long), torch.zeros(len(documents), longest, dtype=torch.bool)
    for i, doc in enumerate(documents):
        words[i, : len(doc)] = torch.as_tensor(doc, dtype=torch.long)
        mask[i, : len(doc)] = True
    return words, mask


def batches(documents: Documents, size: int, order: Sequence[int] | None = None):
    order = range(len(documents)) if order is None else order
    for start in range(0, len(order), size):
        yield pad([documents[i] for i in order[start : start + size]])


@torch.no_grad()
def document_nll(model: DocNADE, documents: Documents, batch_size: int = 64) -> np.ndarray:
    model.eval()
    nll = torch.cat([model(words, mask) for words, mask in batches(documents, batch_size)]) if documents else torch.zeros(0)
    model.train()
    return nll.double().numpy()


@torch.no_grad()
def represent(model: DocNADE, documents: Documents, batch_size: int = 256) -> np.ndarray:
    """T vectors (n, topics); an empty document gets g(c)."""
    model.eval()
    vectors = [model.represent(words, mask) for words, mask in batches(documents, batch_size)]
    model.train()
    return torch.cat(vectors).numpy() if vectors else np.zeros((0, model.cfg.n_topics), dtype=np.float32)


def document_perplexity(nll: np.ndarray, lengths: np.ndarray) -> float:
    """exp(mean over documents of NLL_d / |d|), documents without words skipped: the one definition for DocNADE and LDA."""
    keep = lengths > 0
    return float(np.exp(np.mean(nll[keep] / lengths[keep]))) if keep.any() else float("nan")


def perplexity(model: DocNADE, documents: Documents) -> float:
    return document_perplexity(document_nll(model, documents), np.array([len(d) for d in documents]))


def train(documents: Documents, cfg: DocNADEConfig, train_cfg: DocNADETrainConfig, seed: int,
          desc: str = "docnade") -> tuple[DocNADE, list[dict]]:
    """Adam on the exact NLL; the first `validation` share of a seeded shuffle decides early stopping and the kept epoch.

    order 'shuffle' presents each document's words in a new random order every epoch: the model then learns which words
    occur together (topics) and not where a template puts them, and its hidden layer after the whole document, T, does
    not depend on word order anyway. Returns the best model and one history record per epoch.
    """
    with torch_threads(train_cfg.threads):
        return train_model(documents, cfg, train_cfg, seed, desc)


def train_model(documents: Documents, cfg: DocNADEConfig, train_cfg: DocNADETrainConfig, seed: int,
                desc: str) -> tuple[DocNADE, list[dict]]:
    documents = [doc for doc in documents if doc]
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(documents), generator=generator).tolist()
    n_validation = round(train_cfg.validation * len(documents))
    validation, fit = [documents[i] for i in order[:n_validation]], [documents[i] for i in order[n_validation:]]
    model = DocNADE(cfg)
    model.init_weights(generator, torch.bincount(torch.as_tensor([w for doc in fit for w in doc]), minlength=cfg.vocab_size).float())
    optimizer = torch.optim.Adam(model.parameters(), lr=train_cfg.lr)
    history, best = [], (math.inf, copy.deepcopy(model.state_dict()), 0)
    progress = tqdm(range(1, train_cfg.epochs + 1), desc=desc, unit="epoch")
    for epoch in progress:
        total_nll, total_words = 0.0, 0
        epoch_docs = fit if train_cfg.order == "text" else [shuffled(doc, generator) for doc in fit]
        for words, mask in batches(epoch_docs, train_cfg.batch_size, torch.randperm(len(fit), generator=generator).tolist()):
            nll = model(words, mask).sum()
            optimizer.zero_grad()
            (nll / mask.sum()).backward()  # per word: a batch of long documents takes no larger step
            optimizer.step()
            total_nll, total_words = total_nll + nll.item(), total_words + int(mask.sum())
        score = perplexity(model, validation) if validation else math.exp(total_nll / total_words)
        history.append({"epoch": epoch, "train_nll_per_word": total_nll / total_words, "validation_perplexity": score})
        progress.set_postfix(nll=f"{total_nll / total_words:.3f}", val_ppl=f"{score:.1f}")
        if score < best[0]:
            best = (score, copy.deepcopy(model.state_dict()), epoch)
        elif epoch - best[2] >= train_cfg.patience:
            break
    model.load_state_dict(best[1])
    return model, history


def shuffled(doc: Sequence[int], generator: torch.Generator) -> list[int]:
    return [doc[i] for i in torch.randperm(len(doc), generator=generator).tolist()]


def save_checkpoint(path: str | Path, model: DocNADE, vocabulary: Vocabulary, history: list[dict]) -> None:
    """Plain data only (config, tensors, words, history), so torch.load(weights_only=True) reads it back."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    torch.save({"config": asdict(model.cfg), "state_dict": model.state_dict(), "vocabulary": list(vocabulary.words),
                "history": history}, path)


def load_checkpoint(path: str | Path) -> tuple[DocNADE, Vocabulary]:
    checkpoint = torch.load(path, weights_only=True)
    model = DocNADE(DocNADEConfig(**checkpoint["config"]))
    model.load_state_dict(checkpoint["state_dict"])
    return model, Vocabulary(tuple(checkpoint["vocabulary"]))


def top_words(topic_word: np.ndarray, vocabulary: Vocabulary, k: int) -> list[list[str]]:
    """The k words with the largest weight in each row of a (topics, V) matrix.

    For DocNADE pass W, the input weights: T = g(c + sum_k W[:, v_k]) is built from W alone, so the largest entries of
    W[j] are the words whose presence turns topic j on, which is what explains a T vector. (U[:, j] says which words
    topic j predicts next, mixed with the other topics' votes through the softmax.) For LDA pass phi.
    """
    assert topic_word.shape[1] == len(vocabulary.words), f"{topic_word.shape} against {len(vocabulary.words)} words"
    return [[vocabulary.words[i] for i in np.argsort(-row, kind="stable")[:k]] for row in topic_word]
