"""What the benchmarks and the tests both use: a clean clone of the repo and its small params, a tiny sentence encoder and
tiny bundles built in code, an index tiled to any size, a process's memory and a cold process's cost, sides taken in
turns, a server on a free local port with concurrent clients, and Markdown tables.

Imported as `benchmarks.common`: the repo root is on sys.path for `python -m benchmarks.<name>` run there and for
pytest (pyproject's `pythonpath`).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
import torch
import yaml

from ticketsim.bundle.writer import write_bundle
from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.registry import fitted_files, models_folder, word_files
from ticketsim.channels.sentence import load_encoder
from ticketsim.channels.sumemb import word_vectors
from ticketsim.channels.topics import fit_topic_models
from ticketsim.channels.word2vec import corpus_sentences, save_vectors, train_word2vec
from ticketsim.config import (
    RESEARCH,
    CharBLSTMConfig,
    DocNADETrainConfig,
    EncoderConfig,
    GraphConfig,
    IndexConfig,
    LDAConfig,
    SentenceConfig,
    SiameseParams,
    SyntheticConfig,
    TextConfig,
    TopicsConfig,
    TopicVocabularyConfig,
    VariantConfig,
    Word2VecConfig,
)
from ticketsim.config.workspace import FOLDERS
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import Calibrator
from ticketsim.model.branches import BranchStart
from ticketsim.model.saved import ENCODER, WEIGHTS, build_model, save_model
from ticketsim.search.index import Encoded, TicketIndex, append, compact
from ticketsim.search.segments import MERGE_BELOW
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

if TYPE_CHECKING:
    from ticketsim.search.searcher import Searcher

REPO = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


# ------------------------------------------------------------------------------------------------- a clean clone
def clone(root: Path, revision: str | None = None) -> Path:
    """The repo's tracked files at `revision` in `root`, as `git clone` gives them: no outputs, no dvc.lock, a fresh git
    repo (nothing committed). None: the working tree, with its new files not yet committed."""
    root.mkdir(parents=True, exist_ok=True)
    if revision:
        archive = subprocess.run(["git", "archive", revision], cwd=REPO, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    else:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, text=True, check=True).stdout.split()
        for name in listed:
            if (REPO / name).is_file():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, root / name)
    for name in FOLDERS:      # the pipeline's outputs (config.workspace)
        shutil.rmtree(root / name, ignore_errors=True)
    (root / "dvc.lock").unlink(missing_ok=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


PARAMS_FILES = ("params.yaml", RESEARCH)   # RESEARCH: the research catalogue's file


def edit_params(root: Path, change: Callable[[dict], Any]) -> Path:
    """`change` applied to root's params as one mapping (the sections of params.yaml and params-research.yaml joined),
    each section written back to the file that set it (each key of a section split over both, to its own; a new one to
    params.yaml): root's params.yaml."""
    files = {name: yaml.safe_load((root / name).read_text()) if (root / name).is_file() else {} for name in PARAMS_FILES}
    joined: dict = {}
    for values in files.values():
        for section, value in values.items():
            joined[section] = {**joined[section], **value} if section in joined else value
    change(joined)
    out: dict[str, dict] = {name: {} for name in PARAMS_FILES}
    for section, value in joined.items():
        holders = [name for name in PARAMS_FILES if section in files[name]]
        if len(holders) > 1:
            for key, item in value.items():
                out[next((n for n in holders if key in files[n][section]), "params.yaml")].setdefault(section, {})[key] = item
        else:
            out[(holders or ["params.yaml"])[0]][section] = value
    for name, values in out.items():
        if values or (root / name).is_file():
            (root / name).write_text(yaml.safe_dump(values, sort_keys=False))
    return root / "params.yaml"


SMALL_ROWS = ("15", "22", "Ac+L-relpos")     # the Siamese rows a small pipeline trains beside the final and the reference


