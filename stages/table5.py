"""Stage table5: one results table of every method on one dataset (the paper's Table 5 rows #1-22, BM25, ...)."""
import argparse
import json
from pathlib import Path

from ticketsim.config import load_params
from ticketsim.evaluate.report import block_of, table5, write_results
from ticketsim.tracking import log_artifacts, log_methods, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--inputs", nargs="+", required=True,
                        help="metrics JSON files (method -> split -> protocol -> measure) or folders of them")
    parser.add_argument("--metrics", required=True, help="the table as JSON (for dvc metrics)")
    parser.add_argument("--reports", required=True, help="folder for the table as Markdown, per split")
    parser.add_argument("--plots", required=True, help="folder for a bar plot per split")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    with stage_run(params.tracking, "table5", args.dataset, raw=params.dataset(args.dataset).raw, context="eval"):
        paths = [p for arg in map(Path, args.inputs) for p in (sorted(arg.glob("*.json")) if arg.is_dir() else [arg])]
        results = table5([json.loads(p.read_text()) for p in paths])
        write_results(results, args.metrics, args.reports, args.plots, f"{args.dataset}: Table 5")
        # one child run per method: compare them all, one column per figure; param `block` filters a block
        log_methods(results, {method: {"block": block_of(method)} for method in results})
        log_artifacts(args.metrics, args.reports, args.plots)


if __name__ == "__main__":
    main()
