"""Stage rows_<channel>: the paper's unsupervised Table 5 rows of one cached channel (g = exp(-d) on one level pair)."""
import argparse

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.baselines import channel_rows
from ticketsim.evaluate.report import write_results
from ticketsim.tracking import log_artifacts, log_methods, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--channel", required=True, help="a key of `rows` in params.yaml, e.g. E or T")
    parser.add_argument("--vectors", required=True, help="the channel's cached vectors (.npz)")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder")
    parser.add_argument("--metrics", required=True, help="JSON file: row -> split -> protocol -> measure")
    parser.add_argument("--reports", required=True, help="folder for a Markdown table per split")
    parser.add_argument("--plots", required=True, help="folder for a PNG bar plot per split")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    spec = params.rows[args.channel]
    with stage_run(params.tracking, f"rows_{args.channel}", args.dataset, {"rows": spec, "evaluation": params.evaluation},
                   tags={"channel": args.channel}, corpus=args.corpus, raw=params.dataset(args.dataset).raw, context="eval"):
        pairs, vectors = Corpus.read(args.corpus).pairs, ChannelVectors.load(args.vectors)
        results = channel_rows(pairs, vectors, spec.levels, spec.distances, params.evaluation)
        write_results(results, args.metrics, args.reports, args.plots, f"{args.dataset}: channel {args.channel} rows")
        log_methods(results)   # one child run per row, tagged method: the same keys in every row
        log_artifacts(args.metrics, args.reports, args.plots)


if __name__ == "__main__":
    main()
