"""Day one, measured: on a knowledge base none of the models saw labelled, which model finds the relevant tickets.

The knowledge base is SemEval-2016 dev's related questions (about 500 threads: subject, body, comments as the
solution); the queries are its 50 original questions, each searched against the whole pool. A related question is
relevant to the query it was judged for when labelled PerfectMatch or Relevant, and irrelevant otherwise and for every
other query (the retrieve protocol, docs/model.md#evaluation). In one run, with the same evaluation module:

- BM25 and the zero-shot encoder S (row #14: SUB+DESC against SUB+DESC+SOL, cosine), untrained;
- `--bundle`: a bundle trained elsewhere, by default the pipeline's models/default/bundle (A+L on the synthetic corpus);
- every `--variants` entry as the tickets-only pipeline builds it on this knowledge base: the related questions are
  written as `tickets.csv` of a `labels: false` dataset in a throwaway clone of the repo (default params), and
  `dvc repro bundle@kb` runs with `siamese.unlabelled` set to the variant. No label is read by the pipeline.

Channel S of the corpus is encoded once and given to every bundle that reads it with the same encoder settings.

Usage: python benchmarks/tickets_only.py SEMEVAL_FOLDER [--bundle models/default/bundle] [--variants Szs+L Ass+L]
       [--workspace DIR]   (SEMEVAL_FOLDER holds SemEval2016-Task3-CQA-QL-dev.xml; it is read, never copied)
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.sentence import sentence_channel
from ticketsim.config import SEMEVAL_FILES, DatasetConfig, EvaluationConfig
from ticketsim.data.sources import read_dataset
from ticketsim.data.validate import IntakeReport
from ticketsim.evaluate.baselines import bm25_matrix, channel_matrix
from ticketsim.evaluate.suite import evaluate_method
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
MEASURES = (("retrieve", "map@10"), ("retrieve", "mrr@10"), ("rerank", "map"))


def figures(corpus, scores, matrix) -> dict[str, float]:
    """The measures of MEASURES on the queries (all in split test), in %."""
    result = evaluate_method(corpus.pairs, scores, matrix, EvaluationConfig())["test"]
    return {f"{protocol} {name}": 100 * result[protocol][name] for protocol, name in MEASURES}


def day_one_bundles(tickets, variants: list[str], workspace: Path) -> dict[str, Path]:
    """Each variant as siamese.unlabelled, built by `dvc repro bundle@kb` on a labels: false dataset of `tickets`."""
    from conftest import clone  # the repo's tracked files, as `git clone` gives them (no outputs)

    repo = clone(workspace / "repo")
    (repo / "kb").mkdir(exist_ok=True)    # a --workspace run before: its outputs are reused
    tickets.select("ticket_id", "subject", "description", "solution").write_csv(repo / "kb/tickets.csv")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["datasets"] = {"kb": {"source": "csv", "raw": "kb", "labels": False}}
    bundles = {}
    for variant in variants:
        params["siamese"]["unlabelled"] = variant
        (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
        started = time.perf_counter()
        subprocess.run([sys.executable, "-m", "dvc", "repro", "bundle@kb"], cwd=repo, check=True,
                       env={**os.environ, "DVC_NO_ANALYTICS": "1"})
        bundles[variant] = shutil.copytree(repo / "models/kb/bundle", workspace / "bundles" / variant)
        print(f"{variant}: dvc repro bundle@kb in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return bundles


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("semeval", type=Path, help="the folder holding SemEval2016-Task3-CQA-QL-dev.xml")
    parser.add_argument("--bundle", type=Path, default=ROOT / "models/default/bundle", help="a bundle trained elsewhere")
    parser.add_argument("--variants", nargs="*", default=["Szs+L", "Ass+L"], help="siamese.variants to build with no label")
    parser.add_argument("--workspace", type=Path, help="where the clone and bundles go (default: a temporary folder)")
    args = parser.parse_args()

    corpus = read_dataset(DatasetConfig(name="semeval-dev", source="semeval2016", raw=str(args.semeval),
                                        test=SEMEVAL_FILES["dev"]), IntakeReport())
    print(f"{corpus.tickets.height} tickets, {corpus.queries.height} queries, "
          f"{corpus.pairs.filter(corpus.pairs['label'] >= 3).height} relevant pairs", file=sys.stderr)
    workspace = args.workspace or Path(tempfile.mkdtemp(prefix="tickets-only-"))
    bundles = {**day_one_bundles(corpus.tickets, args.variants, workspace), f"trained elsewhere ({args.bundle})": args.bundle}

    scorers = {name: Scorer.load(path) for name, path in bundles.items()}
    sentence = next(iter(scorers.values())).sentence
    s_vectors = sentence_channel(corpus, sentence, progress=False)[0]
    tokens = tokenize_corpus(corpus, make_tokenizer(next(iter(scorers.values())).text, corpus), progress=False)
    rows = {"BM25": bm25_matrix(tokens, next(iter(scorers.values())).bm25),
            "S#14 zero-shot (cosine)": channel_matrix(s_vectors, "sub+desc-sub+desc+sol", "cosine")}
    table = {name: figures(corpus, matrix.pair_scores(corpus.pairs), matrix) for name, matrix in rows.items()}
    for name, scorer in scorers.items():
        scores, matrix = scorer.score(corpus, cached=[s_vectors] if scorer.sentence == sentence else [])
        table[name if "elsewhere" in name else f"{name} (tickets only, this knowledge base)"] = figures(corpus, scores, matrix)

    print(f"| {corpus.queries.height} SemEval dev queries, {corpus.tickets.height} tickets | "
          + " | ".join(f"{p} {m}" for p, m in MEASURES) + " |")
    print("| --- |" + " ---: |" * len(MEASURES))
    for name, values in table.items():
        print(f"| {name} | " + " | ".join(f"{v:.2f}" for v in values.values()) + " |")


if __name__ == "__main__":
    main()
