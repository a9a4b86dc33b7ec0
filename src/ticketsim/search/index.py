"""The knowledge base of a search, as a store that opens in constant time: an index folder of generations
(search/generations.py: one writer at a time, readers never see a half-written one), each generation a whole index of
segments (search/segments.py: the tickets' vectors, texts, postings and ids, every file written once, hard-linked into
later generations and memory-mapped when it loads), so opening costs nothing per ticket and the page's workers share
one copy of it in the page cache. Beside its segments a generation holds:

- the reason topics' word co-occurrence counts over every ticket, from which their coherence follows;
- manifest.json, the generation manifest: its segments, the score's layout (FusedScore.layout), the scales, and the
  hash of the bundle whose weights flattened the vectors, so that a search with other weights is refused instead of
  answering wrongly.

Adding tickets writes the next generation: the segments of the one in force linked, and one new segment of the new
tickets (joined with the newest small segments, search/segments.joined_tail). Counts add up, so BM25 and the coherence
after an addition are exactly those of a rebuild. A write that removes tickets (delete, an update, a sync) rewrites the
segments that hold them, without them, and links the others; `ticketsim index compact` joins every segment into one.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
import pyarrow as pa

from ticketsim.channels.bm25 import Lexicon
from ticketsim.channels.cache import ChannelVectors, component_tokens
from ticketsim.channels.coherence import cooccurrence, npmi_of_counts, topic_word_list
from ticketsim.channels.lexical import TICKET_LEVEL
from ticketsim.config import BM25Config, EncodeConfig, GraphConfig, IndexConfig, TopicsConfig
from ticketsim.data.tables import FACETS, TICKET_FIELDS, TICKET_SCHEMA
from ticketsim.data.validate import ORIGIN, DataError
from ticketsim.errors import StepError
from ticketsim.scoring.fused import FusedScore
from ticketsim.search.damage import Damaged, one_line, opened, whole
from ticketsim.search.encode import flat_side, one_side, search_score
from ticketsim.search.generations import (
    POINTER,
    current,
    generations,
    locked,
    next_generation,
    next_name,
    number,
    previous_of,
    scratch_number,
    switch,
    writable,
)
from ticketsim.search.reasons import ReasonTopics, TopicLabels, standardized
from ticketsim.search.segments import (
    SEGMENT,
    Encoded,
    Segment,
    SegmentVectors,
    Source,
    joined_table,
    joined_tail,
    lexicon,
    link_segment,
    segment_name,
    ticket_documents,
    write_segment,
)
from ticketsim.search.space import room, tree_bytes
from ticketsim.search.vectors import Precision

if TYPE_CHECKING:
    from ticketsim.bundle.loader import Scorer

GENERATION_MANIFEST, COOCCURRENCE = "manifest.json", "cooccurrence.npy"
FORMAT = 3      # manifest's "format": generations of hard-linked segments
CHUNK = 1000    # tickets encoded at once: bounds the memory of a large knowledge base
TEXT_BYTES = 4  # a generation's bytes per byte of ticket text, about: tickets.arrow (texts and tokens) 3.5, postings 1
SHOWN = ("ticket_id", "subject", "description", "solution", "topics")   # what a hit shows of its ticket


class IndexMismatch(StepError):
    """An index whose vectors were flattened with other weights than the bundle's."""


def model_hash(bundle: str | Path) -> str:
    """SHA-256 over every file of a bundle (path and bytes): the weights, the vocabulary, the channels' models, the manifest."""
    bundle, digest = Path(bundle), hashlib.sha256()
    for path in sorted(p for p in bundle.rglob("*") if p.is_file()):
        # in three updates, the digest of their concatenation: no copy of a graph of hundreds of MB (a cold search)
        for part in (path.relative_to(bundle).as_posix().encode() + b"\0", path.read_bytes(), b"\0"):
            digest.update(part)
    return digest.hexdigest()


REBUILD = "rebuild it with `dvc repro index@<dataset>` or `ticketsim index build --force`"


