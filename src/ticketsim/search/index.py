"""The knowledge base of a search, as one folder: the tickets' folded vectors (float32, or float16 at half the bytes;
searched exactly under L1 and memory-mapped, so the page's workers share one copy: search/vectors.py), the tickets themselves (texts, each
part's tokens, standardized topic activity), the coherence a topic needs to be named in a reason, and the hash of the
bundle whose weights folded them, so that a search with other weights is refused instead of answering wrongly.

Adding tickets appends their vectors (a flat index has nothing to rebalance). Channel L is not stored as vectors:
BM25's statistics (every idf, the mean ticket length) move with each new ticket, so they are rebuilt from the stored
words on load and after every addition, a sparse pass that costs little next to encoding; L then stays exactly what
the model computes on the whole pool.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ticketsim.channels.cache import ChannelVectors, component_tokens
from ticketsim.channels.lexical import TICKET_LEVEL, LexicalIndex
from ticketsim.config import BM25Config, EncodeConfig, TopicsConfig
from ticketsim.data.tables import TICKET_FIELDS, TICKET_SCHEMA
from ticketsim.data.validate import ORIGIN, DataError
from ticketsim.errors import StepError
from ticketsim.search.encode import Layout, fold_side, one_side
from ticketsim.search.fold import Block
from ticketsim.search.reasons import ReasonTopics, standardized
from ticketsim.search.vectors import Precision, TicketVectors

if TYPE_CHECKING:
    from ticketsim.bundle.loader import Scorer

MANIFEST, VECTORS, TICKETS = "manifest.json", "vectors.npy", "tickets.parquet"
CHUNK = 1000   # tickets encoded at once: bounds the memory of a large knowledge base


class IndexMismatch(StepError):
    """An index whose vectors were folded with other weights than the bundle's."""


def model_hash(bundle: str | Path) -> str:
    """SHA-256 over every file of a bundle (path and bytes): the weights, the vocabulary, the channels' models, the manifest."""
    bundle, digest = Path(bundle), hashlib.sha256()
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        # in three updates, the digest of their concatenation: no copy of a graph of hundreds of MB (a cold search)
        for part in (path.relative_to(bundle).as_posix().encode() + b"\0", path.read_bytes(), b"\0"):
            digest.update(part)
    return digest.hexdigest()


def read_manifest(directory: Path) -> dict:
    """The manifest of an index folder, or a StepError when the folder is none or of an older ticketsim."""
    if not (directory / MANIFEST).is_file():
        raise StepError(f"{directory}: not a search index (no {MANIFEST}); build one with `dvc repro index@<dataset>` "
                        "or `ticketsim index build`")
    manifest = json.loads((directory / MANIFEST).read_text())
    if "coherence" not in manifest or "precision" not in manifest:
        raise StepError(f"{directory}: an index of an older ticketsim (its vectors in a FAISS file, or no tokens per "
                        "ticket part and no topic coherence for the reasons); rebuild it with `dvc repro index@<dataset>` "
                        "or `ticketsim index build`")
    return manifest


def check_hash(index_hash: str, scorer_hash: str, bundle: str | Path, where: str | Path) -> None:
    """IndexMismatch unless the index at `where` was folded with the weights of `bundle`."""
    if scorer_hash != index_hash:
        raise IndexMismatch(
            f"{where} was built with other model weights (bundle hash {index_hash[:12]}) than {bundle} "
            f"({scorer_hash[:12]}): its ticket vectors would be scored by the wrong model. Rebuild it: "
            f"`dvc repro index@<dataset>`, or `ticketsim index build --model {bundle} --tickets FILE --index {where}`")


