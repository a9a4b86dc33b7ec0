"""The approximate graph of a large index (issue 46): an index keeps one from index.graph.tickets tickets on, built at
the threshold from every vector and extended by each addition; its walk finds the exact search's nearest tickets (recall
measured), and a search through it lists the same tickets with the same totals where the walk sees the whole index."""
from dataclasses import replace

import numpy as np
import polars as pl
import pytest
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.config import GraphConfig
from ticketsim.scoring.fused import FusedScore
from ticketsim.scoring.topk import top_k
from ticketsim.search.graph import GRAPH, GraphVectors, write_graph
from ticketsim.search.index import Encoded, TicketIndex, append, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.vectors import TicketVectors

SMALL = GraphConfig(tickets=70, links=8, build_breadth=40, breadth=64)


@pytest.fixture(scope="module")
def graphed(search_parts, tmp_path_factory):
    """(bundle, an index of 60 tickets whose graph starts at 70, the tickets)."""
    root = tmp_path_factory.mktemp("graph")
    bundle = make_bundle(root / "bundle", search_parts, "22")
    build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets.head(60), root / "index", graph=SMALL)
    return bundle, root / "index", search_parts.corpus.tickets


def again(index: TicketIndex, rows: list[int], suffix: str) -> Encoded:
    frame = index.tickets[rows].with_columns(ticket_id=pl.col("ticket_id") + suffix)
    return Encoded(np.asarray(index.vectors.array[rows], np.float32) + 0.01, frame)


def test_the_graph_starts_at_its_threshold_and_grows_with_each_addition(graphed):
    bundle, folder, _ = graphed
    index = TicketIndex.load(folder)
    assert index.graph is None and index.nearest is index.vectors and index.graph_config == SMALL
    grown = append(folder, index.model_hash, again(index, list(range(20)), "-a"))     # 80 tickets: past 70
    assert grown.graph is not None and grown.graph.graph.ntotal == 80 and grown.nearest is grown.graph
    assert np.array_equal(grown.graph.graph.reconstruct_n(0, 80), np.asarray(grown.vectors.array, np.float32))
    first = grown.generation
    grown = append(folder, index.model_hash, again(index, list(range(20, 30)), "-b"))  # linked into the graph in force
    assert grown.graph.graph.ntotal == 90 and (first / GRAPH).is_file()
    assert np.array_equal(grown.graph.graph.reconstruct_n(80, 10), np.asarray(grown.vectors.array[80:], np.float32))
    never = append(folder, index.model_hash, again(index, [30], "-c"), graph=GraphConfig(tickets=0))
    assert never.graph is None and never.graph_config.tickets == 0 and not (never.generation / GRAPH).exists()


def test_a_search_through_a_graph_that_sees_every_ticket_equals_the_exact_one(graphed, search_parts, tmp_path):
    bundle, _, tickets = graphed
    scorer = Scorer.load(bundle)
    built = build_index(scorer, model_hash(bundle), tickets, tmp_path / "index", graph=replace(SMALL, tickets=1))
    assert built.graph is not None and (built.generation / GRAPH).is_file()
    approximate = Searcher(query_encoder(bundle, scorer), built, bundle)
    exact = Searcher(query_encoder(bundle, scorer), replace(built, graph=None), bundle)
    for k in (1, 10):
        for walked, scanned in zip(approximate.search(search_parts.corpus.queries, k), exact.search(search_parts.corpus.queries, k)):
            assert [(h.ticket_id, round(h.score, 6)) for h in walked.hits] == [(h.ticket_id, round(h.score, 6)) for h in scanned.hits]


def test_the_walk_finds_most_of_the_exact_nearest_and_rescores_them_exactly(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(40, 16))     # tickets come in kinds, as real ones do
    vectors = TicketVectors.of(centres[rng.integers(0, 40, 4000)] + rng.normal(scale=0.3, size=(4000, 16)), "float32")
    write_graph(tmp_path, None, None, np.asarray(vectors.array), GraphConfig(tickets=1000, links=16, build_breadth=64, breadth=64))
    walked = GraphVectors.load(tmp_path, vectors, GraphConfig(breadth=64))
    queries = (centres[rng.integers(0, 40, 50)] + rng.normal(scale=0.3, size=(50, 16))).astype(np.float32)
    exact, found = vectors.search(queries, 10)[1], walked.search(queries, 10)[1]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, found)])
    assert recall >= 0.95, recall
    order, lexical = rng.permutation(4000), rng.random(4000)
    rows, totals = top_k(walked, queries[0].astype(np.float64), 10, order, FusedScore((), {"L": 0.5}), lexical)
    assert np.allclose(totals, np.abs(vectors.array[rows] - queries[0]).sum(1) + 0.5 * lexical[rows], rtol=1e-5)
    assert len(set(rows.tolist())) == 10 and np.all(np.diff(totals) >= 0)
    assert GraphVectors.load(tmp_path / "none", vectors, GraphConfig()) is None
