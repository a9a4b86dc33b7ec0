"""The query-tower road of `ticketsim retrain` (ticketsim.lifecycle.promotion.QueryRoad): the champion's query side trained
alone (ticketsim.training.query_tower) and registered, with the index it keeps, as a new version for the gate."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ticketsim.app.pyfunc import log_bundle
from ticketsim.config import Params
from ticketsim.lifecycle.tracking import log_metrics, stage_run
from ticketsim.training.query_tower import retrain_query_tower

STAGE = "retrain"   # the MLflow run's stage tag: the version was trained outside the DVC pipeline


def register_query_tower(params: Params, bundle: Path, index: Path) -> str:
    """Train the query tower of the champion's `bundle`, register it with its `index` reused; the new version number."""
    dataset, name, row = params.retrain.dataset, params.siamese.registered_name(params.retrain.dataset), params.retrain.query_tower
    with tempfile.TemporaryDirectory(prefix="ticketsim-query-tower-") as scratch:
        trained = retrain_query_tower(params, bundle, index, Path(scratch))
        # the dataset's own files where it has them: this road reads them, not the pipeline's prepared folder
        with stage_run(params.tracking, STAGE, dataset, {"variant": row, "registered_model": name, "weights": trained.variant},
                       tags={"variant": row, "road": "query-tower"}, corpus=params.dataset(dataset).raw) as run:
            log_metrics(trained.results)    # dev.rerank.map, ...: the keys the register stage logs
            version = log_bundle(str(trained.bundle), name, str(trained.index))
    query = f"goes through torch: {trained.torch_query}" if trained.torch_query else "runs without torch"
    print(f"retrain@{dataset}: {name} version {version} (run {run.info.run_id}), the query tower of {bundle} on its index; "
          f"a query {query}", flush=True)
    return version
