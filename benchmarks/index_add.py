"""`ticketsim index add` of --add new tickets into an index of each of --sizes, side by side in one run: a bundle's index
tiled by the index's own writer to each size (benchmarks.common.tile: one segment, as a build writes it), then at each
size the same add as a new process (load, encode, write: wall and CPU), the bytes it wrote (hard links excluded), and
the segments after it; the last line, the largest size's time over the smallest's (segments: flat where 1.0).

    python -m benchmarks.index_add [--model models/default/bundle --index models/default/index | --tiny AL|SL]
                                   [--sizes 1000 100000 1000000] [--add 1000] [--measure 200]

--tiny builds a tiny bundle here (benchmarks.search_scale's) and tiles the index of --measure tickets it builds instead
of --index; the output says so on the same line as the figures.
"""
import argparse
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import load_average, table, tile
from benchmarks.search_scale import build_seconds, index_add, tiny_bundle
from ticketsim.config import GraphConfig
from ticketsim.search.index import TicketIndex


def new_bytes(folder: Path) -> int:
    """Bytes of the generation in force's files that no other generation links (what the add wrote)."""
    generation = TicketIndex.load(folder).generation
    return sum(p.stat().st_size for p in generation.rglob("*") if p.is_file() and p.stat().st_nlink == 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/default/bundle"))
    parser.add_argument("--index", type=Path, default=Path("models/default/index"), help="built with --model: it is tiled")
    parser.add_argument("--tiny", choices=("AL", "SL"), help="build a tiny bundle of this configuration instead of --model")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    parser.add_argument("--add", type=int, default=1000, help="new tickets given to `ticketsim index add`")
    parser.add_argument("--measure", type=int, default=200, help="--tiny: generated tickets of the index tiled")
    args = parser.parse_args()
    before = load_average()
    with tempfile.TemporaryDirectory(prefix="index-add-") as scratch:
        scratch = Path(scratch)
        bundle = tiny_bundle(args.tiny, scratch / "tiny") if args.tiny else args.model
        if args.tiny:
            build_seconds(bundle, args.measure, scratch / "measured")
        source = scratch / "measured" if args.tiny else args.index
        rows, seconds = [], {}
        for n in sorted(args.sizes):
            folder = scratch / f"tiled-{n}"
            tile(source, n, folder, np.random.default_rng(0), GraphConfig(tickets=0))
            added = index_add(bundle, folder, args.add, scratch)
            if added.code:
                raise SystemExit(f"index add into {n:,} failed (exit {added.code}): {added.output[-2000:]}")
            seconds[n] = added.seconds
            rows.append((f"{n:,}", f"{added.seconds:.1f}", f"{added.cpu:.1f}", f"{new_bytes(folder) / 1e3:,.0f}",
                         len(TicketIndex.load(folder).segments)))
            print(f"{n:,}: add of {args.add:,} in {added.seconds:.1f} s", flush=True)
    print(f"\n{bundle} ({'a tiny ' + args.tiny + ' bundle built here' if args.tiny else 'given'}); `ticketsim index add` "
          f"of {args.add:,} new tickets, a new process each; load average before: {before}, after: {load_average()}\n")
    print(table(("tickets before", "add s", "CPU s", "KB written", "segments after"), rows))
    print(f"\n{max(seconds):,} / {min(seconds):,} tickets: the add takes {seconds[max(seconds)] / seconds[min(seconds)]:.2f}x "
          f"the time" + (" (a tiny bundle)" if args.tiny else ""))


if __name__ == "__main__":
    main()
