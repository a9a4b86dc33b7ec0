"""`ticketsim`: the command line for people (the DVC stages in stages/ run the pipeline)."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ticketsim.config import Params

# Each command imports what it uses when it runs: `ticketsim --help` must not wait for torch, MLflow or polars.

# Exit codes, also listed by `ticketsim --help`. FAILED keeps its meaning for the retrain workflow (the gate said no).
OK = 0
FAILED = 1       # the quality gate failed (gate, retrain)
ERROR = 2        # a step could not run: bad params file, tracking server unreachable, dvc failed, data not overwritten (and usage errors)
BAD_INPUT = 65   # EX_DATAERR: input refused (any DataError), each problem as file:line; nothing was written
BUG = 70         # EX_SOFTWARE: an unexpected exception, a bug in ticketsim: its traceback, then a line saying so
EXIT_CODES = f"""exit codes:
  {OK:<3} ok
  {FAILED:<3} the quality gate failed (gate, retrain)
  {ERROR:<3} a step could not run (a bad params file, tracking server unreachable, dvc failed; bad usage)
  {BAD_INPUT:<3} bad input (EX_DATAERR): refused, every problem listed as file:line; nothing was written
  {BUG:<3} a bug in ticketsim (EX_SOFTWARE): the traceback is printed; please report it"""


def validate_command(args: argparse.Namespace) -> int:
    import dataclasses

    from ticketsim.config import DatasetConfig, load_params
    from ticketsim.data.sources import load_corpus, read_dataset
    from ticketsim.data.validate import DataError, IntakeReport

    if args.tickets_only and not args.csv:
        print("--tickets-only checks a --csv folder; a dataset of params says so itself (labels: false)", file=sys.stderr)
        return ERROR
    report = IntakeReport()
    given = {key: getattr(args, key) for key in ("columns", "encoding", "delimiter") if getattr(args, key)}
    try:
        if args.csv:
            read_dataset(DatasetConfig(name="csv", source="csv", raw=args.csv, labels=not args.tickets_only, **given),
                         report, options=True)
        elif given:     # instead of the dataset's own
            dataset = load_params(args.params).dataset(args.dataset)
            if dataset.source != "csv":
                print(f"{', '.join(f'--{key}' for key in given)}: for `source: csv` exports; datasets.{args.dataset} "
                      f"has source {dataset.source!r}", file=sys.stderr)
                return ERROR
            read_dataset(dataclasses.replace(dataset, **given), report)
        else:
            load_corpus(load_params(args.params), args.dataset, report)
    except DataError as error:
        print(error, file=sys.stderr)
        if args.csv and not args.tickets_only and tickets_alone(Path(args.csv)):
            print(f"{args.csv} holds tickets and no queries or pairs: add --tickets-only to check a day-one export",
                  file=sys.stderr)
        return BAD_INPUT
    print(json.dumps(report.as_dict(), indent=2))
    return 0


def tickets_alone(folder: Path) -> bool:
    """The folder holds a tickets file and neither a queries nor a pairs file (a tickets-only export)."""
    def holds(table: str) -> bool:
        return any((folder / f"{table}.{ext}").is_file() for ext in ("csv", "jsonl"))
    return holds("tickets") and not holds("queries") and not holds("pairs")


def evaluate_command(args: argparse.Namespace) -> int:
    """A trained bundle on any dataset the importer accepts: the same metrics JSON, optionally SemEval predictions."""
    from ticketsim.bundle.loader import evaluate_bundle
    from ticketsim.config import DatasetConfig, load_params
    from ticketsim.data.sources import load_corpus, read_dataset
    from ticketsim.data.validate import DataError, IntakeReport
    from ticketsim.evaluate.report import semeval_predictions, write_metrics

    params = load_params(args.params)
    if args.semeval:
        xml = Path(args.semeval)
        gold = Path(args.gold).resolve().as_posix() if args.gold else None
        cfg = DatasetConfig(name=xml.stem, source="semeval2016", raw=str(xml.parent), test=xml.name, test_gold=gold)
    elif args.csv:
        cfg = DatasetConfig(name="csv", source="csv", raw=args.csv, encoding=args.encoding, delimiter=args.delimiter)
    try:
        corpus = read_dataset(cfg, IntakeReport(), options=True) if args.semeval or args.csv else \
            load_corpus(params, args.dataset, IntakeReport())
    except DataError as error:
        print(error, file=sys.stderr)
        return BAD_INPUT
    results, scored = evaluate_bundle(args.model, corpus, params.evaluation)
    write_metrics(results, args.out)
    print(json.dumps(results, indent=2))
    if args.predictions:
        Path(args.predictions).write_text(semeval_predictions(scored))
        print(f"wrote {scored.height} predictions to {args.predictions} (SemEval scorer format)")
    return 0


def export_command(args: argparse.Namespace) -> int:
    """The synthetic corpus in the CSV layout, to try the labelled-data flow from the embedded default."""
    from ticketsim.config import load_params, set_dataset
    from ticketsim.data.csvsource import TABLES, write_corpus
    from ticketsim.data.synthetic import generate

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
    from ticketsim.config import load_params
    from ticketsim.data.csvsource import Dialect
    from ticketsim.data.intake import add_pairs

    cfg = csv_dataset(load_params(args.params), args.dataset)
    if cfg is None:
        return ERROR
    result = add_pairs(cfg.raw, args.file, cfg.split, datetime.now(timezone.utc), tickets=args.tickets, queries=args.queries,
                       dialect=Dialect(args.encoding, args.delimiter))
    print(result.render(), file=sys.stdout if result.ok else sys.stderr)
    if result.written and not pointer_updated(cfg.raw):
        return ERROR
    return 0 if result.ok else BAD_INPUT


def feedback_export_command(args: argparse.Namespace) -> int:
    """The journal's new judgments checked against the champion, judge by judge; those of unusual judges held for review."""
    from ticketsim.config import load_params
    from ticketsim.lifecycle.feedback_check import checked_export

    params = load_params(args.params)
    cfg = csv_dataset(params, args.dataset)
    if cfg is None:
        return ERROR
    result = checked_export(params, args.journal or params.serve.feedback, cfg.raw, cfg.split, datetime.now(timezone.utc))
    print(result.render(), file=sys.stdout if result.export.intake.ok else sys.stderr)
    return exported(result.export.intake, cfg.raw)


