"""The index's writes at each of --sizes, side by side in one run: a bundle's index tiled by the index's own writer to
each size (benchmarks.common.tile: one segment, as a build writes it), then at each size: --add tickets encoded already
(copies of its own) appended in this process, the add's write alone; then, each a new process (wall and CPU),
`ticketsim index add` of --add new tickets (load, encode, write), `ticketsim index compact` (the base and the added
segments joined into one) and `ticketsim index delete` of --delete tickets drawn at random from the whole index (the
segment that holds them rewritten without them); the bytes the add wrote (hard links excluded) and the segments after
it; the last line, the largest size's time over the smallest's for each write.

    python -m benchmarks.index_writes [--model models/default/bundle --index models/default/index | --tiny AL|SL]
                                      [--sizes 1000 100000 1000000] [--add 1000] [--delete 1000] [--measure 200]

--tiny builds a tiny bundle here (benchmarks.search_scale's) and tiles the index of --measure tickets it builds instead
of --index; the output says so on the same line as the figures.
"""
import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.common import cold, copies, load_average, table, tile
from benchmarks.search_scale import CLI, build_seconds, index_add, index_arguments, tiny_bundle
from ticketsim.config import GraphConfig
from ticketsim.search.index import Encoded, TicketIndex, append

WRITES = ("add", "compact", "delete")     # the commands, in their order; "append" is the add's write alone


def new_bytes(folder: Path) -> int:
    """Bytes of the generation in force's files that no other generation links (what the add wrote)."""
    generation = TicketIndex.load(folder).generation
    return sum(p.stat().st_size for p in generation.rglob("*") if p.is_file() and p.stat().st_nlink == 1)


def writes(bundle: Path, folder: Path, args: argparse.Namespace, scratch: Path, rng: np.random.Generator) -> tuple[list, dict]:
    """(the table's cells, write -> seconds) of the writes into the index at `folder`: first --add tickets encoded
    already (copies of the index's own) appended in this process, the write alone, then the three commands."""
    index = TicketIndex.load(folder)
    started = time.perf_counter()
    again = copies(index, np.arange(args.add), 0.0, rng)
    append(folder, index.model_hash, Encoded(again.vectors, again.frame.with_columns(ticket_id="APPENDED-" + pl.col("ticket_id"))))
    appended = time.perf_counter() - started
    added = index_add(bundle, folder, args.add, scratch)
    written, segments = new_bytes(folder), len(TicketIndex.load(folder).segments)
    compacted = cold([*CLI, "index", "compact", "--index", str(folder)])   # the base and the small segments: one
    ids = TicketIndex.load(folder).table["ticket_id"].to_numpy(zero_copy_only=False)
    (scratch / "gone.txt").write_text("\n".join(rng.choice(ids, min(args.delete, len(ids) - 1), replace=False)) + "\n")
    deleted = cold([*CLI, "index", "delete", "--index", str(folder), str(scratch / "gone.txt")])
    done = dict(zip(WRITES, (added, compacted, deleted)))
    for write, run in done.items():
        if run.code:
            raise SystemExit(f"index {write} into {len(ids):,} failed (exit {run.code}): {run.output[-2000:]}")
    return ([f"{appended:.1f}", *(f"{run.seconds:.1f}" for run in done.values()), f"{added.cpu:.1f}", f"{written / 1e3:,.0f}",
             segments], {"append": appended, **{write: run.seconds for write, run in done.items()}})


def main() -> None:
    parser = index_arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add`")
    parser.add_argument("--delete", type=int, default=1000, help="tickets given to `ticketsim index delete`")
    parser.add_argument("--measure", type=int, default=200, help="--tiny: generated tickets of the index tiled")
    args = parser.parse_args()
    before, rng = load_average(), np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="index-writes-") as scratch:
        scratch = Path(scratch)
        bundle = tiny_bundle(args.tiny, scratch / "tiny") if args.tiny else args.model
        if args.tiny:
            build_seconds(bundle, args.measure, scratch / "measured")
        source = scratch / "measured" if args.tiny else args.index
        rows, seconds = [], {}
        for n in sorted(args.sizes):
            folder = scratch / f"tiled-{n}"
            tile(source, n, folder, np.random.default_rng(0), GraphConfig(tickets=0))
            cells, seconds[n] = writes(bundle, folder, args, scratch, rng)
            rows.append((f"{n:,}", *cells))
            print(f"{n:,}: " + ", ".join(f"{w} {s:.1f} s" for w, s in seconds[n].items()), flush=True)
    print(f"\n{bundle} ({'a tiny ' + args.tiny + ' bundle built here' if args.tiny else 'given'}); each write a new "
          f"process; add {args.add:,} new tickets, delete {args.delete:,} drawn from the index; load average before: "
          f"{before}, after: {load_average()}\n")
    print(table(("tickets before", "append s", "add s", "compact s", "delete s", "add CPU s", "add KB written",
                 "segments after add"), rows))
    largest, smallest = seconds[max(seconds)], seconds[min(seconds)]
    print(f"\n{max(seconds):,} / {min(seconds):,} tickets: " + ", ".join(
        f"the {write} takes {largest[write] / smallest[write]:.2f}x the time" for write in ("append", *WRITES))
        + (" (a tiny bundle)" if args.tiny else ""))


if __name__ == "__main__":
    main()
