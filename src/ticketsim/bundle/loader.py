"""A bundle loaded: a trained model as one folder (FILES names the model's own files beside the manifest, each cached
channel of ticketsim.channels.registry adds its own), and the path from raw texts to scores: tokens -> the cached
channels (E, T, S, ...), L, h -> g -> [1, 5]. ticketsim.bundle.writer writes one, ticketsim.bundle.evaluation
measures one.

Every dataset the importer accepts, an external SemEval test file, or a served request goes through the same
functions the pipeline stages use, so a bundle scores new text exactly as the pipeline scored its own.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import torch

from ticketsim.bundle.manifest import bundle_manifest
from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.channel import Texts
from ticketsim.channels.char_blstm import CharEncoder, load_checkpoint
from ticketsim.channels.registry import CHANNELS
from ticketsim.channels.sumemb import CHAR_BLSTM, WORD2VEC, word_vectors
from ticketsim.channels.topics import TOPIC_MODELS, TopicModel, load_topic_models
from ticketsim.config import (
    BM25Config,
    EncoderConfig,
    SentenceConfig,
    TextConfig,
    VariantConfig,
    build,
)
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import CALIBRATOR, Calibrator
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.model.branches import cached_components
from ticketsim.model.inputs import Inputs, build_inputs, scaled
from ticketsim.model.saved import ENCODER, WEIGHTS, load_model
from ticketsim.model.scores import pair_values, pool_values
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.scoring.weights import metric_of
from ticketsim.text.tokenize import Tokens, make_tokenizer, tokenize_corpus

if TYPE_CHECKING:
    from gensim.models import KeyedVectors

    from ticketsim.channels.sentence import SentenceEncoder

FILES = {"weights": WEIGHTS, "calibrator": CALIBRATOR}   # the trained model's; the channels' files: Channel.bundle
OPTIONAL = {"encoder": ENCODER}   # F's fine-tuned encoder, Fq's query tower


class Encoding(NamedTuple):
    """A corpus through a bundle: its tokens, the model inputs of both sides, the LSTM for its vocabulary."""

    tokens: Tokens
    inputs: Inputs
    model: SiameseLSTM


@dataclass(frozen=True, eq=False)
class Scorer:
    text: TextConfig
    variant: VariantConfig
    max_tokens: int
    scales: dict[str, float]
    model: SiameseLSTM          # trained on `words`; rebuilt around each new vocabulary in score()
    words: tuple[str, ...]
    directory: Path             # the bundle: the channels' models load from it on first use
    calibrator: Calibrator
    sentence: SentenceConfig = SentenceConfig()
    bm25: BM25Config = BM25Config()

    @classmethod
    def load(cls, directory: str | Path) -> Scorer:
        directory = Path(directory)
        manifest = bundle_manifest(directory)
        variant = build(VariantConfig, manifest["variant"], "manifest.variant")
        sentence = build(SentenceConfig, manifest.get("sentence", {}), "manifest.sentence")
        model = load_model(directory, variant, build(EncoderConfig, manifest.get("encoder", {}), "manifest.encoder").on(sentence),
                           manifest["scales"])
        if sentence.backend != "torch" and "F" in model.branches:   # tickets encoded by F's export, not torch
            model.branches["F"].use_exported(directory / ENCODER, sentence)
        return cls(build(TextConfig, manifest["text"], "manifest.text"), variant,
                   manifest["max_tokens"], manifest["scales"], model, tuple(manifest["words"]), directory,
                   Calibrator.load(directory / FILES["calibrator"]), sentence,
                   build(BM25Config, manifest.get("bm25", {}), "manifest.bm25"))

    @cached_property
    def word2vec(self) -> KeyedVectors:
        """Channel E's word vectors (and the LSTM's input): loaded, with gensim, only by a variant that weighs h or E."""
        from ticketsim.channels.word2vec import load_vectors

        return load_vectors(self.directory / WORD2VEC)

    @cached_property
    def chars(self) -> CharEncoder:
        return load_checkpoint(self.directory / CHAR_BLSTM)

    @cached_property
    def topics(self) -> dict[str, TopicModel]:
        """Channel T's models, which the search's reasons read too."""
        return load_topic_models(self.directory / TOPIC_MODELS)

    @cached_property
    def sentence_encoder(self) -> SentenceEncoder:
        """Loaded on first use, once: a searcher encodes one query at a time."""
        from ticketsim.channels.sentence import configured_encoder

        return configured_encoder(self.sentence)

    def encode(self, corpus: Corpus, lexical: bool = True, cached: Sequence[ChannelVectors] = ()) -> Encoding:
        """Every channel of the corpus's queries and tickets, and the LSTM with an embedding table for its words.
        Without `lexical`, channel L is left out: it needs both sides, and a search index encodes one side at a time.
        `cached`: channels computed already for these texts with the bundle's models and config (the channels stage's
        caches a search index reuses: S, the slow one), taken instead of encoding them again."""
        metric = metric_of(self.variant)
        tokens = tokenize_corpus(corpus, make_tokenizer(self.text, corpus), progress=False)
        # Every word through the char-BLSTM once: the rows feed channel E and the LSTM's embedding table alike.
        words = metric.channels.get("h") or metric.channels.get("E")
        table = word_vectors(list(tokens.vocabulary()["token"]), self.word2vec, self.chars) if words else None
        given, channels = {v.channel: v for v in cached}, []
        for name, channel in CHANNELS.items():   # weighed itself or read by a branch (A reads S; F reads text, no S)
            if any(parts := cached_components(metric, name)):
                channels.append(given.get(name) or channel.encode(self, Texts(corpus, tokens, parts, table)))
        if not lexical:
            metric = replace(metric, channels={c: w for c, w in metric.channels.items() if c != "L"})
        inputs = build_inputs(tokens, [scaled(v, self.scales[v.channel]) for v in channels], metric, self.max_tokens, self.bm25,
                              corpus)
        return Encoding(tokens, inputs, self.model_for(inputs, table))

    def score(self, corpus: Corpus, pool: bool = True, cached: Sequence[ChannelVectors] = ()) -> tuple[np.ndarray, ScoreMatrix | None]:
        """(g of every labelled or requested pair of corpus.pairs, g of every query against every ticket or None);
        `cached`: as in encode()."""
        metric = metric_of(self.variant)
        _, inputs, model = self.encode(corpus, cached=cached)
        scores = pair_values(model, inputs, corpus.pairs, metric)
        return scores, ScoreMatrix(inputs.queries.ids, inputs.tickets.ids, pool_values(model, inputs, metric)) if pool else None

    def model_for(self, inputs: Inputs, word_table: np.ndarray | None) -> SiameseLSTM:
        """The trained LSTM with an embedding table for this vocabulary (word_table: word_vectors of inputs.words):
        trained rows where known, fresh ones elsewhere. Without a table (the variant weighs neither h nor E) the
        model is the trained one as it is: its LSTM reads no word."""
        if word_table is None:
            return self.model.eval()
        table = torch.from_numpy(np.array(word_table, dtype=np.float32))
        trained = {w: i for i, w in enumerate(self.words, start=1)}
        known = [(row, trained[w]) for row, w in enumerate(inputs.words) if w in trained]
        if known:
            rows, old = map(list, zip(*known))
            table[rows] = torch.cat([self.model.word.weight[old], self.model.char.weight[old]], dim=1).detach()
        cfg = SiameseConfig(**{**asdict(self.model.cfg), "vocab_size": len(inputs.words) + 1})
        model = SiameseLSTM(cfg, torch.cat([torch.zeros(1, table.shape[1]), table]), self.model.weights and self.model.weights.start,
                            self.model.branches)
        model.lstm.load_state_dict(self.model.lstm.state_dict())
        if self.model.weights is not None:
            model.weights.load_state_dict(self.model.weights.state_dict())
        return model.eval()
