"""Which raw files a dataset reads, checked before anything runs: one line naming the param and the missing files.

The `sources` stage writes their record (file names, sizes, SHA-256) and `prepare` depends on it instead of the raw
folder. So a dataset whose files are elsewhere (SemEval beside the repo, a user's export) stops `dvc repro` with our
message instead of DVC's `No such file or directory`, and `prepare` reruns exactly when a raw file's bytes change.
Only the standard library here: the stage runs on every `dvc repro` and must start fast.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from ticketsim.config import DatasetConfig

CSV_TABLES = ("tickets", "queries", "pairs")


def csv_tables(cfg: DatasetConfig) -> tuple[str, ...]:
    """The tables a csv dataset's folder holds: tickets alone when it has no labelled pairs (labels: false)."""
    return CSV_TABLES if cfg.labels else CSV_TABLES[:1]


class MissingSource(ValueError):
    """A dataset's raw files are not where its params say."""


def raw_files(cfg: DatasetConfig) -> list[Path]:
    """The files `prepare` will read; MissingSource (one line: param, folder, expected files) when any is absent."""
    if cfg.source == "synthetic":
        return []   # generated from params (synthetic, seed): nothing to find
    raw = Path(cfg.raw or "")
    if cfg.source == "semeval2016":
        names = [*cfg.train, *(n for n in (cfg.dev, cfg.test, cfg.test_gold) if n)]
        expected = [raw / name for name in names]
        missing = [p.name for p in expected if not p.is_file()]
        wanted = "the SemEval-2016 Task 3 XML files"
    else:
        tables = csv_tables(cfg)
        options = {t: [raw / f"{t}.{ext}" for ext in ("csv", "jsonl")] for t in CSV_TABLES}
        expected = [next((p for p in options[t] if p.is_file()), options[t][0]) for t in tables]
        missing = [f"{t}.csv|.jsonl" for t in tables if not any(p.is_file() for p in options[t])]
        wanted = "tickets, queries and pairs as .csv or .jsonl" if cfg.labels else "tickets as .csv or .jsonl"
        # Tickets only, yet labels beside them: say so rather than leave them unread.
        unread = [p.name for t in CSV_TABLES if t not in tables for p in options[t] if p.is_file()]
        if unread:
            raise MissingSource(f"datasets.{cfg.name}.labels is false (tickets only), but {raw} holds {', '.join(unread)}: "
                                f"remove `labels: false` to train on them, or move them out of the folder")
    if missing:
        tickets_only = cfg.source == "csv" and cfg.labels and raw.is_dir() and not missing[0].startswith("tickets")
        hint = f"; with tickets only (no labelled pairs yet), set datasets.{cfg.name}.labels: false" if tickets_only else ""
        where = f"folder {raw} does not exist" if not raw.is_dir() else f"{raw} lacks {', '.join(missing)}"
        raise MissingSource(f"datasets.{cfg.name}.raw = {cfg.raw!r}: {where}; set datasets.{cfg.name}.raw to the folder "
                            f"holding {wanted} ({', '.join(p.name for p in expected)}), or remove datasets.{cfg.name}{hint}")
    # A column mapping file (ticketsim.data.columns) is read like the raw files: prepare reruns when it changes.
    if isinstance(cfg.columns, str) and cfg.columns.endswith((".yaml", ".yml")):
        if not Path(cfg.columns).is_file():
            raise MissingSource(f"datasets.{cfg.name}.columns = {cfg.columns!r}: no such column mapping file")
        expected.append(Path(cfg.columns))
    return expected


def source_record(cfg: DatasetConfig) -> dict:
    """The source and each raw file's name, size and SHA-256: changes exactly when prepare's input changes."""
    files = {}
    for path in raw_files(cfg):
        digest = hashlib.sha256()
        with path.open("rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
        files[path.name] = {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}
    return {"source": cfg.source, "files": files}