def small_params(params: dict) -> dict:
    """A clean clone's params (a dict of params.yaml) made small: every stage runs, each briefly (the pipeline's
    wiring under test, or a stage process's own cost around its work), not the models."""
    params["synthetic"].update(n_tickets=120, n_labeled_queries=40, n_enduser_queries=8, n_lay_queries=10)
    params["embedding"]["word2vec"]["epochs"] = 2
    params["embedding"]["char_blstm"]["epochs"] = 2
    params["topics"].update(n_topics=8, heldout=10)
    params["topics"]["docnade"]["epochs"] = 3
    params["topics"]["lda"].update(passes=2, particles=5)
    params["siamese"]["train"]["epochs"] = 2
    params["tune"].update(n_trials=4, epochs=2)
    # siamese.unlabelled too: the zero-shot reference `ticketsim select` always compares (training.shift); and the
    # adapter road on five level pairs, the trained configuration select and curve are tried with
    kept = dict.fromkeys(SMALL_ROWS + (params["siamese"]["final"], params["siamese"]["unlabelled"]))
    params["siamese"]["variants"] = {k: params["siamese"]["variants"][k] for k in kept}
    params["comparators"]["train"]["epochs"] = 1
    # Models this small train in less time than a worker process takes to start; the Siamese rows keep two workers,
    # so the pipeline's worker path runs through DVC (tests/test_siamese_rows.py compares one worker with two).
    params["comparators"]["workers"] = 1    # (topics fit in-process below channels.topics.SIDE_BY_SIDE_TICKETS)
    params["sentence"]["threads"] = 1      # the suite's processes fill the 2 cores already (tests/conftest.py)
    params["siamese"]["encoder"]["threads"] = 1    # so for F (a tiny encoder in tests/test_finetuned_final.py)
    params["sentence"].update(max_tokens=32, overlap=4)  # MiniLM as SENTENCE below reads it
    params["comparators"]["max_tokens"] = {"query": 10, "ticket": 40}
    params["evaluation"]["seeds"] = params["evaluation"]["seeds"][:2]   # a spread, at two thirds of the training
    return params


