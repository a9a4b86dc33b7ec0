"""The pipeline's wall time, a baseline revision beside the working tree, in one run on one machine.

Each side is a bare layout: the revision's files (`git archive`; for the working tree its tracked and new files, as
`git clone` would give them after a commit) without outputs or dvc.lock, its own `src/` on PYTHONPATH, its own MLflow
and Optuna files. For each side it times, in order:
  full     `dvc repro` of everything from nothing
  no-op    `dvc repro` again at once (nothing to run: DVC's own hashing and the always-changed sources stage)
  fast     `dvc repro <fast target>` in a second bare layout: the deployable model only (default register@default)
and counts the stage processes each ran. The baseline goes first; a busy machine slows both, so compare ratios.

    python benchmarks/pipeline_time.py [--baseline main] [--params tiny.yaml] [--fast-target register@default]

The full default pipeline takes about 25 minutes per side on 2 cores (about 50 in all, plus the fast paths).
`--params FILE` puts FILE, and the params-research.yaml beside it, in place of both sides' params files (e.g. small
epochs and sizes, to check the benchmark itself in minutes); the figures are then not the pipeline's.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = ("data/", "metrics/", "plots/", "reports/", "models/", "tuned/", "mlruns/", "mlartifacts/")
WORKING_TREE = "working tree"


def bare_layout(revision: str, root: Path, params: Path | None) -> Path:
    """The files of `revision` (or of the working tree) in `root`, without outputs or dvc.lock, in a fresh git repo."""
    root.mkdir(parents=True)
    if revision == WORKING_TREE:
        listed = git("ls-files", "--cached", "--others", "--exclude-standard").split("\n")
        for name in filter(None, listed):
            if (REPO / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, root / name)
    else:
        archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    for name in OUTPUTS:
        shutil.rmtree(root / name, ignore_errors=True)
    (root / "dvc.lock").unlink(missing_ok=True)
    if params is not None:      # with the params-research.yaml beside it, where there is one
        for source, name in ((params, "params.yaml"), (params.with_name("params-research.yaml"), "params-research.yaml")):
            if source.is_file():
                shutil.copy2(source, root / name)
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-q", "-m", "bare layout"]):
        subprocess.run(command, cwd=root, check=True, capture_output=True, env=environment(root))
    return root


def environment(root: Path) -> dict[str, str]:
    """The side's own package first on the path; no tracking server or URI of the caller's leaks in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TICKETSIM_"))}
    return {**env, "PYTHONPATH": str(root / "src"), "DVC_NO_ANALYTICS": "1", "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b",
            "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}


def repro(root: Path, *targets: str) -> tuple[float, int]:
    """Seconds of `dvc repro [targets]` in `root`, and how many stages it ran; a failure stops the benchmark."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "dvc", "repro", *targets], cwd=root, env=environment(root),
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        sys.exit(f"dvc repro {' '.join(targets)} failed in {root}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    ran = len(re.findall(r"^Running stage '", done.stdout, flags=re.MULTILINE))
    return seconds, ran


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout


def measure(revision: str, workdir: Path, params: Path | None, fast_target: str) -> dict[str, tuple[float, int]]:
    slug = re.sub(r"\W+", "-", revision)
    full = bare_layout(revision, workdir / f"{slug}-full", params)
    figures = {"full": repro(full)}
    figures["no-op"] = repro(full)
    figures["fast"] = repro(bare_layout(revision, workdir / f"{slug}-fast", params), fast_target)
    for name, (seconds, ran) in figures.items():
        print(f"{revision}: {name} {seconds:.1f} s, {ran} stages", flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="main", help="the revision to compare with (default: main)")
    parser.add_argument("--params", type=Path, help="a params.yaml (and the params-research.yaml beside it) for both "
                                                     "sides instead of each side's own")
    parser.add_argument("--fast-target", default="register@default", help="the fast path's dvc repro target")
    parser.add_argument("--workdir", type=Path, help="where the layouts go (default: a temporary folder, removed after)")
    args = parser.parse_args()
    params = args.params.resolve() if args.params else None
    with tempfile.TemporaryDirectory(prefix="pipeline-time-") as scratch:
        workdir = args.workdir or Path(scratch)
        baseline_rev = git("rev-parse", "--short", args.baseline).strip()
        before = measure(args.baseline, workdir, params, args.fast_target)
        after = measure(WORKING_TREE, workdir, params, args.fast_target)
    print(f"\n| dvc repro | {args.baseline} ({baseline_rev}) | working tree | after / before |")
    print("|---|---:|---:|---:|")
    for name, label in (("full", "whole pipeline"), ("no-op", "no-op (nothing changed)"), ("fast", f"fast path: {args.fast_target}")):
        (old, old_ran), (new, new_ran) = before[name], after[name]
        print(f"| {label} | {old:.1f} s ({old_ran} stages) | {new:.1f} s ({new_ran} stages) | {new / old:.2f} |")
    if params is not None:
        print(f"\n(params: {args.params} on both sides, not each side's own)")


if __name__ == "__main__":
    main()
