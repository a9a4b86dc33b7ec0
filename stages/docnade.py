"""Stage docnade: DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL) and LDA on the historical tickets; held-out perplexity table."""
from ticketsim.channels.topics import fit_topic_models, perplexity_markdown, perplexity_table, write_perplexity
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_metrics

STAGE = Stage("docnade", __doc__, reads=("tokens",), writes=("metrics", "reports"),
              options={"out": "folder for the checkpoints: m1.pt, m2.pt, lda_m1.npz, lda_m2.npz"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.topics
    run_params = {"seed": params.seed, "topics": {k: v for k, v in vars(cfg).items() if k not in ("top_words", "space", "coherence")}}
    with stage.run(run_params):
        tokens = Tokens.read(args.tokens)
        models = fit_topic_models(tokens, cfg, params.seed)
        for model in models.values():
            model.save(args.out)
            for record in model.history:
                log_metrics({k: v for k, v in record.items() if k != "epoch"}, prefix=model.name, step=record["epoch"])
        table = perplexity_table(tokens, models, cfg, params.seed)
        write_perplexity(table, perplexity_markdown(table, models, stage.dataset, cfg.heldout), args.metrics, args.reports)
        log_metrics(table, prefix="perplexity")
        log_metrics({name: model.seconds for name, model in models.items()}, prefix="seconds")


if __name__ == "__main__":
    main()
