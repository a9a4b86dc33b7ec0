"""Stage table5: one results table of every method on one dataset (the paper's Table 5 rows #1-22, BM25, ...)."""
import json
from pathlib import Path

from ticketsim.evaluate.report import table5, write_results
from ticketsim.lifecycle.tracking import log_methods
from ticketsim.stage import Arg, Stage

STAGE = Stage("table5", __doc__, writes=("metrics", "reports", "plots"),
              options={"inputs": Arg("metrics JSON files (method -> split -> protocol -> measure) or folders of them", many=True)},
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    args = stage.args
    with stage.run(context="eval"):
        paths = [p for arg in map(Path, args.inputs) for p in (sorted(arg.glob("*.json")) if arg.is_dir() else [arg])]
        results, blocks = table5([json.loads(p.read_text()) for p in paths])
        write_results(results, args.metrics, args.reports, args.plots, f"{stage.dataset}: Table 5", blocks)
        # one child run per method: compare them all, one column per figure; param `block` filters a block
        log_methods(results, {method: {"block": block} for method, block in blocks.items()})


if __name__ == "__main__":
    main()
