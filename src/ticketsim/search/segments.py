"""An index generation's segments: each a folder of the tickets one write added (or a merge joined), written once and
then hard-linked, not copied, into every later generation that keeps it. An addition so writes its new tickets alone
(joined with the newest small segments, below MERGE_BELOW tickets: a binary counter, so a generation holds a few
segments and no addition rewrites the base), and a generation stays whole by itself: a writer killed at any step, a
rollback, a removed generation behave as before, and a segment's bytes leave the disk with the last generation that
links it (an erasing write keeps none: docs/scale.md#segments).

A segment holds, row i of ticket i:
- vectors.npy: the tickets' flat vectors (scoring/fused.py; float32, or float16 at half the bytes), searched exactly
  under L1 (search/vectors.py);
- graph.faiss, in a segment of index.graph.tickets tickets or more: the vectors' HNSW graph, which a search walks for
  its dense candidates instead of scanning them all (search/graph.py);
- tickets.arrow: each ticket's texts, its facets, its parts' tokens and standardized topic activity (Arrow IPC);
- BM25's postings and lengths (channels/bm25.py), from which, over every segment, channel L and every idf follow;
- the ids in sorted order and each one's row (the id -> row map).
"""
from __future__ import annotations

import os
import re
import shutil
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from ticketsim.channels.bm25 import Lexicon, Postings
from ticketsim.channels.cache import component_tokens
from ticketsim.channels.lexical import TICKET_LEVEL
from ticketsim.config import BM25Config, GraphConfig
from ticketsim.search.damage import Damaged, opened, whole
from ticketsim.search.graph import GRAPH, GraphVectors, write_graph
from ticketsim.search.space import allocate
from ticketsim.search.vectors import Precision, TicketVectors
from ticketsim.text.sorted_strings import SortedStrings

SEGMENT = re.compile(r"seg-(\d{6})")
VECTORS, TICKETS, IDS, BY_ID = "vectors.npy", "tickets.arrow", "ids", "by_id.npy"
MERGE_BELOW = 100_000   # tickets: an addition joins the newest segments into its own only while it stays smaller
WRITTEN_AT_ONCE = 1 << 16     # tickets a segment's writer copies at once


@dataclass(frozen=True, eq=False)
class Encoded:
    """New tickets as an index stores them: flat vectors (float32) and the tickets table (TICKET_SCHEMA, facets, tokens,
    topics), not yet in any index."""

    vectors: np.ndarray
    frame: pl.DataFrame

    @cached_property
    def documents(self) -> list[list[str]]:
        """Channel L's documents of these tickets, once: their postings and their topic counts both read them."""
        return ticket_documents(self.frame)

    @classmethod
    def joined(cls, parts: Sequence[Encoded]) -> Encoded:
        """The tickets of `parts`, one after the other (a facet one part lacks: null there)."""
        return cls(np.concatenate([p.vectors for p in parts]), pl.concat([p.frame for p in parts], how="diagonal_relaxed"))


def ticket_documents(tickets: pl.DataFrame) -> list[list[str]]:
    """Each ticket's SUB+DESC+SOL tokens (of a table with `tokens`): channel L's documents, and those the reasons' topic
    model reads."""
    return component_tokens(tickets["tokens"].struct.unnest(), TICKET_LEVEL)


def segment_name(number: int) -> str:
    """The name of the segment a generation numbered `number` writes (one at most: its additions and merges together)."""
    return f"seg-{number:06d}"


