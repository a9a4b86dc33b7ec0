"""A trained model as one folder (a bundle), and the path from raw texts to scores: tokens -> E, T, S, L, h -> g -> [1, 5].

Every dataset the importer accepts, an external SemEval test file, or a served request goes through the same
functions the pipeline stages use, so a bundle scores new text exactly as the pipeline scored its own.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import polars as pl
import torch

from ticketsim.calibrate import Calibrator
from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.char_blstm import CharEncoder, load_checkpoint
from ticketsim.channels.sumemb import sumemb_vectors, word_vectors
from ticketsim.channels.topics import TopicModel, load_topic_models, topic_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.config import BM25Config, EvaluationConfig, SentenceConfig, SiameseParams, TextConfig, VariantConfig, build
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.experiment import Inputs, build_inputs, metric_of, pair_predictor, pool_scores, predict_all, scaled
from ticketsim.model.siamese import SiameseConfig, SiameseLSTM
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

FILES = {"word2vec": "word2vec.kv", "char_blstm": "char_blstm.pt", "docnade": "docnade", "checkpoint": "checkpoint.pt",
         "calibrator": "calibrator.json"}


def write_bundle(directory: str | Path, *, text: TextConfig, variant: VariantConfig, siamese: SiameseParams,
                 scales: dict[str, float], words: tuple[str, ...], sources: dict[str, str | Path],
                 sentence: SentenceConfig = SentenceConfig(), bm25: BM25Config = BM25Config()) -> Path:
    """Copy a trained variant's files (FILES keys -> paths) and write manifest.json beside them.

    Channel S's encoder is named, not copied (a package or folder the served model's machine has too)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for key, name in FILES.items():
        source, target = Path(sources[key]), directory / name
        shutil.copytree(source, target, dirs_exist_ok=True) if source.is_dir() else shutil.copy2(source, target)
    manifest = {"text": asdict(text), "variant": asdict(variant), "max_tokens": siamese.max_tokens,
                "scales": scales, "words": list(words), "sentence": asdict(sentence), "bm25": asdict(bm25)}
    (directory / "manifest.json").write_text(json.dumps(manifest) + "\n")
    return directory


@dataclass(frozen=True, eq=False)
class Scorer:
    text: TextConfig
    variant: VariantConfig
    max_tokens: int
    scales: dict[str, float]
    model: SiameseLSTM          # trained on `words`; rebuilt around each new vocabulary in score()
    words: tuple[str, ...]
    word2vec: object
    chars: CharEncoder
    topics: dict[str, TopicModel]
    calibrator: Calibrator
    sentence: SentenceConfig = SentenceConfig()
    bm25: BM25Config = BM25Config()

    @classmethod
    def load(cls, directory: str | Path) -> Scorer:
        directory = Path(directory)
        manifest = json.loads((directory / "manifest.json").read_text())
        saved = torch.load(directory / FILES["checkpoint"], weights_only=True)
        variant = build(VariantConfig, manifest["variant"], "manifest.variant")
        model = SiameseLSTM(SiameseConfig(**saved["model_config"]), learn=metric_of(variant) if variant.learn else None)
        model.load_state_dict(saved["best_state_dict"])
        return cls(build(TextConfig, manifest["text"], "manifest.text"), variant,
                   manifest["max_tokens"], manifest["scales"], model, tuple(manifest["words"]),
                   load_vectors(directory / FILES["word2vec"]), load_checkpoint(directory / FILES["char_blstm"]),
                   load_topic_models(directory / FILES["docnade"]), Calibrator.load(directory / FILES["calibrator"]),
                   build(SentenceConfig, manifest.get("sentence", {}), "manifest.sentence"),
                   build(BM25Config, manifest.get("bm25", {}), "manifest.bm25"))

    def score(self, corpus: Corpus, pool: bool = True) -> tuple[np.ndarray, ScoreMatrix | None]:
        """(g of every labelled or requested pair of corpus.pairs, g of every query against every ticket or None)."""
        metric = metric_of(self.variant)
        tokens = tokenize_corpus(corpus, make_tokenizer(self.text, corpus))
        # Every word through the char-BLSTM once: the rows feed channel E and the LSTM's embedding table alike.
        table = word_vectors(list(tokens.vocabulary()["token"]), self.word2vec, self.chars)
        channels: list[ChannelVectors] = []
        if metric.channels.get("E"):
            channels.append(sumemb_vectors(tokens, self.word2vec, self.chars, table)[0])
        if metric.channels.get("T"):
            channels.append(topic_vectors(tokens, self.topics))
        if metric.channels.get("S"):
            from ticketsim.channels.sentence import sentence_channel  # sentence-transformers only when S is weighed

            channels.append(sentence_channel(corpus, self.sentence, progress=False)[0])
        inputs = build_inputs(tokens, [scaled(v, self.scales[v.channel]) for v in channels], metric, self.max_tokens, self.bm25)
        model = self.model_for(inputs, table)
        scores = predict_all(pair_predictor(model, inputs, corpus.pairs, metric), corpus.pairs.height)
        return scores, pool_scores(model, inputs, metric) if pool else None

    def model_for(self, inputs: Inputs, word_table: np.ndarray) -> SiameseLSTM:
        """The trained LSTM with an embedding table for this vocabulary (word_table: word_vectors of inputs.words):
        trained rows where known, fresh ones elsewhere."""
        table = torch.from_numpy(np.array(word_table, dtype=np.float32))
        trained = {w: i for i, w in enumerate(self.words, start=1)}
        known = [(row, trained[w]) for row, w in enumerate(inputs.words) if w in trained]
        if known:
            rows, old = map(list, zip(*known))
            table[rows] = torch.cat([self.model.word.weight[old], self.model.char.weight[old]], dim=1).detach()
        cfg = SiameseConfig(**{**asdict(self.model.cfg), "vocab_size": len(inputs.words) + 1})
        model = SiameseLSTM(cfg, torch.cat([torch.zeros(1, table.shape[1]), table]), self.model.weights and self.model.weights.start)
        model.lstm.load_state_dict(self.model.lstm.state_dict())
        if self.model.weights is not None:
            model.weights.load_state_dict(self.model.weights.state_dict())
        return model.eval()


def scored_pairs(pairs: pl.DataFrame, scores: np.ndarray, calibrator: Calibrator) -> pl.DataFrame:
    """pairs with the raw score g and its calibrated value on the 1-5 label scale."""
    return pairs.with_columns(score=pl.Series(scores), calibrated=pl.Series(calibrator(scores)))


def evaluate_bundle(directory: str | Path, corpus: Corpus, cfg: EvaluationConfig) -> tuple[dict, pl.DataFrame]:
    """Every measure of a trained bundle on a corpus (calibrated with the bundle's own calibrator), and the scored pairs."""
    scorer = Scorer.load(directory)
    scores, matrix = scorer.score(corpus)
    results = evaluate_method(corpus.pairs, scores, matrix, cfg, scorer.calibrator)
    return results, scored_pairs(corpus.pairs, scores, scorer.calibrator)
