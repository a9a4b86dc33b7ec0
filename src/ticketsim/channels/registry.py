"""The cached channels: CHANNELS, name -> its declaration (ticketsim.channels.channel.Channel), read by the channels
stage (stages/channel.py), dvc.yaml (through channels.yaml, `ticketsim channels --write`), the training inputs, the
bundle and the index. Each is one line of ticketsim.config.cached.CACHED, naming the module whose CHANNEL declares it;
that module is imported on the channel's first use (E and S import torch: importing the registry does not). A
channel's files per dataset: its cache <name>.npz and its models folder <name>/, both in data/<dataset>/channels/."""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib import import_module
from pathlib import Path

from ticketsim.channels.cache import ChannelVectors, cache_path, models_folder
from ticketsim.channels.channel import Channel, Fitted, Fitting
from ticketsim.config import Params
from ticketsim.config.cached import CACHED
from ticketsim.data.tables import Corpus
from ticketsim.text.tokenize import Tokens


class Registry(Mapping[str, Channel]):
    """CACHED's channels in its order, each declaration imported from its module when first read."""

    def __getitem__(self, name: str) -> Channel:
        return import_module(CACHED[name].module).CHANNEL

    def __contains__(self, name: object) -> bool:      # without importing the channel's module
        return name in CACHED

    def __iter__(self) -> Iterator[str]:
        return iter(CACHED)

    def __len__(self) -> int:
        return len(CACHED)


CHANNELS = Registry()
VARS = "channels.yaml"      # dvc.yaml's `vars:` file of the channels stage, written from CHANNELS


def fit_channel(name: str, params: Params, dataset: str, corpus: Corpus, tokens: Tokens, channels: str | Path) -> Fitted:
    """Channel `name` fitted on one dataset (the channels stage's work): its models into its folder of `channels`, its
    cache beside them."""
    models = models_folder(channels, name)
    models.mkdir(parents=True, exist_ok=True)
    fitted = CHANNELS[name].fit(Fitting(params, dataset, corpus, tokens, models))
    fitted.vectors.save(cache_path(channels, name))
    return fitted


def load_caches(channels: str | Path, names: set[str] | None = None, reused: bool = False) -> list[ChannelVectors]:
    """The caches of the channels folder, in CHANNELS' order: of `names` (None: every channel), only those written, or
    only those a search index reuses (`reused`)."""
    return [ChannelVectors.load(path) for name, channel in CHANNELS.items()
            if (names is None or name in names) and (channel.reuse or not reused)
            and (path := cache_path(channels, name)).is_file()]


def fitted_files(channels: str | Path) -> dict[str, Path]:
    """Every channel's bundle files (bundle name -> where its models folder holds it) in a dataset's channels folder."""
    return {bundled: (models_folder(channels, name) / inside).resolve()
            for name, channel in CHANNELS.items() for bundled, inside in channel.bundle.items()}


def bundled_files(bundle: str | Path) -> dict[str, Path]:
    """Every channel's files in a bundle folder (bundle name -> path): what a new bundle of the same channels copies."""
    return {bundled: Path(bundle) / bundled for channel in CHANNELS.values() for bundled in channel.bundle}


def dvc_vars() -> dict:
    """channels.yaml: what dvc.yaml's channels stage iterates (`matrix`), one entry per channel of CHANNELS."""
    return {"channels": [{"name": c.name, "stage": c.stage, "file": c.params_file, "section": c.section}
                         for c in CHANNELS.values()]}


def word_files(channels: str | Path) -> tuple[str, str]:
    """Channel E's word2vec and char-BLSTM in a dataset's channels folder: the LSTM's (h) and the comparators' word table."""
    from ticketsim.channels import sumemb  # here, not above: it imports torch

    folder = models_folder(channels, sumemb.CHANNEL.name)
    return str(folder / sumemb.WORD2VEC), str(folder / sumemb.CHAR_BLSTM)


def dvc_stage(dataset: str, name: str) -> str:
    """The channels stage of channel `name` on `dataset`, as `dvc repro` names it (the matrix numbers CHANNELS' entries)."""
    return f"channels@{dataset}-channel{list(CHANNELS).index(name)}"
