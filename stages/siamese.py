"""Stage siamese: train one Table 5 variant (#15-22) of the Replicated Siamese LSTM on one dataset and evaluate it."""
import json
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from ticketsim.calibrate import UNCALIBRATED, Calibrator, fit_calibrator
from ticketsim.channels.cache import ChannelVectors
from ticketsim.channels.char_blstm import load_checkpoint
from ticketsim.channels.sumemb import word_vectors
from ticketsim.channels.word2vec import load_vectors
from ticketsim.config import load_tuned
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import reliability_plot
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.experiment import (
    branch_start,
    build_inputs,
    build_model,
    channel_scale,
    fit_variant,
    metric_of,
    mined_scale,
    pair_predictor,
    pool_scores,
    predict_all,
    reads,
    save_model,
    scaled,
)
from ticketsim.mining import mine
from ticketsim.stage import Arg, Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_metrics

STAGE = Stage("siamese", __doc__, reads=("corpus", "tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"variant": "a key of siamese.variants in params.yaml (with --variant-file: the row's name)",
                       "variant_file": Arg("YAML of the tune stage (channels, levels, hidden): the weights and LSTM size "
                                           "to train", required=False),
                       "channels": Arg("cached channel vectors (.npz): E, T, ...", many=True),
                       "out": "folder for the trained model (weights, checkpoints), calibrator.json, scales.json"},
              needs_labels=lambda args: not args.variant_file)   # the Table 5 rows; the final model trains without labels too

LOSS_PREFIX = {"labels": "", "selfsup": "selfsup_"}   # MLflow keys: train_loss, dev_loss as every stage; selfsup_* for phase 1


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.siamese
    if args.variant_file:
        variant = load_tuned(args.variant_file)
    else:
        variant = cfg.variant(args.variant)
    cfg = replace(cfg, hidden=variant.hidden or cfg.hidden)
    labelled = stage.dataset_config.labels      # else tickets only (the final stage): mined pairs stand in for labelled ones
    row = args.variant if labelled else cfg.final_of(stage.dataset_config)   # not "#A+L-tuned": nothing was tuned
    metric = metric_of(variant)
    logged = {"variant": row, "weights": variant, "model": {k: v for k, v in asdict(cfg).items() if k != "variants"}}
    torch.set_num_threads(cfg.threads)
    tag = "final" if args.variant_file else "siamese"    # one stage tag for all variants: the variant is a tag and a param
    out = Path(args.out)
    with stage.run(logged, stage=tag, name=f"{tag}#{row}@{stage.dataset}",
                   tags={"variant": row, "method": f"#{row}"},
                   artifacts=(args.metrics, out / "calibrator.json", out / "scales.json", args.plots)):
        started = time.perf_counter()
        corpus, tokens = Corpus.read(args.corpus), Tokens.read(args.tokens)
        pairs, train_pairs = corpus.pairs, corpus.split("train")
        cached = [v for v in map(ChannelVectors.load, args.channels) if v.channel in reads(metric)]
        sentence = next((v for v in cached if v.channel == "S"), None)
        mined = (mine(corpus, tokens, cfg.selfsup, params.bm25, sentence, params.seed)
                 if variant.selfsup or not labelled else None)
        scales = {v.channel: channel_scale(v, train_pairs) if labelled else mined_scale(v, mined, cfg.selfsup.query)
                  for v in cached}
        start = branch_start([variant], cfg, params.sentence, sentence, scales.get("S"))
        cached = [scaled(v, scales[v.channel]) for v in cached]
        if mined is not None and mined.sentence is not None:   # the adapter reads the mined texts' S at S's scale
            mined = replace(mined, sentence=scaled(mined.sentence, scales["S"]))
        inputs = build_inputs(tokens, cached, metric, cfg.max_tokens, params.bm25, corpus)
        chars = load_checkpoint(args.char_blstm)
        torch.manual_seed(params.seed)
        model = build_model(cfg, word_vectors(list(inputs.words), load_vectors(args.word2vec), chars), chars.dim, variant, start)

        out.mkdir(parents=True, exist_ok=True)
        histories = fit_variant(model, inputs, pairs, variant, cfg, params.seed, mined, checkpoints=out,
                                on_epoch=lambda phase, epoch, train, dev: log_metrics(
                                    {f"{LOSS_PREFIX[phase]}train_loss": train, f"{LOSS_PREFIX[phase]}dev_loss": dev}, step=epoch))
        save_model(model, variant, out)
        model.eval()
        if labelled:
            calibrator, results = evaluated(model, inputs, pairs, metric, params.evaluation, f"#{args.variant}",
                                            Path(args.plots) / f"reliability_{args.variant}.png", stage.dataset)
        else:
            calibrator, results = UNCALIBRATED, {"unevaluated": f"datasets.{stage.dataset} has no labelled pairs: no "
                                                                f"figure; scores calibrated as 1 + 4g"}
            Path(args.plots).mkdir(parents=True, exist_ok=True)    # no reliability to plot; the folder is the stage's output
        calibrator.save(out / "calibrator.json")
        (out / "scales.json").write_text(json.dumps(scales, indent=2) + "\n")
        (out / "words.json").write_text(json.dumps(inputs.words) + "\n")  # the embedding rows, for the bundle
        if args.variant_file:   # the register stage builds the bundle from these weights, not from siamese.variants
            (out / "variant.json").write_text(json.dumps(asdict(variant), indent=2) + "\n")
        phases = {phase: {"epochs": len(h.dev_loss), "best_epoch": h.best_epoch, "best_dev_loss": h.best_dev_loss}
                  for phase, h in histories.items()}
        training = {**phases.pop("labels", {}), **phases, "seconds": round(time.perf_counter() - started, 1)}
        if variant.learn:   # the W and V it ended with
            learned = model.metric(metric)
            training["weights"] = {"channels": {c: round(float(w), 4) for c, w in learned.channels.items()},
                                   "levels": {k: round(float(w), 4) for k, w in learned.levels.items()}}
        # dev.rerank.map, ...: the same keys in every variant
        figures = results.get(f"#{args.variant}", {})
        stage.metrics({**results, "training": training}, logged={**figures, "training": training})


def evaluated(model, inputs, pairs, metric, evaluation, method: str, plot: Path, dataset: str) -> tuple[Calibrator, dict]:
    """The calibrator fitted on the train pairs, the method's every measure on every split, and its reliability plot."""
    scores = predict_all(pair_predictor(model, inputs, pairs, metric), pairs.height)
    is_train = (pairs["split"] == "train").to_numpy()
    calibrator = fit_calibrator(scores[is_train], pairs["label"].to_numpy()[is_train])
    results = {method: evaluate_method(pairs, scores, pool_scores(model, inputs, metric), evaluation, calibrator)}
    reliability_plot(calibrator(scores[~is_train]), pairs["label"].to_numpy()[~is_train], plot,
                     f"{dataset} {method}: calibrated vs gold")
    return calibrator, results


if __name__ == "__main__":
    main()
