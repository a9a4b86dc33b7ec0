"""The approximate graph of a large index (issue 46): a segment keeps one from index.graph.tickets tickets on (a build's,
a compaction's), linked into later generations beside the small segments additions write; its walk finds the exact
search's nearest tickets (recall measured), and a search through it lists the same tickets with the same totals where
the walk sees the whole index."""
import os
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
from ticketsim.search.index import Encoded, TicketIndex, append, build_index, compact, model_hash
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
    return Encoded(np.asarray(index.vectors.take(rows), np.float32) + 0.01, frame)


def test_a_segment_keeps_a_graph_from_its_threshold_on_and_later_ones_are_scanned_beside_it(graphed, capsys):
    from ticketsim.cli import OK, main

    bundle, folder, _ = graphed
    index = TicketIndex.load(folder)
    assert index.vectors.graphs == 0 and index.graph_config == SMALL
    grown = append(folder, index.model_hash, again(index, list(range(20)), "-a"))     # 80 tickets, in segments of 60 and 20
    assert [len(s) for s in grown.segments] == [60, 20] and grown.vectors.graphs == 0
    assert main(["index", "compact", "--index", str(folder)]) == OK      # one segment of 80: past 70, graphed
    assert capsys.readouterr().out.startswith(f"{folder}: 80 tickets in one segment, joined from 2 (gen-000003;")
    [joined] = TicketIndex.load(folder).segments
    assert joined.graph is not None and joined.nearest is joined.graph and joined.graph.graph.ntotal == 80
    assert np.array_equal(joined.graph.graph.reconstruct_n(0, 80), np.asarray(joined.vectors.array, np.float32))
    grown = append(folder, index.model_hash, again(index, list(range(20, 30)), "-b"))  # the graph linked, the 10 scanned
    assert [len(s) for s in grown.segments] == [80, 10] and grown.vectors.graphs == 1
    assert os.path.samefile(grown.segments[0].folder / GRAPH, joined.folder / GRAPH)     # linked, not copied
    rows = grown.vectors.search(np.asarray(grown.vectors.take([85]), np.float32), 3)[1][0]
    assert rows[0] == 85    # a ticket of the scanned segment found beside the walked one
    assert main(["index", "compact", "--index", str(folder)]) == OK
    assert TicketIndex.load(folder).vectors.graphs == 1 and len(TicketIndex.load(folder).segments) == 1
    never = append(folder, index.model_hash, again(index, [30], "-c"), graph=GraphConfig(tickets=0))
    assert never.graph_config.tickets == 0 and compact(folder)[1].vectors.graphs == 0


def test_a_search_through_a_graph_that_sees_every_ticket_equals_the_exact_one(graphed, search_parts, tmp_path):
    bundle, _, tickets = graphed
    scorer = Scorer.load(bundle)
    built = build_index(scorer, model_hash(bundle), tickets, tmp_path / "index", graph=replace(SMALL, tickets=1))
    assert built.vectors.graphs == 1 and (built.segments[0].folder / GRAPH).is_file()
    approximate = Searcher(query_encoder(bundle, scorer), built, bundle)
    exact = Searcher(query_encoder(bundle, scorer), built.exact(), bundle)
    for k in (1, 10):
        for walked, scanned in zip(approximate.search(search_parts.corpus.queries, k), exact.search(search_parts.corpus.queries, k)):
            assert [(h.ticket_id, round(h.score, 6)) for h in walked.hits] == [(h.ticket_id, round(h.score, 6)) for h in scanned.hits]


def test_the_walk_finds_most_of_the_exact_nearest_and_rescores_them_exactly(tmp_path):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(40, 16))     # tickets come in kinds, as real ones do
    vectors = TicketVectors.of(centres[rng.integers(0, 40, 4000)] + rng.normal(scale=0.3, size=(4000, 16)), "float32")
    write_graph(tmp_path, np.asarray(vectors.array), GraphConfig(tickets=1000, links=16, build_breadth=64, breadth=64))
    walked = GraphVectors.load(tmp_path, vectors, GraphConfig(breadth=64))
    queries = (centres[rng.integers(0, 40, 50)] + rng.normal(scale=0.3, size=(50, 16))).astype(np.float32)
    exact, found = vectors.search(queries, 10)[1], walked.search(queries, 10)[1]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, found)])
    assert recall >= 0.95, recall
    order, lexical = rng.permutation(4000), rng.random(4000)
    rows, totals = top_k(walked, queries[0].astype(np.float64), 10, order.__getitem__, FusedScore((), {"L": 0.5}), lexical)
    assert np.allclose(totals, np.abs(vectors.array[rows] - queries[0]).sum(1) + 0.5 * lexical[rows], rtol=1e-5)
    assert len(set(rows.tolist())) == 10 and np.all(np.diff(totals) >= 0)
    assert GraphVectors.load(tmp_path / "none", vectors, GraphConfig()) is None
