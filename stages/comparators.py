"""Stage comparators: train every neighbouring text-matching model of params comparators.models (DSSM, CDSSM, CGRU, RDE,
HRDE, HRDE-LTC, MV-LSTM, aMV-LSTM) on one dataset once per seed of evaluation.seeds, side by side on comparators.workers
processes, and evaluate each like the Siamese variants; one MLflow run per model, its figures the mean over the seeds,
with their spread.

Per model: <out>/<model>/ (checkpoint.pt, calibrator.json; each seed but the first in seed-<n>/ there),
<metrics>/<model>.json (mean, sd, each seed's results), <plots>/<model>/reliability_<model>.png. A model whose
checkpoint holds the same config, data and seed resumes from it (DVC keeps the folder): a finished one is only
evaluated again, so changing one model's params retrains that model alone.
"""
from dataclasses import asdict
from operator import itemgetter
from pathlib import Path

from ticketsim.channels.registry import word_files
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import CALIBRATOR
from ticketsim.evaluate.report import headline, over_seeds
from ticketsim.lifecycle.tracking import log_metrics
from ticketsim.side_by_side import side_by_side, whole_groups
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.training.comparators import Comparators, compare_saved, title
from ticketsim.workflows.stage_process import script

STAGE = Stage("comparators", __doc__, reads=("corpus", "tokens", "channels"), writes=("metrics", "plots"),
              options={"out": "folder for a folder per model: checkpoint.pt and calibrator.json"}, needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg, seeds = params.comparators, params.evaluation.seeds
    shared = Comparators(stage.dataset, cfg, Corpus.read(args.corpus), Tokens.read(args.tokens), *word_files(args.channels),
                         params.evaluation, Path(args.out), Path(args.plots))
    jobs = [(model, seed) for model in cfg.models for seed in seeds]
    finished = whole_groups(side_by_side(compare_saved, shared, jobs, cfg.workers, cfg.threads), itemgetter(0), len(seeds))
    for done, runs in enumerate(finished, 1):
        model, by_seed = runs[0][0][0], {seed: compared for (_, seed), compared in runs}
        results, history = over_seeds({seed: by_seed[seed].results for seed in seeds}), by_seed[seeds[0]].history
        metrics, method = Path(args.metrics) / f"{model}.json", title(model)
        logged = {"model": model, "settings": cfg.settings(model), "loss": cfg.loss, "margin": cfg.margin,
                  "stopwords": cfg.stopwords, "train": asdict(cfg.training(model))}
        with stage.run(logged, name=f"comparators#{model}@{stage.dataset}", tags={"model": model, "method": method},
                       artifacts=(metrics, shared.out / model / CALIBRATOR, shared.plots / model)):
            for epoch, (train, dev) in enumerate(zip(history.train_loss, history.dev_loss)):   # the first seed's
                log_metrics({"train_loss": train, "dev_loss": dev}, step=epoch)
            # dev.rerank.map, ...: the same keys for every model; sd.*, and seed.* at step = the seed
            stage.method_metrics(results, method, metrics)
        print(f"comparators@{stage.dataset}-{model}: {headline(results, method)}, {results['training']['seconds']} s "
              f"({done}/{len(cfg.models)})", flush=True)


if __name__ == "__main__":
    script(main)
