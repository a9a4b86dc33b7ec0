"""Stage tokenize: a prepared dataset -> token lists per component (SUB, DESC, SOL) and a vocabulary with counts.

(Not named tokenize.py: that would shadow the standard library module of that name.)
"""
import argparse
import json
from pathlib import Path

from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.text.tokenize import make_tokenizer, token_stats, tokenize_corpus
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder")
    parser.add_argument("--out", required=True, help="folder for tickets/queries/vocab.parquet")
    parser.add_argument("--metrics", required=True, help="JSON file of vocabulary and length statistics")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    with stage_run(params.tracking, "tokenize", args.dataset, {"text": params.text}, corpus=args.corpus,
                   raw=params.dataset(args.dataset).raw):
        corpus = Corpus.read(args.corpus)
        tokens = tokenize_corpus(corpus, make_tokenizer(params.text, corpus))
        tokens.write(args.out)
        stats = token_stats(tokens)
        Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(args.metrics).write_text(json.dumps(stats, indent=2) + "\n")
        log_metrics(stats)
        log_artifacts(args.metrics)


if __name__ == "__main__":
    main()