def feedback_review_command(args: argparse.Namespace) -> int:
    """The held batches of a journal, with why and their figures; or one of them accepted (exported) or rejected."""
    from ticketsim.config import load_params
    from ticketsim.data.review import accept, review_log

    params = load_params(args.params)
    journal, now = Path(args.journal or params.serve.feedback), datetime.now(timezone.utc)
    if args.accept is None:
        with review_log(journal) as log:
            if args.reject is not None:
                print(log.decide(args.reject, "rejected", now).render())
                return 0
            held = [batch.render() for batch in log.batches().values() if batch.status == "held"]
        print("\n".join(held) if held else f"{journal}: no batch is held for review")
        return 0
    cfg = csv_dataset(params, args.dataset)
    if cfg is None:
        return ERROR
    result, batch = accept(journal, args.accept, Path(cfg.raw), cfg.split, now)
    print(result.render(), file=sys.stdout if result.intake.ok else sys.stderr)
    if batch:
        print(batch.render())
    return exported(result.intake, cfg.raw)


def exported(intake, raw: str) -> int:
    """The exit status of a feedback intake into `raw` (its DVC pointer kept in step when it wrote)."""
    if intake.written and not pointer_updated(raw):
        return ERROR
    return 0 if intake.ok else BAD_INPUT


def csv_dataset(params, name: str):
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


def gate_command(args: argparse.Namespace) -> int:
    from ticketsim.config import load_params
    from ticketsim.lifecycle.promotion import run_gate
    from ticketsim.lifecycle.tracking import check_reachable

    params = load_params(args.params)
    check_reachable(params.tracking)
    outcome = run_gate(params, version=args.version, record=not args.dry_run)
    print(outcome.markdown)
    report_outcome(outcome, args)
    return 0 if outcome.passed else FAILED


