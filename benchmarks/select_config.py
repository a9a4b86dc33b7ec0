"""Choose a configuration honestly: `ticketsim select` (ticketsim.training.selection_report), run as a benchmark.

Usage, in a workspace where `dvc repro` has built the dataset's prepared pairs, tokens and channels:
  python benchmarks/select_config.py --dataset default --variants 22 22+S+L best --baselines --out selection.json
  python benchmarks/select_config.py --merge cv_13.json cv_1.json cv_2.json --out cv.json
"""
import sys

from ticketsim.cli import main

if __name__ == "__main__":
    sys.exit(main(["select", *sys.argv[1:]]))
