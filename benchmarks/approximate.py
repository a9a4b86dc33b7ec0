"""The approximate index against the exact search, side by side in one run: first --index as it is, its graph linked
beside it (its own tickets: the recall that counts), then at each of --sizes the index tiled by its writer
(benchmarks.common.tile), whose last --add tickets are appended and then compacted with a graph (index.graph's
threshold crossed: the one segment links every ticket, timed). Each is searched for --queries end-user queries exactly
and through the graph at each of --breadths: recall@10 (the share of the exact ten that the graph's ten hold; on a
tiled index also by source ticket, since copies share one ticket's texts and differ by noise alone), p50 and p95 of a
search, query encoding included; then --add more tickets are added beside the tiled graph (a segment of their own,
scanned; timed). And float16 vectors against float32 on the index as it is: how many top 10s keep their order, and
their tickets.

    python -m benchmarks.approximate [--model models/default/bundle --index models/default/index]
                                     [--sizes 100000 1000000] [--breadths 32 64 128 256] [--queries 200] [--add 1000]
"""
import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchmarks.common import copies, copy_noise, end_user_queries, load_average, percentiles, searched_one_by_one, table, tile
from ticketsim.config import GraphConfig, IndexConfig
from ticketsim.search.graph import GRAPH, GraphVectors, write_graph
from ticketsim.search.index import TicketIndex, append, compact
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.vectors import TicketVectors


def recall(exact: list[list[str]], found: list[list[str]]) -> float:
    """The share of each exact list that the other holds, averaged over the queries."""
    return float(np.mean([len(set(a) & set(b)) / len(set(a)) for a, b in zip(exact, found)]))


def sources(lists: list[list[str]]) -> list[list[str]]:
    """The ticket each tiled copy copies (its id without common.copies' "~n"): copies share texts and solutions."""
    return [[ticket_id.split("~")[0] for ticket_id in ids] for ids in lists]


def compared(index: TicketIndex, searcher_of, queries: list[dict[str, str]], breadths: list[int]) -> dict:
    """The exact search's p50 and p95, and at each breadth the graph's recall@10 by ticket and by source ticket, p50, p95."""
    exact, exact_seconds = searched_one_by_one(searcher_of(index.exact()), queries)
    rows = []
    for breadth in breadths:
        for segment in index.segments:
            if segment.graph is not None:
                segment.graph.breadth = breadth
        found, seconds = searched_one_by_one(searcher_of(index), queries)
        rows.append((breadth, recall(exact, found), recall(sources(exact), sources(found)), *percentiles(seconds)))
    return {"exact": percentiles(exact_seconds), "graph": rows}


def own(source: Path, folder: Path, searcher_of, queries, breadths) -> dict:
    """The index as it is, its graph linked into `folder` (the index itself unchanged)."""
    base = TicketIndex.load(source)
    folder.mkdir()
    started = time.perf_counter()
    [segment] = base.segments
    write_graph(folder, segment.vectors.array, replace(IndexConfig.graph, tickets=1))
    linked = time.perf_counter() - started
    index = replace(base, segments=(replace(segment, graph=GraphVectors.load(folder, segment.vectors, IndexConfig.graph)),))
    return {"linked": linked, "extended": None, "graph_bytes": (folder / GRAPH).stat().st_size,
            **compared(index, searcher_of, queries, breadths)}


