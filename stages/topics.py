"""Stage topics: channel T vectors of every ticket and query component (from M1 or M2: topics.space), and the topic-words
report with each topic's NPMI coherence (its summary as the stage's metrics)."""
from pathlib import Path

from ticketsim.channels.topics import coherence_summary, coherence_table, load_topic_models, topic_vectors, topic_words_markdown
from ticketsim.stage import Stage
from ticketsim.text.tokenize import Tokens

STAGE = Stage("topics", __doc__, reads=("tokens", "docnade"), writes=("metrics", "reports"),
              options={"out": "the channel cache to write (.npz)"})


def main() -> None:
    stage = STAGE.start()
    args, cfg = stage.args, stage.params.topics
    with stage.run({"topics": {"top_words": cfg.top_words, "space": cfg.space, "coherence": cfg.coherence}}):
        models, tokens = load_topic_models(args.docnade), Tokens.read(args.tokens)
        topic_vectors(tokens, models, cfg.space).save(args.out)
        coherence = coherence_table(tokens, models, cfg.top_words)
        reports = Path(args.reports)
        reports.mkdir(parents=True, exist_ok=True)
        (reports / "topic_words.md").write_text(topic_words_markdown(models, cfg.top_words, stage.dataset, coherence, cfg.coherence))
        summary = coherence_summary(coherence, cfg.coherence)
        stage.metrics(summary, logged={"coherence": {name: kinds for name, kinds in summary.items() if isinstance(kinds, dict)}})


if __name__ == "__main__":
    main()
