"""Stage sources: check that a dataset's raw files exist and record their hashes (prepare depends on this record)."""
import argparse
import json
import sys
from pathlib import Path

from ticketsim.config import ConfigError, load_params
from ticketsim.data.manifest import MissingSource, manifest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset", help="a key of `datasets` in params.yaml")
    parser.add_argument("--out", required=True, help="the manifest JSON to write")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    try:
        record = manifest(load_params(args.params).dataset(args.dataset))
    except (ConfigError, MissingSource) as error:
        sys.exit(f"sources@{args.dataset}: {error}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")   # same files, same bytes: prepare stays cached


if __name__ == "__main__":
    main()