def rollback_command(args: argparse.Namespace) -> int:
    from ticketsim.config import load_params
    from ticketsim.lifecycle.registry import rollback
    from ticketsim.lifecycle.tracking import check_reachable

    params = load_params(args.params)
    check_reachable(params.tracking)
    model = params.siamese.registered_name(params.retrain.dataset)
    try:
        restored, demoted = rollback(params.tracking, model)
    except LookupError as error:
        print(error, file=sys.stderr)
        return ERROR
    print(f"{model}: champion is v{restored} again; v{demoted} is now 'previous'")
    return 0


def retrain_command(args: argparse.Namespace) -> int:
    from ticketsim.app.retrain_road import register_query_tower
    from ticketsim.config import load_params
    from ticketsim.lifecycle.promotion import retrain
    from ticketsim.lifecycle.retrain_lock import retrain_lock

    params = load_params(args.params)
    with retrain_lock(args.wait):     # before the first write (dvc pull): one retrain at a time in a workspace
        outcome = retrain(params, None if args.full else register_query_tower)
    print(outcome.markdown)
    report_outcome(outcome, args)
    return 0 if outcome.passed else FAILED


def report_outcome(outcome, args: argparse.Namespace) -> None:
    """Print the verdict of a ticketsim.lifecycle.promotion.GateOutcome and write it for GitHub Actions."""
    from ticketsim.lifecycle.promotion import write_github

    if outcome.promoted:
        print(f"promoted {outcome.candidate.model} v{outcome.candidate.version} to champion")
    print(f"mlflow_run_id: {outcome.candidate.run_id}\nmodel_version: {outcome.candidate.version}")
    write_github(args.summary, args.outputs, outcome)


def search_command(args: argparse.Namespace) -> int:
    """The top k tickets of a query typed in, or of every query of a file: a table for people or JSON."""
    import polars as pl

    from ticketsim.search.searcher import LEGEND, Searcher

    if args.queries and (args.subject or args.description):
        print("ticketsim search: give --subject/--description or --queries, not both", file=sys.stderr)
        return ERROR
    if args.queries:
        from ticketsim.data.csvsource import read_records  # the importers: only for a file of queries

        queries = read_records(args.queries, "search", dialect=dialect(args))
    else:
        queries = pl.DataFrame({"query_id": ["1"], "subject": [args.subject or ""], "description": [args.description or ""]})
    searcher = Searcher.load(args.model, args.index)
    if searcher.queries.road == "torch":    # seconds of imports: say why, so a slow answer has its reason
        print(f"ticketsim search: {args.model} has no query export (its variant needs torch, or it was bundled before "
              "exports): the query is encoded through torch; docs/search.md", file=sys.stderr)
    answers = searcher.search(queries, args.k)
    if args.json:
        print(json.dumps([a.as_dict() for a in answers], indent=2))
    else:   # the legend once, as the page shows it: what score and g mean for this model
        print("\n\n".join([LEGEND[searcher.queries.calibrator.fitted], *(a.as_text() for a in answers)]))
    return OK


def index_build_command(args: argparse.Namespace) -> int:
    from ticketsim.bundle.loader import Scorer
    from ticketsim.data.csvsource import read_records
    from ticketsim.search.index import build_index, model_hash

    tickets = read_records(args.tickets, "tickets", args.columns, dialect=dialect(args))
    index = build_index(Scorer.load(args.model), model_hash(args.model), tickets, args.index, precision=args.precision,
                        engine=workspace_params(args).encode.engine, force=args.force)
    print(f"indexed {len(index)} tickets ({index.vectors.d} dimensions) in {args.index} ({index.generation.name})")
    return OK