def generation_of(directory: Path) -> Path:
    """The generation in force of an index folder, or a StepError when the folder is none or of an older ticketsim
    (Damaged where CURRENT names no generation that is there)."""
    found = current(directory)
    if found is None:
        manifest = directory / GENERATION_MANIFEST     # where an older index kept it, in the folder itself
        if manifest.is_file() and "model_hash" in json.loads(manifest.read_text()):
            raise StepError(f"{directory}: an index of an older ticketsim (one folder rewritten in place, BM25 rebuilt "
                            f"on every load); {REBUILD}")
        raise StepError(f"{directory}: not a search index (no {POINTER}); build one with `dvc repro index@<dataset>` "
                        "or `ticketsim index build`")
    return found


def read_generation_manifest(directory: Path) -> dict:
    """The manifest of the generation in force of an index folder."""
    return in_force(Path(directory))[1]


def in_force(directory: Path) -> tuple[Path, dict]:
    """(the generation in force, its manifest): `CURRENT` read once, so a writer switching it meanwhile cannot pair one
    generation's manifest with another's files. Damaged, with its remedy, where either cannot be read."""
    try:
        generation = generation_of(directory)
        return generation, manifest_of(generation)
    except Damaged as damage:
        raise damage.with_remedy(remedy(directory, damage.below)) from None


def manifest_of(generation: Path) -> dict:
    """A generation's manifest, or Damaged naming it."""
    path = generation / GENERATION_MANIFEST
    manifest = opened(path, number(generation), lambda: json.loads(path.read_bytes()))
    if not isinstance(manifest, dict):
        raise Damaged(path, "holds no JSON object", number(generation))
    return manifest


def segments_of(generation: Path, manifest: dict) -> list[Path]:
    """The segment folders a generation's manifest names; Damaged where it names none, or a name that is no segment's."""
    named = manifest.get("segments")
    if not isinstance(named, list) or not named or not all(isinstance(n, str) and SEGMENT.fullmatch(n) for n in named):
        raise Damaged(generation / GENERATION_MANIFEST, f"names no segments (seg-000001, ...): {str(named)[:60]}",
                      number(generation))
    return [generation / name for name in named]


def whole_generation(generation: Path, manifest: dict) -> None:
    """Damaged naming the first file of the generation that is missing or cut short."""
    whole([generation / COOCCURRENCE], [], number(generation))
    for segment in segments_of(generation, manifest):
        whole(*Segment.files(segment), number(generation))


def check_whole(directory: str | Path) -> None:
    """Damaged, with its remedy, unless the generation in force has every file whole (present, as long as written):
    opened by no library that starts threads, so `ticketsim serve`'s parent runs it before it forks its workers."""
    generation, manifest = in_force(Path(directory))
    try:
        whole_generation(generation, manifest)
    except Damaged as damage:
        raise damage.with_remedy(remedy(Path(directory), damage.below)) from None


def earlier(directory: Path, below: int | None) -> TicketIndex | None:
    """The newest generation numbered below `below` (None: any) that is intact and loads, or None."""
    for generation in reversed(generations(directory)):
        if below is None or number(generation) < below:
            try:
                return TicketIndex.of_generation(directory, generation, manifest_of(generation))
            except Damaged:
                continue
    return None


def remedy(directory: Path, below: int | None) -> str:
    """What can replace a damaged generation numbered `below` (None: CURRENT names none): the earlier one that loads,
    which `ticketsim index rollback` puts in force, else a rebuild."""
    found = earlier(directory, below)
    if found is None:
        return f"no {'earlier ' if below is not None else ''}generation of the index is intact: {REBUILD}"
    which = "the generation before it" if below is not None else "the newest generation"
    return (f"{which}, {found.generation.name} ({len(found)} tickets), is intact: `ticketsim index rollback --index "
            f"{directory}` puts it in force")


def rollback(directory: str | Path) -> tuple[TicketIndex, str]:
    """Put in force the newest intact generation before the one in force (where CURRENT names none that is there, the
    newest intact one), under the writer lock; (the index now, what became of the one it replaces). The next writer
    removes a generation set aside."""
    directory = Path(directory)
    with locked(directory):
        try:
            left = generation_of(directory)
            below, what = number(left), f"{left.name} set aside (the next `index add` or `index build --force` removes it)"
        except Damaged as damage:
            below, what = damage.below, f"{POINTER} rewritten (it {damage.problem})"
        found = earlier(directory, below)
        if found is None:
            raise StepError(f"{directory}: no earlier generation is intact to roll back to; {REBUILD}")
        switch(directory, found.generation.name)
    return TicketIndex.load(directory), what


