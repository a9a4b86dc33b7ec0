"""Stage word2vec: channel E's word vectors, trained with gensim on every ticket and query text of one dataset."""
import argparse
import time
from dataclasses import asdict

from ticketsim.channels.word2vec import corpus_sentences, load_pretrained, neighbours, save_vectors, train_word2vec
from ticketsim.config import load_params
from ticketsim.evaluate.report import write_metrics
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_dict, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--out", required=True, help="the word vectors (gensim KeyedVectors, .kv)")
    parser.add_argument("--metrics", required=True, help="JSON file: vocabulary, pretrained and trained words, seconds")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.embedding.word2vec
    with stage_run(params.tracking, "word2vec", args.dataset, {"embedding.word2vec": cfg, "seed": params.seed},
                   raw=params.dataset(args.dataset).raw):
        started = time.perf_counter()
        tokens = Tokens.read(args.tokens)
        pretrained = load_pretrained(cfg.pretrained) if cfg.pretrained else None
        vectors, report = train_word2vec(corpus_sentences(tokens), cfg, params.seed, pretrained)
        save_vectors(vectors, args.out)
        metrics = {**asdict(report), "seconds": round(time.perf_counter() - started, 1)}
        write_metrics(metrics, args.metrics)
        log_metrics(metrics)
        # The vectors themselves are a DVC output; MLflow gets a summary people can read: neighbours of frequent words.
        frequent = [word for word in tokens.vocabulary()["token"].to_list() if word.isalpha() and len(word) > 4][:25]
        log_dict({"dim": vectors.vector_size, **metrics, "neighbours": neighbours(vectors, frequent)}, "word2vec_summary.json")


if __name__ == "__main__":
    main()
