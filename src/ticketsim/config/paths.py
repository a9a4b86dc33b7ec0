"""The paths dvc.yaml hands each stage, read from its command lines (dvc.yaml read once per process), so that a
command running a stage's work outside DVC reads the pipeline's files where the stages write them."""
from __future__ import annotations

import shlex
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from ticketsim.config.coerce import ConfigError


def stage_paths(stage: str, dataset: str, root: str | Path = ".") -> dict[str, Any]:
    """The paths dvc.yaml hands `stage` for `dataset`: its command's --options (${key} resolved), one path or a list,
    relative to `root`."""
    path = Path(root) / "dvc.yaml"
    stages = pipeline_stages(path.resolve())
    if stage not in stages:
        raise ConfigError(f"{path}: no stage {stage!r}")
    words = shlex.split(stages[stage]["do"]["cmd"].replace("${key}", dataset))
    paths: dict[str, Any] = {}
    for word in words[words.index(dataset) + 1:]:
        if word.startswith("--"):
            key = word[2:].replace("-", "_")
            paths[key] = []
        else:
            paths[key].append(str(Path(root) / word))
    return {key: values[0] if len(values) == 1 else values for key, values in paths.items()}


@cache
def pipeline_stages(path: Path) -> dict[str, Any]:
    """dvc.yaml's stages, parsed once per process."""
    if not path.is_file():
        raise ConfigError(f"{path}: not found; run in the pipeline's folder (where dvc.yaml is) or point at it")
    return yaml.safe_load(path.read_text(encoding="utf-8"))["stages"]
