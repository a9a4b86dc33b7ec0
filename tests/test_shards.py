"""A knowledge base in two shards, searched in this process and as two actors of a local Ray cluster: the merged top k
and its totals are the one index's of every ticket, bit for bit, because BM25 reads the shards' summed counts (a shard
scored by its own counts alone ranks otherwise); shards of other weights are refused."""
import shutil

import numpy as np
import pytest
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.errors import StepError
from ticketsim.search.index import build_index, delete_tickets, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.shards import Shard, Shards, on_ray


@pytest.mark.slow   # a local Ray cluster starts in about 20 s on 2 busy cores
def test_two_shards_here_and_on_ray_give_the_whole_indexs_top_k_and_totals(search_parts, tmp_path):
    ray = pytest.importorskip("ray", reason='ray is not installed: the test extra has it (pip install -e ".[test]")')
    bundle = make_bundle(tmp_path / "bundle", search_parts, "FL")       # F (a tiny encoder) and BM25
    scorer, tickets, queries = Scorer.load(bundle), search_parts.corpus.tickets, search_parts.corpus.queries
    whole = Searcher(query_encoder(bundle, scorer), build_index(scorer, model_hash(bundle), tickets, tmp_path / "whole"), bundle)
    folders = [tmp_path / "even", tmp_path / "odd"]
    for folder, other in zip(folders, (tickets[1::2], tickets[::2])):     # the whole's vectors (an encoder batches
        shutil.copytree(tmp_path / "whole", folder)                       # tickets, so a build of half might round
        delete_tickets(folder, other["ticket_id"].to_list())              # its last bits otherwise), half the tickets each
    here = Shards(bundle, [Shard(folder) for folder in folders])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_cluster = on_ray(bundle, folders)
        found = {k: (here.search(queries, k), on_cluster.search(queries, k)) for k in (1, 5, tickets.height)}
    finally:
        ray.shutdown()
    for k, merged in found.items():
        for answer, *shards in zip(whole.search(queries, k), *merged):
            for ids, totals in shards:
                assert ids.tolist() == [h.ticket_id for h in answer.hits], (k, answer.query_id)
                assert np.array_equal(here.score.flat_similarity(totals), [h.score for h in answer.hits])

    # the premise: scored by its own BM25 statistics alone, a shard would total its tickets otherwise
    words, origin = whole.query_words(queries)[0], np.zeros(here.shards[0].index.vectors.d)
    assert any(not np.array_equal(shard.top_k(origin, words, 10, shard.counts(words))[1],
                                  shard.top_k(origin, words, 10, here.counts(words))[1]) for shard in here.shards)

def test_shards_flattened_with_other_weights_are_refused(search_parts, tmp_path):
    bundle, other = (make_bundle(tmp_path / name, search_parts, "22", seed=seed) for name, seed in (("a", 0), ("b", 1)))
    build_index(Scorer.load(other), model_hash(other), search_parts.corpus.tickets.head(20), tmp_path / "shard")
    with pytest.raises(StepError, match="the shards were not all flattened with the weights of"):
        Shards(bundle, [Shard(tmp_path / "shard")])