def index_add_command(args: argparse.Namespace) -> int:
    from ticketsim.bundle.loader import Scorer
    from ticketsim.data.csvsource import read_records
    from ticketsim.search.index import add_tickets

    tickets = read_records(args.file, "tickets", args.columns, origins=True, dialect=dialect(args))   # refused: file:line
    added, index = add_tickets(args.index, Scorer.load(args.model), args.model, tickets, workspace_params(args).encode.engine)
    print(f"added {added} tickets to {args.index} ({len(index)} in all, {index.generation.name}; a running server "
          "follows). `dvc repro` rebuilds a pipeline index from its dataset: add the tickets there too to keep them")
    return OK


def dialect(args: argparse.Namespace):
    """The csvsource.Dialect of the files the command line names (--encoding, --delimiter)."""
    from ticketsim.data.csvsource import Dialect

    return Dialect(args.encoding, args.delimiter)


def workspace_params(args: argparse.Namespace) -> Params:
    """--params, else ./params.yaml where there is one, else the defaults (a bundle served or indexed outside the repo);
    a --params that is missing is an error."""
    from ticketsim.config import Params, load_params

    return load_params(args.params or "params.yaml") if args.params or Path("params.yaml").is_file() else Params(0, {})


def serve_command(args: argparse.Namespace) -> int:
    import os

    from ticketsim.app.access import TOKEN_VARIABLE, Access
    from ticketsim.app.worker import import_heavy, run, worker_app
    from ticketsim.data.feedback import Journal
    from ticketsim.search.searcher import check_folders

    settings = workspace_params(args).serve
    host, port, workers = args.host or settings.host, args.port or settings.port, args.workers or settings.workers
    access = Access(host, args.token or os.environ.get(TOKEN_VARIABLE) or None)
    journal = Journal(args.feedback or settings.feedback)
    check_folders(args.model, args.index)
    import_heavy(args.model)

    def make_app(searcher):
        from ticketsim.app.page import create_app

        return create_app(searcher, settings, journal, access)

    writes = ("needs the token" if access.token else f"closed: no token ({TOKEN_VARIABLE} or --token)") \
        if access.needs_token else "from this machine only"
    print(f"ticketsim serve: http://{host}:{port}/ ({workers} workers; feedback to {journal.path}, {writes}; "
          "Ctrl-C stops it)", flush=True)
    run(worker_app(args.model, args.index, make_app), settings, host, port, workers)
    return OK


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least 1")
    return int(text)


def checked(check):
    """A check of ticketsim.config as an argparse type: its ValueError's message is what argparse prints."""
    def parse(text: str):
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return parse


def tune_command(args: argparse.Namespace) -> int:
    """The tune stage's work on the files `dvc repro` leaves: the channel caches there are, and for a dev objective the
    siamese stage's model of siamese.final when it has run (else the search trains one; cv_map trains its fold models)."""
    from ticketsim.config import load_params, stage_paths
    from ticketsim.model.saved import WEIGHTS
    from ticketsim.tuning.tuner import prepared_for_tuning, run  # torch and optuna

    params = load_params(args.params).for_dataset(args.dataset)
    files, base = stage_paths("tune", args.dataset), Path(stage_paths("siamese", args.dataset)["out"]) / params.siamese.final
    channels = [path for path in files["channels"] if Path(path).is_file()]
    result = run(params, args.dataset,
                 lambda: prepared_for_tuning(params, files["corpus"], files["tokens"], files["word2vec"], files["char_blstm"], channels),
                 args.out or files["out"], args.metrics or files["metrics"], args.plots or files["plots"], args.workers,
                 base if (base / WEIGHTS).is_file() else None)
    print(json.dumps(result, indent=2))
    return OK


def select_command(args: argparse.Namespace) -> int:
    from ticketsim.training.selection_report import command  # torch

    command(args)
    return OK


def curve_command(args: argparse.Namespace) -> int:
    from ticketsim.training.curve_report import command  # torch

    command(args)
    return OK


