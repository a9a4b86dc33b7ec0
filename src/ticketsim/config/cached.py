"""The channels a variant may weigh, named so that reading the params imports no model: CACHED, the one line of each
cached channel (its module and its weight's default tune range), which ticketsim.channels.registry reads and the
schema's tune ranges fall back to, and the channels and components the model computes."""
from __future__ import annotations

from typing import NamedTuple


class Cached(NamedTuple):
    """A cached channel's line: the module whose CHANNEL declares it (ticketsim.channels.channel.Channel) and its
    weight's default tune range [low, high] (tune.ranges.channels wins; None: the params must give one)."""

    module: str
    tune: tuple[float, float] | None = None


# The cached channels, one line each, in their order (ticketsim.channels.registry.CHANNELS imports a module on first use
# of its channel): a new channel is its module and one line here. Named here so that reading the params imports no model.
CACHED: dict[str, Cached] = {
    "E": Cached("ticketsim.channels.sumemb"),                    # word2vec ++ char-BLSTM, summed
    "T": Cached("ticketsim.channels.topics"),                    # DocNADE topics
    "S": Cached("ticketsim.channels.pretrained", (0.0, 8.0)),    # a pretrained sentence encoder
}
# The channels the model computes (ticketsim.model.branches.BRANCHES, ticketsim.scoring.weights.PAIR_CHANNELS), and the
# components (ticketsim.channels.cache): tests/test_config_ranges.py holds them equal to the model's.
COMPUTED = ("h", "A", "F", "Fq", "L", "R")
QUERY_COMPONENTS = ("sub", "desc", "sub+desc")
TICKET_COMPONENTS = ("sub", "desc", "sol", "sub+desc", "sub+desc+sol")


def channel_names() -> tuple[str, ...]:
    """Every channel a variant may weigh: the computed ones, then the cached ones (CACHED as it is now)."""
    return (*COMPUTED, *CACHED)


def declared_ranges() -> dict[str, tuple[float, float]]:
    """The cached channels' declared tune ranges (TuneConfig's fallback where tune.ranges names none)."""
    return {name: cached.tune for name, cached in CACHED.items() if cached.tune is not None}
