"""`ticketsim serve` on gunicorn: the app of ticketsim.app.page in several worker processes, each one request at a time.

The process that forks the workers imports every heavy module a search of this bundle uses (FAISS, polars, onnxruntime
for a bundle with a query export; torch and sentence-transformers for one without: seconds that the workers then share)
and checks the bundle and the index, but loads no model: polars' and OpenMP's thread pools do not survive a fork (a
worker forked after a search hangs in its first one). Each worker loads the model and the index once, answers a warm-up
search, and only then takes requests: nothing heavy is imported or loaded per request. The index's vectors are one
memory-mapped file (ticketsim.search.vectors): every worker maps the same pages of the page cache instead of holding a
copy (200k x 384: a private 307 MB FAISS copy per worker before; as float16, 78 MB PSS each and nothing private after).
ONNX Runtime (sentence.threads), torch and FAISS run on one thread each: the workers are the parallelism.
"""
from __future__ import annotations

import importlib
import logging
import os
import select
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

import gunicorn.config
from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter

from ticketsim.config import ConfigError, ServeConfig
from ticketsim.data.validate import DataError
from ticketsim.errors import BUG, ERROR, StepError
from ticketsim.search.damage import one_line

URL_LIMIT = 8190    # gunicorn's largest request line: a GET search carries the query's text in its URL
# What a search imports on first use (the sentence encoder, the Punkt tokenizer), imported before the fork: by every
# bundle, and by a bundle without a query export (ticketsim.search.queries) beside.
HEAVY = ("faiss", "polars", "onnxruntime", "tokenizers", "punkt.data", "ticketsim.search.searcher")
TORCH = ("torch", "sentence_transformers", "transformers", "ticketsim.channels.sentence", "ticketsim.bundle.loader")
# A worker's own voice: gunicorn configures only its loggers, so Python writes this one's records to stderr as they are.
log = logging.getLogger(__name__)


class Server(BaseApplication):
    """gunicorn with its settings from a dict; each worker builds its app with `make_app` after the fork. A worker
    that cannot build it says why on stderr and through a pipe to the parent, which then stops with that line: without
    it the parent kept listening with no worker, and answered nothing."""

    def __init__(self, make_app: Callable, options: dict):
        self.make_app, self.options = make_app, options
        self.why, self.tell = os.pipe()     # made before the fork: every worker writes to the parent's pipe
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def load(self):
        try:
            return self.make_app()
        except Exception as error:
            code, line = (ERROR, str(error)) if isinstance(error, (StepError, DataError, ConfigError)) else (BUG, one_line(error))
            if code == BUG:
                traceback.print_exc()
            log.error(f"ticketsim serve: a worker cannot load: {line}")
            os.write(self.tell, f"{code} {line}\n".encode()[:select.PIPE_BUF])    # one atomic write per worker
            # At once, with gunicorn's code for a worker that failed to boot, on which the parent stops: a normal exit
            # waited forever on the thread pools that loading had started, and the parent never learnt of it.
            os._exit(Arbiter.WORKER_BOOT_ERROR)

    def boot_failure(self, status: int) -> Exception | None:
        """What the parent's end with `status` (the arbiter's exit status) means: where a worker failed to boot, a
        StepError with its line (a bug's: a RuntimeError) for the caller to raise; None for any other end."""
        if status != Arbiter.WORKER_BOOT_ERROR:
            return None
        os.set_blocking(self.why, False)
        try:
            told = os.read(self.why, 1 << 16).decode(errors="replace").splitlines()
        except BlockingIOError:
            told = []
        code, _, line = (told[0] if told else f"{BUG} a worker failed to boot without saying why").partition(" ")
        return (RuntimeError if int(code) == BUG else StepError)(f"a worker cannot load, so nothing is served: {line}")


def import_heavy(bundle: str) -> None:
    from ticketsim.search.queries import QUERY
    from ticketsim.text.tokenize import nltk_tokenizers

    nltk_tokenizers()
    for module in HEAVY + (() if (Path(bundle) / QUERY).is_dir() else TORCH):
        importlib.import_module(module)


def worker_app(bundle: str, index: str, make_app: Callable) -> Callable:
    """What a worker runs once after the fork: one thread, the Searcher, a warm-up search, then make_app(searcher)."""

    def load():
        import faiss
        import polars as pl

        from ticketsim.search.searcher import Searcher

        faiss.omp_set_num_threads(1)
        searcher = Searcher.load(bundle, index)
        searcher.search(pl.DataFrame({"query_id": ["warm-up"], "subject": ["warm up"], "description": [""]}), 1)
        if "torch" in sys.modules:      # a bundle without a query export, or a large float16 index (search/vectors.py)
            sys.modules["torch"].set_num_threads(1)
        return make_app(searcher)

    return load


def bind(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def server(make_app: Callable, settings: ServeConfig, host: str, port: int, workers: int) -> Server:
    """The server; its run() serves until stopped (Ctrl-C, SIGTERM) and ends as gunicorn's arbiter ends, with its exit
    status (Server.boot_failure reads it). A worker has `timeout` seconds for each request and for loading the model."""
    options = {"bind": bind(host, port), "workers": workers, "worker_class": "sync", "timeout": settings.timeout,
               "graceful_timeout": 10, "preload_app": False, "limit_request_line": URL_LIMIT, "proc_name": "ticketsim-serve"}
    if any(setting.name == "control_socket_disable" for setting in gunicorn.config.KNOWN_SETTINGS):
        options["control_socket_disable"] = True    # gunicorn >= 25.1: one socket path per user, shared by every server
    return Server(make_app, options)
