"""Stage topics: channel T vectors of every ticket and query component (from M1 or M2: topics.space), and the topic-words report."""
import argparse
from pathlib import Path

from ticketsim.channels.topics import load_topic_models, topic_vectors, topic_words_markdown
from ticketsim.config import load_params
from ticketsim.text.tokenize import Tokens
from ticketsim.tracking import log_artifacts, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dataset")
    parser.add_argument("--tokens", required=True, help="the tokenize stage's folder")
    parser.add_argument("--models", required=True, help="the docnade stage's folder")
    parser.add_argument("--out", required=True, help="the channel cache to write (.npz)")
    parser.add_argument("--reports", required=True, help="folder for topic_words.md")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    cfg = params.topics
    with stage_run(params.tracking, "topics", args.dataset, {"topics": {"top_words": cfg.top_words, "space": cfg.space}},
                   raw=params.dataset(args.dataset).raw):
        models = load_topic_models(args.models)
        topic_vectors(Tokens.read(args.tokens), models, cfg.space).save(args.out)
        reports = Path(args.reports)
        reports.mkdir(parents=True, exist_ok=True)
        (reports / "topic_words.md").write_text(topic_words_markdown(models, cfg.top_words, args.dataset))
        log_artifacts(args.reports)


if __name__ == "__main__":
    main()
