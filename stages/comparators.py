"""Stage comparators: train one neighbouring text-matching model (DSSM, CDSSM, CGRU, RDE, HRDE, HRDE-LTC, MV-LSTM,
aMV-LSTM) on one dataset and evaluate it like the Siamese variants."""
import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from ticketsim.channels.char_blstm import load_checkpoint
from ticketsim.channels.sumemb import word_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.comparison import compare, title
from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import reliability_plot
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--model", required=True, help="a key of comparators.models in params.yaml")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--word2vec", required=True, help="the word2vec stage's vectors (.kv)")
    parser.add_argument("--char-blstm", required=True, help="the char_blstm stage's checkpoint (.pt)")
    parser.add_argument("--out", required=True, help="folder for checkpoint.pt and calibrator.json")
    parser.add_argument("--metrics", required=True, help="JSON file: method -> split -> protocol -> measure, and training")
    parser.add_argument("--plots", required=True, help="folder for the reliability plot")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg, method = params.comparators, title(args.model)
    logged = {"model": args.model, "settings": cfg.settings(args.model), "loss": cfg.loss, "margin": cfg.margin,
              "stopwords": cfg.stopwords, "train": asdict(cfg.training(args.model))}
    torch.set_num_threads(cfg.threads)

    def pretrained_vectors(words):   # called for the word-level models only: letter-trigram ones never load word2vec
        return word_vectors(list(words), load_vectors(args.word2vec), load_checkpoint(args.char_blstm))

    with stage_run(params.tracking, "comparators", args.dataset, logged, name=f"comparators#{args.model}@{args.dataset}",
                   tags={"model": args.model, "method": method}, corpus=args.corpus, raw=params.dataset(args.dataset).raw):
        started = time.perf_counter()
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        corpus = Corpus.read(args.corpus)
        done = compare(args.model, cfg, corpus, Tokens.read(args.tokens), pretrained_vectors, params.seed, params.evaluation,
                       out / "checkpoint.pt",
                       on_epoch=lambda epoch, train, dev: log_metrics({"train_loss": train, "dev_loss": dev}, step=epoch))
        done.calibrator.save(out / "calibrator.json")
        held_out = (corpus.pairs["split"] != "train").to_numpy()
        reliability_plot(done.calibrator(done.scores[held_out]), corpus.pairs["label"].to_numpy()[held_out],
                         Path(args.plots) / f"reliability_{args.model}.png", f"{args.dataset} {method}: calibrated vs gold")
        results = {method: done.results, "training": done.training(time.perf_counter() - started)}
        Path(args.metrics).parent.mkdir(parents=True, exist_ok=True)
        Path(args.metrics).write_text(json.dumps(results, indent=2) + "\n")
        log_metrics({**results[method], "training": results["training"]})   # dev.rerank.map, ...: the same keys for every model
        log_artifacts(args.metrics, out / "calibrator.json", args.plots)


if __name__ == "__main__":
    main()
