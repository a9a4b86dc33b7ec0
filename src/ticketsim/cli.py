"""`ticketsim`: the command line for people (the DVC stages in stages/ run the pipeline)."""
from __future__ import annotations

import argparse
import json
import sys

from ticketsim.config import DatasetConfig, load_params
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import DataError, IntakeReport


def validate_command(args: argparse.Namespace) -> int:
    cfg = (DatasetConfig(name="csv", source="csv", raw=args.csv) if args.csv
           else load_params(args.params).dataset(args.dataset))
    report = IntakeReport()
    try:
        read_dataset(cfg, report)
    except DataError as error:
        print(error, file=sys.stderr)
        return 1
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ticketsim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a dataset and print its intake report; exit 1 on bad input")
    target = validate.add_mutually_exclusive_group(required=True)
    target.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    target.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    validate.add_argument("--params", default="params.yaml")
    validate.set_defaults(run=validate_command)
    args = parser.parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
