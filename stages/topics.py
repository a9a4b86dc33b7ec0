"""Stage topics: channel T vectors of every ticket and query component (from M1 or M2: topics.space), and the topic-words
report with each topic's NPMI coherence (its summary as the stage's metrics)."""
import argparse
from pathlib import Path

from ticketsim.channels.topics import coherence_summary, coherence_table, load_topic_models, topic_vectors, topic_words_markdown
from ticketsim.config import load_params
from ticketsim.evaluate.report import write_metrics
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--models", required=True, help="the docnade stage's folder")
    parser.add_argument("--out", required=True, help="the channel cache to write (.npz)")
    parser.add_argument("--reports", required=True, help="folder for topic_words.md")
    parser.add_argument("--metrics", required=True, help="JSON: the topics' NPMI coherence per model (mean, median, coherent)")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.topics
    with stage_run(params.tracking, "topics", args.dataset,
                   {"topics": {"top_words": cfg.top_words, "space": cfg.space, "coherence": cfg.coherence}},
                   raw=params.dataset(args.dataset).raw):
        models, tokens = load_topic_models(args.models), Tokens.read(args.tokens)
        topic_vectors(tokens, models, cfg.space).save(args.out)
        coherence = coherence_table(tokens, models, cfg.top_words)
        reports = Path(args.reports)
        reports.mkdir(parents=True, exist_ok=True)
        (reports / "topic_words.md").write_text(topic_words_markdown(models, cfg.top_words, args.dataset, coherence, cfg.coherence))
        summary = coherence_summary(coherence, cfg.coherence)
        write_metrics(summary, args.metrics)
        log_metrics({name: kinds for name, kinds in summary.items() if isinstance(kinds, dict)}, prefix="coherence")
        log_artifacts(args.metrics, args.reports)


if __name__ == "__main__":
    main()
