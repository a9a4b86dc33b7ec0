"""The MLflow pyfunc flavour of a bundle and its search index. The request's columns say what it asks:

- `subject, description` (a search): each row's top-k tickets of the knowledge base (k: the request's param, default 10)
  as ticket_ids, calibrated 1-5 scores, the raw similarities g (which order equal scores), reasons and warnings;
- `query_subject, query_description, ticket_subject, ticket_description, ticket_solution` (pairs, as before the index):
  each row's calibrated 1-5 score.
Bad input is an MlflowException of INVALID_PARAMETER_VALUE, which the scoring server answers with a 400 and the message.
"""
from __future__ import annotations

import mlflow
import pandas as pd
import polars as pl
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE
from mlflow.types.schema import ParamSchema, ParamSpec

from ticketsim.data.tables import PAIR_SCHEMA, QUERY_FIELDS, QUERY_SCHEMA, TICKET_SCHEMA, Corpus, conform
from ticketsim.data.validate import DataError
from ticketsim.scorer import Scorer

COLUMNS = ("query_subject", "query_description", "ticket_subject", "ticket_description", "ticket_solution")
DEFAULT_K = 10
SIGNATURE = ModelSignature(inputs=None, params=ParamSchema([ParamSpec("k", "long", DEFAULT_K)]))


def corpus_of_requests(frame: pd.DataFrame) -> Corpus:
    """Row i of the request becomes query q<i>, ticket t<i> and the pair (q<i>, t<i>)."""
    rows = pl.from_pandas(frame[list(COLUMNS)].fillna("").astype(str))
    ids = pl.int_range(rows.height, eager=True).cast(pl.String)
    queries = rows.select(query_id="q" + ids, subject="query_subject", description="query_description")
    tickets = rows.select(ticket_id="t" + ids, subject="ticket_subject", description="ticket_description", solution="ticket_solution")
    pairs = pl.DataFrame({"query_id": queries["query_id"], "ticket_id": tickets["ticket_id"], "label": [None] * rows.height,
                          "split": ["test"] * rows.height})
    return Corpus(conform(tickets, TICKET_SCHEMA), conform(queries, QUERY_SCHEMA), conform(pairs, PAIR_SCHEMA))


def queries_of_requests(frame: pd.DataFrame) -> pl.DataFrame:
    """Row i of a search request becomes query '<i>' (its row number)."""
    rows = pl.from_pandas(frame[list(QUERY_FIELDS)].fillna("").astype(str))
    return rows.select(query_id=pl.int_range(rows.height).cast(pl.String), subject="subject", description="description")


class TicketSimModel(mlflow.pyfunc.PythonModel):
    def load_context(self, context) -> None:
        from ticketsim.search.index import TicketIndex
        from ticketsim.search.searcher import Searcher

        bundle, index = context.artifacts["bundle"], context.artifacts.get("index")
        self.scorer = Scorer.load(bundle)
        # Versions registered before the index existed score pairs only.
        self.searcher = Searcher(self.scorer, TicketIndex.load(index), bundle, "the model's index") if index else None

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series | pd.DataFrame:
        try:
            if set(COLUMNS) <= set(model_input.columns):
                # Each request row is its own query-ticket pair: the query x pool matrix would be wasted (and n^2 large).
                scores, _ = self.scorer.score(corpus_of_requests(model_input), pool=False)
                return pd.Series(self.scorer.calibrator(scores), name="score")
            if set(QUERY_FIELDS) <= set(model_input.columns):
                return self.search(model_input, int((params or {}).get("k", DEFAULT_K)))
            raise DataError([f"request columns {list(model_input.columns)}: expected {list(QUERY_FIELDS)} (a search) or "
                             f"{list(COLUMNS)} (query-ticket pairs to score)"])
        except DataError as error:
            raise MlflowException("; ".join(error.problems), INVALID_PARAMETER_VALUE) from None

    def search(self, model_input: pd.DataFrame, k: int) -> pd.DataFrame:
        if self.searcher is None:
            raise DataError(["this model version was registered without a search index: it scores query-ticket pairs only"])
        answers = self.searcher.search(queries_of_requests(model_input), k)
        return pd.DataFrame({"ticket_ids": [[h.ticket_id for h in a.hits] for a in answers],
                             "scores": [[round(h.calibrated, 4) for h in a.hits] for a in answers],
                             "raw_scores": [[h.score for h in a.hits] for a in answers],
                             "reasons": [[h.reasons for h in a.hits] for a in answers],
                             "warnings": [list(a.warnings) for a in answers]})


def log_bundle(bundle: str, registered_name: str, index: str | None = None) -> str:
    """Log the bundle (and the search index built with it) as the active run's MLflow model and register it; returns the
    new version number."""
    from importlib.metadata import version

    info = mlflow.pyfunc.log_model(name="model", python_model=TicketSimModel(),
                                   artifacts={"bundle": bundle, **({"index": index} if index else {})},
                                   registered_model_name=registered_name, signature=SIGNATURE,
                                   pip_requirements=[f"ticketsim=={version('ticketsim')}"])
    return str(info.registered_model_version)
