"""`ticketsim params`: the params in force (the params files over the schema's defaults), or their reference page;
`ticketsim workspace`: the pipeline's paths as dvc.yaml's vars file (workspace.yaml)."""
from __future__ import annotations

import dataclasses
import json

from ticketsim.config import homes, load_params, reference_markdown, workspace_vars
from ticketsim.errors import OK


def params_command(params: str, markdown: str | None) -> int:
    """Print the params in force as JSON; `markdown` (a params file's name): the reference page of its keys (type,
    default, meaning), as docs/params.md and docs/params-research.md show them."""
    if markdown:
        print(reference_markdown(homes(params), markdown), end="")
    else:
        print(json.dumps(dataclasses.asdict(load_params(params)), indent=2))
    return OK


def workspace_command() -> int:
    """Print workspace.yaml: config.workspace's folders and files, as dvc.yaml's `vars:` reads them."""
    print(workspace_vars(), end="")
    return OK
