"""Stage prepare: one dataset's raw files (or the generator) -> validated tickets, queries and pairs (Parquet) + an intake
report, and their tokens: token lists per component (SUB, DESC, SOL) and a vocabulary with counts."""
import json
import sys
from pathlib import Path

from ticketsim.data.sources import load_corpus
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.lifecycle.tracking import log_metrics
from ticketsim.stage import Stage
from ticketsim.text.tokenize import make_tokenizer, token_stats, tokenize_corpus

STAGE = Stage("prepare", __doc__, writes=("metrics",),
              options={"out": "folder for tickets/queries/pairs.parquet and intake.json",
                       "tokens": "folder for the tokens: tickets/queries/vocab.parquet"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    out = Path(args.out)
    with stage.run({"dataset": stage.dataset_config, "text": params.text}, corpus=out, context="output",
                   artifacts=(out / "intake.json", args.metrics)):
        report = IntakeReport()
        try:
            corpus = load_corpus(params, stage.dataset, report)
        except DataError as error:
            sys.exit(f"prepare@{stage.dataset}: {error}")
        corpus.write(out)
        (out / "intake.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n")
        print(f"prepare@{stage.dataset}:", json.dumps(report.as_dict(), indent=2))
        log_metrics({name: frame.height for name, frame in corpus.frames().items()})
        tokens = tokenize_corpus(corpus, make_tokenizer(params.text, corpus))
        tokens.write(args.tokens)
        stage.metrics(token_stats(tokens))


if __name__ == "__main__":
    main()
