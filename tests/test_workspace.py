"""The pipeline's paths are named once (ticketsim.config.workspace): dvc.yaml reads them from workspace.yaml, which
`ticketsim workspace` writes, names none by hand, and hands each stage of each dataset the files the Workspace names
for it, as DVC resolves the stages (a dataset beside the default one, so that each dataset's files are its own)."""
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO
from dvc.repo import Repo

from ticketsim.config.workspace import FILES, FOLDERS, Workspace

# The stages' own outputs (--out) and inputs under other option names, as Workspace names them.
OUT = {"sources": "source", "prepare": "corpus", "siamese": "siamese", "final": "final", "bundle": "bundle",
       "index": "index", "comparators": "comparators", "channels": "channels"}
NAMED = {("final", "variant_file"): lambda ws: ws.tuned, ("tune", "out"): lambda ws: ws.tuned,
         ("bundle", "model"): lambda ws: ws.final}


def options(cmd: str) -> dict[str, list[str]]:
    """A stage command's --options and their values."""
    found: dict[str, list[str]] = {}
    for word in shlex.split(cmd)[3:]:     # python stages/<stage>.py <dataset>
        if word.startswith("--"):
            key = found.setdefault(word[2:].replace("-", "_"), [])
        else:
            key.append(word)
    return found


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    """DVC's stages of dvc.yaml, resolved for the datasets default and other."""
    root = tmp_path_factory.mktemp("pipeline")
    for name in ("dvc.yaml", "workspace.yaml", "channels.yaml"):
        shutil.copy(REPO / name, root / name)
    (root / "params.yaml").write_text(yaml.safe_dump({"datasets": {"default": {}, "other": {}}}))
    Repo.init(root, no_scm=True)
    return {stage.name: stage for stage in Repo(root).index.stages}


def test_workspace_yaml_is_what_ticketsim_workspace_writes():
    done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "workspace"], capture_output=True, text=True, check=True)
    assert done.stdout == (REPO / "workspace.yaml").read_text(), "run `ticketsim workspace > workspace.yaml`"
    assert set(FILES) <= {name for name, value in vars(Workspace).items() if isinstance(value, property)}


def test_dvc_yaml_names_no_workspace_path_by_hand():
    by_hand = re.compile(rf"(?<![\w/.{{$])({'|'.join(FOLDERS)})/")
    lines = [f"dvc.yaml:{n}: {line.strip()}" for n, line in enumerate((REPO / "dvc.yaml").read_text().splitlines(), 1)
             if by_hand.search(line.split("#", 1)[0])]
    assert not lines, "write the path as ${ws.<folder>}/${key}/${ws.<name>}:\n" + "\n".join(lines)


@pytest.mark.parametrize("dataset", ["default", "other"])
def test_each_stage_is_handed_the_files_the_workspace_names(stages, dataset):
    ws = Workspace(dataset)
    checked = 0
    for address, stage in stages.items():
        name, at = address.split("@")
        if at.split("-channel")[0] != dataset:     # channels@<dataset>-channel<i>: the registry's matrix
            continue
        given = options(stage.cmd)
        want = {key: [str(ws.path(key))] for key in given if key in FILES}
        want |= {key: [str(f(ws))] for (s, key), f in NAMED.items() if s == name}
        if name in OUT:
            want["out"] = [str(ws.path(OUT[name]))]
        assert {key: given[key] for key in want} == want, address
        checked += len(want)
        # every workspace path it reads or writes is the dataset's own
        paths = [*(word for values in given.values() for word in values), *(str(d.def_path) for d in (*stage.deps, *stage.outs))]
        for path in paths:
            top = path.split("/", 1)[0]
            if top in FOLDERS:
                assert path.startswith(f"{top}/{dataset}/") or path == str(ws.tuned), (address, path)
    assert checked >= 20, f"only {checked} paths compared: has dvc.yaml lost its stages?"
