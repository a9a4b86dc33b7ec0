"""`ticketsim index sync`: an index made equal to a help desk's export in one generation. The export's new ids are
added, its changed tickets (a text or a facet differs) replace the index's, the ids it lacks are deleted and erased as
`index delete` erases them; only new tickets and changed texts are encoded (a facet alone changed keeps the ticket's
stored vectors, tokens and topics). A sync whose export equals the index writes nothing."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from ticketsim.config import EncodeConfig
from ticketsim.data.tables import FACETS, TICKET_FIELDS, TICKET_SCHEMA
from ticketsim.errors import StepError
from ticketsim.search.generations import next_generation, next_name, writable
from ticketsim.search.index import Encoded, TicketIndex, append, encoded_tickets, model_hash, needs, write_without
from ticketsim.search.space import room

if TYPE_CHECKING:
    from ticketsim.bundle.loader import Scorer


@dataclass(frozen=True)
class SyncPlan:
    """What a sync of `export` does to an index, by ticket id: `encode` new tickets or changed texts (added: ids new to
    the index), `facets_only` tickets whose facets alone changed, `deleted` ids the export lacks."""

    generation: Path            # the generation the plan was made against
    added: tuple[str, ...]
    encode: tuple[str, ...]     # added, then those whose texts changed
    facets_only: tuple[str, ...]
    deleted: tuple[str, ...]

    @property
    def updated(self) -> int:
        return len(self.encode) - len(self.added) + len(self.facets_only)

    @property
    def dropped(self) -> set[str]:
        """The index's tickets the next generation leaves out: the deleted and the replaced."""
        return set(self.deleted) | (set(self.encode) - set(self.added)) | set(self.facets_only)

    def counts(self) -> str:
        return f"{len(self.added)} added, {self.updated} updated, {len(self.deleted)} deleted"


def sync_plan(index: TicketIndex, export: pl.DataFrame, name: str = "the export") -> SyncPlan:
    """What syncing `export` (TICKET_SCHEMA and the FACETS it has, ids unique: as csvsource.read_records gives it) does
    to `index`. A StepError of one line where the export lacks a facet the index keeps (the sync would clear it on every
    ticket) or holds none of the index's ids (it would delete every ticket: another knowledge base's export?)."""
    held = index.facets()
    lacking = [f for f in held if f not in export.columns]
    if lacking:
        raise StepError(f"{name} has no column {lacking[0]!r}, which the index keeps for its tickets (the sync would clear "
                        f"it on all {len(index)}); add the column, or rebuild with `ticketsim index build --force`; "
                        "nothing written")
    facets = [f for f in FACETS if f in held or f in export.columns]
    stored = pl.from_arrow(index.table.select(["ticket_id", *TICKET_FIELDS, *held])).with_columns(
        pl.lit(None, pl.String).alias(f) for f in facets if f not in held)
    both = export.select(["ticket_id", *TICKET_FIELDS, *facets]).join(stored, on="ticket_id", how="full", suffix="_stored",
                                                                        coalesce=False)
    new, gone = both["ticket_id_stored"].is_null(), both["ticket_id"].is_null()
    kept = ~new & ~gone
    if not kept.any():
        raise StepError(f"{name} holds none of the index's {len(index)} ticket ids: the sync would delete every ticket "
                        "(the export of another knowledge base?); nothing written (`ticketsim index build --force` "
                        "replaces an index)")

    def differs(fields) -> pl.Series:
        # "" and null alike: a file's empty cell is read as "", a ticket added without a facet's column holds null
        return pl.Series(np.zeros(both.height, bool)) if not fields else both.select(pl.any_horizontal(
            pl.col(f).fill_null("").ne(pl.col(f"{f}_stored").fill_null("")) for f in fields)).to_series()

    texts = differs(TICKET_FIELDS)
    ids = both["ticket_id"]
    return SyncPlan(index.generation, tuple(ids.filter(new)), tuple(ids.filter(new)) + tuple(ids.filter(kept & texts)),
                    tuple(ids.filter(kept & ~texts & differs(facets))), tuple(both["ticket_id_stored"].filter(gone)))


def changed_tickets(scorer: Scorer, index: TicketIndex, export: pl.DataFrame, plan: SyncPlan, engine: str) -> Encoded | None:
    """The tickets a sync writes anew (None: none): those of `plan.encode` encoded, those of `plan.facets_only` as stored
    with the export's facets."""
    facets, parts = [f for f in FACETS if f in export.columns], []
    if plan.encode:
        vectors, frame, _ = encoded_tickets(scorer, index.score, to_encode(export, plan), index.topic_scale, engine=engine)
        parts.append(Encoded(vectors, frame))
    if plan.facets_only:
        rows = sorted(index.row_of(t) for t in plan.facets_only)
        frame = pl.from_arrow(index.table.take(rows)).drop(facets, strict=False)
        frame = frame.join(export.select(["ticket_id", *facets]), on="ticket_id", how="left", maintain_order="left")
        parts.append(Encoded(np.asarray(index.vectors.take(np.asarray(rows, np.int64)), np.float32), frame))
    return Encoded.joined(parts) if parts else None


def to_encode(export: pl.DataFrame, plan: SyncPlan) -> pl.DataFrame:
    return export.filter(pl.col("ticket_id").is_in(plan.encode)).select(
        [*TICKET_SCHEMA, *(f for f in FACETS if f in export.columns)])


def sync_tickets(directory: str | Path, scorer: Scorer, bundle: str | Path, export: pl.DataFrame, name: str = "the export",
                 engine: str = EncodeConfig.engine) -> tuple[SyncPlan, TicketIndex]:
    """Make the index at `directory` equal to `export` (as sync_plan reads it) in one generation, under the writer lock;
    (what it did, the index after). Where anything is deleted or replaced no earlier generation is kept (erasure, as
    delete_tickets); additions alone are an add (append). The changed tickets are encoded before the lock; a writer
    that changed the index meanwhile makes this one refuse, nothing written (the sync run again plans against the index
    then in force)."""
    directory = Path(directory)
    index, bundle_hash = TicketIndex.load(directory), model_hash(bundle)
    index.check(bundle_hash, bundle, directory)
    plan = sync_plan(index, export, name)
    if not (plan.encode or plan.facets_only or plan.deleted):
        return plan, index
    writable(directory)
    space = needs(index, to_encode(export, plan), rewritten=index.stored_bytes())     # every segment joined into one
    room(directory, space, directory / next_name(directory))   # before minutes of encoding
    changed = changed_tickets(scorer, index, export, plan, engine)
    if not plan.dropped:    # additions alone: an add's generation, BM25's counts added to, not rebuilt
        return plan, append(directory, bundle_hash, changed)
    with next_generation(directory, space, erase=True) as (in_force, scratch):
        if in_force != plan.generation:
            raise StepError(f"{directory}: another writer changed the index during the sync ({getattr(in_force, 'name', None)} "
                            f"in force, the sync read {plan.generation.name}); nothing written: run the sync again")
        write_without(scratch, index, plan.dropped, changed)
    return plan, TicketIndex.load(directory)