def check_hash(index_hash: str, scorer_hash: str, bundle: str | Path, where: str | Path) -> None:
    """IndexMismatch unless the index at `where` was flattened with the weights of `bundle`."""
    if scorer_hash != index_hash:
        raise IndexMismatch(
            f"{where} was built with other model weights (bundle hash {index_hash[:12]}) than {bundle} "
            f"({scorer_hash[:12]}): its ticket vectors would be scored by the wrong model. Rebuild it: "
            f"`dvc repro index@<dataset>`, or `ticketsim index build --model {bundle} --tickets FILE --index {where} --force`")


@dataclass(eq=False)
class TicketIndex:
    """One generation of an index folder, loaded: its segments' tickets, numbered segment after segment (row i of
    `vectors` is ticket i of `table`). Read-only; writers make the next generation (build_index, append, reuse_index)."""

    folder: Path                # the index folder
    generation: Path            # the generation loaded
    model_hash: str
    score: FusedScore           # the bundle's weights in force, as the vectors were flattened with them
    segments: tuple[Segment, ...]
    topic_scale: tuple[np.ndarray, np.ndarray]   # the tickets' mean and std of topic activity when the index was built
    bm25: BM25Config
    coherence: float            # topics.coherence: the NPMI a topic needs for a reason to name it
    topic_words: tuple[str, ...]
    cooccurrence: np.ndarray    # of topic_words in the tickets (channels.coherence.cooccurrence)
    graph_config: GraphConfig   # from what size a segment keeps a graph, and how it is built and walked
    vectors: SegmentVectors = field(init=False)     # every segment's vectors, searched as one
    table: pa.Table = field(init=False)             # every segment's tickets.arrow, mapped, as one table
    postings: Lexicon = field(init=False)           # channel L's statistics over every segment

    def __post_init__(self) -> None:
        self.vectors, self.table, self.postings = SegmentVectors(self.segments), joined_table(self.segments), lexicon(self.segments)

    def exact(self) -> TicketIndex:
        """The same generation searched exactly, every segment's graph left unwalked (a benchmark's and a test's reference)."""
        scanned = replace(self)
        scanned.vectors = self.vectors.exact
        return scanned

    @classmethod
    def load(cls, directory: str | Path) -> TicketIndex:
        """The generation in force; Damaged naming the file that is missing, cut short or unreadable, and the remedy.
        Loaded again where CURRENT moved on meanwhile: an erasing writer (`index delete`) removes the generation it
        replaces, maybe while this reads it."""
        directory = Path(directory)
        while True:
            seen = previous_of(directory)
            try:
                generation, manifest = in_force(directory)
                try:
                    return cls.of_generation(directory, generation, manifest)
                except Damaged as damage:
                    raise damage.with_remedy(remedy(directory, damage.below)) from None
            except Damaged:
                if seen is None or previous_of(directory) == seen:
                    raise

    @classmethod
    def of_generation(cls, directory: Path, generation: Path, manifest: dict) -> TicketIndex:
        """One generation of the folder, every file checked whole first; Damaged (without a remedy) where one is not."""
        at = number(generation)
        if manifest.get("format", FORMAT) < FORMAT:
            raise StepError(f"{directory}: an index of an older ticketsim (format {manifest['format']}, one copy of every "
                            f"ticket per generation); {REBUILD}")
        whole_generation(generation, manifest)
        try:
            score = FusedScore.from_layout(manifest["layout"])
            bm25, graph = BM25Config(**manifest["bm25"]), GraphConfig(**manifest.get("graph", {}))
            scale = tuple(np.asarray(part, dtype=np.float32) for part in manifest["topic_scale"])
            model, coherence, words = manifest["model_hash"], manifest["coherence"], tuple(manifest["topic_words"])
        except (KeyError, TypeError, ValueError) as error:
            raise Damaged(generation / GENERATION_MANIFEST, f"not a generation's manifest ({one_line(error)}: wrong or "
                          "missing)", at) from None
        segments = tuple(Segment.load(folder, bm25, graph, at) for folder in segments_of(generation, manifest))
        counts = opened(generation / COOCCURRENCE, at, lambda: np.load(generation / COOCCURRENCE))
        index = cls(directory, generation, model, score, segments, scale, bm25, coherence, words, counts, graph)
        if len(index) != manifest.get("tickets"):
            raise Damaged(generation, f"its segments hold {len(index)} tickets, the manifest says {manifest.get('tickets')}", at)
        return index

    def __len__(self) -> int:
        return self.vectors.ntotal

    def rows(self, rows: Sequence[int], excerpt: int | None = None) -> list[dict]:
        """What a hit shows of the tickets at `rows` (SHOWN), each text of more than `excerpt` characters cut to them
        (None: whole) and `cut`, each such text's full length. Row by row: Arrow's `take` would import pandas, half a
        second of a cold search; and no more than one row's whole texts are held at once."""
        shown, found = self.table.select(list(SHOWN)), []
        for row in rows:
            ticket = shown.slice(row, 1).to_pylist()[0]
            cut = {f: len(ticket[f]) for f in TICKET_FIELDS if excerpt is not None and len(ticket[f] or "") > excerpt}
            found.append({**ticket, **{f: ticket[f][:excerpt] for f in cut}, "cut": cut})
        return found

    def tokens(self, row: int) -> dict[str, list[str]]:
        """The ticket's tokens, part by part."""
        return self.table["tokens"][row].as_py()

    def row_of(self, ticket_id: str) -> int | None:
        for segment, start in zip(self.segments, self.vectors.starts):
            if (row := segment.row_of(ticket_id)) is not None:
                return int(start) + row
        return None

    def ids_at(self, rows: np.ndarray) -> np.ndarray:
        """The ticket ids of these rows (a few: the candidates whose totals tie), as strings."""
        column = self.table.column("ticket_id")
        return np.array([column[int(row)].as_py() for row in rows], dtype=str)

    def ticket(self, ticket_id: str) -> dict | None:
        """A ticket as indexed (its id and texts), or None when there is no such id."""
        row = self.row_of(ticket_id.strip())
        return None if row is None else self.table.select(list(TICKET_SCHEMA)).slice(row, 1).to_pylist()[0]

    def facets(self) -> list[str]:
        """The FACETS its tickets table keeps, those a filter can name."""
        return [c for c in FACETS if c in self.table.column_names]

    def matching(self, where: dict[str, str]) -> np.ndarray:
        """The rows whose FACETS hold every value of `where` (field -> value, exactly), ascending; a StepError of one
        line naming a field the index lacks and those it has."""
        held = self.facets()
        lacking = [field for field in where if field not in held]
        if lacking:
            kept = ", ".join(held) or "none (an index keeps " + ", ".join(FACETS) + " where its tickets file has them)"
            raise StepError(f"the index's tickets have no field {lacking[0]!r} to filter on; the fields they have: {kept}")
        keep = np.ones(len(self), bool)
        for name, value in where.items():
            keep &= np.asarray(self.table[name].to_numpy(zero_copy_only=False) == value, bool)
        return np.flatnonzero(keep)

    @property
    def tickets(self) -> pl.DataFrame:
        """Every ticket as a table (an evaluation's or a test's view: it reads the whole file)."""
        return pl.from_arrow(self.table)

    def words(self) -> list[list[str]]:
        return ticket_documents(self.tickets)

    def topic_labels(self, topics: ReasonTopics) -> TopicLabels:
        """The reason topics' words and their coherence on the tickets, from the stored counts."""
        if tuple(topic_word_list(topics.words)) != self.topic_words:
            raise IndexMismatch(f"{self.folder}: its topic counts are of another topic model than the bundle's; {REBUILD}")
        return TopicLabels(topics.words, tuple(npmi_of_counts(topics.words, self.cooccurrence, len(self)).tolist()),
                           self.coherence)

    def stored_bytes(self) -> int:
        """The bytes of its segments' files."""
        return sum(tree_bytes(s.folder) for s in self.segments)

    def joining(self, tickets: int) -> tuple[tuple[Segment, ...], tuple[Segment, ...]]:
        """(the segments an addition of `tickets` tickets keeps, linked; those it joins into its own, rewritten)."""
        split = len(self.segments) - joined_tail([len(s) for s in self.segments], tickets)
        return self.segments[:split], self.segments[split:]

    def joined_bytes(self, tickets: int) -> int:
        """The bytes of the segments an addition of `tickets` tickets joins into its own."""
        return sum(tree_bytes(s.folder) for s in self.joining(tickets)[1])

    def check(self, scorer_hash: str, bundle: str | Path, where: str | Path) -> None:
        check_hash(self.model_hash, scorer_hash, bundle, where)

    def generation_manifest(self) -> dict:
        return generation_manifest_of(self.model_hash, self.score, self.topic_scale, self.bm25, self.coherence, self.topic_words,
                                      self.graph_config)


