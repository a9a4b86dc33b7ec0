"""The MLflow pyfunc flavour of a bundle and its search index. The request's columns say what it asks:

- `subject, description` (a search): each row's top-k tickets of the knowledge base (k: the request's param, default 10)
  as ticket_ids, calibrated 1-5 scores (None where the model has no calibration: trained without labelled pairs), the
  raw similarities g (which order equal scores), reasons and warnings;
- `query_subject, query_description, ticket_subject, ticket_description, ticket_solution` (pairs, as before the index):
  each row's calibrated 1-5 score;
- `subject, description, ticket_id, label` (judgments, YES/REL/NO): each row recorded in the feedback journal as the
  search page records a click (ticketsim.data.feedback), answered with its status (recorded, repeated, conflict). The
  model cannot tell which address it is served on, so it takes feedback only when served with TICKETSIM_FEEDBACK (the
  journal file) and TICKETSIM_FEEDBACK_TOKEN set, from requests whose param `token` is that token (else 403 / 401).
Bad input is an MlflowException of INVALID_PARAMETER_VALUE, which the scoring server answers with a 400 and the message.
"""
from __future__ import annotations

import os
from datetime import datetime, timezone
from functools import cached_property
from typing import TYPE_CHECKING

import mlflow
import pandas as pd
import polars as pl
from mlflow.exceptions import MlflowException
from mlflow.models import ModelSignature
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, PERMISSION_DENIED, UNAUTHENTICATED
from mlflow.types.schema import ParamSchema, ParamSpec

from ticketsim.app.access import TOKEN_VARIABLE, Access
from ticketsim.config import EvaluationConfig, SentenceConfig, ServeConfig
from ticketsim.data.feedback import Journal, Judgment
from ticketsim.data.tables import PAIR_SCHEMA, QUERY_FIELDS, QUERY_SCHEMA, TICKET_SCHEMA, Corpus, conform
from ticketsim.data.validate import DataError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ticketsim.bundle.loader import Scorer
    from ticketsim.channels.cache import ChannelVectors