# ------------------------------------------------------------------------------------------ a tiny encoder, in code
def tiny_encoder(folder: Path, texts: list[str], seed: int = 0, positions: int = 64, vocab_size: int = 300) -> Path:
    """A randomly initialised sentence-transformers encoder at `folder`, built as all-MiniLM-L6-v2 is (no download): a
    WordPiece vocabulary of the texts' most frequent words and their characters, a 2-layer BERT of width 16 reading at
    most `positions` word pieces, mean pooling and unit length."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as st_models
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, BertTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    normalizer, pre_tokenizer = normalizers.BertNormalizer(lowercase=True), pre_tokenizers.BertPreTokenizer()
    # Counted here, not by WordPieceTrainer: the trainer breaks ties in an order that differs from process to process,
    # and so did the vocabulary, the vectors and near-tie rankings of the tests that use this encoder.
    words = Counter(word for text in texts for word, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({char for word in words for char in word})
    frequent = sorted(words, key=lambda word: (-words[word], word))
    vocab = list(dict.fromkeys(specials + chars + [f"##{char}" for char in chars] + frequent))[:vocab_size]
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer, tokenizer.pre_tokenizer, tokenizer.decoder = normalizer, pre_tokenizer, decoders.WordPiece()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    tokenizer.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
                                                             special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    raw = folder.parent / f".{folder.name}-bert"
    BertTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]",
                      mask_token="[MASK]", model_max_length=positions).save_pretrained(raw)
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=tokenizer.get_vocab_size(), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=positions)).save_pretrained(raw)
    transformer = st_models.Transformer(str(raw), max_seq_length=positions)
    modules = [transformer, st_models.Pooling(transformer.get_embedding_dimension(), "mean"), st_models.Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder))
    return folder


# --------------------------------------------------------------------------------------- tiny bundles, in seconds
# Channel E, T and the tokenizer trained briefly on a small synthetic corpus, S the packaged MiniLM, the LSTM and its
# learned W and V left random, a linear calibrator: real bundles for the search tests and the benchmarks' --tiny.
CROSS = {"sub-sub": 0.3, "desc-desc": 0.3, "sub-desc": 0.2, "sub-sol": 0.1, "desc-sol": 0.1}
VARIANTS = {  # every channel with learned W and V and a ranking loss (a superset of the best configuration), the paper's #22,
            # the best configuration
    "all": VariantConfig({"h": 0.7, "E": 0.1, "T": 0.2, "S": 0.5, "L": 0.5}, {**CROSS, "sub+desc-sub+desc+sol": 0.3},
                          learn=True, loss="pairwise"),
    "22": VariantConfig({"h": 0.7, "E": 0.1, "T": 0.2}, CROSS),
    "best": VariantConfig({"S": 1.0, "L": 0.5}, {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3,   # params' `best`
                                                 "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}, learn=True, loss="pairwise"),
    # the trained branches: F (a tiny encoder built in code) and A (an adapter over S), with L
    "FA": VariantConfig({"F": 0.8, "A": 0.5, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # F and BM25 alone: both towers fine-tuned, an index flattened by F
    "FL": VariantConfig({"F": 0.8, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # a query tower over S and BM25: a registered model whose query tower `ticketsim retrain` trains alone
    # (training/query_tower.py); its S is the tiny encoder the tower starts from
    "FqL": VariantConfig({"Fq": 0.8, "L": 0.5}, {"sub+desc-sub+desc+sol": 0.6, "sub-sub": 0.3}, learn=True, loss="pairwise"),
    # S+L on one level pair: F+L's index layout (384 dims) with S in F's place
    "SL": VariantConfig({"S": 1.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise"),
    # the A road on five level pairs (Ac+L-relpos; the registered Ac+L-relpos-merged reads one): its queries need no torch
    # once exported (search/queries.py)
    "AL": VariantConfig({"A": 5.0, "L": 0.5}, {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3,
                                               "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}, learn=True,
                        loss="contrastive", rel="positive"),
}
SCALES = {"E": 40.0, "T": 4.0, "S": 1.0}
ENCODER_CONFIG = EncoderConfig(max_tokens=48, frozen_layers=1)    # F's: one of the tiny encoder's two layers trains
# MiniLM reading 32 tokens: the same code path at an eighth of the cost; one thread, as the suite's processes fill the cores
SENTENCE = SentenceConfig(max_tokens=32, overlap=4, threads=1)


@dataclass(frozen=True)
class Parts:
    corpus: Corpus
    words: tuple[str, ...]
    channels: Path          # a channels folder as the channels stage leaves one: E/ and T/ (no caches)


def train_parts(root: Path, n_tickets: int = 80, seed: int = 3, n_enduser: int = 10) -> Parts:
    corpus = generate(SyntheticConfig(n_tickets=n_tickets, n_labeled_queries=10, pairs_per_query=3, n_enduser_queries=n_enduser,
                                      n_lay_queries=0),
                      seed)
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus))
    word2vec, _ = train_word2vec(corpus_sentences(tokens), Word2VecConfig(dim=16, epochs=1, min_count=1), seed)
    chars, _ = train_char_blstm(word2vec.index_to_key, word2vec.vectors, CharBLSTMConfig(hidden=4, char_dim=8, epochs=1), seed,
                                progress=False)
    topics = fit_topic_models(tokens, TopicsConfig(n_topics=6, heldout=5, vocabulary=TopicVocabularyConfig(min_documents=2),
                                                   docnade=DocNADETrainConfig(epochs=2), lda=LDAConfig(passes=1, iterations=5),
                                                   workers=1), seed)   # tiny: faster than starting a worker
    channels = root / "channels"
    save_vectors(word2vec, word_files(channels)[0])
    save_checkpoint(chars, word_files(channels)[1])
    models_folder(channels, "T").mkdir(parents=True)
    for model in topics.values():
        model.save(models_folder(channels, "T"))
    return Parts(corpus, tuple(tokens.vocabulary()["token"]), channels)


def make_bundle(directory: Path, parts: Parts, variant: str, seed: int = 0, tower: str | None = None,
                sentence: SentenceConfig = SENTENCE) -> Path:
    """A bundle of `variant` (a VARIANTS key) with a random LSTM (and random learned W, V) drawn from `seed`.

    `tower` (FqL only): a pretrained encoder (sentence.model's form, e.g. SENTENCE.model, the packaged MiniLM) that channel
    S is and the query tower starts from, instead of a tiny random one: a model that ranks like a real one before any
    training, with W and V as the variant gives them and the lowest two layers kept pretrained (params' siamese.encoder).
    `sentence`: how channel S reads (the benchmarks give params' own: the encoder's full window, its real cost)."""
    from ticketsim.channels.char_blstm import load_checkpoint
    from ticketsim.channels.word2vec import load_vectors

    cfg, chars = SiameseParams(hidden=8), load_checkpoint(word_files(parts.channels)[1])
    scratch = directory.parent / f".{directory.name}-parts"
    scratch.mkdir(parents=True)
    start, weighed, encoder_config = None, VARIANTS[variant].weighed, ENCODER_CONFIG
    assert tower is None or weighed == {"Fq", "L"}, "a pretrained tower is FqL's"
    if tower:
        pretrained = load_encoder(tower, max_tokens=sentence.max_tokens).model
        sentence, encoder_config = replace(sentence, model=tower), replace(ENCODER_CONFIG, frozen_layers=2)
        start = BranchStart(pretrained, encoder_config, SCALES["S"], pretrained.get_embedding_dimension())
    elif weighed & {"F", "Fq", "A"}:  # F and Fq from a random tiny encoder (S's scale 1), A over MiniLM's 384-d S
        texts = [text for frame in (parts.corpus.tickets, parts.corpus.queries) for column in ("subject", "description")
                 for text in frame[column]]
        folder = tiny_encoder(scratch / "tiny", texts, seed) if weighed & {"F", "Fq"} else None
        tiny = load_encoder(str(folder)).model if folder else None
        if "Fq" in weighed:         # the tower's ticket side is S: the encoder it starts from
            sentence = replace(sentence, model=str(folder))
        start = BranchStart(tiny, ENCODER_CONFIG, SCALES["S"], tiny.get_embedding_dimension() if "Fq" in weighed else 384)
    torch.manual_seed(seed)
    model = build_model(cfg, word_vectors(list(parts.words), load_vectors(word_files(parts.channels)[0]), chars), chars.dim,
                        VARIANTS[variant], start)
    with torch.no_grad():   # learned weights unlike the starting ones; an adapter that is not the identity
        if model.weights is not None and not tower:
            model.weights.w += 0.3 * torch.randn_like(model.weights.w)
            model.weights.v += 0.3 * torch.randn_like(model.weights.v)
        if "A" in model.branches:
            model.branches["A"].map += 0.05 * torch.randn_like(model.branches["A"].map)
    save_model(model, VARIANTS[variant], scratch)
    Calibrator((0.0, 1.0), (1.0, 5.0)).save(scratch / "calibrator.json")
    encoder = {"encoder": scratch / ENCODER} if (scratch / ENCODER).is_dir() else {}
    return write_bundle(directory, text=TextConfig(), variant=VARIANTS[variant], siamese=replace(cfg, encoder=encoder_config),
                        scales=SCALES, words=parts.words,
                        sources={"weights": scratch / WEIGHTS, "calibrator": scratch / "calibrator.json", **encoder},
                        channels=fitted_files(parts.channels),
                        sentence=sentence)


# ------------------------------------------------------------------------------------------ an index at any size
def tile(source: Path, n: int, target: Path, rng: np.random.Generator, graph: GraphConfig = IndexConfig.graph,
         noise: float | None = None) -> float:
    """The index at `source` as `n` tickets at `target`, appended to itself by the index's own writer until it holds n,
    then compacted into one segment as a build writes it (seconds): its tickets over and over under new ids (copies),
    every file real at full size; a graph as `graph` says; noise: copy_noise(base), measured here where None."""
    started = time.perf_counter()
    shutil.copytree(source, target)
    base = TicketIndex.load(source)
    size, noise = len(base), copy_noise(base, rng) if noise is None else noise
    while size < n:     # doubling, MERGE_BELOW tickets at most at once: an append holds its new tickets in memory
        size = len(append(target, base.model_hash, copies(base, np.arange(size, min(n, 2 * size, size + MERGE_BELOW)), noise, rng),
                          graph=graph))
    compact(target)
    return time.perf_counter() - started


def copy_noise(base: TicketIndex, rng: np.random.Generator, sample: int = 1000) -> float:
    """The std of the noise on a copy's vector that puts two copies of a ticket as far apart as a ticket is from its
    nearest neighbour (the median over a sample of `sample` tickets)."""
    rows = np.sort(rng.choice(len(base), min(sample, len(base)), replace=False))
    nearest = float(np.median(base.vectors.search(np.asarray(base.vectors.take(rows), np.float32), 2)[0][:, 1]))
    return nearest * np.sqrt(np.pi) / (2 * base.vectors.d)     # E|a - b|_1 = dim * sigma * 2 / sqrt(pi) for two copies


def copies(base: TicketIndex, positions: np.ndarray, noise: float, rng: np.random.Generator) -> Encoded:
    """Tickets `positions` of an index tiled from `base`: its tickets again under new ids, texts and tokens as they are
    (BM25 meets real postings), vectors with `noise` (copy_noise): more tickets of the same kinds, not clones."""
    rows = positions % len(base)
    vectors = np.asarray(base.vectors.take(rows), np.float32)
    new = base.tickets[rows].with_columns(ticket_id=pl.col("ticket_id") + "~" + pl.Series((positions // len(base)).astype(str)))
    return Encoded(vectors + noise * rng.standard_normal(vectors.shape, np.float32), new)


# ------------------------------------------------------------------------------------------------------ processes
def memory(pid: int) -> dict[str, int]:
    """The kernel's figures of a live process, in bytes: RSS (the pages it touched, shared ones included), PSS (shared
    pages divided among the processes mapping them) and its private pages."""
    fields = dict(line.split(":") for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:])
    kb = {key: int(value.split()[0]) * 1024 for key, value in fields.items()}
    return {"rss": kb["Rss"], "pss": kb["Pss"], "private": kb["Private_Clean"] + kb["Private_Dirty"]}


@dataclass(frozen=True)
class Cold:
    """A new process run to its end."""
    seconds: float      # wall
    cpu: float          # user + sys
    peak_rss: int       # bytes
    code: int
    output: str         # stdout and stderr


def cold(command: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None, every: float = 0.02) -> Cold:
    """`command` in a new process, and what it cost that process alone: CPU from wait4's usage, the peak RSS from its
    VmHWM, read every `every` s until it exits. wait4's ru_maxrss would not do: Linux counts the forked copy of this
    process, whatever it held before exec, in the child's maximum."""
    with tempfile.TemporaryFile() as out:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env={**os.environ, **(env or {})})
        peak = 0
        while not (done := os.wait4(process.pid, os.WNOHANG))[0]:
            peak = max(peak, high_water(process.pid))
            time.sleep(every)
        _, status, usage = done
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        output = out.read().decode(errors="replace")
    return Cold(seconds, usage.ru_utime + usage.ru_stime, peak, process.returncode, output)


