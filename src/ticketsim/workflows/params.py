"""`ticketsim params`: the params in force (the params files over the schema's defaults), or their reference page."""
from __future__ import annotations

import dataclasses
import json

from ticketsim.config import homes, load_params, reference_markdown
from ticketsim.errors import OK


def params_command(params: str, markdown: str | None) -> int:
    """Print the params in force as JSON; `markdown` (a params file's name): the reference page of its keys (type,
    default, meaning), as docs/params.md and docs/params-research.md show them."""
    if markdown:
        print(reference_markdown(homes(params), markdown), end="")
    else:
        print(json.dumps(dataclasses.asdict(load_params(params)), indent=2))
    return OK
