"""A bundle written: a trained variant's files copied into one folder (the names ticketsim.bundle.loader reads) with the
manifest beside them."""
from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from ticketsim.bundle.loader import FILES, OPTIONAL
from ticketsim.bundle.manifest import BUNDLE_MANIFEST
from ticketsim.channels.registry import fitted_files
from ticketsim.config import BM25Config, Params, SentenceConfig, SiameseParams, TextConfig, VariantConfig
from ticketsim.evaluate.calibrate import CALIBRATOR
from ticketsim.model.saved import WEIGHTS, read_inputs, read_variant


def write_bundle(directory: str | Path, *, text: TextConfig, variant: VariantConfig, siamese: SiameseParams,
                 scales: dict[str, float], words: tuple[str, ...], sources: dict[str, str | Path],
                 channels: Mapping[str, Path], sentence: SentenceConfig = SentenceConfig(), bm25: BM25Config = BM25Config()
                 ) -> Path:
    """Copy a trained variant's files (FILES and OPTIONAL keys -> paths), the channels' files (bundle name -> path:
    ticketsim.channels.registry's fitted_files of a channels folder, or bundled_files of another bundle) and write
    manifest.json beside them.

    Channel S's encoder is named, not copied (a package or folder the served model's machine has too); channel F's
    fine-tuned encoder is the model's own, and is copied."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    own = {name: Path(sources[key]) for key, name in {**FILES, **{k: v for k, v in OPTIONAL.items() if k in sources}}.items()}
    for name, source in {**own, **channels}.items():
        target = directory / name
        shutil.copytree(source, target, dirs_exist_ok=True) if source.is_dir() else shutil.copy2(source, target)
    manifest = {"text": asdict(text), "variant": asdict(variant), "max_tokens": siamese.max_tokens,
                "scales": scales, "words": list(words), "sentence": asdict(sentence), "bm25": asdict(bm25),
                "encoder": asdict(siamese.encoder)}
    (directory / BUNDLE_MANIFEST).write_text(json.dumps(manifest) + "\n")
    return directory


def final_bundle(directory: str | Path, params: Params, model: str | Path, channels: str | Path) -> Path:
    """The bundle of the final variant trained in `model` (the final stage's folder) with the files of every channel of
    the `channels` folder (the channels stage's, data/<dataset>/channels): tune's weights (variant.json) when
    it has them, else siamese.variants[siamese.final]. The register and index stages both write it with this one
    function, so the index's model hash is the registered bundle's."""
    model = Path(model)
    cfg = params.siamese
    variant = read_variant(model) or cfg.variant(cfg.final)   # tune's weights (stage final), else siamese.variants'
    scales, words = read_inputs(model)
    return write_bundle(
        directory, text=params.text, variant=variant, siamese=cfg, scales=scales, words=words,
        sources={"weights": model / WEIGHTS, "calibrator": model / CALIBRATOR,
                 **{k: model / name for k, name in OPTIONAL.items() if (model / name).is_dir()}},
        channels=fitted_files(channels), sentence=params.sentence, bm25=params.bm25)
