"""Channel S: a pretrained sentence encoder's vector of every ticket and query component, long texts read in passages.

The encoder is a sentence-transformers folder named by `sentence.model` (where it is found: ticketsim.channels.encoder_files).
Local folders load with HF_HUB_OFFLINE=1 and local_files_only: nothing is ever fetched for them. The encoder runs on
`sentence.device` (ticketsim.device: auto is cuda where torch sees one); on cuda it encodes under float16 autocast.
This module imports no polars at module level (only sentence_vectors reads a corpus): the encoder runs where only torch
and sentence-transformers are installed (benchmarks/gpu_check.py).

A component's text is the raw text of its fields (not our tokens), joined by a newline. A text longer than the encoder
reads is cut into passages: windows of whole words of at most max_tokens tokens that overlap by `overlap` tokens.
Its vector is the first passage's alone (`first`: plain truncation, the default), or the element-wise max or mean over
its passages' vectors; `normalize` scales it back to unit length. An empty text gets a zero vector, as in channel E.
Why first: on SemEval-2016 dev (a third of the texts cut), ticket SUB+DESC+SOL ranked best from its first passage with
both encoders, mean of all passages second and max last (the `rows` command of `git show
4a5f059:benchmarks/sentence_encoder.py`): there the thread's later comments add more noise than evidence. Tickets
whose decisive text comes late may differ: measure before switching.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tqdm import tqdm

from ticketsim.channels.encoder_backends import Backend, BackendError, Quantize, backend_label, load_backend
from ticketsim.channels.encoder_files import DEFAULT_ENCODER_CACHE, DEFAULT_MODEL, EncoderError, resolve_model
from ticketsim.channels.passages import Pooling, check_overlap, pool, windows
from ticketsim.config import SentenceConfig
from ticketsim.device import DeviceError, inference_precision, resolve_device
from ticketsim.threads import torch_threads

if TYPE_CHECKING:   # polars through them
    from ticketsim.channels.cache import ChannelVectors
    from ticketsim.data.tables import Corpus


@dataclass(frozen=True)
class SentenceEncoder:
    """A loaded sentence-transformers model, where it came from, and the passage length it reads (tokens, with specials)."""

    model: Any                      # sentence_transformers.SentenceTransformer (imported lazily: offline env first)
    name: str                       # the sentence.model value
    folder: str                     # the folder it was loaded from (an export's, for onnx), or the hub name
    max_tokens: int
    backend: str = "torch"          # what runs it: torch, onnx, onnx-int8
    device: str = "cpu"             # where it runs (resolved: cpu, cuda, cuda:N)

    @property
    def dim(self) -> int:
        return int(self.model.get_embedding_dimension())

    @property
    def passage_tokens(self) -> int:
        """Text tokens of one passage: max_tokens less the [CLS]/[SEP]-like tokens the tokenizer adds."""
        return self.max_tokens - self.model.tokenizer.num_special_tokens_to_add()


# ---------------------------------------------------------------------------------------------------------- loading
def load_encoder(name: str = DEFAULT_MODEL, *, download: bool = False, encoder_cache: str | Path = DEFAULT_ENCODER_CACHE,
                 max_tokens: int | None = None, backend: Backend = "torch", quantize: Quantize = "none",
                 threads: int = 1, device: str = SentenceConfig.device) -> SentenceEncoder:
    """Load the encoder on `device` (sentence.device: auto, cpu, cuda, cuda:N). `max_tokens`: passage length (at most
    the model's max_seq_length; None: that). `backend`, `quantize`: torch, or an export made once under `encoder_cache`
    (ticketsim.channels.encoder_backends), which runs on the CPU on `threads` threads from loading on (torch takes its
    threads when encoding)."""
    if max_tokens is not None and max_tokens < 8:
        raise EncoderError(f"sentence.max_tokens: {max_tokens} is too short for a passage (at least 8)")
    try:
        device = resolve_device(device, "sentence.device") if backend == "torch" else "cpu"
    except DeviceError as error:
        raise EncoderError(str(error)) from None
    source, local = resolve_model(name, encoder_cache, download)
    if local or not download:
        # Read by huggingface_hub when it is first imported: set before sentence_transformers is.
        os.environ["HF_HUB_OFFLINE"] = os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")    # the Rust tokenizer would take every core: threads says how many
    from transformers.utils import logging as transformers_logging
    transformers_logging.disable_progress_bar()     # its per-load 'Loading weights' bar; the encoding bar is ours
    try:
        model, loaded_from = load_backend(source, backend, quantize, threads, encoder_cache, local_files_only=local or not download,
                                          device=device)
    except BackendError as error:
        raise EncoderError(str(error)) from None
    except Exception as error:  # transformers raises OSError, ValueError, HF errors... for a missing or broken model
        hint = ("it is not in the local Hugging Face cache: set sentence.download: true where there is internet, "
                "or give a local folder" if not local and not download else "is it a complete sentence-transformers folder?")
        raise EncoderError(f"sentence.model: {name}: cannot load {source} ({type(error).__name__}: {error}); {hint}") from None
    model.eval()
    limit = model.max_seq_length
    return SentenceEncoder(model, name, loaded_from, min(max_tokens or limit, limit), backend_label(backend, quantize), device)


# ------------------------------------------------------------------------------------------------ texts, passages
def passages(encoder: SentenceEncoder, texts: Sequence[str], overlap: int = 32) -> list[list[str]]:
    """Each text cut into passages of whole words, each at most encoder.passage_tokens tokens, consecutive passages
    sharing about `overlap` tokens (channels.passages.windows). An empty text has none."""
    size = encoder.passage_tokens
    check_overlap(overlap, size)
    stripped = [text.strip() for text in texts]
    result: list[list[str]] = [[] for _ in stripped]
    todo = [i for i, text in enumerate(stripped) if text]
    if not todo:
        return result
    encoded = encoder.model.tokenizer([stripped[i] for i in todo], add_special_tokens=False,
                                      return_offsets_mapping=True, verbose=False)
    for row, i in enumerate(todo):
        result[i] = windows(stripped[i], encoded["offset_mapping"][row], encoded.word_ids(row), size, overlap)
    return result


# -------------------------------------------------------------------------------------------------------- encoding
def passage_order(texts: Sequence[str]) -> list[int]:
    """The positions of `texts` longest first, ties by text: the order encode_passages cuts into batches."""
    return sorted(range(len(texts)), key=lambda i: (-len(texts[i]), texts[i]))


def encode_passages(encoder: SentenceEncoder, texts: Sequence[str], batch_size: int = 32, progress: bool = True,
                    desc: str = "channel S") -> np.ndarray:
    """(len(texts), dim) float32: the encoder's vector of each passage-sized text, in batches of similar length.

    Longest first, in a fixed order: the same texts always form the same batches, and padding is least. On cuda under
    float16 autocast (ticketsim.device), the vectors then stored as float32.
    """
    vectors = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    order = passage_order(texts)
    with tqdm(total=len(texts), desc=desc, unit="passage", disable=not progress) as bar, inference_precision(encoder.device):
        for begin in range(0, len(order), batch_size):
            batch = order[begin:begin + batch_size]
            vectors[batch] = encoder.model.encode([texts[i] for i in batch], batch_size=len(batch), show_progress_bar=False,
                                                  convert_to_numpy=True)
            bar.update(len(batch))
    return vectors


# (query side, ticket side): the components to encode (ticketsim.model.branches.cached_components).
Components = tuple[Sequence[str], Sequence[str]]

# How the distinct passages of encode_groups are encoded: (encoder, passages, batch_size, threads, progress) -> vectors.
# encode_local below in this process; ticketsim.channels.ray_encode on a Ray cluster's actors (encode.engine: ray).
PassageEncoding = Callable[[SentenceEncoder, Sequence[str], int, int, bool], np.ndarray]


def encode_local(encoder: SentenceEncoder, texts: Sequence[str], batch_size: int = 32, threads: int = 1,
                 progress: bool = False) -> np.ndarray:
    """encode_passages here, on `threads` torch threads."""
    with torch_threads(threads), torch.inference_mode():
        return encode_passages(encoder, texts, batch_size, progress)


def encode_texts(encoder: SentenceEncoder, texts: Sequence[str], pooling: Pooling = "first", overlap: int = 32,
                 normalize: bool = True, batch_size: int = 32, threads: int = 1, progress: bool = False) -> np.ndarray:
    """(len(texts), dim) float32: each text's pooled passage vectors; zeros for an empty text."""
    return encode_groups(encoder, {"texts": list(texts)}, pooling, overlap, normalize, batch_size, threads, progress)[0]["texts"]


@dataclass(frozen=True)
class EncodeReport:
    texts: int              # distinct non-empty texts
    passages: int           # distinct passages encoded
    cut: float              # share of the distinct texts longer than one passage
    seconds: float          # cutting and encoding


def encode_groups(encoder: SentenceEncoder, groups: dict[str, list[str]], pooling: Pooling, overlap: int, normalize: bool,
                  batch_size: int, threads: int, progress: bool,
                  encode: PassageEncoding = encode_local) -> tuple[dict[str, np.ndarray], EncodeReport]:
    """Named lists of texts -> their vectors; every distinct text is cut once and every distinct passage encoded once
    by `encode`, on `threads` torch threads (same texts, settings and threads: the same bytes, as the batches follow
    from the texts)."""
    if pooling not in ("max", "mean", "first"):
        raise ValueError(f"sentence.pooling: {pooling!r} is not one of max, mean, first")
    started = time.perf_counter()
    distinct = sorted({text.strip() for texts in groups.values() for text in texts} - {""})
    full = passages(encoder, distinct, overlap)
    # first: the other passages are never encoded, i.e. plain truncation (at a word boundary)
    cut = [parts[:1] for parts in full] if pooling == "first" else full
    unique = sorted({p for parts in cut for p in parts})
    index = {p: i for i, p in enumerate(unique)}
    encoded = encode(encoder, unique, batch_size, threads, progress)
    text_vectors = {text: pool(encoded[[index[p] for p in parts]], pooling, normalize) for text, parts in zip(distinct, cut)}
    zero = np.zeros(encoder.dim, dtype=np.float32)
    vectors = {name: np.array([text_vectors.get(text.strip(), zero) for text in texts], dtype=np.float32).reshape(len(texts), encoder.dim)
               for name, texts in groups.items()}
    report = EncodeReport(texts=len(distinct), passages=len(unique), cut=sum(len(parts) > 1 for parts in full) / max(len(distinct), 1),
                          seconds=round(time.perf_counter() - started, 1))
    return vectors, report


@dataclass(frozen=True)
class SentenceReport:
    model: str
    folder: str
    dim: int
    max_tokens: int         # per passage, special tokens included
    texts: int
    passages: int
    cut: float              # share of distinct texts read in more than one passage
    seconds: float


def sentence_vectors(corpus: Corpus, encoder: SentenceEncoder, pooling: Pooling = "first", overlap: int = 32,
                     normalize: bool = True, batch_size: int = 32, threads: int = 1, progress: bool = True,
                     encode: PassageEncoding = encode_local, components: Components | None = None
                     ) -> tuple[ChannelVectors, SentenceReport]:
    """S of the query and ticket components of a prepared corpus (`components`: (query side, ticket side); None: every
    one, as the stage caches them), on `threads` torch threads; `encode`: as encode_groups."""
    from ticketsim.channels.cache import QUERY_COMPONENTS, TICKET_COMPONENTS, ChannelVectors, component_strings

    query_parts, ticket_parts = components or (QUERY_COMPONENTS, TICKET_COMPONENTS)
    groups = {f"queries/{c}": component_strings(corpus.queries, c) for c in query_parts}
    groups |= {f"tickets/{c}": component_strings(corpus.tickets, c) for c in ticket_parts}
    vectors, encoded = encode_groups(encoder, groups, pooling, overlap, normalize, batch_size, threads, progress, encode)
    channel = ChannelVectors(
        channel="S", query_ids=tuple(corpus.queries["query_id"]), ticket_ids=tuple(corpus.tickets["ticket_id"]),
        queries={c: vectors[f"queries/{c}"] for c in query_parts},
        tickets={c: vectors[f"tickets/{c}"] for c in ticket_parts})
    report = SentenceReport(model=encoder.name, folder=encoder.folder, dim=encoder.dim, max_tokens=encoder.max_tokens,
                            texts=encoded.texts, passages=encoded.passages, cut=round(encoded.cut, 4), seconds=encoded.seconds)
    return channel, report


def configured_encoder(cfg: SentenceConfig) -> SentenceEncoder:
    """The encoder params `sentence` name."""
    return load_encoder(cfg.model, download=cfg.download, encoder_cache=cfg.cache, max_tokens=cfg.max_tokens, backend=cfg.backend,
                        quantize=cfg.quantize, threads=cfg.threads, device=cfg.device)


def sentence_channel(corpus: Corpus, cfg: SentenceConfig, progress: bool = True, encoder: SentenceEncoder | None = None,
                     encode: PassageEncoding = encode_local, components: Components | None = None
                     ) -> tuple[ChannelVectors, SentenceReport]:
    """Channel S of a corpus as params `sentence` names it: the stage's cache and a bundle's new texts alike.
    `encoder`: configured_encoder(cfg), when the caller keeps it loaded (a searcher encodes one query at a time);
    `encode`: as encode_groups; `components`: as sentence_vectors (a bundle encodes those its model reads)."""
    encoder = encoder or configured_encoder(cfg)
    return sentence_vectors(corpus, encoder, pooling=cfg.pooling, overlap=cfg.overlap, normalize=cfg.normalize,
                            batch_size=cfg.batch_size, threads=cfg.threads, progress=progress, encode=encode,
                            components=components)