@dataclass(eq=False)
class TicketIndex:
    """Row i of `vectors` is ticket i of `tickets`. Made by build_index or load; add() grows it in place."""

    model_hash: str
    layout: Layout
    vectors: TicketVectors
    tickets: pl.DataFrame       # TICKET_SCHEMA + tokens (a struct: each part's tokens) + topics (standardized activity)
    topic_scale: tuple[np.ndarray, np.ndarray]   # the tickets' mean and std of topic activity when the index was built
    bm25: BM25Config
    coherence: float            # topics.coherence: the NPMI a topic needs for a reason to name it
    lexical: LexicalIndex = field(init=False)   # BM25's statistics of the tickets, rebuilt by refresh()
    order: np.ndarray = field(init=False)       # each row's position in ticket-id order: ties break by id (ScoreMatrix.top_k)

    def __post_init__(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        ids = tuple(self.tickets["ticket_id"])
        self.lexical = LexicalIndex.build(ids, self.words(), self.bm25.k1, self.bm25.b)
        self.order = np.argsort(np.argsort(np.asarray(ids, dtype=object), kind="stable"), kind="stable")

    def __len__(self) -> int:
        return self.vectors.ntotal

    def words(self) -> list[list[str]]:
        """Every ticket's SUB+DESC+SOL tokens: channel L's documents, and those the reasons' topic model read."""
        return component_tokens(self.tickets["tokens"].struct.unnest(), TICKET_LEVEL)

    def manifest(self) -> dict:
        return {"model_hash": self.model_hash, "tickets": len(self), "dim": self.vectors.d, "precision": self.vectors.precision,
                "layout": {"blocks": [asdict(b) for b in self.layout.blocks], "lexical_weight": self.layout.lexical_weight,
                           "constant": self.layout.constant},
                "topic_scale": [part.tolist() for part in self.topic_scale], "bm25": asdict(self.bm25),
                "coherence": self.coherence}

    def save(self, directory: str | Path, files: tuple[str, ...] = (VECTORS, TICKETS, MANIFEST)) -> None:
        """Write the folder (or only `files` of it); each file is replaced whole (written aside, then renamed), never
        left half-written."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        writers = {VECTORS: self.vectors.save, TICKETS: self.tickets.write_parquet,
                   MANIFEST: lambda path: path.write_text(json.dumps(self.manifest()) + "\n")}
        for name, write in writers.items():     # the manifest last: it says how many tickets the other files hold
            if name in files:
                write(directory / f".{name}.tmp")
                os.replace(directory / f".{name}.tmp", directory / name)

    @classmethod
    def load(cls, directory: str | Path) -> TicketIndex:
        directory = Path(directory)
        manifest = read_manifest(directory)
        layout = manifest["layout"]
        index = cls(manifest["model_hash"],
                    Layout(tuple(Block(**b) for b in layout["blocks"]), layout["lexical_weight"], layout["constant"]),
                    TicketVectors.load(directory / VECTORS), pl.read_parquet(directory / TICKETS),
                    tuple(np.asarray(part, dtype=np.float32) for part in manifest["topic_scale"]), BM25Config(**manifest["bm25"]),
                    manifest["coherence"])
        if not len(index) == index.tickets.height == manifest["tickets"]:
            raise StepError(f"{directory}: {len(index)} vectors, {index.tickets.height} tickets, the manifest says "
                            f"{manifest['tickets']}: the folder is damaged; rebuild it")
        return index

    def check(self, scorer_hash: str, bundle: str | Path, where: str | Path) -> None:
        check_hash(self.model_hash, scorer_hash, bundle, where)

    def add(self, scorer: Scorer, tickets: pl.DataFrame, engine: str = EncodeConfig.engine) -> int:
        """Append tickets (TICKET_SCHEMA, ids new to the index; an `origin` column, file:line, names them in the
        refusal); returns how many. BM25's statistics are rebuilt. engine: encode.engine."""
        known = set(self.tickets["ticket_id"])
        origins = tickets[ORIGIN] if ORIGIN in tickets.columns else [None] * tickets.height
        again = [(origin, t) for origin, t in zip(origins, tickets["ticket_id"]) if t in known]
        if again:
            raise DataError([f"{origin + ': ' if origin else ''}ticket_id {t!r} is already in the index; new tickets need "
                             "new ids" for origin, t in again])
        vectors, frame, _ = encoded_tickets(scorer, self.layout, tickets, self.topic_scale, engine=engine)
        self.vectors.add(vectors)
        self.tickets = pl.concat([self.tickets, frame])
        self.refresh()
        return frame.height


def engine_channels(scorer: Scorer, tickets: pl.DataFrame, cached: Sequence[ChannelVectors], engine: str) -> list[ChannelVectors]:
    """`cached`, and on encode.engine ray the tickets' S (the one slow channel) encoded on the cluster once, in one job,
    where the variant reads S and `cached` lacks it; the other channels are encoded here, CHUNK tickets at a time."""
    if engine != "ray":
        return list(cached)
    from ticketsim.channels.ray_encode import ray_encoding
    from ticketsim.channels.sentence import sentence_channel
    from ticketsim.model.branches import reads
    from ticketsim.model.metric import metric_of

    encode = ray_encoding(scorer.sentence)      # refuses first where ray is missing, whatever the variant reads
    if "S" not in reads(metric_of(scorer.variant)) or any(v.channel == "S" for v in cached):
        return list(cached)
    return [*cached, sentence_channel(one_side(tickets, "tickets"), scorer.sentence, False, scorer.sentence_encoder, encode)[0]]


def encoded_tickets(scorer: Scorer, layout: Layout, tickets: pl.DataFrame, topic_scale: tuple[np.ndarray, np.ndarray] | None,
                    cached: Sequence[ChannelVectors] = (), engine: str = EncodeConfig.engine
                    ) -> tuple[np.ndarray, pl.DataFrame, tuple[np.ndarray, np.ndarray]]:
    """(folded vectors float32, the tickets with their parts' tokens and standardized topics, the mean and std used),
    CHUNK tickets at a time. topic_scale None: these tickets' own (a new index). cached: as Scorer.encode; engine:
    encode.engine."""
    tickets = tickets.select(list(TICKET_SCHEMA))
    cached = engine_channels(scorer, tickets, cached, engine)
    vectors, parts, activity, topics = [], [], [], ReasonTopics.of(scorer.topics)
    for start in range(0, tickets.height, CHUNK):
        tokens, folded = fold_side(scorer, layout, tickets.slice(start, CHUNK), "tickets", cached)
        vectors.append(folded.astype(np.float32))
        parts.append(tokens.select(tokens=pl.struct(list(TICKET_FIELDS))))
        activity.append(topics.activity(component_tokens(tokens, TICKET_LEVEL)))
    activity = np.concatenate(activity)
    topic_scale = (activity.mean(0), activity.std(0)) if topic_scale is None else topic_scale
    frame = pl.concat([tickets, pl.concat(parts)], how="horizontal").with_columns(
        topics=pl.Series(standardized(activity, *topic_scale).tolist(), dtype=pl.List(pl.Float32)))
    return np.concatenate(vectors), frame, topic_scale


def reuse_index(index: str | Path, scorer: Scorer, bundle: str | Path, out: str | Path, probe: int = 8) -> TicketIndex:
    """The index at `index` for `bundle` (loaded: `scorer`), whose ticket side folded it: a query-tower retrain's
    (docs/retraining.md#two-roads). Every file is copied byte for byte and the manifest names the new bundle and its
    weights in force; IndexMismatch unless the bundle folds the first `probe` tickets to the vectors stored for them."""
    index, out = Path(index), Path(out)
    reused = TicketIndex.load(index)
    reused.model_hash, reused.layout = model_hash(bundle), Layout.of(scorer)
    stored = np.asarray(reused.vectors.array[:probe], dtype=np.float32)
    folded, _, _ = encoded_tickets(scorer, reused.layout, reused.tickets.head(probe), reused.topic_scale)
    if folded.shape != stored.shape or not np.allclose(folded, stored, rtol=1e-3, atol=1e-5):
        raise IndexMismatch(f"{bundle} folds the tickets of {index} otherwise than the model that built it (another ticket "
                            f"encoder or other dense weights): rebuild the index (`ticketsim retrain --full`)")
    shutil.copytree(index, out)
    reused.save(out, files=(MANIFEST,))
    return reused


def build_index(scorer: Scorer, bundle_hash: str, tickets: pl.DataFrame, cached: Sequence[ChannelVectors] = (),
                coherence: float = TopicsConfig.coherence, precision: Precision = "float32",
                engine: str = EncodeConfig.engine) -> TicketIndex:
    """An exact L1 index of every ticket, folded with the bundle's weights in force; cached: as Scorer.encode; engine:
    where S is encoded (encode.engine);
    coherence: the NPMI a topic needs for a reason to name it (topics.coherence); precision: of the stored vectors.
    float16 halves the bytes but reorders near-ties (synthetic end-user queries: 195 of 200 top 10s in the same order,
    all 200 with the same ten tickets, docs/performance.md), so it is chosen, not the default."""
    if tickets.is_empty():
        raise DataError(["the knowledge base has no tickets: nothing to index"])
    layout = Layout.of(scorer)
    vectors, frame, topic_scale = encoded_tickets(scorer, layout, tickets, None, cached, engine)
    return TicketIndex(bundle_hash, layout, TicketVectors.of(vectors, precision), frame, topic_scale, scorer.bm25, coherence)
