"""`ticketsim tune`: the tune stage's work on the files `dvc repro` leaves, where the workspace keeps them (config.workspace)."""
from __future__ import annotations

import json

from ticketsim.config import Workspace, load_params
from ticketsim.errors import OK
from ticketsim.model.saved import WEIGHTS
from ticketsim.tuning.tuner import run, tuning_inputs, untuned_line


def tune_command(params: str, dataset: str, workers: int | None, out: str | None, metrics: str | None,
                 plots: str | None) -> int:
    """The channel vectors there are, and for a dev objective the siamese stage's model of siamese.final when it has run
    (else the study trains one; cv_map trains its fold models); the tune stage's outputs unless `out`, `metrics`,
    `plots` say otherwise."""
    loaded = load_params(params).for_dataset(dataset)
    files = Workspace(dataset)
    base, out = files.siamese / loaded.siamese.final, out or str(files.tuned)
    result = run(loaded, dataset,
                 lambda: tuning_inputs(loaded, str(files.corpus), str(files.tokens), str(files.channels)),
                 out, metrics or str(files.folder("metrics") / "tune.json"), plots or str(files.folder("plots") / "tune"),
                 workers, base if (base / WEIGHTS).is_file() else None)
    if line := untuned_line(loaded, dataset, out):
        print(line)
    print(json.dumps(result, indent=2))
    return OK
