"""The MLflow pyfunc flavour of a bundle: a table of query and ticket texts in, calibrated 1-5 scores out."""
from __future__ import annotations

import mlflow
import pandas as pd
import polars as pl

from ticketsim.data.tables import PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, Corpus, conform
from ticketsim.scorer import Scorer

COLUMNS = ("query_subject", "query_description", "ticket_subject", "ticket_description", "ticket_solution")


def corpus_of_requests(frame: pd.DataFrame) -> Corpus:
    """Row i of the request becomes query q<i>, ticket t<i> and the pair (q<i>, t<i>)."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"request is missing column(s) {missing}; expected {list(COLUMNS)}")
    rows = pl.from_pandas(frame[list(COLUMNS)].fillna("").astype(str))
    ids = pl.int_range(rows.height, eager=True).cast(pl.String)
    queries = rows.select(query_id="q" + ids, subject="query_subject", description="query_description")
    tickets = rows.select(ticket_id="t" + ids, subject="ticket_subject", description="ticket_description", solution="ticket_solution")
    pairs = pl.DataFrame({"query_id": queries["query_id"], "ticket_id": tickets["ticket_id"], "label": [None] * rows.height,
                          "split": ["test"] * rows.height})
    return Corpus(conform(tickets, TICKET_SCHEMA), conform(queries, QUERY_SCHEMA), conform(pairs, PAIR_SCHEMA))


class TicketSimModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context) -> None:
        self.scorer = Scorer.load(context.artifacts["bundle"])

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series:
        # Each request row is its own query-ticket pair: the query x pool matrix would be wasted (and n^2 large).
        scores, _ = self.scorer.score(corpus_of_requests(model_input), pool=False)
        return pd.Series(self.scorer.calibrator(scores), name="score")


def log_bundle(bundle: str, registered_name: str) -> str:
    """Log the bundle as the active run's MLflow model and register it; returns the new version number."""
    from importlib.metadata import version

    info = mlflow.pyfunc.log_model(name="model", python_model=TicketSimModel(), artifacts={"bundle": bundle},
                                   registered_model_name=registered_name, pip_requirements=[f"ticketsim=={version('ticketsim')}"])
    return str(info.registered_model_version)
