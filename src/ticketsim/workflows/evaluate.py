"""`ticketsim evaluate`: a trained bundle on any dataset the importer accepts, its metrics JSON written, optionally its
pairs' scores in the SemEval scorer's format."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ticketsim.bundle.evaluation import evaluate_bundle
from ticketsim.config import DatasetConfig, load_params
from ticketsim.data.sources import load_corpus, read_dataset
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.errors import BAD_INPUT, OK
from ticketsim.evaluate.report import semeval_predictions, write_metrics


def evaluate_command(params: str, model: str, dataset: str | None, semeval: str | None, gold: str | None, csv: str | None,
                     encoding: str | None, delimiter: str | None, out: str, predictions: str | None) -> int:
    """Every measure of the bundle `model` on a dataset of params, a SemEval XML file (`gold`: its .relevancy file) or a
    csv folder."""
    loaded = load_params(params)
    if semeval:
        xml = Path(semeval)
        cfg = DatasetConfig(name=xml.stem, source="semeval2016", raw=str(xml.parent), test=xml.name,
                            test_gold=Path(gold).resolve().as_posix() if gold else None)
    elif csv:
        cfg = DatasetConfig(name="csv", source="csv", raw=csv, encoding=encoding, delimiter=delimiter)
    try:
        corpus = read_dataset(cfg, IntakeReport(), options=True) if semeval or csv else load_corpus(loaded, dataset, IntakeReport())
    except DataError as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    results, scored = evaluate_bundle(model, corpus, loaded.evaluation)
    write_metrics(results, out)
    print(json.dumps(results, indent=2))
    if predictions:
        Path(predictions).write_text(semeval_predictions(scored))
        print(f"wrote {scored.height} predictions to {predictions} (SemEval scorer format)")
    return OK