def main(argv: list[str] | None = None) -> int:
    from ticketsim.config import csv_delimiter, text_encoding  # light: PyYAML

    parser = argparse.ArgumentParser(prog="ticketsim", description=__doc__, epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    validate = commands.add_parser("validate", help="check a dataset and print its intake report; exit 65 on bad input")
    target = validate.add_mutually_exclusive_group(required=True)
    target.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    target.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    validate.add_argument("--tickets-only", action="store_true",
                          help="with --csv: the folder holds tickets alone, no labelled pairs yet (as labels: false)")
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
    add = pairs.add_parser("add", help="append a batch of labelled pairs (all or nothing); exit 65 if refused")
    add.add_argument("file", help=".csv or .jsonl: ticket_id, label (YES/REL/NO or 5/3/1), query_id or subject/description")
    add.add_argument("--tickets", help="new tickets that pairs of the batch name (.csv or .jsonl, as tickets.csv)")
    add.add_argument("--queries", help="new queries that pairs of the batch name (.csv or .jsonl, as queries.csv)")
    add.add_argument("--dataset", default="default", help="a dataset of params.yaml with source: csv")
    add.set_defaults(run=pairs_add_command)

    gate = commands.add_parser("gate", help="judge the newest model version against the champion; promote it if it passes")
    gate.add_argument("--version", help="judge this version of the registered model instead (again, if it was judged)")
    gate.add_argument("--dry-run", action="store_true", help="judge only: write nothing to the registry (no tag, no promotion)")
    rollback_parser = commands.add_parser("rollback", help="make the previous champion the champion again")
    rollback_parser.set_defaults(run=rollback_command)
    run = commands.add_parser("retrain", help="train the champion's query tower (or with --full: dvc pull, dvc repro), gate, "
                              "promote, dvc push; exit 1 if the gate fails")
    run.add_argument("--full", action="store_true", help="train both towers and rebuild the index (dvc repro of retrain.targets), "
                     "not the champion's query tower alone")
    run.add_argument("--wait", type=positive, metavar="SECONDS",
                     help="when another retrain runs in this folder, wait up to SECONDS for it (default: refuse at once)")
    for command, handler in ((gate, gate_command), (run, retrain_command)):
        command.add_argument("--summary", type=Path, help="append the gate's Markdown here ($GITHUB_STEP_SUMMARY)")
        command.add_argument("--outputs", type=Path, help="append run_id=, model_version=, gate= lines here ($GITHUB_OUTPUT)")
        command.set_defaults(run=handler)
    tune = commands.add_parser("tune", help="Optuna search of W, V and hidden size on train+dev (the tune stage's work)")
    tune.add_argument("dataset")
    tune.add_argument("--workers", type=int, default=None, help="processes running trials of one study (default: tune.workers)")
    tune.add_argument("--out", help="the tuned variant YAML (default: the tune stage's, tuned/<dataset>.yaml)")
    tune.add_argument("--metrics", help="default: the tune stage's, metrics/<dataset>/tune.json")
    tune.add_argument("--plots", help="default: the tune stage's, plots/<dataset>/tune")
    tune.set_defaults(run=tune_command)
    select = commands.add_parser("select", help="configurations by k-fold CV over queries, under shift, paired tests, the "
                                                "choice of siamese.final (trained and chosen on train + dev only)",
                                 description="Cross-validated rerank MAP over the train + dev queries beside the dev MAP and "
                                             "the MAP under each shift (lay split, later year, cross-part, cross-dataset), paired tests "
                                             "over queries and the choice against siamese.unlabelled (docs/tuning.md)")
    select.add_argument("--workspace", type=Path, default=Path("."), help="the folder holding params.yaml and data/")
    select.add_argument("--dataset", help="a key of `datasets` in the workspace's params.yaml")
    select.add_argument("--variants", nargs="+",
                        help="names in siamese.variants or siamese.finetuned; the first is the one the paired tests "
                             "compare the others with (siamese.unlabelled, the reference of the choice, is added)")
    select.add_argument("--folds", type=int, default=5)
    select.add_argument("--seeds", type=int, nargs="+", default=[13, 14, 15])
    select.add_argument("--cv-seeds", type=int, help="cross-validate with the first N seeds only (default: all; 0: no "
                                                        "cross-validation nor paired tests); the dev figure uses every seed")
    select.add_argument("--epochs", type=int, help="training epochs per model (default: each variant's own training config)")
    select.add_argument("--baselines", action="store_true", help="add BM25, S's row #14 and the source order, untrained")
    select.add_argument("--resamples", type=int, default=10_000, help="bootstrap and permutation draws of each paired test")
    select.add_argument("--out", type=Path, help="write the report as JSON here")
    select.add_argument("--cross", nargs=2, metavar=("WORKSPACE", "DATASET"),
                        help="the cross-dataset shift: each seed's model also scores this dataset's train + dev queries "
                             "(its workspace's pipeline files)")
    select.add_argument("--merge", type=Path, nargs="+", metavar="REPORT",
                        help="no training: one report of these --out reports (same data and folds): other seeds of the same "
                             "configurations, or other configurations on the same seeds")
    select.set_defaults(run=select_command)
    curve = commands.add_parser("curve", help="a learning curve: CV MAP of trained configurations on 25, 50, ... judged "
                                "queries, beside zero-shot and BM25 (train + dev only)",
                                description="What agents' clicks buy: each fold's model trained on n judged queries of "
                                            "the other folds (docs/model.md)")
    curve.add_argument("--workspace", type=Path, default=Path("."), help="the folder holding params.yaml and data/")
    curve.add_argument("--dataset", required=True, help="a key of `datasets` in the workspace's params.yaml")
    curve.add_argument("--variants", nargs="+", required=True, help="names in siamese.variants or siamese.finetuned: "
                       "trained ones make curves, label-free ones (labels: false, e.g. Szs+L) flat lines")
    curve.add_argument("--sizes", nargs="+", help="judged queries per model, or `all` (default: 25 50 100 200 all)")
    curve.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    curve.add_argument("--folds", type=int, default=5)
    curve.add_argument("--extra", nargs="+", default=[], metavar="SPLIT",
                       help="splits never trained on that every model scores too (a shift split)")
    curve.add_argument("--reference", help="the untrained line each point is tested against (default: the first "
                                           "label-free variant, else S's zero-shot row)")
    curve.add_argument("--epochs", type=int, help="training epochs per model (default: each variant's own)")
    curve.add_argument("--out", type=Path, help="write the report as JSON here")
    curve.add_argument("--plot", type=Path, help="draw the curve as a PNG here")
    curve.add_argument("--no-mlflow", action="store_true", help="log nothing to MLflow (default: a `curve` run in "
                                                                 "params' tracking experiment)")
    curve.set_defaults(run=curve_command)

    search = commands.add_parser("search", help="the top k tickets of a query (or of every query of a file), with reasons")
    search.add_argument("--subject", help="the query's subject")
    search.add_argument("--description", help="the query's description")
    search.add_argument("--queries", help="a .csv or .jsonl file of queries: subject, description (query_id optional)")
    search.add_argument("-k", type=positive, default=10, help="tickets per query (default 10)")
    search.add_argument("--json", action="store_true", help="JSON for machines instead of a table")
    search.set_defaults(run=search_command)
    index = commands.add_parser("index", help="the search index of a knowledge base").add_subparsers(dest="action", required=True)
    build_parser = index.add_parser("build", help="index every ticket of a file with a bundle's weights")
    build_parser.add_argument("--tickets", required=True, help=".csv or .jsonl: ticket_id, subject, description, solution")
    build_parser.add_argument("--precision", choices=("float32", "float16"), default="float32",
                              help="of the stored vectors: float16 halves the index's bytes, near-ties may swap places")
    build_parser.add_argument("--force", action="store_true", help="replace the index the folder already holds")
    build_parser.set_defaults(run=index_build_command)
    grow = index.add_parser("add", help="append tickets to an index (no rebuild); exit 65 if refused")
    grow.add_argument("file", help=".csv or .jsonl: ticket_id, subject, description, solution (ids new to the index)")
    grow.set_defaults(run=index_add_command)
    serve = commands.add_parser("serve", help="a small search page over the index (a query form, ranked tickets, reasons)")
    serve.add_argument("--host", help="the address to listen on (default: serve.host, 127.0.0.1); off loopback, feedback "
                                      "needs the token")
    serve.add_argument("--port", type=positive, help="default: serve.port (8000)")
    serve.add_argument("--workers", type=positive, help="gunicorn worker processes (default: serve.workers)")
    serve.add_argument("--feedback", help="the feedback journal (default: serve.feedback, feedback/judgments.jsonl)")
    serve.add_argument("--token", help="the token that writing feedback needs (better: the variable TICKETSIM_FEEDBACK_TOKEN, "
                                       "which `ps` does not show)")
    serve.add_argument("--params", help="the params file of serve.* (default: params.yaml when there is one)")
    serve.set_defaults(run=serve_command)
    feedback = commands.add_parser("feedback", help="judgments from the search page and the served model")
    feedback_actions = feedback.add_subparsers(dest="action", required=True)
    feedback_export = feedback_actions.add_parser(
        "export", help="check the journal's new judgments against the champion and hand them to a csv dataset as labelled "
        "pairs (as `pairs add`), those of an unusual judge held for review; exit 65 if refused")
    feedback_export.set_defaults(run=feedback_export_command)
    review = feedback_actions.add_parser("review", help="list the batches of judgments held for review; accept or reject one")
    decision = review.add_mutually_exclusive_group()
    decision.add_argument("--accept", type=int, metavar="BATCH", help="hand this held batch to the dataset as export does")
    decision.add_argument("--reject", type=int, metavar="BATCH", help="never hand this held batch to the dataset")
    review.set_defaults(run=feedback_review_command)
    for command in (feedback_export, review):
        command.add_argument("--journal", help="default: serve.feedback (feedback/judgments.jsonl)")
        command.add_argument("--dataset", default="default", help="a dataset of params.yaml with source: csv")
    for command in (search, build_parser, grow, serve):
        command.add_argument("--model", default="models/default/bundle", help="a bundle (default: models/default/bundle)")
        command.add_argument("--index", default="models/default/index", help="an index folder (default: models/default/index)")
    for command in (validate, evaluate, export, add, feedback_export, review, gate, rollback_parser, run, tune):
        command.add_argument("--params", default="params.yaml")
    for command in (build_parser, grow):
        command.add_argument("--params", help="the params file of encode.engine (default: params.yaml when there is one)")
    for command in (validate, build_parser, grow):
        command.add_argument("--columns", help="how the export names its columns: jira, servicenow, zendesk, otrs, or a "
                             "mapping .yaml (docs/helpdesk-data.md); validate: instead of the dataset's own")
    for command in (validate, evaluate, add, search, build_parser, grow):
        command.add_argument("--encoding", type=checked(text_encoding), help="of the CSV files read (cp1252, latin-1, ...; default "
                             "UTF-8; JSONL is UTF-8); validate: instead of the dataset's own")
        command.add_argument("--delimiter", type=checked(csv_delimiter), help="of the CSV files read (';', tab; default: a comma, or "
                             "the ';' or tab a header is written with); validate: instead of the dataset's own")
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except Exception as error:
        import traceback

        from ticketsim.config import ConfigError
        from ticketsim.data.validate import DataError
        from ticketsim.errors import StepError

        if isinstance(error, DataError):
            print(f"ticketsim {args.command}: {error}", file=sys.stderr)
            return BAD_INPUT
        if isinstance(error, (StepError, ConfigError)):
            print(f"ticketsim {args.command}: {error}", file=sys.stderr)
            return ERROR
        traceback.print_exc()
        print(f"ticketsim {args.command}: the error above is a bug in ticketsim, not a problem of your input "
              f"(exit {BUG}); please report it with the traceback", file=sys.stderr)
        return BUG


if __name__ == "__main__":
    sys.exit(main())
