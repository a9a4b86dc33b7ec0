"""Stage baselines: BM25 (and the source's own candidate order, where it ships one), evaluated with both protocols."""
import argparse

from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.baselines import bm25_matrix, source_order_scores
from ticketsim.evaluate.report import write_results
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, log_methods, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--metrics", required=True, help="JSON file: method -> split -> protocol -> measure")
    parser.add_argument("--reports", required=True, help="folder for a Markdown table per split")
    parser.add_argument("--plots", required=True, help="folder for a PNG bar plot per split")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    with stage_run(params.tracking, "baselines", args.dataset, {"bm25": params.bm25, "evaluation": params.evaluation},
                   corpus=args.corpus, raw=params.dataset(args.dataset).raw, context="eval"):
        pairs, tokens = Corpus.read(args.corpus).pairs, Tokens.read(args.tokens)
        bm25 = bm25_matrix(tokens, params.bm25)
        results = {"bm25": evaluate_method(pairs, bm25.pair_scores(pairs), bm25, params.evaluation)}
        source_order = source_order_scores(pairs)
        if source_order is not None:
            results["source_order"] = evaluate_method(pairs, source_order, None, params.evaluation)
        write_results(results, args.metrics, args.reports, args.plots, f"{args.dataset}: baselines")
        log_methods(results)   # one child run per method (bm25, source_order), the same keys in each
        log_artifacts(args.metrics, args.reports, args.plots)


if __name__ == "__main__":
    main()
