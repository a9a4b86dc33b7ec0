"""What the params name, checked against each other when the files are read: every variant a key names is in the
catalogue (siamese.variants and siamese.finetuned), every channel and level pair a variant or a row weighs is one the
model has, every weight is at least 0, every dataset a key names is in `datasets`. So `ticketsim params` refuses a bad
name, and so does the first stage of the pipeline (sources, which every other stage follows), before DVC has removed
any stage's outputs to run it; a name the tune stage met first had cost tuned/ and metrics/ already.

A name the files set is checked always; a default only where it is used (siamese.final by every dataset with labelled
pairs, siamese.unlabelled by one without), so a trimmed catalogue (tests, benchmarks) need not hold every default.

The names checked against: ticketsim.config.cached, the one line of each cached channel among them.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ticketsim.config.cached import CACHED, QUERY_COMPONENTS, TICKET_COMPONENTS, channel_names
from ticketsim.config.coerce import ConfigError

if TYPE_CHECKING:
    from ticketsim.config.schema import Params


def name_problems(params: Params, written: dict[str, Any]) -> list[str]:
    """Each name of `params` that names nothing, as `key: what is wrong` (the first of the checks that found any);
    `written`: the sections the files set, whose keys are checked even where nothing uses them."""
    siamese, found = params.siamese, []
    for group in ("variants", "finetuned"):
        for name, variant in getattr(siamese, group).items():
            found += weights_problems(f"siamese.{group}.{name}", variant.channels, variant.levels)
    found += [f"rows.{channel}: no channel with cached vectors of that name (have: {', '.join(CACHED)})"
              for channel in params.rows if channel not in CACHED]
    found += [f"rows.{channel}.levels.{row}: {level!r} is no level pair {pair_form()}"
              for channel, rows in params.rows.items() for row, level in rows.levels.items() if not level_pair(level)]
    set_retrain = written.get("retrain") or {}
    named_datasets = [("finetune.datasets", d) for d in params.finetune.datasets]
    if "dataset" in set_retrain:
        named_datasets.append(("retrain.dataset", params.retrain.dataset))
    if "targets" in set_retrain:
        named_datasets += [("retrain.targets", t.split("@", 1)[1]) for t in params.retrain.targets if "@" in t]
    found += [f"{key}: no dataset {name!r} in datasets (have: {', '.join(params.datasets)})"
              for key, name in named_datasets if name not in params.datasets]
    if found:
        return found
    catalogue = {**siamese.variants, **siamese.finetuned}
    set_siamese = written.get("siamese") or {}
    try:
        for dataset in params.datasets.values():
            if dataset.final or catalogue:     # without a catalogue (params.yaml alone) only a dataset's own final
                siamese.final_of(dataset)
        if catalogue:
            for key in ("final", "unlabelled"):
                if key in set_siamese:
                    siamese.deployable(getattr(siamese, key), f"siamese.{key}")
            if "query_tower" in set_retrain:
                siamese.variant(params.retrain.query_tower, "retrain.query_tower")
    except ConfigError as error:
        found.append(str(error).removeprefix("params: "))
    return found


def weights_problems(key: str, channels: dict[str, float], levels: dict[str, float]) -> list[str]:
    """A variant's unknown channels and level pairs, and its negative weights."""
    known = channel_names()
    found = [f"{key}.channels.{c}: no channel of that name (have: {', '.join(known)})" for c in channels if c not in known]
    found += [f"{key}.levels.{pair}: no level pair {pair_form()}" for pair in levels if not level_pair(pair)]
    found += [f"{key}.{part}.{name}: {weight!r} is out of range; allowed: at least 0"
              for part, weights in (("channels", channels), ("levels", levels)) for name, weight in weights.items() if weight < 0]
    return found


def level_pair(text: str) -> bool:
    query, _, ticket = text.partition("-")
    return query in QUERY_COMPONENTS and ticket in TICKET_COMPONENTS


def pair_form() -> str:
    return f"(query part-ticket part; query parts: {', '.join(QUERY_COMPONENTS)}; ticket parts: {', '.join(TICKET_COMPONENTS)})"
