"""`ticketsim channels`: the registry's cached channels as dvc.yaml's channels stage iterates them (channels.yaml,
generated: tests/test_channel_registry.py fails when the committed file is stale)."""
from __future__ import annotations

from pathlib import Path

import yaml

from ticketsim.channels.registry import VARS, dvc_vars
from ticketsim.errors import OK

HEADER = ("# Written by `ticketsim channels --write` from ticketsim.channels.registry.CHANNELS: do not edit. dvc.yaml's\n"
          "# channels stage runs once per dataset and entry (name, its stage's name, its params file and section).\n")


def channels_text() -> str:
    return HEADER + yaml.safe_dump(dvc_vars(), sort_keys=False)


def channels_command(write: bool) -> int:
    if write:
        Path(VARS).write_text(channels_text())
    else:
        print(channels_text(), end="")
    return OK