def generation_manifest_of(bundle_hash: str, score: FusedScore, topic_scale: tuple[np.ndarray, np.ndarray], bm25: BM25Config,
                coherence: float, topic_words: Sequence[str], graph: GraphConfig) -> dict:
    """What a generation's manifest says beside its size (write_generation adds tickets, dim and precision)."""
    return {"format": FORMAT, "model_hash": bundle_hash,
            "layout": score.layout(),
            "topic_scale": [part.tolist() for part in topic_scale], "bm25": asdict(bm25), "coherence": coherence,
            "topic_words": list(topic_words), "graph": asdict(graph)}


def write_generation(scratch: Path, manifest: dict, kept: Sequence[Segment], new: Sequence[Source], cooccurrence: np.ndarray,
                     precision: Precision) -> None:
    """A whole generation in `scratch`: the segments `kept` (of the generation in force) linked, followed by one segment
    of the tickets of `new` (none: no segment) with its graph as the manifest says; `cooccurrence` counts every ticket."""
    named, new = [segment.folder.name for segment in kept], [source for source in new if len(source)]
    for segment in kept:
        link_segment(segment.folder, scratch)
    if new:
        named.append(segment_name(scratch_number(scratch)))
        write_segment(scratch / named[-1], new, kept[0].table.schema if kept else None, BM25Config(**manifest["bm25"]),
                      GraphConfig(**manifest["graph"]), precision)
    np.save(scratch / COOCCURRENCE, cooccurrence)
    dim = kept[0].vectors.d if kept else new[0].vectors.shape[1]
    (scratch / GENERATION_MANIFEST).write_text(json.dumps({**manifest, "segments": named, "tickets": sum(map(len, [*kept, *new])),
                                                           "dim": dim, "precision": precision}) + "\n")


