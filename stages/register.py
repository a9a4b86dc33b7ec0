"""Stage register: the final Siamese variant as one bundle, logged to MLflow as a model and registered under a name."""
import argparse
import json
from dataclasses import replace
from pathlib import Path

from ticketsim.config import TunedVariant, build, load_params
from ticketsim.scorer import write_bundle
from ticketsim.serving import log_bundle
from ticketsim.tracking import log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--model", required=True, help="the siamese stage's folder of the final variant")
    parser.add_argument("--metrics", required=True, help="the final variant's metrics JSON")
    parser.add_argument("--word2vec", required=True)
    parser.add_argument("--char-blstm", required=True)
    parser.add_argument("--docnade", required=True, help="the docnade stage's folder (M1, M2)")
    parser.add_argument("--bundle", required=True, help="folder to write the bundle to")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg, final = params.siamese, params.siamese.final
    name = cfg.registered_name(args.dataset)
    with stage_run(params.tracking, "register", args.dataset, {"variant": final, "registered_model": name},
                   tags={"variant": final}, raw=params.dataset(args.dataset).raw) as run:
        model = Path(args.model)
        variant = cfg.variants[final]
        if (model / "variant.json").is_file():   # trained from tune's weights (stage final), not from siamese.variants
            tuned = build(TunedVariant, json.loads((model / "variant.json").read_text()), str(model / "variant.json"))
            cfg, variant = replace(cfg, hidden=tuned.hidden), tuned.variant
        bundle = write_bundle(
            args.bundle, text=params.text, variant=variant, siamese=cfg,
            scales=json.loads((model / "scales.json").read_text()), words=tuple(json.loads((model / "words.json").read_text())),
            sources={"word2vec": args.word2vec, "char_blstm": args.char_blstm, "docnade": args.docnade,
                     "checkpoint": model / "checkpoint.pt", "calibrator": model / "calibrator.json"},
            sentence=params.sentence, bm25=params.bm25)
        # The version's run holds the variant's own figures (dev.rerank.map, ...): what the retraining gate compares.
        results = json.loads(Path(args.metrics).read_text())
        log_metrics(next(value for key, value in results.items() if key != "training"))   # the model's one row ("#22-tuned")
        version = log_bundle(str(bundle), name)
        print(f"register@{args.dataset}: {name} version {version} (run {run.info.run_id})")


if __name__ == "__main__":
    main()
