"""The approximate nearest-ticket graph of a large index: FAISS's HNSW over the flat ticket vectors under L1, one file per
segment (graph.faiss), walked by a search instead of a scan of every ticket.

An exact search reads every vector once per query: 190 ms at a million tickets on 2 cores (docs/scale.md). From
`index.graph.tickets` tickets on (GraphConfig) a segment keeps an HNSW graph, and the search (scoring/topk.py) takes
its dense candidates from a walk of the graph, then rescores them exactly from vectors.npy with BM25 as before: a ticket
is lost only where the walk misses it (recall@10 against the exact search: `benchmarks.approximate`). A graph belongs to
one segment (search/segments.py) and is written with it: the segments an addition writes are small and scanned
exactly, the base's graph is kept as it is, and `ticketsim index compact` joins every segment into one, graphed. The
graph keeps its own float32 copy of the vectors (FAISS's HNSW scores L1 only over flat float32 storage), memory-mapped at
load as vectors.npy is; its links, about 280 bytes per ticket at 32, are read into each process.
"""
from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np
from tqdm import tqdm

from ticketsim.config import GraphConfig
from ticketsim.search.vectors import TicketVectors

GRAPH = "graph.faiss"
DEEPEST = 4096      # a dense list deeper than this is scanned exactly: the walk would visit more than a scan reads
LINKED_AT_ONCE = 1 << 14    # tickets linked per call: the float32 copy of a float16 index is made block by block


class GraphVectors:
    """The index's vectors (`array`, rescored exactly) searched through their graph; TicketVectors' search, approximate."""

    def __init__(self, vectors: TicketVectors, graph: faiss.Index, breadth: int):
        self.vectors, self.graph, self.breadth = vectors, graph, breadth

    @classmethod
    def load(cls, generation: Path, vectors: TicketVectors, config: GraphConfig) -> GraphVectors | None:
        """The generation's graph, memory-mapped (read-only: FAISS aborts on a write to a mapped graph); None without one."""
        path = generation / GRAPH
        if not path.is_file():
            return None
        return cls(vectors, faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC | faiss.IO_FLAG_READ_ONLY), config.breadth)

    @property
    def array(self) -> np.ndarray:
        return self.vectors.array

    @property
    def ntotal(self) -> int:
        return self.vectors.ntotal

    def take(self, rows: np.ndarray) -> np.ndarray:
        return self.vectors.take(rows)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(distances, rows) of about the k nearest under L1, nearest first: the walk visits max(breadth, k) candidates."""
        if k <= DEEPEST:
            distances, rows = self.graph.search(queries, k, params=faiss.SearchParametersHNSW(efSearch=max(self.breadth, k)))
            if (rows >= 0).all():   # -1: the walk found fewer than k
                return distances, rows
        return self.vectors.search(queries, k)


def write_graph(folder: Path, vectors: np.ndarray, config: GraphConfig) -> None:
    """graph.faiss in a segment's `folder` for its `vectors` where they reach config.tickets (0: never)."""
    if not config.tickets or len(vectors) < config.tickets:
        return
    graph = faiss.IndexHNSWFlat(vectors.shape[1], config.links, faiss.METRIC_L1)
    graph.hnsw.efConstruction = config.build_breadth
    with tqdm(total=len(vectors), desc="graph", unit="ticket", disable=None) as bar:
        for start in range(0, len(vectors), LINKED_AT_ONCE):
            block = np.ascontiguousarray(vectors[start:start + LINKED_AT_ONCE], dtype=np.float32)
            graph.add(block)
            bar.update(len(block))
    faiss.write_index(graph, str(folder / GRAPH))