def engine_channels(scorer: Scorer, tickets: pl.DataFrame, cached: Sequence[ChannelVectors], engine: str) -> list[ChannelVectors]:
    """`cached`, and on encode.engine ray the tickets' S (the one slow channel) encoded on the cluster once, in one job,
    where the variant reads S and `cached` lacks it; the other channels are encoded here, CHUNK tickets at a time."""
    if engine != "ray":
        return list(cached)
    from ticketsim.channels.ray_encode import ray_encoding
    from ticketsim.channels.sentence import sentence_channel
    from ticketsim.model.branches import cached_components
    from ticketsim.scoring.weights import metric_of

    encode = ray_encoding(scorer.sentence)      # refuses first where ray is missing, whatever the variant reads
    parts = cached_components(metric_of(scorer.variant), "S")
    if not parts[1] or any(v.channel == "S" for v in cached):
        return list(cached)
    return [*cached, sentence_channel(one_side(tickets, "tickets"), scorer.sentence, False, scorer.sentence_encoder, encode,
                                      ((), parts[1]))[0]]


def encoded_tickets(scorer: Scorer, score: FusedScore, tickets: pl.DataFrame, topic_scale: tuple[np.ndarray, np.ndarray] | None,
                    cached: Sequence[ChannelVectors] = (), engine: str = EncodeConfig.engine
                    ) -> tuple[np.ndarray, pl.DataFrame, tuple[np.ndarray, np.ndarray]]:
    """(flat vectors float32, the tickets (and their FACETS) with their parts' tokens and standardized topics, the
    mean and std used), CHUNK tickets at a time. topic_scale None: these tickets' own (a new index). cached: as Scorer.encode; engine:
    encode.engine."""
    facets = tickets.select([c for c in FACETS if c in tickets.columns]).cast(pl.String)
    tickets = tickets.select(list(TICKET_SCHEMA))
    cached = engine_channels(scorer, tickets, cached, engine)
    vectors, parts, activity, topics = [], [], [], ReasonTopics.of(scorer.topics)
    for start in range(0, tickets.height, CHUNK):
        tokens, flat = flat_side(scorer, score, tickets.slice(start, CHUNK), "tickets", cached)
        vectors.append(flat.astype(np.float32))
        parts.append(tokens.select(tokens=pl.struct(list(TICKET_FIELDS))))
        activity.append(topics.activity(component_tokens(tokens, TICKET_LEVEL)))
    activity = np.concatenate(activity)
    topic_scale = (activity.mean(0), activity.std(0)) if topic_scale is None else topic_scale
    frame = pl.concat([tickets, facets, pl.concat(parts)], how="horizontal").with_columns(
        topics=pl.Series(standardized(activity, *topic_scale).tolist(), dtype=pl.List(pl.Float32)))
    return np.concatenate(vectors), frame, topic_scale


