"""Stage siamese: every Siamese row of one dataset (siamese.variants: Table 5 #15-22 and the rows beyond the paper; with
the dataset in finetune.datasets, siamese.finetuned's too), trained once per seed of evaluation.seeds side by side on
siamese.workers processes and evaluated; one MLflow run per row, its figures the mean over the seeds, with their spread.

Per row: <out>/<row>/ (the first seed's trained model, ticketsim.training.siamese_rows; <out>/<row>/seed-<n>/ each other
seed's), <metrics>/<row>.json (mean, sd, each seed's results), <plots>/<row>/. A row whose checkpoint holds the same
variant, model, training, data and seed resumes from it (DVC keeps the folder): a finished one is only evaluated again,
so changing one variant's params retrains that row alone, and adding a seed trains that seed alone.
"""
from operator import attrgetter
from pathlib import Path

from ticketsim.side_by_side import side_by_side, whole_groups
from ticketsim.stage import Stage
from ticketsim.training.siamese_rows import log_row, over_row_seeds, rows_of, train_row
from ticketsim.training.variant import training_inputs_from_files
from ticketsim.workflows.stage_process import script

STAGE = Stage("siamese", __doc__, reads=("corpus", "tokens", "channels"), writes=("metrics", "plots"),
              options={"out": "folder for a folder per row: its trained model, checkpoints, calibrator.json, scales.json"},
              needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg, seeds = params.siamese, params.evaluation.seeds
    rows = rows_of(params, stage.dataset, Path(args.out), Path(args.plots))
    data = training_inputs_from_files(params, args.corpus, args.tokens, args.channels,
                         [row.variant for row in rows])
    finished = whole_groups(side_by_side(train_row, data, rows, cfg.workers, cfg.threads), attrgetter("name"), len(seeds))
    for done, runs in enumerate(finished, 1):
        row, trained = over_row_seeds(runs, seeds)
        print(log_row(stage, row, trained, Path(args.metrics) / f"{row.name}.json", f"{done}/{len(rows) // len(seeds)}"),
              flush=True)


if __name__ == "__main__":
    script(main)
