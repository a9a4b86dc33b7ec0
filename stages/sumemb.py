"""Stage sumemb: channel E of every ticket and query component (sum of word2vec ++ char-BLSTM word vectors), cached."""
import argparse
import time
from dataclasses import asdict
from pathlib import Path

from ticketsim.channels.char_blstm import load_checkpoint
from ticketsim.channels.projection import fault_types, projection_plot
from ticketsim.channels.sumemb import spelling_neighbours, sumemb_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.config import load_params
from ticketsim.evaluate.report import write_metrics
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, log_dict, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--word2vec", required=True, help="the word2vec stage's vectors (.kv)")
    parser.add_argument("--char-blstm", required=True, help="the char_blstm stage's checkpoint (.pt)")
    parser.add_argument("--out", required=True, help="the channel cache (.npz, ticketsim.channels.cache format)")
    parser.add_argument("--metrics", required=True, help="JSON file: vocabulary, word2vec coverage, dim, seconds")
    parser.add_argument("--plots", required=True, help="folder for a PNG of the ticket vectors projected to 2-D, "
                        "coloured by fault type on the synthetic corpus")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    with stage_run(params.tracking, "sumemb", args.dataset, raw=params.dataset(args.dataset).raw):
        started = time.perf_counter()
        tokens, word2vec, chars = Tokens.read(args.tokens), load_vectors(args.word2vec), load_checkpoint(args.char_blstm)
        vectors, report = sumemb_vectors(tokens, word2vec, chars)
        vectors.save(args.out)
        metrics = {**asdict(report), "seconds": round(time.perf_counter() - started, 1)}
        write_metrics(metrics, args.metrics)
        subjects = tokens.tickets["subject"].to_list()
        labels = fault_types(subjects) if params.dataset(args.dataset).source == "synthetic" else ["ticket"] * len(subjects)
        projection_plot(vectors.tickets["sub+desc+sol"], labels, Path(args.plots) / "tickets.png",
                        f"{args.dataset}: E of ticket SUB+DESC+SOL (PCA of unit-length vectors)")
        log_metrics(metrics)
        log_artifacts(args.metrics, args.plots)
        # What the char part is for: the most frequent words word2vec lacks, and the known word each is spelt most like.
        words = [word for word in tokens.vocabulary()["token"].to_list() if word.isalpha()]  # not dates and codes
        log_dict(spelling_neighbours(words, word2vec, chars, n=50), "unknown_words.json")


if __name__ == "__main__":
    main()