@dataclass(frozen=True, eq=False)
class Segment:
    """One segment folder, memory-mapped: row i of `vectors` is ticket i of `table`."""

    folder: Path
    vectors: TicketVectors
    table: pa.Table
    postings: Postings
    ids: SortedStrings          # the ticket ids, sorted
    by_id: np.ndarray           # the row of each sorted id
    graph: GraphVectors | None  # in a segment of graph.tickets tickets or more

    def __len__(self) -> int:
        return self.vectors.ntotal

    @property
    def nearest(self) -> TicketVectors | GraphVectors:
        """What finds a query's nearest vectors here: the graph where there is one, else the exact scan."""
        return self.vectors if self.graph is None else self.graph

    @staticmethod
    def files(folder: Path) -> tuple[list[Path], list[Path]]:
        """(its .npy files, its Arrow file): what must be whole for it to load."""
        return [folder / VECTORS, folder / BY_ID, *SortedStrings.files(folder / IDS), *Postings.files(folder)], [folder / TICKETS]

    @classmethod
    def load(cls, folder: Path, bm25: BM25Config, graph: GraphConfig, at: int) -> Segment:
        """The segment, every file checked whole first; Damaged (of generation `at`) naming one that is not."""
        whole(*cls.files(folder), at)

        def read(name: str, load):
            return opened(folder / name, at, lambda: load(folder / name))

        vectors = read(VECTORS, TicketVectors.load)
        segment = cls(folder, vectors, read(TICKETS, read_arrow), opened(folder, at, lambda: Postings.load(folder, bm25.k1, bm25.b)),
                      read(IDS, SortedStrings.load), read(BY_ID, partial(np.load, mmap_mode="r")),
                      read(GRAPH, lambda _: GraphVectors.load(folder, vectors, graph)))
        counts = (len(segment), segment.table.num_rows, segment.postings.tickets, len(segment.ids))
        if len(set(counts)) > 1:
            raise Damaged(folder, f"its files disagree on the number of tickets ({counts[0]} vectors, {counts[1]} in "
                          f"{TICKETS}, {counts[2]} in the postings, {counts[3]} ids)", at)
        return segment

    def row_of(self, ticket_id: str) -> int | None:
        found = self.ids.find(ticket_id)
        return None if found is None else int(self.by_id[found])


def read_arrow(path: Path) -> pa.Table:
    """An Arrow IPC file, memory-mapped: no column is read until a row is."""
    return pa.ipc.open_file(pa.memory_map(str(path), "r")).read_all()


@dataclass(frozen=True, eq=False)
class Source:
    """Tickets a segment is written from, in their order: the rows of a segment a write keeps (`keep`, ascending; None:
    every row), or new tickets with their postings built in memory."""

    vectors: np.ndarray     # (tickets, d): float32, or a segment's stored precision
    table: pa.Table
    postings: Postings
    keep: np.ndarray | None = None

    @classmethod
    def of(cls, segment: Segment, dropped: Collection[str] = ()) -> Source:
        """The segment's tickets but those whose ids are `dropped`."""
        held = pc.is_in(segment.table["ticket_id"], value_set=pa.array(list(dropped), pa.string())) if dropped else None
        keep = None if held is None else np.flatnonzero(~np.asarray(held.to_numpy(zero_copy_only=False), bool))
        return cls(segment.vectors.array, segment.table, segment.postings, keep)

    @classmethod
    def new(cls, tickets: Encoded, bm25: BM25Config) -> Source:
        return cls(tickets.vectors, tickets.frame.to_arrow(), Postings.build(tickets.documents, bm25.k1, bm25.b))

    def __len__(self) -> int:
        return self.table.num_rows if self.keep is None else len(self.keep)

    def blocks(self) -> Iterator[np.ndarray]:
        """The rows it keeps, WRITTEN_AT_ONCE at a time: what a writer holds of its tickets at once."""
        rows = np.arange(self.table.num_rows) if self.keep is None else self.keep
        for start in range(0, len(rows), WRITTEN_AT_ONCE):
            yield rows[start:start + WRITTEN_AT_ONCE]


def conformed(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """`table` in `schema`'s columns and types, a column it lacks (a facet its tickets had not) null."""
    for name in schema.names:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, schema.field(name).type))
    return table.select(schema.names).cast(schema)


