"""Stage final: the final model, the dataset's final variant (datasets.<name>.final, else siamese.final) trained with
the tune stage's weights (row "#<final>-tuned"), which the bundle stage bundles; on a dataset without labelled pairs
siamese.unlabelled, on mined pairs, unevaluated; a final variant that learns from no labelled pair keeps its weights."""
from pathlib import Path

from ticketsim.config import load_tuned
from ticketsim.stage import Stage
from ticketsim.threads import torch_threads
from ticketsim.training.siamese_rows import Row, log_row, train_row
from ticketsim.training.variant import threads_alone, training_inputs_from_files

STAGE = Stage("final", __doc__, reads=("corpus", "tokens", "channels"), writes=("metrics", "plots"),
              options={"variant_file": "YAML of the tune stage: the weights and LSTM size to train",
                       "out": "folder for the trained model (weights, checkpoints), calibrator.json, scales.json, variant.json"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    labelled = stage.dataset_config.labels
    row = Row(params.siamese.final_row(stage.dataset_config), load_tuned(args.variant_file), stage.dataset, Path(args.out),
              Path(args.plots), params.seed, final=True)
    data = training_inputs_from_files(params, args.corpus, args.tokens, args.channels, [row.variant],
                         labelled)
    with torch_threads(threads_alone(params.siamese, row.variant)):
        trained = train_row(data, row)
    print(log_row(stage, row, trained, Path(args.metrics)), flush=True)


if __name__ == "__main__":
    main()