def high_water(pid: int) -> int:
    """A live process's peak RSS since its exec (VmHWM), in bytes; 0 once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def alternate(calls: dict[str, Callable[[], object]], repeat: int) -> dict[str, list]:
    """Each call once untimed (bytecode compiled, files in the page cache), then all in turns `repeat` times: a load that
    other jobs put on the machine meanwhile hits every side alike."""
    for call in calls.values():
        call()
    found: dict[str, list] = {name: [] for name in calls}
    for _ in range(repeat):
        for name, call in calls.items():
            found[name].append(call())
    return found


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------- a server and its clients
@dataclass(frozen=True)
class Server:
    uri: str
    process: subprocess.Popen

    def stop(self) -> None:
        """Terminate the server and its workers (their own process group), then wait for them; idempotent."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def answers(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def refuse(message: str) -> None:
    raise RuntimeError(message)


# No telemetry, and no job runner beside `mlflow server` (huey consumers for MLflow's GenAI jobs, which are never
# started here: 14 processes and a minute of CPU across the test suite otherwise).
QUIET = {"MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


@contextmanager
def serving(command: Sequence[str], log: Path, env: dict[str, str] | None = None, startup_seconds: float = 180,
            on_failure: Callable[[str], None] = refuse) -> Iterator[Server]:
    """`command` ({port} filled in with a free port) in its own process group on 127.0.0.1 until the block ends, polled on
    GET /health until it answers (`mlflow server`, `mlflow models serve`, `ticketsim serve`); `on_failure(message)` with
    the log's tail when it exits or does not answer within startup_seconds (the default: torch, transformers and a
    model loading on a busy 2-core box)."""
    port = free_port()
    with Path(log).open("w") as out:
        process = subprocess.Popen([part.format(port=port) for part in command], stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True, env={**os.environ, **QUIET, **(env or {})})
        server = Server(f"http://{HOST}:{port}", process)
        try:
            deadline = time.monotonic() + startup_seconds
            while not answers(server.uri):
                if process.poll() is not None or time.monotonic() > deadline:
                    server.stop()
                    on_failure(f"{' '.join(command[:4])} did not answer on {server.uri} within {startup_seconds} s:\n"
                               f"{Path(log).read_text()[-2000:]}")
                time.sleep(0.5)
            yield server
        finally:
            server.stop()


def end_user_queries(n: int) -> list[dict[str, str]]:
    """n end-user queries (subject, description) of the default synthetic corpus, distinct, cycled when more are asked."""
    corpus = generate(SyntheticConfig(), seed=13)
    asked = corpus.pairs.filter(pl.col("split") == "test")["query_id"].unique(maintain_order=True)
    queries = corpus.queries.filter(pl.col("query_id").is_in(asked.implode())).select("subject", "description").to_dicts()
    return [queries[i % len(queries)] for i in range(n)]


def get(url: str, timeout: float) -> tuple[float, int | str]:
    """(seconds, HTTP status or the error's name)."""
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read()
            status: int | str = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    except (urllib.error.URLError, ConnectionError, TimeoutError) as error:
        status = type(error).__name__
    return time.perf_counter() - started, status


def searched_one_by_one(searcher: Searcher, queries: list[dict[str, str]], k: int = 10) -> tuple[list[list[str]], list[float]]:
    """(each query's top k ticket ids, the seconds of each search), one query at a time, after one untimed search (what
    the index and the encoder load lazily)."""
    frames = [pl.DataFrame([{"query_id": str(i), **query}]) for i, query in enumerate(queries)]
    searcher.search(frames[0], k)
    lists, seconds = [], []
    for frame in frames:
        started = time.perf_counter()
        lists.append([hit.ticket_id for hit in searcher.search(frame, k)[0].hits])
        seconds.append(time.perf_counter() - started)
    return lists, seconds


def percentiles(seconds: Sequence[float]) -> tuple[float, float]:
    """(p50, p95) of the times."""
    ordered = sorted(seconds)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * len(ordered)) - 1)]


def page_load(uri: str, queries: list[dict[str, str]], clients: int, k: int = 10, timeout: float = 120.0) -> dict[str, float]:
    """The search page's GET / for each query, by `clients` concurrent clients after two untimed searches: requests/s,
    p50, p95, errors (a status other than 200, or no answer within `timeout`)."""
    url = lambda query: f"{uri}/?{urllib.parse.urlencode({**query, 'k': k})}"  # noqa: E731
    for query in queries[:2]:
        get(url(query), timeout)
    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(lambda query: get(url(query), timeout), queries))
    p50, p95 = percentiles([s for s, _ in results])
    return {"per_s": len(results) / (time.perf_counter() - started), "p50": p50, "p95": p95,
            "errors": sum(status != 200 for _, status in results)}


# ------------------------------------------------------------------------------------------------------- printing
def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table: the first column left-aligned, the others right-aligned; floats as given by the caller."""
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    return "\n".join(lines + ["| " + " | ".join(map(str, row)) + " |" for row in rows])
