"""Stage register: the final Siamese variant as one bundle, logged to MLflow as a model and registered under a name."""
import argparse
import json
from pathlib import Path

from ticketsim.config import load_params
from ticketsim.scorer import final_bundle
from ticketsim.search.index import TicketIndex, model_hash
from ticketsim.serving import log_bundle
from ticketsim.tracking import log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--model", required=True, help="the siamese stage's folder of the final variant")
    parser.add_argument("--metrics", required=True, help="the final variant's metrics JSON")
    parser.add_argument("--word2vec", required=True)
    parser.add_argument("--char-blstm", required=True)
    parser.add_argument("--docnade", required=True, help="the docnade stage's folder (M1, M2)")
    parser.add_argument("--bundle", required=True, help="folder to write the bundle to")
    parser.add_argument("--index", help="the index stage's folder: logged with the bundle, so the registered model searches")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    final, name = params.siamese.final, params.siamese.registered_name(args.dataset)
    with stage_run(params.tracking, "register", args.dataset, {"variant": final, "registered_model": name},
                   tags={"variant": final}, raw=params.dataset(args.dataset).raw) as run:
        bundle = final_bundle(args.bundle, params, args.model, args.word2vec, args.char_blstm, args.docnade)
        if args.index:   # built by the index stage from a bundle written by the same function: the same hash, or a bug
            TicketIndex.load(args.index).check(model_hash(bundle), bundle, args.index)
        # The version's run holds the variant's own figures (dev.rerank.map, ...): what the retraining gate compares.
        results = json.loads(Path(args.metrics).read_text())
        log_metrics(next(value for key, value in results.items() if key != "training"))   # the model's one row ("#22-tuned")
        version = log_bundle(str(bundle), name, args.index)
        print(f"register@{args.dataset}: {name} version {version} (run {run.info.run_id})")


if __name__ == "__main__":
    main()
