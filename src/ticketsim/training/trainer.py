"""One trainer for every pair-scoring model: a loss (MSE to rescaled labels by default), Adadelta, clipping, early stopping,
resumable checkpoints."""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn as nn
from tqdm import tqdm

from ticketsim.config import TrainConfig
from ticketsim.model.losses import Loss, mse


@dataclass
class History:
    train_loss: list[float] = field(default_factory=list)
    dev_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1

    @property
    def best_dev_loss(self) -> float:
        return self.dev_loss[self.best_epoch] if self.best_epoch >= 0 else float("inf")


def rescale(labels: torch.Tensor) -> torch.Tensor:
    """Labels 1..5 -> targets 0..1 for a score g in (0, 1]."""
    return (labels.float() - 1) / 4


def fit(model: nn.Module, predict: Callable[[torch.Tensor], torch.Tensor], targets: torch.Tensor,
        train_rows: torch.Tensor, dev_rows: torch.Tensor, cfg: TrainConfig, seed: int, checkpoint: Path | None = None,
        meta: dict | None = None, on_epoch: Callable[[int, float, float], None] | None = None, loss: Loss = mse,
        groups: torch.Tensor | None = None) -> History:
    """Train `model` so that predict(rows) approaches targets[rows]; leaves the best-dev-loss weights loaded.

    With a checkpoint path, every epoch is saved there and a later call resumes from it: weights, optimizer,
    RNG state and history come back, so an interrupted run ends where an uninterrupted one would.
    `meta` (plain data: model and train config, a data fingerprint) is stored beside the weights; a checkpoint
    whose meta differs belongs to another run and is started over, never resumed.
    `loss` is one of ticketsim.model.losses; `groups` (the query index of every pair, indexed like targets) makes each
    batch hold whole queries, in a new order every epoch, as a per-query ranking loss needs.
    """
    torch.manual_seed(seed)
    optimizer = make_optimizer(model, cfg)
    history, best_state, start = History(), copy.deepcopy(model.state_dict()), 0
    saved = torch.load(checkpoint, weights_only=True) if checkpoint is not None and checkpoint.exists() else None
    if saved is not None and all(saved.get(key) == value for key, value in (meta or {}).items()):
        model.load_state_dict(saved["state_dict"])
        optimizer.load_state_dict(saved["optimizer"])
        history, best_state, start = History(**saved["history"]), saved["best_state_dict"], saved["epoch"] + 1
        torch.set_rng_state(saved["rng"])
    for epoch in (bar := tqdm(range(start, cfg.epochs), desc="train", unit="epoch", initial=start, total=cfg.epochs)):
        if history.best_epoch >= 0 and epoch - history.best_epoch > cfg.patience:
            break
        model.train()
        total = 0.0
        for batch in batches(train_rows, cfg.batch_size, torch.Generator().manual_seed(seed + epoch), groups):
            value = loss(predict(batch), targets[batch], None if groups is None else groups[batch])
            optimizer.zero_grad()
            value.backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            optimizer.step()
            total += value.item() * len(batch)
        history.train_loss.append(total / len(train_rows))
        history.dev_loss.append(evaluate_loss(model, predict, targets, dev_rows, cfg.batch_size, loss, groups))
        if history.dev_loss[-1] < history.best_dev_loss:
            history.best_epoch, best_state = epoch, copy.deepcopy(model.state_dict())
        bar.set_postfix(train=f"{history.train_loss[-1]:.4f}", dev=f"{history.dev_loss[-1]:.4f}")
        if on_epoch:
            on_epoch(epoch, history.train_loss[-1], history.dev_loss[-1])
        if checkpoint is not None:
            torch.save({**(meta or {}), "epoch": epoch, "state_dict": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "best_state_dict": best_state, "history": asdict(history), "rng": torch.get_rng_state()}, checkpoint)
    model.load_state_dict(best_state)
    return history


def seed_folder(folder: Path, seed: int, seeds: Sequence[int]) -> Path:
    """Where the model trained with `seed` of `seeds` keeps its files: `folder` for the first seed (its checkpoints
    resume where a run of that seed alone left them), folder/seed-<seed> for each other one."""
    return folder if seed == seeds[0] else folder / f"seed-{seed}"


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adadelta (the paper's) or AdamW, whose small steps suit a pretrained transformer."""
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(parameter_groups(model, cfg), lr=cfg.lr)
    return torch.optim.Adadelta(parameter_groups(model, cfg), lr=cfg.lr, rho=cfg.rho)


def parameter_groups(model: nn.Module, cfg: TrainConfig) -> list[dict]:
    """The trainable parameters; learned metric weights (named weights.*) step at lr * weights_lr.

    Adadelta's first steps are about lr * 1e-3: enough for an LSTM's thousands of weights, far too slow for the few
    weights that mix whole channels, which otherwise end a 30-epoch run next to where they started.
    """
    named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for name, p in named if not name.startswith("weights.")]},
              {"params": [p for name, p in named if name.startswith("weights.")], "lr": cfg.lr * cfg.weights_lr}]
    return [g for g in groups if g["params"]]


@torch.no_grad()
def evaluate_loss(model: nn.Module, predict: Callable[[torch.Tensor], torch.Tensor], targets: torch.Tensor,
                  rows: torch.Tensor, batch_size: int, loss: Loss = mse, groups: torch.Tensor | None = None) -> float:
    was_training = model.training
    model.eval()
    total = sum(loss(predict(b), targets[b], None if groups is None else groups[b], reduction="sum").item()
                for b in batches(rows, batch_size, groups=groups))
    model.train(was_training)
    return total / max(1, len(rows))


def batches(rows: torch.Tensor, batch_size: int, generator: torch.Generator | None = None,
            groups: torch.Tensor | None = None) -> list[torch.Tensor]:
    """rows in batches of batch_size, shuffled by `generator` (None keeps the order).

    With groups (query index per pair, indexed by row), a batch holds whole queries: the queries come in shuffled
    order and fill a batch while it stays within batch_size rows (a larger query is a batch of its own).
    """
    if groups is None or len(rows) == 0:
        order = rows if generator is None else rows[torch.randperm(len(rows), generator=generator)]
        return list(order.split(batch_size))
    _, inverse = torch.unique(groups[rows], return_inverse=True)
    queries = rows[torch.argsort(inverse, stable=True)].split(torch.bincount(inverse).tolist())
    if generator is not None:
        queries = [queries[i] for i in torch.randperm(len(queries), generator=generator)]
    out, current = [], []
    for query in queries:
        if current and sum(map(len, current)) + len(query) > batch_size:
            out.append(torch.cat(current))
            current = []
        current.append(query)
    return out + ([torch.cat(current)] if current else [])
