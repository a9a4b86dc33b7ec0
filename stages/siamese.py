"""Stage siamese: every Siamese row of one dataset (siamese.variants: Table 5 #15-22 and the rows beyond the paper; with
the dataset in finetune.datasets, siamese.finetuned's too), trained side by side on siamese.workers processes and
evaluated; one MLflow run per row.

Per row: <out>/<row>/ (the trained model, ticketsim.training.siamese_rows), <metrics>/<row>.json, <plots>/<row>/. A row whose
checkpoint holds the same variant, model, training, data and seed resumes from it (DVC keeps the folder): a finished one
is only evaluated again, so changing one variant's params retrains that row alone.
"""
from pathlib import Path

from ticketsim.side_by_side import side_by_side
from ticketsim.stage import Arg, Stage
from ticketsim.training.siamese_rows import log_row, rows_of, train_row
from ticketsim.training.variant import prepare_files

STAGE = Stage("siamese", __doc__, reads=("corpus", "tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"channels": Arg("cached channel vectors (.npz): E, T, S", many=True),
                       "out": "folder for a folder per row: its trained model, checkpoints, calibrator.json, scales.json"},
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.siamese
    rows = rows_of(params, stage.dataset, Path(args.out), Path(args.plots))
    data = prepare_files(params, args.corpus, args.tokens, args.word2vec, args.char_blstm, args.channels,
                         [row.variant for row in rows])
    for done, (row, trained) in enumerate(side_by_side(train_row, data, rows, cfg.workers, cfg.threads), 1):
        log_row(stage, row, trained, Path(args.metrics) / f"{row.name}.json", f"{done}/{len(rows)}")


if __name__ == "__main__":
    main()
