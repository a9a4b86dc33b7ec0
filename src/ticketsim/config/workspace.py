"""Where the pipeline keeps each dataset's files: one name per path (Workspace), for the code that reads the stages'
files outside DVC (select, curve, tune, the gate, the benchmarks) and for dvc.yaml, which reads the same names from its
`vars:` file, workspace.yaml (`ticketsim workspace > workspace.yaml` writes it from FOLDERS and FILES; the file a
dataset's stage is handed is ${ws.<folder>}/${key}/${ws.<name>}; tests/test_workspace.py holds the two equal)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

# The workspace's folders, each holding a folder per dataset (tuned/ a file per dataset: tuned/<dataset>.yaml).
FOLDERS = ("data", "models", "metrics", "reports", "plots", "tuned")
# The files several stages or commands share, by name: (folder, path under the dataset's folder there).
FILES = {
    "source": ("data", "source.json"),              # the sources stage's record of the raw files
    "corpus": ("data", "prepared"),                 # the prepare stage's tickets, queries, pairs
    "tokens": ("data", "tokens"),
    "channels": ("data", "channels"),               # each cached channel's vectors <C>.npz and its models folder <C>/
    "siamese": ("models", "siamese"),               # a folder per Siamese row
    "final": ("models", "final"),
    "bundle": ("models", "bundle"),
    "index": ("models", "index"),
    "comparators": ("models", "comparators"),
}
VARS = "ws"     # the key of workspace.yaml's mapping: one key, so that no name meets a params.yaml key in DVC's context


def _file(name: str) -> property:
    return property(lambda self: self.path(name), doc=f"FILES[{name!r}] of the dataset")


@dataclass(frozen=True)
class Workspace:
    """One dataset's files in the workspace at `root` (where params.yaml and dvc.yaml are)."""

    dataset: str
    root: Path = Path(".")

    source, corpus, tokens, channels = _file("source"), _file("corpus"), _file("tokens"), _file("channels")
    siamese, final, bundle, index, comparators = (_file("siamese"), _file("final"), _file("bundle"), _file("index"),
                                                  _file("comparators"))

    def path(self, name: str) -> Path:
        """The file FILES names `name`."""
        folder, under = FILES[name]
        return self.root / folder / self.dataset / under

    def folder(self, folder: str) -> Path:
        """The dataset's folder in one of FOLDERS: its stages' metrics, reports or plots go under it."""
        return self.root / folder / self.dataset

    def channel(self, channel: str) -> Path:
        """A cached channel's vectors: channels/<channel>.npz (channels.cache.cache_path's name)."""
        return self.channels / f"{channel}.npz"

    @property
    def tuned(self) -> Path:
        """The tune stage's variant file."""
        return self.root / "tuned" / f"{self.dataset}.yaml"

def workspace_vars() -> str:
    """workspace.yaml's text: FOLDERS and FILES under one key, as dvc.yaml's `vars:` reads them."""
    names = {folder: folder for folder in FOLDERS} | {name: under for name, (_, under) in FILES.items()}
    return ("# Written by `ticketsim workspace > workspace.yaml` from ticketsim.config.workspace: where the pipeline keeps\n"
            "# each dataset's files. dvc.yaml writes a dataset's file as ${ws.<folder>}/${key}/${ws.<name>}.\n"
            + yaml.safe_dump({VARS: names}, sort_keys=False))

