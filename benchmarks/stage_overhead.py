"""Per-stage overhead before and after, side by side: every stage of a tiny pipeline timed as its own process.

    python benchmarks/stage_overhead.py [--before REV] [--repeat 2]

Each side (the code at REV, and the working tree) gets a bare clone of its own tracked files with tiny params (60
tickets, one epoch, two trials), so a stage's own work takes a fraction of a second and its wall time is what the
process costs around it: interpreter start, imports, params, the MLflow run. `dvc repro` builds every input once;
then each stage's command (from dvc.lock) runs again `--repeat` times and the fastest time counts. Both sides run
with the side's own `src` first on PYTHONPATH, in one session, on the same machine.

A third column runs the old code as the old `.ci/run` installed it: uv without `--compile-bytecode`, on a machine
with PYTHONDONTWRITEBYTECODE=1, so every process compiled MLflow, torch & co. from source (simulated with an empty
PYTHONPYCACHEPREFIX). It prints Markdown tables: per stage, the sums, `ticketsim --help` and the tiny `dvc repro`.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
OUTPUTS = ("data/", "metrics/", "plots/", "reports/", "models/", "tuned/")
TINY = {  # dotted key -> value, set where one of the side's params files has the key
    "synthetic.n_tickets": 60, "synthetic.n_labeled_queries": 20, "synthetic.n_enduser_queries": 4,
    "embedding.word2vec.epochs": 1, "embedding.char_blstm.epochs": 1, "topics.n_topics": 4, "topics.heldout": 6,
    "topics.docnade.epochs": 1, "topics.lda.passes": 1, "topics.lda.particles": 2, "siamese.train.epochs": 1,
    "tune.n_trials": 2, "tune.epochs": 1,
}


def clone(rev: str | None, root: Path) -> Path:
    """The tracked files of `rev` (None: the working tree, new files included) without outputs, as a git repo."""
    root.mkdir(parents=True)
    if rev:
        archive = subprocess.run(["git", "archive", rev], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    else:
        names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout.split()
        for name in (n for n in names if (REPO / n).is_file()):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    for name in OUTPUTS:
        shutil.rmtree(root / name, ignore_errors=True)
    (root / "dvc.lock").unlink(missing_ok=True)
    for name in ("params.yaml", "params-research.yaml"):    # a side from before the split has no research file
        if not (root / name).is_file():
            continue
        params = yaml.safe_load((root / name).read_text())
        if "datasets" in params:
            params["datasets"] = {"default": params["datasets"]["default"]}
        if "variants" in params.get("siamese", {}):
            params["siamese"]["variants"] = {k: params["siamese"]["variants"][k] for k in ("15", "22")}
        for dotted, value in TINY.items():
            *path, key = dotted.split(".")
            node = params
            for part in path:
                node = node.get(part, {})
            if key in node:
                node[key] = value
        (root / name).write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def environment(root: Path, compiled: bool, cache: Path) -> dict[str, str]:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1", "PYTHONPATH": str(root / "src")}
    if not compiled:
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(cache))   # no .pyc found: compile each import
    return env


def timed(command: str, root: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{command} failed in {root}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return time.perf_counter() - started


def stage_commands(root: Path) -> dict[str, str]:
    lock = yaml.safe_load((root / "dvc.lock").read_text())
    return {name: stage["cmd"] for name, stage in lock["stages"].items()}


def measure(root: Path, compiled: bool, repeat: int, cache: Path) -> dict[str, float]:
    env = environment(root, compiled, cache)
    times = {"dvc repro (tiny)": timed(f"{sys.executable} -m dvc repro -q", root, env)}
    times["ticketsim --help"] = min(timed(f"{sys.executable} -c 'import sys; from ticketsim.cli import main; "
                                          f"sys.argv[0] = \"ticketsim\"; main([\"--help\"])'", root, env) for _ in range(repeat))
    for name, command in stage_commands(root).items():
        times[name] = min(timed(command, root, env) for _ in range(repeat))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="8ba4d89", help="the revision to compare with (default: main before issue 13)")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        before, after = clone(args.before, tmp / "before"), clone(None, tmp / "after")   # siblings: no ../shared
        sides = {"before, no bytecode": measure(before, False, args.repeat, tmp / "pycache"),
                 "before": measure(before, True, args.repeat, tmp / "pycache"),
                 "after": measure(after, True, args.repeat, tmp / "pycache")}
    names = list(dict.fromkeys(n for times in sides.values() for n in times))
    print(f"| stage | {' | '.join(sides)} | after / before |\n|---|{'---:|' * (len(sides) + 1)}")
    for name in names:
        cells = [f"{times[name]:.1f}" if name in times else "-" for times in sides.values()]
        ratio = f"{sides['after'][name] / sides['before'][name]:.2f}" if name in sides["after"] and name in sides["before"] else "-"
        print(f"| {name} | {' | '.join(cells)} | {ratio} |")
    shared = [n for n in names if n in sides["before"] and n in sides["after"] and " " not in n]
    sums = {side: sum(times[n] for n in shared) for side, times in sides.items()}
    print(f"| sum of the {len(shared)} stages both have | {' | '.join(f'{v:.1f}' for v in sums.values())} | "
          f"{sums['after'] / sums['before']:.2f} |")
    per_stage = {side: sum(times[n] for n in names if n in times and " " not in n) / sum(" " not in n for n in times)
                 for side, times in sides.items()}
    print(f"| mean per stage process (all stages of each side) | {' | '.join(f'{v:.2f}' for v in per_stage.values())} | "
          f"{per_stage['after'] / per_stage['before']:.2f} |")


if __name__ == "__main__":
    main()
