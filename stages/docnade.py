"""Stage docnade: DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL) and LDA on the historical tickets; held-out perplexity table."""
import argparse

from ticketsim.channels.topics import fit_topic_models, perplexity_markdown, perplexity_table, write_perplexity
from ticketsim.config import load_params
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--out", required=True, help="folder for the checkpoints: m1.pt, m2.pt, lda_m1.npz, lda_m2.npz")
    parser.add_argument("--metrics", required=True, help="JSON file: model -> docnade|lda|lda_bound -> component -> perplexity")
    parser.add_argument("--reports", required=True, help="folder for perplexity.md")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.topics
    run_params = {"seed": params.seed, "topics": {k: v for k, v in vars(cfg).items() if k not in ("top_words", "space", "coherence")}}
    with stage_run(params.tracking, "docnade", args.dataset, run_params, raw=params.dataset(args.dataset).raw):
        tokens = Tokens.read(args.tokens)
        models = fit_topic_models(tokens, cfg, params.seed)
        for model in models.values():
            model.save(args.out)
            for record in model.history:
                log_metrics({k: v for k, v in record.items() if k != "epoch"}, prefix=model.name, step=record["epoch"])
        table = perplexity_table(tokens, models, cfg, params.seed)
        write_perplexity(table, perplexity_markdown(table, models, args.dataset, cfg.heldout), args.metrics, args.reports)
        log_metrics(table, prefix="perplexity")
        log_metrics({name: model.seconds for name, model in models.items()}, prefix="seconds")
        log_artifacts(args.metrics, args.reports)


if __name__ == "__main__":
    main()
