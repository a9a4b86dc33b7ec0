"""`ticketsim`: the command line for people (the DVC stages in stages/ run the pipeline)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from ticketsim.config import DatasetConfig, load_params, set_dataset
from ticketsim.data.csvsource import TABLES, write_corpus
from ticketsim.data.intake import add_pairs
from ticketsim.data.sources import read_dataset
from ticketsim.data.synthetic import generate
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.retrain import GateOutcome, RetrainError, registered_name, retrain, run_gate, write_github
from ticketsim.tracking import TrackingUnavailable, check_reachable, rollback

FAILED, ERROR = 1, 2    # exit codes: the gate (or an intake) refused; a step could not run


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


def evaluate_command(args: argparse.Namespace) -> int:
    """A trained bundle on any dataset the importer accepts: the same metrics JSON, optionally SemEval predictions."""
    from ticketsim.evaluate.report import semeval_predictions, write_metrics
    from ticketsim.scorer import evaluate_bundle

    params = load_params(args.params)
    if args.semeval:
        xml = Path(args.semeval)
        gold = Path(args.gold).resolve().as_posix() if args.gold else None
        cfg = DatasetConfig(name=xml.stem, source="semeval2016", raw=str(xml.parent), test=xml.name, test_gold=gold)
    else:
        cfg = DatasetConfig(name="csv", source="csv", raw=args.csv) if args.csv else params.dataset(args.dataset)
    try:
        corpus = read_dataset(cfg, IntakeReport())
    except DataError as error:
        print(error, file=sys.stderr)
        return FAILED
    results, scored = evaluate_bundle(args.model, corpus, params.evaluation)
    write_metrics(results, args.out)
    print(json.dumps(results, indent=2))
    if args.predictions:
        Path(args.predictions).write_text(semeval_predictions(scored))
        print(f"wrote {scored.height} predictions to {args.predictions} (SemEval scorer format)")
    return 0


def export_command(args: argparse.Namespace) -> int:
    """The synthetic corpus in the CSV layout, to try the labelled-data flow from the embedded default."""
    params, out = load_params(args.params), Path(args.out)
    present = [p.name for table in TABLES for p in out.glob(f"{table}.*")]
    if present:
        print(f"{out} already holds {', '.join(present)}: not overwriting labelled data; choose an empty folder", file=sys.stderr)
        return ERROR
    corpus = generate(params.synthetic, params.seed)
    write_corpus(corpus, out)
    sizes = ", ".join(f"{frame.height} {name}" for name, frame in corpus.frames().items())
    print(f"wrote the synthetic corpus (seed {params.seed}: {sizes}) to {out} in the CSV layout")
    change = f"datasets.{args.dataset}: {{source: csv, raw: {out.as_posix()}}}"
    if args.set_params:
        set_dataset(args.params, args.dataset, {"source": "csv", "raw": out.as_posix()})
        print(f"set {change} in {args.params}")
    else:
        print(f"next: in {args.params} set {change}   (or rerun with --set-params)")
    print(f"then: dvc add {out.as_posix()} && git add {out.as_posix()}.dvc {args.params} && dvc push")
    return 0


def pairs_add_command(args: argparse.Namespace) -> int:
    cfg = load_params(args.params).dataset(args.dataset)
    if cfg.source != "csv":
        print(f"datasets.{args.dataset} has source {cfg.source!r}; pairs are added to a `csv` dataset "
              "(for the embedded corpus: ticketsim export --out data/labeled --set-params)", file=sys.stderr)
        return ERROR
    result = add_pairs(cfg.raw, args.file, cfg.split, datetime.now(timezone.utc), tickets=args.tickets, queries=args.queries)
    print(result.render(), file=sys.stdout if result.ok else sys.stderr)
    pointer = Path(f"{cfg.raw}.dvc")
    if result.written and pointer.exists():  # keep the DVC pointer in step, so a later `dvc pull` cannot undo the intake
        if subprocess.run([sys.executable, "-m", "dvc", "add", cfg.raw], check=False).returncode:
            print(f"the pairs were added, but `dvc add {cfg.raw}` failed: run it before any `dvc pull`", file=sys.stderr)
            return ERROR
        print(f"updated {pointer}: commit it with git, then `dvc push`")
    return 0 if result.ok else FAILED


def gate_command(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    check_reachable(params.tracking)
    outcome = run_gate(params, version=args.version, promote_on_pass=not args.dry_run)
    print(outcome.markdown)
    report_outcome(outcome, args)
    return 0 if outcome.passed else FAILED


def rollback_command(args: argparse.Namespace) -> int:
    params = load_params(args.params)
    check_reachable(params.tracking)
    model = registered_name(params)
    try:
        restored, demoted = rollback(params.tracking, model)
    except LookupError as error:
        print(error, file=sys.stderr)
        return ERROR
    print(f"{model}: champion is v{restored} again; v{demoted} is now 'previous'")
    return 0


def retrain_command(args: argparse.Namespace) -> int:
    outcome = retrain(load_params(args.params))
    print(outcome.markdown)
    report_outcome(outcome, args)
    return 0 if outcome.passed else FAILED


def report_outcome(outcome: GateOutcome, args: argparse.Namespace) -> None:
    if outcome.promoted:
        print(f"promoted {outcome.candidate.model} v{outcome.candidate.version} to champion")
    print(f"mlflow_run_id: {outcome.candidate.run_id}\nmodel_version: {outcome.candidate.version}")
    write_github(args.summary, args.outputs, outcome)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ticketsim", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a dataset and print its intake report; exit 1 on bad input")
    target = validate.add_mutually_exclusive_group(required=True)
    target.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    target.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    validate.set_defaults(run=validate_command)

    evaluate = commands.add_parser("evaluate", help="score a dataset with a trained bundle and write its metrics")
    evaluate.add_argument("--model", required=True, help="a bundle folder (the register stage's models/<dataset>/bundle)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    source.add_argument("--semeval", help="a SemEval-2016/2017 Task 3 XML file (its pairs are evaluated as the test split)")
    source.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    evaluate.add_argument("--gold", help="with --semeval: the .relevancy gold file, when the XML carries no labels")
    evaluate.add_argument("--out", required=True, help="the metrics JSON to write")
    evaluate.add_argument("--predictions", help="also write the pairs' scores in the SemEval scorer format here")
    evaluate.set_defaults(run=evaluate_command)

    export = commands.add_parser("export", help="write the synthetic corpus as a CSV-layout folder of labelled data")
    export.add_argument("--out", default="data/labeled", help="an empty or new folder (default: data/labeled)")
    export.add_argument("--dataset", default="default", help="the dataset of params.yaml to point at it")
    export.add_argument("--set-params", action="store_true", help="edit params.yaml (comments kept) instead of saying how")
    export.set_defaults(run=export_command)

    pairs = commands.add_parser("pairs", help="labelled pairs of a csv dataset").add_subparsers(dest="action", required=True)
    add = pairs.add_parser("add", help="append a batch of labelled pairs (all or nothing); exit 1 if refused")
    add.add_argument("file", help=".csv or .jsonl: ticket_id, label (YES/REL/NO or 5/3/1), query_id or subject/description")
    add.add_argument("--tickets", help="new tickets that pairs of the batch name (.csv or .jsonl, as tickets.csv)")
    add.add_argument("--queries", help="new queries that pairs of the batch name (.csv or .jsonl, as queries.csv)")
    add.add_argument("--dataset", default="default", help="a dataset of params.yaml with source: csv")
    add.set_defaults(run=pairs_add_command)

    gate = commands.add_parser("gate", help="judge the newest model version against the champion; promote it if it passes")
    gate.add_argument("--version", help="judge this version of the registered model instead (again, if it was judged)")
    gate.add_argument("--dry-run", action="store_true", help="judge only: do not promote")
    rollback_parser = commands.add_parser("rollback", help="make the previous champion the champion again")
    rollback_parser.set_defaults(run=rollback_command)
    run = commands.add_parser("retrain", help="dvc pull, dvc repro, gate, promote, dvc push; exit 1 if the gate fails")
    for command, handler in ((gate, gate_command), (run, retrain_command)):
        command.add_argument("--summary", type=Path, help="append the gate's Markdown here ($GITHUB_STEP_SUMMARY)")
        command.add_argument("--outputs", type=Path, help="append run_id=, model_version=, gate= lines here ($GITHUB_OUTPUT)")
        command.set_defaults(run=handler)
    for command in (validate, evaluate, export, add, gate, rollback_parser, run):
        command.add_argument("--params", default="params.yaml")
    from ticketsim.tune import add_tune_command  # imports torch and optuna: not at module import time

    add_tune_command(commands)  # brings its own --params
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (RetrainError, TrackingUnavailable) as error:
        print(f"ticketsim {args.command}: {error}", file=sys.stderr)
        return ERROR


if __name__ == "__main__":
    sys.exit(main())
