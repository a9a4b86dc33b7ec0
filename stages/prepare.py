"""Stage prepare: one dataset's raw files (or the generator) -> validated tickets, queries and pairs (Parquet) + an intake report."""
import argparse
import json
import sys
from pathlib import Path

from ticketsim.config import load_params
from ticketsim.data.sources import load_corpus
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a key of `datasets` in params.yaml")
    parser.add_argument("--out", required=True, help="folder for tickets/queries/pairs.parquet and intake.json")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.dataset(args.dataset)
    with stage_run(params.tracking, "prepare", args.dataset, {"dataset": cfg}, corpus=args.out, raw=cfg.raw, context="output"):
        report = IntakeReport()
        try:
            corpus = load_corpus(params, args.dataset, report)
        except DataError as error:
            sys.exit(f"prepare@{args.dataset}: {error}")
        out = Path(args.out)
        corpus.write(out)
        (out / "intake.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        print(f"prepare@{args.dataset}:", json.dumps(report.as_dict(), indent=2))
        log_metrics({name: frame.height for name, frame in corpus.frames().items()})
        log_artifacts(out / "intake.json")


if __name__ == "__main__":
    main()
