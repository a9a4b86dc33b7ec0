"""Day one on every ready-made export shape at every size: the docs' two tickets-only commands, run as written.

For each shape of tests/export_shapes.py (Jira with HTML and repeated Comment columns, Jira's current fields, ServiceNow
with and without work notes, Zendesk with and without comments, OTRS) and each size: a throwaway clone of the repo
(default params, no outputs), the export written as exports/mydesk/tickets.csv|.jsonl, then docs/helpdesk-data.md's

    dvc exp run -S '+datasets.mydesk={source: csv, raw: exports/mydesk, columns: <its mapping>, labels: false}' register@mydesk
    ticketsim search --model models/mydesk/bundle --index models/mydesk/index --subject "vpn keeps disconnecting"

One line per run: shape, tickets, both exit codes, the pipeline's seconds, the hits found, and every line a stage said
about what the small knowledge base made it shrink (topics, embedding). Exits 1 when any run failed.

Usage: python benchmarks/dayone_exports.py [--shapes jira-html otrs ...] [--sizes 1 5 300] [--workspace DIR]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import clone  # noqa: E402  (the repo's tracked files as `git clone` gives them)
from export_shapes import SHAPES, write_export  # noqa: E402

EXPERIMENT = "dvc exp run -S '+datasets.mydesk={{source: csv, raw: exports/mydesk, columns: {mapping}, labels: false}}' register@mydesk"
SEARCH = 'ticketsim search --model models/mydesk/bundle --index models/mydesk/index --subject "vpn keeps disconnecting"'
# What a stage says when a small knowledge base makes it shrink or skip something
SAID = re.compile(r"^(?:topics|embedding)@mydesk: (.*)$", re.M)


def day_one(workspace: Path, shape: str, size: int) -> dict:
    repo = clone(workspace / f"{shape}-{size}")
    write_export(repo / "exports/mydesk", shape, size)
    for git in ("config user.email bench@dayone", "config user.name dayone", "add -A", "commit -qm clone"):
        subprocess.run(["git", *git.split()], cwd=repo, check=True, capture_output=True)
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    pipeline = subprocess.run(EXPERIMENT.format(mapping=SHAPES[shape][0]), shell=True, cwd=repo, env=env,
                              capture_output=True, text=True)
    seconds = time.perf_counter() - started
    search = subprocess.run(SEARCH, shell=True, cwd=repo, env=env, capture_output=True, text=True)
    return {"pipeline": pipeline, "seconds": seconds, "search": search,
            "hits": len(re.findall(r"^ {0,3}\d+  \S", search.stdout, re.M))}   # a hit's line: its rank, then the ticket


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[1, 5, 300])
    parser.add_argument("--workspace", type=Path, help="keep the clones here (default: a temporary folder)")
    args = parser.parse_args()
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="dayone-"))
    failed = False
    print("| shape | tickets | dvc exp run | search | seconds | hits | said |\n| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for shape in args.shapes:
        for size in args.sizes:
            run = day_one(workspace, shape, size)
            codes = run["pipeline"].returncode, run["search"].returncode
            said = "; ".join(SAID.findall(run["pipeline"].stdout))
            print(f"| {shape} | {size} | {codes[0]} | {codes[1]} | {run['seconds']:.0f} | {run['hits']} | {said} |", flush=True)
            if any(codes):
                failed = True
                print(run["pipeline"].stdout[-3000:] + run["pipeline"].stderr[-3000:] + run["search"].stderr[-2000:],
                      file=sys.stderr)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