def tiled(source: Path, n: int, add: int, folder: Path, searcher_of, queries, breadths) -> dict:
    """At n tickets tiled from `source`: the graph's build, exact and graph searches at each breadth, an addition."""
    base, rng, config = TicketIndex.load(source), np.random.default_rng(0), IndexConfig.graph
    noise = copy_noise(base, rng)
    tile(source, n - add, folder, rng, GraphConfig(tickets=0), noise)
    started = time.perf_counter()
    append(folder, base.model_hash, copies(base, np.arange(n - add, n), noise, rng), graph=replace(config, tickets=n))
    index = compact(folder)[1]
    linked = time.perf_counter() - started
    figures = compared(index, searcher_of, queries, breadths)
    started = time.perf_counter()
    append(folder, base.model_hash, copies(base, np.arange(n, n + add), noise, rng))
    return {"linked": linked, "extended": time.perf_counter() - started, "graph_bytes": (index.segments[0].folder / GRAPH).stat().st_size,
            **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=Path("models/default/bundle"))
    parser.add_argument("--index", type=Path, default=Path("models/default/index"), help="built with --model: it is tiled")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--breadths", type=int, nargs="+", default=[32, 64, 128, 256], help="index.graph.breadth tried")
    parser.add_argument("--queries", type=int, default=200, help="end-user queries searched at each size")
    parser.add_argument("--add", type=int, default=1000, help="tickets linked into a graph in force (and the last tiled)")
    args = parser.parse_args()
    before, base = load_average(), TicketIndex.load(args.index)
    encoder = query_encoder(args.model)
    queries = end_user_queries(args.queries)

    def searcher_of(index: TicketIndex) -> Searcher:
        return Searcher(encoder, index, args.model)

    full, _ = searched_one_by_one(searcher_of(base), queries)
    [segment] = base.segments
    half = replace(base, segments=(replace(segment, vectors=TicketVectors.of(np.asarray(segment.vectors.array, np.float32), "float16")),))
    halved, _ = searched_one_by_one(searcher_of(half), queries)
    with tempfile.TemporaryDirectory(prefix="approximate-") as scratch:
        figures = {f"{len(base):,} (its own)": own(args.index, Path(scratch) / "own", searcher_of, queries, args.breadths)}
        for n in sorted(args.sizes):
            figures[f"{n:,} (tiled)"] = tiled(args.index, n, args.add, Path(scratch) / f"tiled-{n}", searcher_of, queries,
                                              args.breadths)
            print(f"{n:,}: tiled, its graph linked in {figures[f'{n:,} (tiled)']['linked']:.0f} s", flush=True)
    print(f"\n{args.model}: its index of {len(base):,} tickets ({base.vectors.d} dims) as it is, and tiled (copies of its "
          f"tickets with noise on their vectors: more tickets of the same kinds, not tickets with texts of their own); graph "
          f"{IndexConfig.graph.links} links, efConstruction {IndexConfig.graph.build_breadth}; {args.queries} end-user "
          f"queries, one at a time, encoding included; load average before: {before}, after: {load_average()}\n")
    print(table(("tickets", "graph of all s", f"add {args.add:,} s", "graph B/ticket", "exact p50 ms", "p95 ms"),
                [(size, f"{f['linked']:.0f}", "–" if f["extended"] is None else f"{f['extended']:.1f}",
                  f"{f['graph_bytes'] / int(size.split()[0].replace(',', '')):,.0f}", f"{f['exact'][0] * 1000:.1f}",
                  f"{f['exact'][1] * 1000:.1f}") for size, f in figures.items()]))
    print("\nrecall@10: the share of the exact top 10 in the graph's; by source: of their source tickets (a tiled copy "
          "counts as the ticket it copies)\n")
    print(table(("tickets", "breadth", "recall@10", "by source", "p50 ms", "p95 ms", "p50 vs exact"),
                [(size, b, f"{r:.4f}", f"{r_source:.4f}", f"{p50 * 1000:.1f}", f"{p95 * 1000:.1f}", f"{p50 / f['exact'][0]:.2f}x")
                 for size, f in figures.items() for b, r, r_source, p50, p95 in f["graph"]]))
    same_order = sum(a == b for a, b in zip(full, halved))
    same_tickets = sum(set(a) == set(b) for a, b in zip(full, halved))
    print(f"\nfloat16 vectors against float32 on the {len(base):,} tickets: {same_order} of {len(full)} top 10s in the same "
          f"order, {same_tickets} with the same tickets (recall@10 {recall(full, halved):.4f})")


if __name__ == "__main__":
    main()
