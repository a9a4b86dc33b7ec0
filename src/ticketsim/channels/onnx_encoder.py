"""A sentence-transformers encoder without torch: exported once, at bundle time, to an ONNX graph beside its
tokenizer.json, and run at query time by onnxruntime and the `tokenizers` library, with mean pooling and unit length in
numpy. A query then imports neither torch nor sentence-transformers (seconds of a cold search).

The graph is the Hugging Face transformer, float32, as channels/encoder_backends.py exports it for sentence.backend: onnx.
It reads a text as its channel does: channel S's passages (channels/passages.py, as on the torch path), or one passage
cut at `max_length` word pieces (`truncate`: channel F's fine-tuned encoders, model/branches.py). Each passage runs alone
(no padding: a query's three texts differ in length). An encoder is exported only when its vectors on sample texts equal
its torch encoding's (within TOLERANCE): a sentence-transformers model with other modules (another pooling, a dense layer,
prompts) gets no export, and its bundle searches through torch.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ticketsim.channels.passages import Pooling, pool, windows

if TYPE_CHECKING:
    from ticketsim.channels.sentence import SentenceEncoder
    from ticketsim.config import SentenceConfig

GRAPH, TOKENIZER, SETTINGS = "model.onnx", "tokenizer.json", "encoder.json"
TOLERANCE = 1e-5     # largest difference of a vector component (unit vectors) from the torch path's, checked at export
EXPORT_VERSION = 1   # in a kept export's key (kept_export), with the exporting libraries' versions: raise it when
                     # export_encoder writes something else
SAMPLES = ("pump getting hot", "The feed pump P-339 runs at 95 C since monday; bearing noise and vibration.\nsee log",
           "error E9203 after restart " * 40)   # the last is cut into passages, or truncated


@dataclass(frozen=True, eq=False)
class OnnxEncoder:
    """An exported encoder, loaded: encode(texts) gives each text's vector as its torch encoding does (channel S's
    sentence.encode_texts, or with `truncate` a fine-tuned encoder's TransformerBranch, unscaled)."""

    session: Any                 # onnxruntime.InferenceSession
    words: Any                   # tokenizers.Tokenizer without special tokens: the passages' word boundaries
    tokenizer: Any               # the same with the encoder's special tokens and length limit: its input
    settings: dict               # normalized (a Normalize module), dim, max_length; then truncate: true, or channel S's
                                 # passage_tokens, overlap, pooling, normalize
    inputs: tuple[str, ...]      # the graph's inputs: input_ids, attention_mask and, for BERT, token_type_ids

    @classmethod
    def load(cls, folder: str | Path, threads: int = 1) -> OnnxEncoder:
        import onnxruntime
        from tokenizers import Tokenizer

        folder = Path(folder)
        settings = json.loads((folder / SETTINGS).read_text())
        words, tokenizer = Tokenizer.from_file(str(folder / TOKENIZER)), Tokenizer.from_file(str(folder / TOKENIZER))
        words.no_truncation()
        words.no_padding()
        tokenizer.no_padding()
        tokenizer.enable_truncation(settings["max_length"])
        options = onnxruntime.SessionOptions()
        # One op at a time on `threads` threads, as torch: the served workers are the parallelism.
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        session = onnxruntime.InferenceSession(str(folder / GRAPH), options, providers=["CPUExecutionProvider"])
        return cls(session, words, tokenizer, settings, tuple(i.name for i in session.get_inputs()))

    @property
    def dim(self) -> int:
        return int(self.settings["dim"])

    def passage_vector(self, passage: str) -> np.ndarray:
        ids = np.asarray([self.tokenizer.encode(passage).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        hidden = self.session.run(None, {name: feeds[name] for name in self.inputs})[0][0]
        vector = hidden.mean(0)     # mean pooling: every token is real, nothing is padded
        if self.settings["normalized"]:
            vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        return vector

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) float32; zeros for an empty text. A text repeated is encoded once."""
        vectors, done = np.zeros((len(texts), self.dim), dtype=np.float32), {}
        for i, text in enumerate(texts):
            text = text.strip()
            if not text:
                continue
            if text not in done:
                done[text] = self.passage_vector(text) if self.settings.get("truncate") else self.passages_vector(text)
            vectors[i] = done[text]
        return vectors

    def passages_vector(self, text: str) -> np.ndarray:
        """Channel S's vector of a text: its passages' vectors pooled."""
        pooling: Pooling = self.settings["pooling"]
        found = self.words.encode(text, add_special_tokens=False)
        parts = windows(text, found.offsets, found.word_ids, self.settings["passage_tokens"], self.settings["overlap"])
        parts = parts[:1] if pooling == "first" else parts      # first: the other passages are never read
        return pool(np.stack([self.passage_vector(p) for p in parts]), pooling, self.settings["normalize"])


def kept_export(cfg: SentenceConfig, folder: str | Path) -> str | None:
    """export_encoder of the encoder `cfg` names (torch, on the CPU) into `folder`, through a copy kept under cfg.cache:
    the first bundle of a local encoder with these settings exports it (sentence-transformers loaded, the graph traced
    and checked against torch), the next ones (a retrain's, another dataset's) copy that checked export. None when
    written, else why not."""
    from ticketsim.channels.encoder_backends import exports_in, source_digest
    from ticketsim.channels.encoder_files import resolve_model
    from ticketsim.channels.sentence import configured_encoder

    source, local = resolve_model(cfg.model, cfg.cache, cfg.download)
    exporters = [importlib.metadata.version(p) for p in ("torch", "transformers", "sentence-transformers", "tokenizers")]
    key = json.dumps([EXPORT_VERSION, *exporters, source_digest(source), cfg.max_tokens, cfg.overlap, cfg.pooling,
                      cfg.normalize])
    kept = exports_in(cfg.cache) / f"query-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if local and kept.is_dir():
        shutil.copytree(kept, folder)
        return None
    why = export_encoder(configured_encoder(replace(cfg, backend="torch", device="cpu")), cfg, folder)
    if why is None and local:   # kept by a rename, as the backends' exports are: a kept folder is complete
        kept.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=kept.parent, prefix=".export-") as scratch:
            shutil.copytree(folder, Path(scratch) / "query")
            try:
                os.replace(Path(scratch) / "query", kept)
            except OSError:     # another process kept the same export first
                pass
    return why


def export_encoder(encoder: SentenceEncoder, cfg: SentenceConfig, folder: str | Path) -> str | None:
    """Write channel S's export of a loaded torch encoder (configured by `cfg`) to `folder`; None when written, else why
    not (nothing is left behind then)."""
    from ticketsim.channels.sentence import encode_texts

    if encoder.backend != "torch":
        return f"the encoder runs on {encoder.backend}, not torch"
    settings = {"passage_tokens": encoder.passage_tokens, "overlap": cfg.overlap, "pooling": cfg.pooling, "normalize": cfg.normalize}
    return export_model(encoder.model, settings, folder,
                        lambda texts: encode_texts(encoder, texts, cfg.pooling, cfg.overlap, cfg.normalize, threads=cfg.threads))


def export_model(model: Any, settings: dict, folder: str | Path, reference: Callable[[Sequence[str]], np.ndarray]) -> str | None:
    """Write the export of a SentenceTransformer on the CPU (a transformer with mean pooling), read as `settings` say,
    to `folder`, checked against `reference` (texts -> vectors: torch's) on SAMPLES; None when written, else why not
    (nothing is left behind then)."""
    from ticketsim.channels.encoder_backends import export_onnx

    folder = Path(folder)
    names = [type(module).__name__ for module in model]
    if names[:2] != ["Transformer", "Pooling"] or names[2:] not in ([], ["Normalize"]) or model[1].pooling_mode != "mean":
        return f"its modules are {names} with {getattr(model[1], 'pooling_mode', '?')} pooling, not a transformer with mean pooling"
    folder.mkdir(parents=True, exist_ok=True)
    export_onnx(model, folder / GRAPH)
    model.tokenizer.backend_tokenizer.save(str(folder / TOKENIZER))
    settings = {**settings, "normalized": names[2:] == ["Normalize"], "dim": int(model.get_embedding_dimension()),
                "max_length": int(model.max_seq_length)}
    (folder / SETTINGS).write_text(json.dumps(settings) + "\n")
    difference = float(np.abs(OnnxEncoder.load(folder).encode(SAMPLES) - reference(SAMPLES)).max())
    if difference > TOLERANCE:
        shutil.rmtree(folder)
        return f"its exported vectors differ from torch's by {difference:.2g} (more than {TOLERANCE:g})"
    return None
