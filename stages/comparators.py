"""Stage comparators: train every neighbouring text-matching model of params comparators.models (DSSM, CDSSM, CGRU, RDE,
HRDE, HRDE-LTC, MV-LSTM, aMV-LSTM) on one dataset and evaluate each like the Siamese variants; one MLflow run per model.

Per model: <out>/<model>/ (checkpoint.pt, calibrator.json), <metrics>/<model>.json, <plots>/<model>/reliability_<model>.png.
A model whose checkpoint holds the same config and data resumes from it (DVC keeps the folder): a finished one is only
evaluated again, so changing one model's params retrains that model alone.
"""
import time
from dataclasses import asdict
from pathlib import Path

import torch

from ticketsim.channels.char_blstm import load_checkpoint
from ticketsim.channels.sumemb import word_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.comparison import compare, title
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import reliability_plot
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_metrics

STAGE = Stage("comparators", __doc__, reads=("corpus", "tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"out": "folder for a folder per model: checkpoint.pt and calibrator.json"}, needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.comparators
    torch.set_num_threads(cfg.threads)
    corpus, tokens = Corpus.read(args.corpus), Tokens.read(args.tokens)
    held_out = (corpus.pairs["split"] != "train").to_numpy()

    def pretrained_vectors(words):   # called for the word-level models only: letter-trigram ones never load word2vec
        return word_vectors(list(words), load_vectors(args.word2vec), load_checkpoint(args.char_blstm))

    for model in cfg.models:
        method, out, metrics, plots = title(model), Path(args.out) / model, Path(args.metrics) / f"{model}.json", Path(args.plots) / model
        logged = {"model": model, "settings": cfg.settings(model), "loss": cfg.loss, "margin": cfg.margin,
                  "stopwords": cfg.stopwords, "train": asdict(cfg.training(model))}
        with stage.run(logged, name=f"comparators#{model}@{stage.dataset}", tags={"model": model, "method": method},
                       artifacts=(metrics, out / "calibrator.json", plots)):
            started = time.perf_counter()
            out.mkdir(parents=True, exist_ok=True)
            done = compare(model, cfg, corpus, tokens, pretrained_vectors, params.seed, params.evaluation, out / "checkpoint.pt",
                           on_epoch=lambda epoch, train, dev: log_metrics({"train_loss": train, "dev_loss": dev}, step=epoch))
            done.calibrator.save(out / "calibrator.json")
            reliability_plot(done.calibrator(done.scores[held_out]), corpus.pairs["label"].to_numpy()[held_out],
                             plots / f"reliability_{model}.png", f"{stage.dataset} {method}: calibrated vs gold")
            results = {method: done.results, "training": done.training(time.perf_counter() - started)}
            # dev.rerank.map, ...: the same keys for every model
            stage.metrics(results, logged={**results[method], "training": results["training"]}, path=metrics)


if __name__ == "__main__":
    main()
