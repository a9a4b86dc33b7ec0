"""A stand-in for the Siamese and register stages in the retraining tests, with the seam ticketsim.lifecycle.promotion relies on.

Its model is as good as its training labels are true: it scores a pair by the label a reference file gives it (the
generator's true labels), blurred by noise that grows with the share of the dataset's train labels that disagree with
the reference. So a batch of shuffled labels makes a worse model, which the gate sees when it scores champion and
candidate on the same pairs, as it scores real models (the `evaluate` of ticketsim.app.pyfunc.TicketSimModel). Like the
register stage, it logs the model's results on its own dataset in the run it registers as a new version of
`siamese.registered_name(dataset)`, the first version made the champion. It searches too (a request of subject and
description): the first tickets of its pool by those scores, the query named by its text as the feedback journal names
it, so judgments can be checked against it.
"""
import argparse
import json
import random
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import polars as pl

from ticketsim.app.pyfunc import DEFAULT_K
from ticketsim.config import load_params
from ticketsim.data.intake import text_query_id
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.calibrate import Calibrator
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.lifecycle.promotion import crown_first
from ticketsim.lifecycle.tracking import log_metrics, stage_run

NOISE = 20.0            # the noise's standard deviation when every train label is false
SCALE = Calibrator((1.0, 5.0), (1.0, 5.0))   # scores are on the label scale already: clipped to [1, 5]


class ReferenceModel(mlflow.pyfunc.PythonModel):
    def __init__(self, truth: dict[str, float], false_share: float, tickets: tuple[str, ...] = ()):
        self.truth, self.false_share = truth, false_share    # truth: "query_id ticket_id" -> label
        self.tickets = tickets                               # the pool a search ranks

    def scores(self, pairs: pl.DataFrame) -> np.ndarray:
        keys = [f"{q} {t}" for q, t in zip(pairs["query_id"], pairs["ticket_id"])]
        noise = [random.Random(key).gauss(0.0, 1.0) for key in keys]   # the same for a pair in every process
        return np.array([self.truth.get(key, 0.0) + NOISE * self.false_share * z for key, z in zip(keys, noise)])

    def evaluate(self, corpus, cfg, cached=(), sentence=None) -> dict:
        return evaluate_method(corpus.pairs, self.scores(corpus.pairs), None, cfg, SCALE)

    def predict(self, context, model_input, params=None):
        """A search, answered as TicketSimModel answers one: each query's first k tickets of the pool."""
        k = int((params or {}).get("k", DEFAULT_K))
        hits = []
        for subject, description in zip(model_input["subject"], model_input["description"]):
            pairs = pl.DataFrame({"query_id": text_query_id(subject, description), "ticket_id": self.tickets})
            hits.append([self.tickets[i] for i in np.argsort(-self.scores(pairs), kind="stable")[:k]])
        return pd.DataFrame({"ticket_ids": hits})


def trained(corpus, truth: dict[str, float]) -> ReferenceModel:
    """The stand-in trained on a corpus: blurred as far as its train labels are false; its pool the corpus's tickets."""
    train = corpus.split("train")
    false = [truth.get(f"{q} {t}", 0.0) != label for q, t, label in train.select("query_id", "ticket_id", "label").iter_rows()]
    return ReferenceModel(truth, sum(false) / len(false) if false else 0.0, tuple(corpus.tickets["ticket_id"]))


def register_trained(params, dataset: str, truth: dict[str, float]) -> tuple[str, ReferenceModel, dict]:
    """As the register stage: the stand-in trained on the dataset's raw files, its results logged, registered as a new
    version in a run of its own, the first made the champion (said). (version, model, results)"""
    with stage_run(params.tracking, "register", dataset):
        # Straight from the raw folder, not the prepare stage's output: one stage process per retrain keeps tests fast.
        corpus = read_dataset(params.dataset(dataset), IntakeReport())
        model = trained(corpus, truth)
        results = model.evaluate(corpus, params.evaluation)
        log_metrics(results)
        version = register(params.siamese.registered_name(dataset), model)
        crowned = crown_first(params, dataset, version)
        if crowned:
            print(crowned)
        return version, model, results


class FixedFigures(mlflow.pyfunc.PythonModel):
    """A version whose dev figures are given, the same on any pairs: for the registry's own tests."""

    def __init__(self, figures: dict):
        self.figures = figures

    def evaluate(self, corpus, cfg, cached=(), sentence=None) -> dict:
        return self.figures

    def predict(self, context, model_input, params=None):
        raise NotImplementedError("a fixed-figures version is only evaluated")


def register(model: str, python_model: mlflow.pyfunc.PythonModel) -> str:
    """Log `python_model` in the active run and register it as a new version of `model`; returns the version."""
    info = mlflow.pyfunc.log_model(name="model", python_model=python_model, registered_model_name=model, pip_requirements=[])
    return str(info.registered_model_version)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--reference", required=True, help="CSV: query_id, ticket_id, label (the true labels)")
    parser.add_argument("--metrics", required=True)
    args = parser.parse_args()
    params = load_params()
    truth = pl.read_csv(args.reference, schema_overrides={"query_id": pl.String, "ticket_id": pl.String})
    version, model, results = register_trained(params, args.dataset, {f"{q} {t}": float(label) for q, t, label in truth.iter_rows()})
    Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
    Path(args.metrics).write_text(json.dumps({f"#{params.siamese.final_of(params.dataset(args.dataset))}": results}, indent=2) + "\n")
    print("registered version", version, f"(train labels false: {model.false_share:.0%})")


if __name__ == "__main__":
    main()
