"""Stage char_blstm: channel E's character BiLSTM, trained to predict each word2vec word's vector from its spelling."""
from dataclasses import asdict

from ticketsim.channels.char_blstm import save_checkpoint, train_char_blstm
from ticketsim.channels.word2vec import load_vectors
from ticketsim.stage import Stage
from ticketsim.tracking import log_artifacts, log_metrics

STAGE = Stage("char_blstm", __doc__, reads=("word2vec",), writes=("metrics",),
              options={"out": "the checkpoint (.pt): model spec, weights, alphabet"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.embedding.char_blstm
    with stage.run({"embedding.char_blstm": cfg, "seed": params.seed}):
        word2vec = load_vectors(args.word2vec)
        encoder, report = train_char_blstm(word2vec.index_to_key, word2vec.vectors, cfg, params.seed)
        save_checkpoint(encoder, args.out)
        for epoch, loss in enumerate(report.epoch_loss):
            log_metrics({"loss": loss}, step=epoch)
        stage.metrics({key: round(value, 4) if isinstance(value, float) else value
                       for key, value in asdict(report).items() if key != "epoch_loss"})
        log_artifacts(args.out)


if __name__ == "__main__":
    main()
