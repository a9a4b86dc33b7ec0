"""What brings data in: `ticketsim validate | export | pairs add | feedback export | feedback review`. A dataset checked,
the synthetic corpus exported as labelled data, labelled pairs and checked judgments added to a csv dataset, whose DVC
pointer is kept in step."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from ticketsim.config import DatasetConfig, Params, load_params, set_dataset
from ticketsim.data.csvsource import TABLES, Dialect, write_corpus
from ticketsim.data.intake import add_pairs
from ticketsim.data.review import accept, review_log
from ticketsim.data.sources import load_corpus, read_dataset
from ticketsim.data.synthetic import generate
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.errors import BAD_INPUT, ERROR, OK
from ticketsim.lifecycle.feedback_check import checked_export


def validate_command(params: str, dataset: str | None, csv: str | None, tickets_only: bool, columns: str | None,
                     encoding: str | None, delimiter: str | None) -> int:
    """The intake report of a dataset of params (or of a --csv folder, or with another export's dialect) as JSON."""
    if tickets_only and not csv:
        print("--tickets-only checks a --csv folder; a dataset of params says so itself (labels: false)", file=sys.stderr)
        return ERROR
    report = IntakeReport()
    given = {key: value for key, value in (("columns", columns), ("encoding", encoding), ("delimiter", delimiter)) if value}
    try:
        if csv:
            read_dataset(DatasetConfig(name="csv", source="csv", raw=csv, labels=not tickets_only, **given), report, options=True)
        elif given:     # instead of the dataset's own
            cfg = load_params(params).dataset(dataset)
            if cfg.source != "csv":
                print(f"{', '.join(f'--{key}' for key in given)}: for `source: csv` exports; datasets.{dataset} "
                      f"has source {cfg.source!r}", file=sys.stderr)
                return ERROR
            read_dataset(dataclasses.replace(cfg, **given), report)
        else:
            load_corpus(load_params(params), dataset, report)
    except DataError as error:
        print(error, file=sys.stderr)
        if csv and not tickets_only and tickets_alone(Path(csv)):
            print(f"{csv} holds tickets and no queries or pairs: add --tickets-only to check a day-one export", file=sys.stderr)
        return BAD_INPUT
    print(json.dumps(report.as_dict(), indent=2))
    return OK


def tickets_alone(folder: Path) -> bool:
    """The folder holds a tickets file and neither a queries nor a pairs file (a tickets-only export)."""
    def holds(table: str) -> bool:
        return any((folder / f"{table}.{ext}").is_file() for ext in ("csv", "jsonl"))
    return holds("tickets") and not holds("queries") and not holds("pairs")


def export_command(params: str, out: str, dataset: str, set_params: bool) -> int:
    """The synthetic corpus in the CSV layout, to try the labelled-data flow from the embedded default."""
    loaded, folder = load_params(params), Path(out)
    present = [p.name for table in TABLES for p in folder.glob(f"{table}.*")]
    if present:
        print(f"{folder} already holds {', '.join(present)}: not overwriting labelled data; choose an empty folder", file=sys.stderr)
        return ERROR
    corpus = generate(loaded.synthetic, loaded.seed)
    write_corpus(corpus, folder)
    sizes = ", ".join(f"{frame.height} {name}" for name, frame in corpus.frames().items())
    print(f"wrote the synthetic corpus (seed {loaded.seed}: {sizes}) to {folder} in the CSV layout")
    change = f"datasets.{dataset}: {{source: csv, raw: {folder.as_posix()}}}"
    if set_params:
        set_dataset(params, dataset, {"source": "csv", "raw": folder.as_posix()})
        print(f"set {change} in {params}")
    else:
        print(f"next: in {params} set {change}   (or rerun with --set-params)")
    print(f"then: dvc add {folder.as_posix()} && git add {folder.as_posix()}.dvc {params} && dvc push")
    return OK


def add_pairs_command(params: str, dataset: str, file: str, tickets: str | None, queries: str | None,
                      encoding: str | None, delimiter: str | None) -> int:
    """A batch of labelled pairs appended to a csv dataset, all or nothing."""
    cfg = csv_dataset(load_params(params), dataset)
    if cfg is None:
        return ERROR
    result = add_pairs(cfg.raw, file, cfg.split, datetime.now(timezone.utc), tickets=tickets, queries=queries,
                       dialect=Dialect(encoding, delimiter))
    print(result.render(), file=sys.stdout if result.ok else sys.stderr)
    if result.written and not pointer_updated(cfg.raw):
        return ERROR
    return OK if result.ok else BAD_INPUT


def export_feedback_command(params: str, dataset: str, journal: str | None) -> int:
    """The journal's new judgments checked against the champion, judge by judge; those of unusual judges held for review."""
    loaded = load_params(params)
    cfg = csv_dataset(loaded, dataset)
    if cfg is None:
        return ERROR
    result = checked_export(loaded, journal or loaded.serve.feedback, cfg.raw, cfg.split, datetime.now(timezone.utc))
    print(result.render(), file=sys.stdout if result.export.intake.ok else sys.stderr)
    return exported(result.export.intake, cfg.raw)


def review_feedback_command(params: str, dataset: str, journal: str | None, accept_batch: int | None,
                            reject_batch: int | None) -> int:
    """The held batches of a journal, with why and their figures; or one of them accepted (exported) or rejected."""
    loaded = load_params(params)
    path, now = Path(journal or loaded.serve.feedback), datetime.now(timezone.utc)
    if accept_batch is None:
        with review_log(path) as log:
            if reject_batch is not None:
                print(log.decide(reject_batch, "rejected", now).render())
                return OK
            held = [batch.render() for batch in log.batches().values() if batch.status == "held"]
        print("\n".join(held) if held else f"{path}: no batch is held for review")
        return OK
    cfg = csv_dataset(loaded, dataset)
    if cfg is None:
        return ERROR
    result, batch = accept(path, accept_batch, Path(cfg.raw), cfg.split, now)
    print(result.render(), file=sys.stdout if result.intake.ok else sys.stderr)
    if batch:
        print(batch.render())
    return exported(result.intake, cfg.raw)


def exported(intake, raw: str) -> int:
    """The exit status of a feedback intake into `raw` (its DVC pointer kept in step when it wrote)."""
    if intake.written and not pointer_updated(raw):
        return ERROR
    return OK if intake.ok else BAD_INPUT


def csv_dataset(params: Params, name: str) -> DatasetConfig | None:
    """The DatasetConfig labelled pairs are added to, or None (said why) when it is not a `csv` dataset in ticketsim's
    layout: the intake rewrites the folder's files as UTF-8 with commas."""
    cfg = params.dataset(name)
    if cfg.source != "csv":
        print(f"datasets.{name} has source {cfg.source!r}; pairs are added to a `csv` dataset "
              "(for the embedded corpus: ticketsim export --out data/labeled --set-params)", file=sys.stderr)
        return None
    if cfg.encoding or cfg.delimiter:
        print(f"datasets.{name} sets its files' encoding or delimiter; pairs are added to a folder in ticketsim's layout "
              "(UTF-8, commas), which the intake rewrites: save the folder's files so and remove those keys", file=sys.stderr)
        return None
    return cfg


def pointer_updated(raw: str) -> bool:
    """After an intake wrote to `raw`: keep its DVC pointer in step (so a later `dvc pull` cannot undo the intake)."""
    pointer = Path(f"{raw}.dvc")
    if not pointer.exists():
        return True
    if subprocess.run([sys.executable, "-m", "dvc", "add", raw], check=False).returncode:
        print(f"the pairs were added, but `dvc add {raw}` failed: run it before any `dvc pull`", file=sys.stderr)
        return False
    print(f"updated {pointer}: commit it with git, then `dvc push`")
    return True