def reuse_index(index: str | Path, scorer: Scorer, bundle: str | Path, out: str | Path, probe: int = 8) -> TicketIndex:
    """The index at `index` for `bundle` (loaded: `scorer`), whose ticket side flattened it: a query-tower retrain's
    (docs/retraining.md#two-roads). The generation in force is copied byte for byte into a new index at `out` whose
    manifest names the new bundle and its weights in force; IndexMismatch unless the bundle flattens the first `probe`
    tickets to the vectors stored for them."""
    reused = TicketIndex.load(index)
    score = search_score(scorer)
    stored = np.asarray(reused.vectors.take(np.arange(min(probe, len(reused)))), dtype=np.float32)
    flat, _, _ = encoded_tickets(scorer, score, reused.tickets.head(probe).select(list(TICKET_SCHEMA)), reused.topic_scale)
    if flat.shape != stored.shape or not np.allclose(flat, stored, rtol=1e-3, atol=1e-5):
        raise IndexMismatch(f"{bundle} flattens the tickets of {index} otherwise than the model that built it (another ticket "
                            f"encoder or other dense weights): rebuild the index (`ticketsim retrain --full`)")
    with next_generation(out, tree_bytes(reused.generation)) as (_, scratch):     # the bytes of a copy, where no link is
        reused.model_hash, reused.score = model_hash(bundle), score
        write_generation(scratch, reused.generation_manifest(), reused.segments, (), reused.cooccurrence,
                         reused.vectors.precision)
    return TicketIndex.load(out)


def build_index(scorer: Scorer, bundle_hash: str, tickets: pl.DataFrame, out: str | Path, cached: Sequence[ChannelVectors] = (),
                coherence: float = TopicsConfig.coherence, precision: Precision = IndexConfig.precision,
                engine: str = EncodeConfig.engine, force: bool = False, graph: GraphConfig = IndexConfig.graph) -> TicketIndex:
    """An L1 index of every ticket at `out`, flattened with the bundle's weights in force; cached: as Scorer.encode;
    engine: where S is encoded (encode.engine); coherence: the NPMI a topic needs for a reason to name it
    (topics.coherence); graph: from what size the index keeps an approximate graph (index.graph; below it the search is
    exact); precision: of the stored vectors. float16 halves the bytes but reorders near-ties (the registered bundle's
    200 end-user queries: 198 top 10s in the same order, all 200 with the same ten tickets, docs/performance.md), so it
    is chosen, not the default. A folder that holds an index is replaced only with `force`."""
    if tickets.is_empty():
        raise DataError(["the knowledge base has no tickets: nothing to index"])
    refuse_existing(out, force)
    writable(out)
    room(Path(out), needs(None, tickets), Path(out) / next_name(Path(out)))    # the texts' part, before the encoding
    score = search_score(scorer)
    vectors, frame, topic_scale = encoded_tickets(scorer, score, tickets, None, cached, engine)
    new = Encoded(vectors, frame)
    words = topic_word_list(ReasonTopics.of(scorer.topics).words)
    manifest = generation_manifest_of(bundle_hash, score, topic_scale, scorer.bm25, coherence, words, graph)
    with next_generation(out, needs(None, tickets, vectors.size * np.dtype(precision).itemsize)) as (_, scratch):
        refuse_existing(out, force)     # again under the lock: another writer may have built it meanwhile
        write_generation(scratch, manifest, (), [Source.new(new, scorer.bm25)], cooccurrence(words, new.documents)[0], precision)
    return TicketIndex.load(out)


