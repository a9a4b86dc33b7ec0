"""The three tables every source becomes (tickets, queries, labelled pairs): schemas, labels, splits, Parquet I/O."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

TICKET_SCHEMA = {"ticket_id": pl.String, "subject": pl.String, "description": pl.String, "solution": pl.String}
QUERY_SCHEMA = {"query_id": pl.String, "subject": pl.String, "description": pl.String}
# source_rank: the candidate order a source ships (SemEval's search-engine rank), null when it has none.
PAIR_SCHEMA = {"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8, "split": pl.String, "source_rank": pl.Int32}

LABELS = {"YES": 5, "REL": 3, "NO": 1}
LAY = "lay"     # queries phrased unlike the train/dev ones (data.synthetic): only scored, a shift (training.shift)
SPLITS = ("train", "dev", "test", LAY)
TICKET_FIELDS = ("subject", "description", "solution")
QUERY_FIELDS = ("subject", "description")
# Fields of a ticket an index keeps beside its texts (strings) where its file or a mapping has them: `search --where`.
FACETS = ("product", "site", "queue")


@dataclass(frozen=True)
class Corpus:
    """A knowledge base of tickets, the queries asked against it, and the labelled query-ticket pairs."""

    tickets: pl.DataFrame
    queries: pl.DataFrame
    pairs: pl.DataFrame

    def write(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for name, frame in self.frames().items():
            frame.write_parquet(directory / f"{name}.parquet")

    @classmethod
    def read(cls, directory: str | Path) -> Corpus:
        directory = Path(directory)
        return cls(**{name: pl.read_parquet(directory / f"{name}.parquet") for name in ("tickets", "queries", "pairs")})

    def frames(self) -> dict[str, pl.DataFrame]:
        return {"tickets": self.tickets, "queries": self.queries, "pairs": self.pairs}

    def split(self, name: str) -> pl.DataFrame:
        """The labelled pairs of one split."""
        return self.pairs.filter(pl.col("split") == name)


def conform(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Columns of `schema`, in its order and types; optional columns missing from `frame` become null."""
    return frame.select(
        (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name) for name, dtype in schema.items()
    )


def stable_split(key: str, fractions: dict[str, float]) -> str:
    """The split a key belongs to, from a hash of the key alone: it never moves when data is added."""
    point = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big") / 2**64
    total = 0.0
    for name, fraction in fractions.items():
        total += fraction
        if point < total:
            return name
    return next(reversed(fractions))
