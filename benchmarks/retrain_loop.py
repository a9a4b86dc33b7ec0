"""One `ticketsim retrain` loop on the default corpus, timed: first model, a batch of true labels, a batch of shuffled ones.

The embedded corpus (params' synthetic settings, seed 13) goes to a throwaway repo as the CSV dataset under DVC, minus
the labelled queries kept for the two batches (tests/retrain_workspace.py builds it, as for the end-to-end test).
Each step prints its wall time and exit code; the gate tables follow.

Usage: python benchmarks/retrain_loop.py /tmp/retrain-bench [--good 20] [--shuffled 20]
"""
import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from retrain_workspace import Deal, make_workspace  # noqa: E402

from ticketsim.config import SyntheticConfig, load_params  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="an empty folder for the repo and its DVC remote")
    parser.add_argument("--good", type=int, default=20, help="labelled queries in the batch of true labels")
    parser.add_argument("--shuffled", type=int, default=20, help="labelled queries in the batch of shuffled labels")
    args = parser.parse_args()
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    synthetic: SyntheticConfig = params.synthetic
    deal = Deal(synthetic, initial=synthetic.n_labeled_queries - args.good - args.shuffled, good=args.good, shuffled=args.shuffled)
    # The repo's own gate and retrain settings (make_workspace would otherwise put in the tests' own).
    gate = {"metrics": {name: {"direction": rule.direction, "tolerance": rule.tolerance} for name, rule in params.gate.metrics.items()}}
    ws = make_workspace(args.folder / "repo", params={"gate": gate, "retrain": {"targets": list(params.retrain.targets),
                                                                               "dataset": params.retrain.dataset}}, deal=deal)
    for step, batch in (("first model", None), ("true labels", ws.good), ("shuffled labels", ws.shuffled)):
        if batch is not None:
            print(ws.ticketsim("pairs", "add", str(batch)).stdout.splitlines()[0])
        started = time.perf_counter()
        done = ws.ticketsim("retrain", "--summary", "summary.md")
        print(f"{step}: ticketsim retrain exit {done.returncode} in {time.perf_counter() - started:.0f} s", flush=True)
    print((ws.root / "summary.md").read_text())


if __name__ == "__main__":
    main()
