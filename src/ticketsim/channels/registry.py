"""The cached channels, one line each: CHANNELS, name -> its declaration (ticketsim.channels.channel.Channel), read by
the channels stage (stages/channel.py), dvc.yaml (through channels.yaml, `ticketsim channels --write`), the training
inputs, the bundle and the index. A channel's files per dataset: its cache <name>.npz and its models folder <name>/,
both in data/<dataset>/channels/."""
from __future__ import annotations

from pathlib import Path

from ticketsim.channels import pretrained, sumemb, topics
from ticketsim.channels.cache import ChannelVectors, cache_path, models_folder
from ticketsim.channels.channel import Channel, Fitted, Fitting
from ticketsim.config import Params
from ticketsim.data.tables import Corpus
from ticketsim.text.tokenize import Tokens

CHANNELS: dict[str, Channel] = {channel.name: channel for channel in (
    sumemb.CHANNEL,         # E: word2vec ++ char-BLSTM, summed
    topics.CHANNEL,         # T: DocNADE topics
    pretrained.CHANNEL,     # S: a pretrained sentence encoder
)}
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
    folder = models_folder(channels, sumemb.CHANNEL.name)
    return str(folder / sumemb.WORD2VEC), str(folder / sumemb.CHAR_BLSTM)


def dvc_stage(dataset: str, name: str) -> str:
    """The channels stage of channel `name` on `dataset`, as `dvc repro` names it (the matrix numbers CHANNELS' entries)."""
    return f"channels@{dataset}-channel{list(CHANNELS).index(name)}"
