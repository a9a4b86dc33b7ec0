"""Stage comparators: train every neighbouring text-matching model of params comparators.models (DSSM, CDSSM, CGRU, RDE,
HRDE, HRDE-LTC, MV-LSTM, aMV-LSTM) on one dataset, side by side on comparators.workers processes, and evaluate each
like the Siamese variants; one MLflow run per model.

Per model: <out>/<model>/ (checkpoint.pt, calibrator.json), <metrics>/<model>.json, <plots>/<model>/reliability_<model>.png.
A model whose checkpoint holds the same config and data resumes from it (DVC keeps the folder): a finished one is only
evaluated again, so changing one model's params retrains that model alone.
"""
from dataclasses import asdict
from pathlib import Path

from ticketsim.data.tables import Corpus
from ticketsim.evaluate.calibrate import CALIBRATOR
from ticketsim.lifecycle.tracking import log_metrics
from ticketsim.side_by_side import side_by_side
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.training.comparators import Comparators, compare_saved, title

STAGE = Stage("comparators", __doc__, reads=("corpus", "tokens", "word2vec", "char_blstm"), writes=("metrics", "plots"),
              options={"out": "folder for a folder per model: checkpoint.pt and calibrator.json"}, needs_labels=True)


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.comparators
    shared = Comparators(stage.dataset, cfg, Corpus.read(args.corpus), Tokens.read(args.tokens), args.word2vec,
                         args.char_blstm, params.seed, params.evaluation, Path(args.out), Path(args.plots))
    for done, (model, compared) in enumerate(side_by_side(compare_saved, shared, list(cfg.models), cfg.workers, cfg.threads), 1):
        metrics, method = Path(args.metrics) / f"{model}.json", title(model)
        logged = {"model": model, "settings": cfg.settings(model), "loss": cfg.loss, "margin": cfg.margin,
                  "stopwords": cfg.stopwords, "train": asdict(cfg.training(model))}
        with stage.run(logged, name=f"comparators#{model}@{stage.dataset}", tags={"model": model, "method": method},
                       artifacts=(metrics, shared.out / model / CALIBRATOR, shared.plots / model)):
            for epoch, (train, dev) in enumerate(zip(compared.history.train_loss, compared.history.dev_loss)):
                log_metrics({"train_loss": train, "dev_loss": dev}, step=epoch)
            # dev.rerank.map, ...: the same keys for every model
            stage.metrics(compared.results, logged={**compared.results[method], "training": compared.results["training"]},
                          path=metrics)
        print(f"comparators@{stage.dataset}-{model}: dev rerank MAP {100 * compared.results[method]['dev']['rerank']['map']:.2f}, "
              f"{compared.results['training']['seconds']} s ({done}/{len(cfg.models)})", flush=True)


if __name__ == "__main__":
    main()