def write_segment(folder: Path, sources: Sequence[Source], schema: pa.Schema | None, bm25: BM25Config, graph: GraphConfig,
                  precision: Precision) -> None:
    """A segment in `folder` (made here) of the tickets of `sources`, one after the other, block by block: what a merge
    of a million tickets holds at once is their postings' arrays, not their texts. schema: that of the index's tables
    (None: the sources' own, unified)."""
    folder.mkdir()
    schema = pa.unify_schemas([s.table.schema for s in sources], promote_options="permissive") if schema is None else schema
    vectors = np.lib.format.open_memmap(folder / VECTORS, "w+", np.dtype(precision), (sum(map(len, sources)), sources[0].vectors.shape[1]))
    allocate(folder / VECTORS)      # a full disk is an OSError here, not a SIGBUS in the copy below
    at, ids = 0, []
    with pa.ipc.new_file(str(folder / TICKETS), schema) as writer:
        for source in sources:
            for rows in source.blocks():
                vectors[at:at + len(rows)] = source.vectors[rows]
                block = source.table.take(rows)
                writer.write_table(conformed(block, schema))
                ids.extend(block["ticket_id"].to_pylist())
                at += len(rows)
    vectors.flush()
    by_id = np.argsort(np.asarray(ids, dtype=object), kind="stable")
    SortedStrings.of([ids[i] for i in by_id]).save(folder / IDS)
    np.save(folder / BY_ID, by_id)
    Postings.joined([(s.postings, s.keep) for s in sources], bm25.k1, bm25.b).save(folder)
    write_graph(folder, vectors, graph)


def link_segment(segment: Path, into: Path) -> None:
    """The segment's files in a folder of the same name in `into`, hard-linked (copied where the disk links none)."""
    target = into / segment.name
    target.mkdir()
    for path in segment.iterdir():
        try:
            os.link(path, target / path.name)
        except OSError:     # another disk, or one without hard links
            shutil.copy2(path, target / path.name)


def joined_tail(sizes: Sequence[int], new: int) -> int:
    """How many of the newest segments (of `sizes`, oldest first) an addition of `new` tickets joins into the segment it
    writes: each next one no larger than what is joined so far, and the whole below MERGE_BELOW."""
    joined, size = 0, new
    while joined < len(sizes) and sizes[-1 - joined] <= size and size + sizes[-1 - joined] < MERGE_BELOW:
        size += sizes[-1 - joined]
        joined += 1
    return joined


class SegmentVectors:
    """The flat vectors of a generation's segments as one (ntotal, d) set, rows numbered segment after segment: the
    nearest of each segment (its graph's walk, or its exact scan) merged, and rows taken for exact rescoring. Merging
    keeps the scan exact: every ticket a segment did not list is at least as far as its k-th, and so as the k-th of all."""

    def __init__(self, segments: Sequence[Segment], walk: bool = True):
        self.segments, self.walk = tuple(segments), walk
        self.starts = np.cumsum([0, *map(len, self.segments)])

    @property
    def exact(self) -> SegmentVectors:
        """The same vectors scanned exactly in every segment, graph or not."""
        return SegmentVectors(self.segments, walk=False)

    @property
    def ntotal(self) -> int:
        return int(self.starts[-1])

    @property
    def d(self) -> int:
        return self.segments[0].vectors.d

    @property
    def precision(self) -> Precision:
        return self.segments[0].vectors.precision

    @cached_property
    def graphs(self) -> int:
        """How many segments keep a graph."""
        return sum(s.graph is not None for s in self.segments)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """(len(rows), d) vectors of these rows, in their order, in the stored precision."""
        rows = np.asarray(rows, np.int64)
        if len(self.segments) == 1:
            return self.segments[0].vectors.array[rows]
        which = np.searchsorted(self.starts, rows, side="right") - 1
        out = np.empty((len(rows), self.d), self.segments[0].vectors.array.dtype)
        for i in np.unique(which):
            at = which == i
            out[at] = self.segments[i].vectors.array[rows[at] - self.starts[i]]
        return out

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(distances, rows), each (n_queries, k), nearest first under L1, as TicketVectors.search."""
        found = [((s.nearest if self.walk else s.vectors).search(queries, min(k, len(s))), start)
                 for s, start in zip(self.segments, self.starts)]
        distances = np.hstack([d for (d, _), _ in found])
        rows = np.hstack([i + start for (_, i), start in found])
        keep = np.argsort(distances, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(distances, keep, 1), np.take_along_axis(rows, keep, 1)


def lexicon(segments: Sequence[Segment]) -> Lexicon:
    """BM25 over every segment's tickets."""
    return Lexicon(tuple(s.postings for s in segments))


def joined_table(segments: Sequence[Segment]) -> pa.Table:
    """The segments' tickets tables as one (chunks of the mapped files: nothing copied)."""
    return segments[0].table if len(segments) == 1 else pa.concat_tables([s.table for s in segments])
