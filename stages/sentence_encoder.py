"""Stage sentence_encoder: channel S, a pretrained sentence encoder's vector of every ticket and query component, cached."""
import argparse
import sys
from dataclasses import asdict
from pathlib import Path

from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.sentence import EncoderError, sentence_channel
from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import write_metrics
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder (raw texts: the encoder has its own tokenizer)")
    parser.add_argument("--out", required=True, help="the channel cache (.npz, ticketsim.channels.cache format)")
    parser.add_argument("--metrics", required=True, help="JSON file: model, dim, passages, share of texts cut, seconds")
    parser.add_argument("--plots", required=True, help="folder for a PNG of the ticket vectors projected to 2-D, "
                        "coloured by fault type on the synthetic corpus")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.sentence
    with stage_run(params.tracking, "sentence_encoder", args.dataset, {"sentence": cfg}, corpus=args.corpus,
                   raw=params.dataset(args.dataset).raw):
        corpus = Corpus.read(args.corpus)
        try:
            vectors, report = sentence_channel(corpus, cfg)
        except EncoderError as error:
            sys.exit(f"sentence_encoder@{args.dataset}: {error}")
        vectors.save(args.out)
        metrics = {key: value for key, value in asdict(report).items() if key not in ("model", "folder")}
        write_metrics(metrics, args.metrics)
        subjects = [subject.lower().split() for subject in corpus.tickets["subject"].fill_null("")]
        labels = fault_types(subjects) if params.dataset(args.dataset).source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{args.dataset}: S of ticket SUB+DESC+SOL ({report.model}, PCA of unit-length vectors)")
        log_metrics(metrics)
        log_artifacts(args.metrics, args.plots)


if __name__ == "__main__":
    main()
