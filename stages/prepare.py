"""Stage prepare: one dataset's raw files (or the generator) -> validated tickets, queries and pairs (Parquet) + an intake report."""
import json
import sys
from pathlib import Path

from ticketsim.data.sources import load_corpus
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.stage import Stage
from ticketsim.tracking import log_metrics

STAGE = Stage("prepare", __doc__, options={"out": "folder for tickets/queries/pairs.parquet and intake.json"})


def main() -> None:
    stage = STAGE.start()
    out = Path(stage.args.out)
    with stage.run({"dataset": stage.dataset_config}, corpus=out, context="output", artifacts=(out / "intake.json",)):
        report = IntakeReport()
        try:
            corpus = load_corpus(stage.params, stage.dataset, report)
        except DataError as error:
            sys.exit(f"prepare@{stage.dataset}: {error}")
        corpus.write(out)
        (out / "intake.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        print(f"prepare@{stage.dataset}:", json.dumps(report.as_dict(), indent=2))
        log_metrics({name: frame.height for name, frame in corpus.frames().items()})


if __name__ == "__main__":
    main()
