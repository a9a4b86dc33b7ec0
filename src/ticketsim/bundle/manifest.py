"""A bundle folder's manifest (manifest.json: its text, variant, scales, words and encoders), read without the model
(ticketsim.bundle.loader loads the rest): light, so that a search whose bundle has a query export
(ticketsim.search.queries) imports no torch."""
from __future__ import annotations

import json
from pathlib import Path

from ticketsim.errors import StepError

BUNDLE_MANIFEST = "manifest.json"


def bundle_manifest(directory: Path) -> dict:
    if not (directory / BUNDLE_MANIFEST).is_file():
        raise StepError(f"{directory}: not a model bundle (no {BUNDLE_MANIFEST}); the register stage writes one to "
                        "models/<dataset>/bundle (`dvc repro register@<dataset>`)")
    return json.loads((directory / BUNDLE_MANIFEST).read_text())
