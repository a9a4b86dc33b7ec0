"""What a cached channel declares (a line of ticketsim.config.cached.CACHED registers it): its name, its params section,
how it is fitted on a dataset (models into its folder, vectors of every ticket and query component), the files it adds
to a bundle and how a bundle encodes new texts with it. A channel's module holds its declaration; the library here
prints nothing, it hands the stage what to write, log and say (Fitted)."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import Params
from ticketsim.data.tables import Corpus
from ticketsim.text.tokenize import Tokens

Components = tuple[tuple[str, ...], tuple[str, ...]]   # (query side, ticket side)


@dataclass(frozen=True)
class Fitting:
    """What a channel is fitted from: the params, one dataset's prepared corpus and tokens, and `models`, the folder its
    fitted models go in (data/<dataset>/channels/<name>/)."""

    params: Params
    dataset: str
    corpus: Corpus
    tokens: Tokens
    models: Path


@dataclass(frozen=True)
class Fitted:
    """A fitted channel: its vectors (the cache) and what the stage writes (metrics, reports), logs (the `logged`
    figures, per-epoch `series` as (prefix, step, figures), JSON `summaries` by file name) and says (`said`, one line each)."""

    vectors: ChannelVectors
    metrics: Mapping[str, Any]
    logged: Mapping[str, Any] | None = None          # None: the metrics
    series: Sequence[tuple[str, int, Mapping[str, float]]] = ()
    summaries: Mapping[str, Any] = field(default_factory=dict)
    reports: Mapping[str, str] = field(default_factory=dict)   # file name -> Markdown
    said: Sequence[str] = ()
    about: str = ""                                  # words for the plot's title (S: its encoder)


@dataclass(frozen=True)
class Texts:
    """New texts a bundle encodes: the corpus, its tokens, the components the model reads and the word table (word
    vectors of tokens.vocabulary(), computed once for E and the LSTM; None where neither is weighed)."""

    corpus: Corpus
    tokens: Tokens
    components: Components
    table: np.ndarray | None


@dataclass(frozen=True)
class Channel:
    """One cached channel. `section`: its params key (in `params_file`, for dvc.yaml); `stage`: the name of its DVC
    stage's run, metrics, reports and plots; `fit`: its models and vectors on one dataset; `bundle`: the files it adds
    to a bundle, bundle name -> path in its models folder ("." the folder itself); `encode(scorer, texts)`: its vectors
    of new texts, from a loaded bundle (ticketsim.bundle.loader.Scorer); `reuse`: a search index takes the cache for
    the dataset's own tickets instead of encoding them again (the slow channels)."""

    name: str
    stage: str
    section: str
    params_file: str
    fit: Callable[[Fitting], Fitted]
    encode: Callable[[Any, Texts], ChannelVectors]
    bundle: Mapping[str, str] = field(default_factory=dict)
    reuse: bool = False
