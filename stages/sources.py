"""Stage sources: check that a dataset's raw files exist and record their hashes (prepare depends on this record)."""
import json
import sys
from pathlib import Path

from ticketsim.data.source_record import MissingSource, source_record
from ticketsim.stage import Stage

STAGE = Stage("sources", __doc__, options={"out": "the source record JSON to write"})


def main() -> None:
    stage = STAGE.start()
    try:
        record = source_record(stage.dataset_config)
    except MissingSource as error:
        sys.exit(f"sources@{stage.dataset}: {error}")
    out = Path(stage.args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")   # same files, same bytes: prepare stays cached


if __name__ == "__main__":
    main()
