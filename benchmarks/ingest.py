"""Ingest at a help desk's size, measured at that size: --tickets generated tickets (the synthetic corpus's generator:
every ticket its own texts, none tiled) written to a CSV and indexed by `ticketsim index build` with the bundle as a new
process (wall, CPU, peak RSS); then `ticketsim index add` of --add more into that index, and a cold `ticketsim search`
of the result. First, where a ticket's time goes: the build of --profile tickets in this process under cProfile, split
into channel S (cutting into passages and encoding), the tokens, and the rest (topics, flattening, BM25, writing).

    python -m benchmarks.ingest [--model models/default/bundle] [--tickets 100000] [--add 1000] [--profile 1000]
"""
import argparse
import cProfile
import pstats
import sys
import tempfile
from pathlib import Path

import polars as pl

from benchmarks.common import Cold, cold, load_average, table
from benchmarks.search_scale import cold_search, index_add
from ticketsim.bundle.loader import Scorer
from ticketsim.config import SyntheticConfig
from ticketsim.data.synthetic import generate
from ticketsim.model.branches import ticket_cost
from ticketsim.scoring.weights import metric_of
from ticketsim.search.index import TicketIndex, build_index, model_hash

CLI = [sys.executable, "-m", "ticketsim.cli"]
GOALS = {"build": (100_000, 3600.0), "add": (100_000, 120.0)}     # step -> (at this many tickets, within these seconds)
# The parts of a build as cProfile names them: (file ending, function) -> the part's name
PARTS = {("channels/sentence.py", "encode_groups"): "channel S: passages and encoding",
         ("text/tokenize.py", "tokenize_corpus"): "tokens"}


def tickets(n: int, seed: int) -> pl.DataFrame:
    """n generated tickets (search_scale.index_add generates the added ones, under ids of their own)."""
    return generate(SyntheticConfig(n_tickets=n, n_labeled_queries=10, n_enduser_queries=10, n_lay_queries=0), seed).tickets


def where_time_goes(bundle: Path, n: int, out: Path) -> dict[str, float]:
    """Seconds of each part of an index build of n tickets in this process (after a warm-up build of five: every model
    loads on first use), with 'all'; cProfile's own overhead falls mostly on the Python-heavy parts."""
    scorer, frame = Scorer.load(bundle), tickets(n, 31)
    build_index(scorer, model_hash(bundle), frame.head(5), out, force=True)
    profile = cProfile.Profile()
    profile.runcall(build_index, scorer, model_hash(bundle), frame, out, force=True)
    stats = pstats.Stats(profile).stats     # (file, line, function) -> (calls, primitive calls, own, cumulative, callers)
    found = {name: sum(row[3] for (file, _, function), row in stats.items() if file.endswith(ending) and function == called)
             for (ending, called), name in PARTS.items()}
    total = max(row[3] for row in stats.values())
    return found | {"the rest: topics, flattening, BM25, writing": total - sum(found.values()), "all": total}


def timed(step: str, done: Cold) -> Cold:
    if done.code:
        raise SystemExit(f"{step} failed (exit {done.code}):\n{done.output[-2000:]}")
    return done


def goal(step: str, n: int, seconds: float) -> str:
    size, limit = GOALS[step]
    if n != size:
        return f"not at the goal's size ({size:,} tickets)"
    return f"< {limit:,.0f} s: {'met' if seconds < limit else 'missed'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/default/bundle"))
    parser.add_argument("--tickets", type=int, default=100_000, help="tickets of the CSV indexed")
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add` (0: none)")
    parser.add_argument("--profile", type=int, default=1000, help="tickets of the profiled build in this process (0: none)")
    args = parser.parse_args()
    before, scorer = load_average(), Scorer.load(args.model)
    passes, blocks = ticket_cost(metric_of(scorer.variant))
    with tempfile.TemporaryDirectory(prefix="ingest-") as scratch:
        scratch = Path(scratch)
        parts = where_time_goes(args.model, args.profile, scratch / "profiled") if args.profile else {}
        tickets(args.tickets, 13).write_csv(scratch / "tickets.csv")
        index = scratch / "index"
        build = timed("index build", cold([*CLI, "index", "build", "--tickets", str(scratch / "tickets.csv"), "--model",
                                           str(args.model), "--index", str(index)]))
        if args.add:
            added = timed("index add", index_add(args.model, index, args.add, scratch))
        search = cold_search(args.model, index)
        loaded = TicketIndex.load(index)
        size, dims = len(loaded), loaded.vectors.d
    print(f"\n{args.model}: {scorer.variant.channels} on {len(scorer.variant.levels)} level pair(s), {passes} encoder "
          f"pass(es) and {dims} flat dims per ticket; load average before: {before}, after: {load_average()}\n")
    if parts:
        print(f"where the time of an index build goes ({args.profile:,} tickets in this process, cProfile)\n")
        print(table(("part", "s", "share", "s per 1,000 tickets"),
                    [(name, f"{s:.1f}", f"{s / parts['all']:.0%}", f"{1000 * s / args.profile:.1f}") for name, s in parts.items()]))
        print()
    rows = [("index build from a CSV (a new process)", f"{args.tickets:,}", f"{build.seconds:,.0f}", f"{build.cpu:,.0f}",
             f"{args.tickets / build.seconds:.1f}", f"{build.peak_rss / 1e6:,.0f}", goal("build", args.tickets, build.seconds))]
    if args.add:
        rows.append((f"index add of {args.add:,} (a new process)", f"{args.add:,} into {args.tickets:,}", f"{added.seconds:,.1f}",
                     f"{added.cpu:,.0f}", f"{args.add / added.seconds:.1f}", f"{added.peak_rss / 1e6:,.0f}",
                     goal("add", args.tickets, added.seconds) if args.add == 1000 else "the goal adds 1,000"))
    rows.append(("cold search of the result", f"{size:,}", f"{search.seconds:.2f}", f"{search.cpu:.1f}", "",
                 f"{search.peak_rss / 1e6:,.0f}", ""))
    print(table(("step", "tickets", "s", "CPU s", "tickets/s", "peak RSS MB", "goal"), rows))


if __name__ == "__main__":
    main()
