"""`ticketsim tune`: the tune stage's work on the files `dvc repro` leaves, with its paths as dvc.yaml names them."""
from __future__ import annotations

import json
from pathlib import Path

from ticketsim.config import load_params, stage_paths
from ticketsim.errors import OK
from ticketsim.model.saved import WEIGHTS
from ticketsim.tuning.tuner import run, tuning_inputs, untuned_line


def tune_command(params: str, dataset: str, workers: int | None, out: str | None, metrics: str | None,
                 plots: str | None) -> int:
    """The channel vectors there are, and for a dev objective the siamese stage's model of siamese.final when it has run
    (else the study trains one; cv_map trains its fold models); the tune stage's outputs unless `out`, `metrics`,
    `plots` say otherwise."""
    loaded = load_params(params).for_dataset(dataset)
    files, base = stage_paths("tune", dataset), Path(stage_paths("siamese", dataset)["out"]) / loaded.siamese.final
    result = run(loaded, dataset,
                 lambda: tuning_inputs(loaded, files["corpus"], files["tokens"], files["channels"]),
                 out or files["out"], metrics or files["metrics"], plots or files["plots"], workers,
                 base if (base / WEIGHTS).is_file() else None)
    if line := untuned_line(loaded, dataset, out or files["out"]):
        print(line)
    print(json.dumps(result, indent=2))
    return OK
