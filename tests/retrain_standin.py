"""A stand-in for the Siamese and register stages in the retraining tests, with the seam ticketsim.retrain relies on.

Its "model" scores a pair by the label a reference file gives it (the generator's true labels), so its dev results
fall exactly when the dataset's labels stop agreeing with the truth (a batch of shuffled labels). Like the register
stage, it logs the final variant's results in the run it registers as a new version of
`siamese.registered_name(dataset)`.
"""
import argparse
import json
from pathlib import Path

import mlflow
import polars as pl

from ticketsim.config import TrackingConfig, load_params
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.tracking import log_dict, log_metrics, stage_run, tracking_uri


def register(cfg: TrackingConfig, model: str, run_id: str) -> str:
    """A new version of `model` (registered on first use) from the run's `model` artifacts."""
    uri = tracking_uri(cfg)
    client = mlflow.MlflowClient(uri, uri)
    if not client.search_registered_models(f"name = '{model}'"):
        client.create_registered_model(model)
    source = f"{client.get_run(run_id).info.artifact_uri}/model"
    return str(client.create_model_version(model, source=source, run_id=run_id).version)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--reference", required=True, help="CSV: query_id, ticket_id, label (the true labels)")
    parser.add_argument("--metrics", required=True)
    args = parser.parse_args()
    params = load_params()
    final, name = params.siamese.final, params.siamese.registered_name(args.dataset)
    with stage_run(params.tracking, "register", args.dataset) as run:
        # Straight from the raw folder, not the prepare stage's output: one stage process per retrain keeps tests fast.
        pairs = read_dataset(params.dataset(args.dataset), IntakeReport()).pairs
        truth = pl.read_csv(args.reference, schema_overrides={"query_id": pl.String, "ticket_id": pl.String})
        scores = pairs.join(truth.rename({"label": "truth"}), on=["query_id", "ticket_id"], how="left",
                            maintain_order="left")["truth"].fill_null(0)
        results = evaluate_method(pairs, scores.to_numpy().astype(float), None, params.evaluation)
        Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(args.metrics).write_text(json.dumps({f"#{final}": results}, indent=2) + "\n")
        log_metrics(results)
        log_dict({"model": "reference labels"}, "model/model.json")
    print("registered version", register(params.tracking, name, run.info.run_id))


if __name__ == "__main__":
    main()
