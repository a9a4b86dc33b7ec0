"""Stage generate: the embedded synthetic ticket corpus, written in the CSV layout that `source: synthetic` reads."""
import argparse

from ticketsim.config import load_params
from ticketsim.data.csvsource import write_corpus
from ticketsim.data.synthetic import generate
from ticketsim.tracking import log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="folder for tickets.csv, queries.csv, pairs.csv")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    with stage_run(params.tracking, "generate", "synthetic", {"seed": params.seed, "synthetic": params.synthetic}):
        corpus = generate(params.synthetic, params.seed)
        write_corpus(corpus, args.out)
        log_metrics({name: frame.height for name, frame in corpus.frames().items()})


if __name__ == "__main__":
    main()
