"""Stage baselines: BM25 (and the source's own candidate order, where it ships one), evaluated with both protocols."""
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.baselines import bm25_matrix, source_order_scores
from ticketsim.evaluate.report import write_results
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_methods

STAGE = Stage("baselines", __doc__, reads=("corpus", "tokens"), writes=("metrics", "reports", "plots"),
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    with stage.run({"bm25": params.bm25, "evaluation": params.evaluation}, context="eval"):
        pairs, tokens = Corpus.read(args.corpus).pairs, Tokens.read(args.tokens)
        bm25 = bm25_matrix(tokens, params.bm25)
        results = {"bm25": evaluate_method(pairs, bm25.pair_scores(pairs), bm25, params.evaluation)}
        source_order = source_order_scores(pairs)
        if source_order is not None:
            results["source_order"] = evaluate_method(pairs, source_order, None, params.evaluation)
        write_results(results, args.metrics, args.reports, args.plots, f"{stage.dataset}: baselines", "baselines")
        log_methods(results)   # one child run per method (bm25, source_order), the same keys in each


if __name__ == "__main__":
    main()