COLUMNS = ("query_subject", "query_description", "ticket_subject", "ticket_description", "ticket_solution")
FEEDBACK_COLUMNS = (*QUERY_FIELDS, "ticket_id", "label")
JOURNAL_VARIABLE = "TICKETSIM_FEEDBACK"
DEFAULT_K = 10
SIGNATURE = ModelSignature(inputs=None, params=ParamSchema([ParamSpec("k", "long", DEFAULT_K), ParamSpec("token", "string", "")]))


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
        from ticketsim.search.queries import query_encoder
        from ticketsim.search.searcher import Searcher

        self.bundle, self.index = context.artifacts["bundle"], context.artifacts.get("index")
        # Versions registered before the index existed score pairs only.
        self.searcher = (Searcher(query_encoder(self.bundle), TicketIndex.load(self.index), self.bundle, "the model's index")
                         if self.index else None)
        self.journal: Journal | None = None     # opened on the first judgment

    @cached_property
    def scorer(self) -> Scorer:
        """The whole model, for scoring pairs: loaded on the first such request (a search of a bundle with a query export
        needs no torch)."""
        from ticketsim.bundle.loader import Scorer

        return Scorer.load(self.bundle)

    def evaluate(self, corpus: Corpus, cfg: EvaluationConfig, cached: Sequence[ChannelVectors] = (),
                 sentence: SentenceConfig | None = None) -> dict:
        """Every measure of this version on a labelled corpus, as `ticketsim evaluate` gives it: how the retraining gate
        scores the champion and the candidate on the same pairs (ticketsim.lifecycle.gate_pairs). `cached`: channel S of the
        corpus computed with `sentence`, taken only when that is this bundle's own `sentence` (else S is encoded)."""
        from ticketsim.bundle.evaluation import evaluate_scorer

        return evaluate_scorer(self.scorer, corpus, cfg, cached if sentence == self.scorer.sentence else ())[0]

    def predict(self, context, model_input: pd.DataFrame, params=None) -> pd.Series | pd.DataFrame:
        try:
            if set(COLUMNS) <= set(model_input.columns):
                # Each request row is its own query-ticket pair: the query x pool matrix would be wasted (and n^2 large).
                scores, _ = self.scorer.score(corpus_of_requests(model_input), pool=False)
                return pd.Series(self.scorer.calibrator(scores), name="score")
            if set(FEEDBACK_COLUMNS) <= set(model_input.columns):
                return self.judge(model_input, str((params or {}).get("token") or ""))
            if set(QUERY_FIELDS) <= set(model_input.columns):
                return self.search(model_input, int((params or {}).get("k", DEFAULT_K)))
            raise DataError([f"request columns {list(model_input.columns)}: expected {list(QUERY_FIELDS)} (a search), "
                             f"{list(FEEDBACK_COLUMNS)} (judgments) or {list(COLUMNS)} (query-ticket pairs to score)"])
        except DataError as error:
            raise MlflowException("; ".join(error.problems), INVALID_PARAMETER_VALUE) from None

    def search(self, model_input: pd.DataFrame, k: int) -> pd.DataFrame:
        if self.searcher is None:
            raise DataError(["this model version was registered without a search index: it scores query-ticket pairs only"])
        if k > ServeConfig.max_k:
            raise DataError([f"k = {k}: at most {ServeConfig.max_k} tickets per search"])
        answers = self.searcher.search(queries_of_requests(model_input), k)
        return pd.DataFrame({"ticket_ids": [[h.ticket_id for h in a.hits] for a in answers],
                             "scores": [[None if h.calibrated is None else round(h.calibrated, 4) for h in a.hits]
                                        for a in answers],
                             "raw_scores": [[h.score for h in a.hits] for a in answers],
                             "reasons": [[h.reasons for h in a.hits] for a in answers],
                             "warnings": [list(a.warnings) for a in answers]})

    def judge(self, model_input: pd.DataFrame, token: str) -> pd.DataFrame:
        """Record each row's judgment in the journal TICKETSIM_FEEDBACK names; a row of bad input refuses the request."""
        if self.searcher is None:
            raise DataError(["this model version was registered without a search index: it takes no judgments"])
        path, expected = os.environ.get(JOURNAL_VARIABLE), os.environ.get(TOKEN_VARIABLE)
        if not (path and expected):
            raise MlflowException(f"this server takes no feedback: serve the model with {JOURNAL_VARIABLE}=<journal file> and "
                                  f"{TOKEN_VARIABLE}=<token> set, and send the token as the param `token`", PERMISSION_DENIED)
        refused = Access("", expected).refusal(token or None)
        if refused:
            raise MlflowException(refused + " (the param `token`)", UNAUTHENTICATED)
        if self.journal is None or str(self.journal.path) != path:
            self.journal = Journal(path)
        rows = model_input[list(FEEDBACK_COLUMNS)].fillna("").astype(str).to_dict("records")
        now = datetime.now(timezone.utc)
        done = [self.journal.record(Judgment(**row, via="model"), self.searcher.ticket(row["ticket_id"]), now) for row in rows]
        return pd.DataFrame([outcome.as_dict() for outcome in done])


def log_bundle(bundle: str, registered_name: str, index: str | None = None) -> str:
    """Log the bundle (and the search index built with it) as the active run's MLflow model and register it; returns the
    new version number."""
    from importlib.metadata import version

    info = mlflow.pyfunc.log_model(name="model", python_model=TicketSimModel(),
                                   artifacts={"bundle": bundle, **({"index": index} if index else {})},
                                   registered_model_name=registered_name, signature=SIGNATURE,
                                   pip_requirements=[f"ticketsim=={version('ticketsim')}"])
    return str(info.registered_model_version)
