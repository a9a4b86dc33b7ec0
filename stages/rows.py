"""Stage rows: the untrained rows of the results table. BM25 (and the source's own candidate order, where it ships one),
one MLflow run tagged stage baselines; then the paper's unsupervised Table 5 rows of every cached channel in params
`rows` (E: #11-14, T: #1-9, S: #11-14 with S), each g = exp(-d) on one level pair, one run per channel tagged
rows_<channel>. Each group's figures, report and plots under its name: baselines, E, T, S."""
from pathlib import Path

from ticketsim.channels.cache import ChannelVectors, cache_path
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.baselines import bm25_matrix, channel_rows, source_order_scores
from ticketsim.evaluate.report import block_of, write_results
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.lifecycle.tracking import log_methods
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens

STAGE = Stage("rows", __doc__, reads=("corpus", "tokens", "channels"), writes=("metrics", "reports", "plots"),
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    pairs = Corpus.read(args.corpus).pairs

    def outputs(group: str) -> tuple[Path, Path, Path]:
        return Path(args.metrics) / f"{group}.json", Path(args.reports) / group, Path(args.plots) / group

    with stage.run({"bm25": params.bm25, "evaluation": params.evaluation}, stage="baselines", artifacts=outputs("baselines"),
                   context="eval"):
        bm25 = bm25_matrix(Tokens.read(args.tokens), params.bm25)
        results = {"bm25": evaluate_method(pairs, bm25.pair_scores(pairs), bm25, params.evaluation)}
        source_order = source_order_scores(pairs)
        if source_order is not None:
            results["source_order"] = evaluate_method(pairs, source_order, None, params.evaluation)
        write_results(results, *outputs("baselines"), f"{stage.dataset}: baselines", "baselines")
        log_methods(results)   # one child run per method (bm25, source_order), the same keys in each
    for channel, spec in params.rows.items():
        with stage.run({"rows": spec, "evaluation": params.evaluation}, stage=f"rows_{channel}", artifacts=outputs(channel),
                       tags={"channel": channel}, context="eval"):
            vectors = ChannelVectors.load(cache_path(args.channels, channel))
            results = channel_rows(pairs, vectors, spec.levels, spec.distances, params.evaluation)
            write_results(results, *outputs(channel), f"{stage.dataset}: channel {channel} rows", block_of(channel))
            log_methods(results)   # one child run per row, tagged method: the same keys in every row


if __name__ == "__main__":
    main()
