"""Stage rows: the paper's unsupervised Table 5 rows of every cached channel in params `rows` (E: #11-14, T: #1-9,
S: #11-14 with S), each g = exp(-d) on one level pair; one MLflow run per channel, tagged stage rows_<channel>."""
from pathlib import Path

from ticketsim.channels.cache import ChannelVectors
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.baselines import channel_rows
from ticketsim.evaluate.report import block_of, write_results
from ticketsim.stage import Stage
from ticketsim.tracking import log_methods

STAGE = Stage("rows", __doc__, reads=("corpus",), writes=("metrics", "reports", "plots"),
              options={"channels": "folder of the cached channels, <channel>.npz"}, needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    pairs = Corpus.read(args.corpus).pairs
    for channel, spec in params.rows.items():
        out = (Path(args.metrics) / f"{channel}.json", Path(args.reports) / channel, Path(args.plots) / channel)
        with stage.run({"rows": spec, "evaluation": params.evaluation}, stage=f"rows_{channel}", artifacts=out,
                       tags={"channel": channel}, context="eval"):
            vectors = ChannelVectors.load(Path(args.channels) / f"{channel}.npz")
            results = channel_rows(pairs, vectors, spec.levels, spec.distances, params.evaluation)
            write_results(results, *out, f"{stage.dataset}: channel {channel} rows", block_of(channel))
            log_methods(results)   # one child run per row, tagged method: the same keys in every row


if __name__ == "__main__":
    main()
