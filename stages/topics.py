"""Stage topics: channel T of one dataset. DocNADE M1 (SUB+DESC) and M2 (SUB+DESC+SOL), each with an LDA, trained on the
historical tickets and scored on held-out ones (the perplexity table); then T of every ticket and query component (from
M1 or M2: topics.space) and the topic-words report with each topic's NPMI coherence. Metrics: perplexity and coherence."""
from pathlib import Path

from ticketsim.channels.topics import (
    coherence_summary,
    coherence_table,
    fit_topic_models,
    heldout_count,
    perplexity_markdown,
    said_of,
    topic_vectors,
    topic_words_markdown,
)
from ticketsim.lifecycle.tracking import log_metrics
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens
from ticketsim.workflows.stage_process import script

STAGE = Stage("topics", __doc__, reads=("tokens",), writes=("metrics", "reports"),
              options={"models": "folder for the models: m1.pt, m2.pt, lda_m1.npz, lda_m2.npz",
                       "out": "the channel cache to write (.npz)"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    cfg = params.topics
    with stage.run({"seed": params.seed, "topics": cfg}):
        tokens = Tokens.read(args.tokens)
        models = fit_topic_models(tokens, cfg, params.seed)
        for line in said_of(models):
            print(f"topics@{stage.dataset}: {line}")
        for model in models.values():
            model.save(args.models)
            for record in model.history:
                log_metrics({k: v for k, v in record.items() if k != "epoch"}, prefix=model.name, step=record["epoch"])
        log_metrics({name: model.seconds for name, model in models.items()}, prefix="seconds")
        perplexity = {name: model.perplexity for name, model in models.items()}
        topic_vectors(tokens, models, cfg.space).save(args.out)
        coherence = coherence_table(tokens, models, cfg.top_words)
        reports = Path(args.reports)
        reports.mkdir(parents=True, exist_ok=True)
        heldout = heldout_count(tokens.tickets.height, cfg.heldout)
        (reports / "perplexity.md").write_text(perplexity_markdown(perplexity, models, stage.dataset, heldout))
        (reports / "topic_words.md").write_text(topic_words_markdown(models, cfg.top_words, stage.dataset, coherence, cfg.coherence))
        summary = coherence_summary(coherence, cfg.coherence)
        stage.metrics({"perplexity": perplexity, "coherence": summary},
                      logged={"perplexity": perplexity,
                              "coherence": {name: kinds for name, kinds in summary.items() if isinstance(kinds, dict)}})


if __name__ == "__main__":
    script(main)