def needs(index: TicketIndex | None, tickets: pl.DataFrame, vector_bytes: int | None = None, rewritten: int = 0) -> int:
    """About the bytes the next generation writes: those of `tickets`, by the index's bytes per ticket or, for a new
    index or long texts, TEXT_BYTES per byte of their text beside their vectors' bytes (those of an index's tickets
    follow from its dimensions; a new index's are known once encoded), and the `rewritten` bytes of the segments it
    joins; the segments it keeps are linked, not written."""
    text = TEXT_BYTES * sum(int(tickets[c].str.len_bytes().sum() or 0) for c in TICKET_SCHEMA if c in tickets.columns)
    if index is None:
        return text + (vector_bytes or 0)
    stored = index.stored_bytes()
    vector_bytes = tickets.height * index.vectors.d * np.dtype(index.vectors.precision).itemsize if vector_bytes is None else vector_bytes
    return rewritten + max(stored // max(len(index), 1) * tickets.height, text + vector_bytes)


def refuse_existing(out: str | Path, force: bool) -> None:
    if force or not (Path(out) / POINTER).exists():
        return
    try:
        held = current(out).name
    except Damaged as damage:
        held = f"damaged: {damage.problem}"
    raise StepError(f"{out} already holds an index ({held}); pass --force to replace it, or `ticketsim index "
                    "add` to add tickets to it")


def add_tickets(directory: str | Path, scorer: Scorer, bundle: str | Path, tickets: pl.DataFrame,
                engine: str = EncodeConfig.engine, upsert: bool = False) -> tuple[int, TicketIndex]:
    """Append tickets (TICKET_SCHEMA, ids new to the index; an `origin` column, file:line, names them in a refusal) as
    the index's next generation; (how many, the index after). upsert: a ticket whose id is there replaces it. The
    tickets are encoded before the lock is taken, so a second writer waits only for the write; their ids are checked
    again under it."""
    if tickets.is_empty():
        raise DataError(["no tickets to add"])
    writable(directory)
    index, bundle_hash = TicketIndex.load(directory), model_hash(bundle)
    index.check(bundle_hash, bundle, directory)
    if not upsert:
        refuse_known(index, tickets["ticket_id"], tickets[ORIGIN] if ORIGIN in tickets.columns else None)
    room(Path(directory), needs(index, tickets, rewritten=index.joined_bytes(tickets.height)),
         Path(directory) / next_name(Path(directory)))   # before minutes of encoding
    vectors, frame, _ = encoded_tickets(scorer, index.score, tickets, index.topic_scale, engine=engine)
    return frame.height, append(directory, bundle_hash, Encoded(vectors, frame),
                                tickets[ORIGIN] if ORIGIN in tickets.columns else None, upsert=upsert)


def append(directory: str | Path, bundle_hash: str, new: Encoded, origins: Sequence[str] | None = None,
           graph: GraphConfig | None = None, upsert: bool = False) -> TicketIndex:
    """Encoded tickets as the next generation of the index at `directory`, under its lock: one new segment, of them and
    the newest small segments it joins (segments.joined_tail); the index after. graph: the graph settings from this
    generation on (None: those in force). upsert: a ticket whose id the index holds replaces it (else refused): the
    segments that hold them rewritten without them, as a delete does (write_without)."""
    loaded = TicketIndex.load(directory)
    with next_generation(directory, needs(loaded, new.frame, rewritten=loaded.joined_bytes(len(new.vectors)))) as (_, scratch):
        index = TicketIndex.load(directory)     # the generation in force now: another writer may have added
        index.check(bundle_hash, "the bundle", directory)
        replaced = {t for t in new.frame["ticket_id"] if index.row_of(t) is not None} if upsert else set()
        if not replaced:
            refuse_known(index, new.frame["ticket_id"], origins)
        if replaced or set(new.frame.columns) - set(index.table.column_names):     # a facet the table lacks: rewritten
            write_without(scratch, index, replaced, new)
        else:
            counts = index.cooccurrence + cooccurrence(index.topic_words, new.documents)[0]
            manifest = {**index.generation_manifest(), **({"graph": asdict(graph)} if graph else {})}
            kept, tail = index.joining(len(new.vectors))
            write_generation(scratch, manifest, kept, [*map(Source.of, tail), Source.new(new, index.bm25)], counts,
                             index.vectors.precision)
    return TicketIndex.load(directory)


def refuse_known(index: TicketIndex, ids: Sequence[str], origins: Sequence[str] | None) -> None:
    """DataError naming each id the index holds already (with its file:line where `origins` has one)."""
    again = [(origin, t) for origin, t in zip([None] * len(ids) if origins is None else origins, ids) if index.row_of(t) is not None]
    if again:
        raise DataError([f"{origin + ': ' if origin else ''}ticket_id {t!r} is already in the index; new tickets need "
                         "new ids" for origin, t in again])


def delete_tickets(directory: str | Path, ids: Sequence[str]) -> TicketIndex:
    """The index's next generation without the tickets `ids`; once it is in force every earlier generation is removed,
    so no file of the folder holds their texts (nor a word only they had). A StepError of one line naming an id the
    index lacks, nothing written; the index after."""
    ids = list(dict.fromkeys(t.strip() for t in ids if t.strip()))
    if not ids:
        raise StepError(f"{directory}: no ticket ids to delete")
    writable(directory)
    loaded = TicketIndex.load(directory)
    refuse_unknown(loaded, ids)     # before the lock: a typo waits for no writer
    with next_generation(directory, loaded.stored_bytes(), erase=True) as (_, scratch):
        index = TicketIndex.load(directory)     # the generation in force now: another writer may have changed it
        refuse_unknown(index, ids)
        write_without(scratch, index, set(ids), None)
    return TicketIndex.load(directory)


def refuse_unknown(index: TicketIndex, ids: Sequence[str]) -> None:
    """StepError of one line naming the first id the index lacks (and how many more), or where none would be left."""
    unknown = [t for t in ids if index.row_of(t) is None]
    if unknown:
        more = f" (and {len(unknown) - 1} more ids it lacks)" if len(unknown) > 1 else ""
        raise StepError(f"{index.folder}: no ticket {unknown[0]!r} in the index{more}; nothing deleted")
    if len(ids) >= len(index):
        raise StepError(f"{index.folder}: deleting all {len(index)} tickets would leave no index; nothing deleted "
                        "(`ticketsim index build --force` replaces it)")


def write_without(scratch: Path, index: TicketIndex, dropped: set[str], new: Encoded | None, every: bool = False) -> None:
    """A whole generation in `scratch`: the segments of `index` that hold a ticket `dropped` (every segment: `every`, or
    where `new` has a facet the tables lack) joined into one without those tickets and followed by `new` (None: none),
    the other segments linked. The joined postings lose the dropped rows (a word only they held leaves the vocabulary),
    the topic counts lose theirs, and the joined segment's graph is built anew: a graph cannot lose a node."""
    every = every or (new is not None and bool(set(new.frame.columns) - set(index.table.column_names)))
    touched = [s for s in index.segments if every or any(s.row_of(t) is not None for t in dropped)]
    gone = np.sort(np.array([row for row in map(index.row_of, dropped) if row is not None], np.int64))
    gone_tokens = pl.from_arrow(index.table.select(["tokens"]).take(gone))     # the dropped tickets' tokens alone
    counts = index.cooccurrence - cooccurrence(index.topic_words, ticket_documents(gone_tokens))[0]
    if new is not None:
        counts += cooccurrence(index.topic_words, new.documents)[0]
    write_generation(scratch, index.generation_manifest(), [s for s in index.segments if s not in touched],
                     [*(Source.of(s, dropped) for s in touched), *([] if new is None else [Source.new(new, index.bm25)])],
                     counts, index.vectors.precision)


def compact(directory: str | Path) -> tuple[int, TicketIndex]:
    """Every segment of the index joined into one (with its graph where it reaches index.graph.tickets), as the next
    generation; (the segments before, the index after). An index of one segment is left as it is."""
    writable(directory)
    loaded = TicketIndex.load(directory)
    if len(loaded.segments) == 1:
        return 1, loaded
    with next_generation(directory, loaded.stored_bytes()) as (_, scratch):
        index = TicketIndex.load(directory)     # the generation in force now: another writer may have added
        before = len(index.segments)
        write_without(scratch, index, set(), None, every=True)
    return before, TicketIndex.load(directory)
