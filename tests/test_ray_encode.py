"""encode.engine: ray on a local two-worker Ray cluster: channel S to the bit of the local path; refused in one line
naming the key and the extra where ray is not installed."""
import numpy as np
import pytest
from benchmarks.common import tiny_encoder
from conftest import tiny_corpus

from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS
from ticketsim.channels.ray_encode import ray_encoding
from ticketsim.channels.sentence import sentence_channel
from ticketsim.config import ConfigError, SentenceConfig


@pytest.mark.slow   # each worker imports torch and sentence-transformers: tens of seconds on 2 busy cores
def test_two_ray_workers_encode_the_bytes_of_the_local_path(tmp_path):
    ray = pytest.importorskip("ray", reason='ray is not installed: the test extra has it (pip install -e ".[test]")')
    corpus, _ = tiny_corpus(n_tickets=24, n_labeled_queries=8)
    texts = [text or "" for frame in (corpus.tickets, corpus.queries) for column in ("subject", "description")
             for text in frame[column]]
    # Passages of 20 tokens in batches of 4, mean-pooled: long texts read in several passages, a dozen rows per worker.
    cfg = SentenceConfig(model=str(tiny_encoder(tmp_path / "tiny", texts)), max_tokens=20, overlap=4, pooling="mean",
                         batch_size=4, threads=1, device="cpu")
    local, report = sentence_channel(corpus, cfg, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        assert ray.cluster_resources()["CPU"] == 2      # two actors of one thread each
        on_ray, ray_report = sentence_channel(corpus, cfg, progress=False, encode=ray_encoding(cfg))
    finally:
        ray.shutdown()
    assert report.passages > 2 * 4 * 8 and ray_report.passages == report.passages and report.cut > 0
    for side, components in (("queries", QUERY_COMPONENTS), ("tickets", TICKET_COMPONENTS)):
        for component in components:
            assert np.array_equal(getattr(on_ray, side)[component], getattr(local, side)[component]), (side, component)


def test_the_ray_engine_without_ray_is_one_line_naming_the_key_and_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)     # `import ray` fails, as without the extra
    with pytest.raises(ConfigError) as refused:
        ray_encoding(SentenceConfig())
    assert str(refused.value) == 'encode.engine: ray needs Ray, which is not installed: pip install -e ".[cluster]"'
