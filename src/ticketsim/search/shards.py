"""A knowledge base split into shards, each an index folder of its own (built, added to and deleted from as any index),
searched as one: the top k of every shard, merged. On a Ray cluster each shard is an actor on the node that holds its
folder (`on_ray`); without one, the shards are searched in this process, one after the other.

Exact as one index of every ticket would be. BM25 reads the whole's statistics, not a shard's: the coordinator sums each
shard's Counts of the query's words (tickets, tokens, document frequencies) and every shard scores with that sum, so
each ticket's d_L, and with its dense distance its total, are those of the whole index. Any ticket of the whole's top k
is then among its shard's top k (fewer than k tickets of its shard rank before it, ties broken by ticket id alike), so
the union of the shards' top-k lists holds the whole's top k, and their k best by (total, id) are it. Only the top k
crosses the network per shard and query, and each shard's search is the index's own (exact, or through its graph).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.channels.bm25 import Counts
from ticketsim.channels.cache import component_tokens
from ticketsim.channels.lexical import QUERY_LEVEL
from ticketsim.data.tables import QUERY_FIELDS, QUERY_SCHEMA
from ticketsim.errors import StepError
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.topk import top_k
from ticketsim.search.index import TicketIndex, model_hash
from ticketsim.search.queries import query_encoder


class Shard:
    """One shard's index, loaded where its folder is."""

    def __init__(self, folder: str | Path):
        self.index = TicketIndex.load(folder)

    def model_hash(self) -> str:
        return self.index.model_hash

    def score(self) -> FusedScore:
        return self.index.score

    def counts(self, words: Sequence[str]) -> Counts:
        return self.index.postings.counts(words)

    def top_k(self, flat: np.ndarray, words: Sequence[str], k: int, counts: Counts | None) -> tuple[np.ndarray, np.ndarray]:
        """(ticket ids, flat totals) of this shard's k best for one query, BM25 by the whole's `counts`."""
        index = self.index
        lexical = index.postings.query(words, counts) if index.score.lexical_weight else None
        rows, totals = top_k(index.vectors, flat, k, index.ids_at, index.score, lexical)
        return index.ids_at(rows), totals


class Shards:
    """Shards searched as one index: local Shard objects, or Ray actor handles of Shard (`on_ray`)."""

    def __init__(self, bundle: str | Path, shards: Sequence, remote: bool = False):
        self.shards, self.remote, self.queries = list(shards), remote, query_encoder(bundle)
        hashes = set(self.each("model_hash"))
        if hashes != {model_hash(bundle)}:
            raise StepError(f"the shards were not all flattened with the weights of {bundle} (model hashes: "
                            f"{', '.join(sorted(hashes))}): rebuild the shards that differ with it")
        self.score = self.each("score")[0]   # the bundle's weights in force, as the shards' vectors were flattened

    def each(self, method: str, *args) -> list:
        """`method(*args)` of every shard: on Ray all at once, else one after the other."""
        if self.remote:
            import ray
            return ray.get([getattr(shard, method).remote(*args) for shard in self.shards])
        return [getattr(shard, method)(*args) for shard in self.shards]

    def counts(self, words: Sequence[str]) -> Counts:
        """BM25's statistics of these words over every shard: those of the whole."""
        return Counts.summed(self.each("counts", words))

    def search(self, queries: pl.DataFrame, k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(ticket ids, flat totals) of each query's k best over every shard, best first, equal totals by id."""
        queries = queries.select(list(QUERY_SCHEMA)).with_columns(pl.col(QUERY_FIELDS).fill_null(""))
        tokens, flat = self.queries.encode(queries, self.score)
        found = []
        for words, vector in zip(component_tokens(tokens, QUERY_LEVEL), flat):
            counts = self.counts(words) if self.score.lexical_weight else None     # no L: one round
            lists = self.each("top_k", vector, words, k, counts)
            ids, totals = np.concatenate([i for i, _ in lists]), np.concatenate([t for _, t in lists])
            best = np.lexsort((ids, totals))[:k]
            found.append((ids[best], totals[best]))
        return found


def on_ray(bundle: str | Path, folders: Sequence[str | Path]) -> Shards:
    """Shards as Ray actors, one per folder, on the cluster ray.init() finds (RAY_ADDRESS, or a local one)."""
    import ray

    if not ray.is_initialized():
        ray.init()
    actor = ray.remote(num_cpus=1)(Shard)
    return Shards(bundle, [actor.remote(str(folder)) for folder in folders], remote=True)
