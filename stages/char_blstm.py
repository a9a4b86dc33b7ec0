"""Stage char_blstm: channel E's character BiLSTM, trained to predict each word2vec word's vector from its spelling."""
import argparse
from dataclasses import asdict

from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.word2vec import load_vectors
from ticketsim.config import load_params
from ticketsim.evaluate.report import write_metrics
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--word2vec", required=True, help="the word2vec stage's vectors (.kv): the training words and targets")
    parser.add_argument("--out", required=True, help="the checkpoint (.pt): model spec, weights, alphabet")
    parser.add_argument("--metrics", required=True, help="JSON file: train and held-out cosine, word counts, seconds")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.embedding.char_blstm
    with stage_run(params.tracking, "char_blstm", args.dataset, {"embedding.char_blstm": cfg, "seed": params.seed},
                   raw=params.dataset(args.dataset).raw):
        word2vec = load_vectors(args.word2vec)
        encoder, report = train_char_blstm(word2vec.index_to_key, word2vec.vectors, cfg, params.seed)
        save_checkpoint(encoder, args.out)
        for epoch, loss in enumerate(report.epoch_loss):
            log_metrics({"loss": loss}, step=epoch)
        metrics = {key: round(value, 4) if isinstance(value, float) else value
                   for key, value in asdict(report).items() if key != "epoch_loss"}
        write_metrics(metrics, args.metrics)
        log_metrics(metrics)
        log_artifacts(args.out)


if __name__ == "__main__":
    main()
