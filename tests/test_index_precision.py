"""The index's vectors as float16 (issue 33): half the bytes per ticket, the same top 10 for the tiny bundles' end-user
queries as float32 (on the 1,000-ticket synthetic set near-ties may swap: docs/performance.md), chosen by `index build
--precision`; memory-mapped on load (the page's workers share the file's pages); an index of the FAISS format refused."""
import shutil
import subprocess
import sys

import numpy as np
import pytest
from benchmarks.common import make_bundle

from ticketsim.bundle.loader import Scorer
from ticketsim.errors import StepError
from ticketsim.search.enduser import SPLIT
from ticketsim.search.index import TicketIndex, build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.segments import VECTORS


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["AL", "FA"])
def test_float16_vectors_keep_the_end_user_top_10_at_half_the_bytes(search_parts, tmp_path, variant):
    """AL: the registered configuration (Ac+L-relpos); FA: the fine-tuned encoder F beside A and L."""
    bundle = make_bundle(tmp_path / "bundle", search_parts, variant)
    scorer = Scorer.load(bundle)
    queries = search_parts.corpus.queries.filter(search_parts.corpus.queries["query_id"].is_in(
        search_parts.corpus.split(SPLIT)["query_id"].unique().implode()))
    answers = {}
    for precision in ("float32", "float16"):
        build_index(scorer, model_hash(bundle), search_parts.corpus.tickets, precision=precision, out=tmp_path / precision)
        index = TicketIndex.load(tmp_path / precision)
        [segment] = index.segments
        assert isinstance(segment.vectors.array, np.memmap) and index.vectors.precision == precision
        size = (segment.folder / VECTORS).stat().st_size
        assert size - 128 == len(index) * index.vectors.d * np.dtype(precision).itemsize     # .npy: a 128-byte header
        answers[precision] = Searcher(query_encoder(bundle, scorer), index, bundle).search(queries, 10)
    assert queries.height == 10 and len(answers["float16"]) == 10
    for wide, half in zip(answers["float32"], answers["float16"]):
        assert [h.ticket_id for h in half.hits] == [h.ticket_id for h in wide.hits], half.query_id
        assert np.allclose([h.score for h in half.hits], [h.score for h in wide.hits], rtol=1e-2)


@pytest.mark.slow
def test_an_index_of_an_older_format_is_refused_with_the_fix(search_parts, tmp_path):
    """One folder rewritten in place (its manifest at the top, no generations): the format before generations."""
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    index = build_index(Scorer.load(bundle), model_hash(bundle), search_parts.corpus.tickets, out=tmp_path / "index")
    old = shutil.copytree(index.generation, tmp_path / "old")
    with pytest.raises(StepError, match="an index of an older ticketsim .* rebuild it with `dvc repro index@<dataset>`"):
        TicketIndex.load(old)
    with pytest.raises(StepError, match="not a search index"):
        TicketIndex.load(tmp_path / "bundle")


@pytest.mark.slow
def test_index_build_stores_float16_when_asked(search_parts, tmp_path):
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    search_parts.corpus.tickets.write_csv(tmp_path / "tickets.csv")
    for precision in ("float16", "float32"):
        done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "index", "build", "--model", str(bundle), "--tickets",
                               str(tmp_path / "tickets.csv"), "--index", str(tmp_path / precision), "--precision", precision],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        assert TicketIndex.load(tmp_path / precision).vectors.take([0]).dtype == np.dtype(precision)
