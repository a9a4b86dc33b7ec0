"""A knowledge base's search: `ticketsim index build | add | delete | sync | compact | rollback | search | serve`. Tickets indexed
with a bundle's weights, the index grown or rolled back, the top k of a query or a file of them, the search page served
by gunicorn workers."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import polars as pl

from ticketsim.config import Params, load_params
from ticketsim.data.csvsource import Dialect, read_records
from ticketsim.data.validate import IntakeReport
from ticketsim.errors import ERROR, OK, StepError

# What loads torch (the Scorer), Flask or gunicorn is imported by the command that needs it: a search through a bundle's
# query export loads none of them.


def say_altered(file: str, report: IntakeReport) -> None:
    """What intake changed in the file's records (a field cut to its limit, control characters removed), on stderr: the
    index holds them so."""
    for line in report.altered():
        print(f"ticketsim: {file}: {line}", file=sys.stderr)


def workspace_params(params: str | None) -> Params:
    """`params`, else ./params.yaml where there is one, else the defaults (a bundle served or indexed outside the repo);
    a `params` that is missing is an error."""
    return load_params(params or "params.yaml") if params or Path("params.yaml").is_file() else Params(0, {})


def build_index_command(params: str | None, model: str, index: str, tickets: str, columns: str | None, precision: str | None,
                        force: bool, encoding: str | None, delimiter: str | None) -> int:
    """Every ticket of the file `tickets` indexed with the bundle's weights (`force`: the folder's index replaced;
    precision None: index.precision)."""
    from ticketsim.bundle.loader import Scorer
    from ticketsim.search.index import build_index, model_hash

    report, settings = IntakeReport(), workspace_params(params)
    records = read_records(tickets, "tickets", columns, dialect=Dialect(encoding, delimiter), report=report)
    say_altered(tickets, report)
    built = build_index(Scorer.load(model), model_hash(model), records, index, precision=precision or settings.index.precision,
                        engine=settings.encode.engine, force=force, graph=settings.index.graph)
    print(f"indexed {len(built)} tickets ({built.vectors.d} dimensions) in {index} ({built.generation.name})")
    return OK


def add_to_index_command(params: str | None, model: str, index: str, file: str, columns: str | None, encoding: str | None,
                         delimiter: str | None, upsert: bool) -> int:
    """The tickets of `file` appended to the index, no rebuild (`upsert`: one whose id is there replaces it); a running
    server follows."""
    from ticketsim.bundle.loader import Scorer
    from ticketsim.search.index import add_tickets

    report = IntakeReport()     # refused: file:line of every problem
    tickets = read_records(file, "tickets", columns, origins=True, dialect=Dialect(encoding, delimiter), report=report)
    say_altered(file, report)
    added, grown = add_tickets(index, Scorer.load(model), model, tickets, workspace_params(params).encode.engine, upsert)
    print(f"{'added or replaced' if upsert else 'added'} {added} tickets in {index} ({len(grown)} in all, "
          f"{grown.generation.name}; a running server "
          "follows). `dvc repro` rebuilds a pipeline index from its dataset: add the tickets there too to keep them")
    return OK


def delete_from_index_command(index: str, file: str | None, ids: list[str] | None) -> int:
    """The index's next generation without the tickets named (`ids`, or `file`'s lines); earlier generations removed."""
    from ticketsim.search.index import delete_tickets

    try:
        named = ids or Path(file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise StepError(f"{file}: cannot read the ids to delete ({getattr(error, 'strerror', None) or error})") from None
    left = delete_tickets(index, named)
    print(f"deleted {len(set(t.strip() for t in named if t.strip()))} tickets from {index} ({len(left)} left, "
          f"{left.generation.name}; no earlier generation kept; a running server follows)")
    return OK


def sync_index_command(params: str | None, model: str, index: str, export: str, columns: str | None, encoding: str | None,
                       delimiter: str | None, dry_run: bool) -> int:
    """The index made equal to the export `export` (new tickets added, changed ones replaced, missing ones deleted), in
    one generation; `dry_run`: the counts only, nothing written (and no model loaded)."""
    from ticketsim.search.index import TicketIndex, check_hash, model_hash
    from ticketsim.search.sync import sync_plan, sync_tickets

    report = IntakeReport()
    tickets = read_records(export, "tickets", columns, origins=True, dialect=Dialect(encoding, delimiter), report=report)
    say_altered(export, report)
    if dry_run:
        held = TicketIndex.load(index)
        check_hash(held.model_hash, model_hash(model), model, index)    # what the sync itself would refuse
        print(f"{index}: {sync_plan(held, tickets, export).counts()} by a sync with {export} (dry run: nothing written)")
        return OK
    from ticketsim.bundle.loader import Scorer

    done, synced = sync_tickets(index, Scorer.load(model), model, tickets, export, workspace_params(params).encode.engine)
    written = f"{len(synced)} tickets, {synced.generation.name}; a running server follows" if done.generation != \
        synced.generation else "it equals the export already: nothing written"
    print(f"{index}: {done.counts()} by a sync with {export} ({written})")
    return OK


def compact_index_command(index: str) -> int:
    """The index's segments joined into one, as its next generation."""
    from ticketsim.search.index import compact

    before, joined = compact(index)
    print(f"{index}: {len(joined)} tickets in one segment" + (f", joined from {before} ({joined.generation.name}; a running "
          "server follows)" if before > 1 else " already: nothing written"))
    return OK


