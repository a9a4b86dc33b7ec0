"""A trained model's folder: building a Siamese model for a variant, and saving and loading it (its weights, F's
fine-tuned encoder, Fq's query tower). The one module that names the folder's files (the calibrator's beside them: evaluate.calibrate);
stages, tuner, bundle and index read them here."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ticketsim.config import (
    EncoderConfig,
    SiameseParams,
    VariantConfig,
)
from ticketsim.model.branches import BRANCHES, STARTED, BranchStart
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.scoring.weights import metric_of


def build_branches(variant: VariantConfig, start: BranchStart | None, own: bool = False) -> dict[str, torch.nn.Module]:
    """The variant's started branches (model/branches.py), built from `start`. A pretrained branch trains its own copy
    of start's encoder, which several models start from, unless the encoder is its `own` already (a saved model's)."""
    started = sorted(variant.weighed & STARTED)
    if started and start is None:
        raise ValueError(f"channels {started} start from channel S: build_model needs a BranchStart")
    return {c: BRANCHES[c].build(start, own) for c in started}


def build_model(cfg: SiameseParams, word_table: np.ndarray, char_dim: int, variant: VariantConfig | None = None,
                start: BranchStart | None = None) -> SiameseLSTM:
    """word_table: (n_words, word_dim + char_dim) rows for Inputs.words, the char-BLSTM part last; a variant with
    learn: true gives the model its W and V to learn; one that weighs F or A gets those branches, from `start`."""
    table = torch.cat([torch.zeros(1, word_table.shape[1]), torch.from_numpy(np.asarray(word_table, dtype=np.float32))])
    model_cfg = SiameseConfig(vocab_size=table.shape[0], word_dim=table.shape[1] - char_dim, char_dim=char_dim,
                              hidden=cfg.hidden, dropout=cfg.dropout, finetune=cfg.trainable,
                              pooling=cfg.pooling)
    learn = metric_of(variant) if variant is not None and variant.learn else None
    return SiameseLSTM(model_cfg, table, learn, build_branches(variant, start) if variant is not None else None)


# A trained model: weights (the transformers apart), F's (or Fq's query tower's) encoder folder
WEIGHTS, ENCODER = "weights.pt", "encoder"


def save_model(model: SiameseLSTM, variant: VariantConfig, folder: Path) -> None:
    """The trained model of `variant` in `folder`: WEIGHTS (its config, variant and state, the transformers apart) and,
    when it has channel F (or Fq), the fine-tuned encoder (its query tower) as an ordinary sentence-transformers folder
    (ENCODER)."""
    pretrained = [c for c in model.branches if BRANCHES[c].pretrained]
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(tuple(f"branches.{c}." for c in pretrained))}
    torch.save({"model_config": asdict(model.cfg), "variant": asdict(variant), "state_dict": state}, folder / WEIGHTS)
    for c in pretrained:
        model.branches[c].save(folder / ENCODER)


def load_model(folder: Path, variant: VariantConfig, encoder: EncoderConfig, scales: dict[str, float]) -> SiameseLSTM:
    """A model save_model wrote, for `variant` (the one it was trained as), in eval mode. F takes channel S's scale and
    runs on encoder.device (named: EncoderConfig.on)."""
    saved = torch.load(folder / WEIGHTS, weights_only=True)
    if saved["variant"] != asdict(variant):
        raise ValueError(f"{folder / WEIGHTS}: trained as {saved['variant']}, not as {asdict(variant)}")
    started = variant.weighed & STARTED
    pretrained = tuple(f"branches.{c}." for c in started if BRANCHES[c].pretrained)
    start = None
    if started:
        fine_tuned = None
        if pretrained:
            from ticketsim.channels.sentence import load_encoder  # sentence-transformers only when F is weighed

            fine_tuned = load_encoder(str(folder / ENCODER), device="cpu").model     # TransformerBranch moves it
        # S's width, as the saved started branches have it (A's map is dim x dim)
        dim = next((v.shape[-1] for k, v in saved["state_dict"].items() if k.startswith("branches.")), 0)
        start = BranchStart(fine_tuned, encoder, scales["S"], dim)
    model = SiameseLSTM(SiameseConfig(**saved["model_config"]), learn=metric_of(variant) if variant.learn else None,
                        branches=build_branches(variant, start, own=True))
    missing, unexpected = model.load_state_dict(saved["state_dict"], strict=False)
    if unexpected or any(not key.startswith(pretrained) for key in missing):
        raise ValueError(f"{folder / WEIGHTS}: its state does not fit the variant (missing {missing[:3]}, unexpected {unexpected[:3]})")
    return model.eval()


# Beside the weights: the cached channels' scales and the embedding rows the model was trained on (the bundle needs
# both), and, for the final model trained from the tuner's weights, the variant it was trained as.
SCALES, WORDS, VARIANT = "scales.json", "words.json", "variant.json"
# Each training phase's resumable checkpoint (ticketsim.training.trainer.fit) in a model's folder.
CHECKPOINTS = {"selfsup": "selfsup.pt", "labels": "checkpoint.pt", "fuse": "fuse.pt"}


def write_inputs(folder: Path, scales: dict[str, float], words: tuple[str, ...]) -> None:
    (folder / SCALES).write_text(json.dumps(scales, indent=2) + "\n")
    (folder / WORDS).write_text(json.dumps(words) + "\n")


def read_inputs(folder: Path) -> tuple[dict[str, float], tuple[str, ...]]:
    """The scales and words write_inputs wrote."""
    return json.loads((folder / SCALES).read_text()), tuple(json.loads((folder / WORDS).read_text()))


def write_variant(folder: Path, variant: VariantConfig) -> None:
    (folder / VARIANT).write_text(json.dumps(asdict(variant), indent=2) + "\n")


def read_variant(folder: Path) -> VariantConfig | None:
    """The variant write_variant wrote, None when the folder has none."""
    from ticketsim.config import build

    path = folder / VARIANT
    return build(VariantConfig, json.loads(path.read_text()), str(path)) if path.is_file() else None
