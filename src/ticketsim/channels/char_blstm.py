"""Channel E's character BiLSTM: a vector for any word from its spelling, trained to predict word2vec vectors.

Words never seen in training (technical codes, misspellings) get a vector from their characters, close to the
vectors of words spelt alike. The training signal is word2vec itself: a linear head on the 2 x 25-d final states
predicts each in-vocabulary word's word2vec vector (cosine loss); the head is discarded after training.
"""
from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence
from tqdm import tqdm

from ticketsim.config import CharBLSTMConfig

PAD, UNKNOWN = 0, 1  # character ids: padding, and any character not in the training alphabet


@dataclass(frozen=True)
class CharBLSTMSpec:
    """The model's shape; a checkpoint stores it beside the weights."""

    n_chars: int            # alphabet size + PAD + UNKNOWN
    char_dim: int = 32
    hidden: int = 25        # per direction


class CharBLSTM(nn.Module):
    """Characters -> BiLSTM -> [last forward state, last backward state]: (batch, 2 * hidden)."""

    def __init__(self, spec: CharBLSTMSpec) -> None:
        super().__init__()
        self.spec = spec
        self.embed = nn.Embedding(spec.n_chars, spec.char_dim, padding_idx=PAD)
        self.lstm = nn.LSTM(spec.char_dim, spec.hidden, batch_first=True, bidirectional=True)

    def forward(self, chars: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        assert chars.ndim == 2 and lengths.shape == chars.shape[:1], (chars.shape, lengths.shape)
        # Packing makes the backward direction start at each word's last character, not at its padding.
        packed = pack_padded_sequence(self.embed(chars), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (final, _) = self.lstm(packed)  # final: (2, batch, hidden), forward then backward direction
        return torch.cat([final[0], final[1]], dim=-1)


@dataclass(frozen=True)
class CharEncoder:
    """A trained model with the alphabet and word length it reads: everything encode() needs."""

    model: CharBLSTM
    alphabet: tuple[str, ...]
    max_chars: int

    @property
    def dim(self) -> int:
        return 2 * self.model.spec.hidden

    def char_ids(self, words: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, longest) padded character ids and the lengths; an empty word reads as one unknown character."""
        index = {char: i + 2 for i, char in enumerate(self.alphabet)}
        rows = [[index.get(char, UNKNOWN) for char in word[: self.max_chars]] or [UNKNOWN] for word in words]
        chars = torch.full((len(rows), max(map(len, rows))), PAD, dtype=torch.long)
        for i, row in enumerate(rows):
            chars[i, : len(row)] = torch.tensor(row)
        return chars, torch.tensor([len(row) for row in rows])


@torch.no_grad()
def encode(encoder: CharEncoder, words: Sequence[str], batch_size: int = 1024) -> np.ndarray:
    """(len(words), 2 * hidden) float32 char vectors."""
    was_training = encoder.model.training
    encoder.model.eval()
    with reproducible():
        parts = [encoder.model(*encoder.char_ids(words[start: start + batch_size])) for start in range(0, len(words), batch_size)]
    encoder.model.train(was_training)
    return torch.cat(parts).numpy() if parts else np.zeros((0, encoder.dim), dtype=np.float32)


@dataclass(frozen=True)
class TrainReport:
    words: int                      # training words (the held-out ones excluded)
    heldout_words: int
    # Mean cosine of the head's prediction and the word2vec vector minus the mean training vector. The head learns these
    # centred targets because word2vec vectors share a large common direction that says nothing about the word (on the
    # synthetic corpus the mean vector alone has cosine .7 with the raw vectors); centred, a constant guess scores 0.
    train_cosine: float
    heldout_cosine: float
    epoch_loss: tuple[float, ...]
    seconds: float


@contextmanager
def reproducible() -> Iterator[None]:
    """Deterministic kernels on one thread while inside, then the caller's settings back.

    One thread because this model's matrices are tiny: with two, thread hand-offs cost more than they save (a training
    step measured 10x slower on a busy 2-core machine), and the result no longer depends on the machine's core count.
    """
    # The debug mode is the same switch as use_deterministic_algorithms without its import of torch._inductor (2 s of a
    # stage that reads word vectors and trains nothing, for a flag only torch.compile reads).
    mode, threads = torch.get_deterministic_debug_mode(), torch.get_num_threads()
    torch.set_deterministic_debug_mode("error")
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_deterministic_debug_mode(mode)
        torch.set_num_threads(threads)


def train_char_blstm(words: Sequence[str], targets: np.ndarray, cfg: CharBLSTMConfig, seed: int,
                     progress: bool = True) -> tuple[CharEncoder, TrainReport]:
    """Learn spelling -> word2vec vector on `words` (most frequent first; only the first cfg.max_words are used).

    A seeded random cfg.heldout fraction is kept out of training; their cosine says how well unseen words are placed.
    """
    assert len(words) == targets.shape[0], (len(words), targets.shape)
    started = time.perf_counter()
    words, targets = list(words[: cfg.max_words]), torch.from_numpy(np.asarray(targets[: cfg.max_words], dtype=np.float32))
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(words), generator=generator)
    n_heldout = int(round(cfg.heldout * len(words)))
    heldout, train = order[:n_heldout], order[n_heldout:]
    # The alphabet comes from the training words only, so held-out words meet unknown characters as new words would.
    alphabet = tuple(sorted({char for i in train.tolist() for char in words[i][: cfg.max_chars]}))
    mean = targets[train].mean(0, keepdim=True)
    centred = targets - mean
    torch.manual_seed(seed)
    encoder = CharEncoder(CharBLSTM(CharBLSTMSpec(len(alphabet) + 2, cfg.char_dim, cfg.hidden)), alphabet, cfg.max_chars)
    head = nn.Linear(encoder.dim, targets.shape[1])
    optimizer = torch.optim.Adam([*encoder.model.parameters(), *head.parameters()], lr=cfg.lr)
    epoch_loss = []
    with reproducible():
        encoder.model.train()
        for _ in (bar := tqdm(range(cfg.epochs), desc=f"char-BLSTM on {len(train)} words", unit="epoch", disable=not progress)):
            total = 0.0
            for batch in train[torch.randperm(len(train), generator=generator)].split(cfg.batch_size):
                predicted = head(encoder.model(*encoder.char_ids([words[i] for i in batch.tolist()])))
                loss = (1 - F.cosine_similarity(predicted, centred[batch], dim=-1)).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch)
            epoch_loss.append(total / max(len(train), 1))
            bar.set_postfix(loss=f"{epoch_loss[-1]:.4f}")

    def cosine(a: torch.Tensor, b: torch.Tensor, subset: torch.Tensor) -> float:
        return F.cosine_similarity(a[subset], b[subset], dim=-1).mean().item()

    with torch.no_grad():
        predicted = head(torch.from_numpy(encode(encoder, words)))
        report = TrainReport(
            words=len(train), heldout_words=len(heldout), train_cosine=cosine(predicted, centred, train),
            heldout_cosine=cosine(predicted, centred, heldout),
            epoch_loss=tuple(epoch_loss), seconds=time.perf_counter() - started)
    return encoder, report


def save_checkpoint(encoder: CharEncoder, path: str | Path) -> None:
    """A dict of plain values and tensors (no pickled modules): torch.load(weights_only=True) reads it back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"spec": asdict(encoder.model.spec), "state_dict": encoder.model.state_dict(),
                "alphabet": list(encoder.alphabet), "max_chars": encoder.max_chars}, path)


def load_checkpoint(path: str | Path) -> CharEncoder:
    checkpoint = torch.load(path, weights_only=True)
    model = CharBLSTM(CharBLSTMSpec(**checkpoint["spec"]))
    model.load_state_dict(checkpoint["state_dict"])
    model.eval()
    return CharEncoder(model, tuple(checkpoint["alphabet"]), checkpoint["max_chars"])