def rollback_index_command(index: str) -> int:
    """The generation before the one in force put in force again; the next writer removes the one set aside."""
    from ticketsim.search.index import rollback

    restored, replaced = rollback(index)
    print(f"{index}: {restored.generation.name} in force ({len(restored)} tickets); {replaced}")
    return OK


def search_command(model: str, index: str, subject: str | None, description: str | None, queries: str | None, k: int,
                   json_out: bool, full: bool, encoding: str | None, delimiter: str | None,
                   where: list[tuple[str, str]] | None) -> int:
    """The top k tickets of a query typed in, or of every query of a file: a table for people or JSON (`full`: each
    ticket's texts whole, not cut to searcher.EXCERPT characters; `where`: (field, value) pairs the tickets must have)."""
    from ticketsim.search.searcher import LEGEND, Searcher

    if queries and (subject or description):
        print("ticketsim search: give --subject/--description or --queries, not both", file=sys.stderr)
        return ERROR
    report = IntakeReport()
    asked = read_records(queries, "search", dialect=Dialect(encoding, delimiter), report=report) if queries else \
        pl.DataFrame({"query_id": ["1"], "subject": [subject or ""], "description": [description or ""]})
    say_altered(queries, report)
    searcher = Searcher.load(model, index)
    if searcher.queries.runtime == "torch":    # seconds of imports: say why, so a slow answer has its reason
        print(f"ticketsim search: {model} has no query export (its variant needs torch, or it was bundled before "
              "exports): the query is encoded through torch; docs/search.md", file=sys.stderr)
    answers = searcher.search(asked, k, full, dict(where or ()))
    if json_out:
        print(json.dumps([a.as_dict() for a in answers], indent=2))
    else:   # the legend once, as the page shows it: what score and g mean for this model
        print("\n\n".join([LEGEND[searcher.queries.calibrator.fitted], *(a.as_text() for a in answers)]))
    return OK


def serve_command(params: str | None, model: str, index: str, host: str | None, port: int | None, workers: int | None,
                  feedback: str | None, token: str | None) -> int:
    """The search page over the index, on gunicorn workers (each loads the bundle and the index once)."""
    from gunicorn.errors import HaltServer

    from ticketsim.app.access import TOKEN_VARIABLE, Access
    from ticketsim.app.worker import import_heavy, server, worker_app
    from ticketsim.data.feedback import Journal
    from ticketsim.search.searcher import check_folders

    settings = workspace_params(params).serve
    host, port, workers = host or settings.host, port or settings.port, workers or settings.workers
    access = Access(host, token or os.environ.get(TOKEN_VARIABLE) or None)
    journal = Journal(feedback or settings.feedback)
    check_folders(model, index)
    import_heavy(model)

    def make_app(searcher):
        from ticketsim.app.page import create_app

        return create_app(searcher, settings, journal, access)

    writes = ("needs the token" if access.token else f"closed: no token ({TOKEN_VARIABLE} or --token)") \
        if access.needs_token else "from this machine only"
    print(f"ticketsim serve: http://{host}:{port}/ ({workers} workers; feedback to {journal.path}, {writes}; "
          "Ctrl-C stops it)", flush=True)
    served = server(worker_app(model, index, make_app), settings, host, port, workers)
    try:
        served.run()
    # gunicorn's arbiter ends with sys.exit; HaltServer: a second worker's failure, reaped while the parent halts
    except (SystemExit, HaltServer) as stop:
        failure = served.boot_failure(stop.code if isinstance(stop, SystemExit) else stop.exit_status)
        if failure is None:
            raise
        raise failure from None
    return OK
