"""Stage register: the bundle and its search index logged to MLflow as one model, registered under a name; the first
version with quality figures is made the champion (nothing to compare it with: ticketsim.lifecycle.promotion.crown_first)."""
import json
from pathlib import Path

from ticketsim.app.pyfunc import log_bundle
from ticketsim.evaluate.report import NOT_METHODS
from ticketsim.lifecycle.promotion import crown_first
from ticketsim.lifecycle.tracking import log_metrics
from ticketsim.search.index import TicketIndex, model_hash
from ticketsim.stage import Stage
from ticketsim.workflows.stage_process import script

STAGE = Stage("register", __doc__, reads=("bundle",),
              options={"index": "the index stage's folder (built with this bundle)", "results": "the final variant's metrics JSON"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    final, name = params.siamese.final_of(stage.dataset_config), params.siamese.registered_name(stage.dataset)
    with stage.run({"variant": final, "registered_model": name}, tags={"variant": final}) as run:
        TicketIndex.load(args.index).check(model_hash(args.bundle), args.bundle, args.index)
        # The version's run holds the variant's own figures (dev.rerank.map, ...): what the retraining gate compares.
        # Without labelled pairs it has none, so the gate cannot judge it: registered, never made champion.
        results = json.loads(Path(args.results).read_text())
        figures = next((value for key, value in results.items() if key not in NOT_METHODS), None)
        if figures:
            log_metrics(figures)    # the model's one row ("#A+L-tuned")
        version = log_bundle(args.bundle, name, args.index)
        print(f"register@{stage.dataset}: {name} version {version} (run {run.info.run_id})" +
              ("" if figures else f"; no quality figures ({results.get('unevaluated')}): the gate has nothing to judge "
                                  f"it by and makes it no champion; search it with --model {args.bundle} --index {args.index}"))
        crowned = crown_first(params, stage.dataset, version) if figures else None
        if crowned:
            print(f"register@{stage.dataset}: {crowned}")


if __name__ == "__main__":
    script(main)
