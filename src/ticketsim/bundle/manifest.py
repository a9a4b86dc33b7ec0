"""A bundle folder's manifest and the files a search reads without the model (ticketsim.bundle.loader owns the rest): light, so
that a search whose bundle has a query export (ticketsim.search.queries) imports no torch."""
from __future__ import annotations

import json
from pathlib import Path

from ticketsim.errors import StepError

MANIFEST = "manifest.json"


def bundle_manifest(directory: Path) -> dict:
    if not (directory / MANIFEST).is_file():
        raise StepError(f"{directory}: not a model bundle (no {MANIFEST}); the register stage writes one to "
                        "models/<dataset>/bundle (`dvc repro register@<dataset>`)")
    return json.loads((directory / MANIFEST).read_text())
