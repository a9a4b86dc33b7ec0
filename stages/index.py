"""Stage index: the final model's exact search index over the dataset's tickets, and the paper's end-user evaluation.

The index must carry the registered bundle's hash, yet the bundle is written by register, which logs the index with
it: so this stage writes the same bundle (scorer.final_bundle, from the same inputs) into a scratch folder, indexes
with it, and register, which runs after it, checks that its own bundle has the index's hash.
"""
import argparse
import tempfile
import time
from pathlib import Path

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import load_params
from ticketsim.data.tables import Corpus
from ticketsim.evaluate.report import write_metrics
from ticketsim.scorer import Scorer, final_bundle
from ticketsim.search.enduser import enduser_evaluation, shares_plot
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.searcher import Searcher
from ticketsim.tracking import log_artifacts, log_metrics, stage_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dataset")
    parser.add_argument("--model", required=True, help="the final stage's folder")
    parser.add_argument("--word2vec", required=True)
    parser.add_argument("--char-blstm", required=True)
    parser.add_argument("--docnade", required=True, help="the docnade stage's folder (M1, M2)")
    parser.add_argument("--corpus", required=True, help="the prepare stage's folder: its tickets are the knowledge base")
    parser.add_argument("--sentence", required=True, help="the sentence_encoder stage's S.npz (the tickets' S, not encoded again)")
    parser.add_argument("--out", required=True, help="the index folder")
    parser.add_argument("--metrics", required=True, help="JSON: the index's size and time, the end-user shares")
    parser.add_argument("--plots", required=True, help="folder for enduser.png")
    parser.add_argument("--params", default="params.yaml")
    args = parser.parse_args()
    params = load_params(args.params)
    run_params = {"variant": params.siamese.final, "topics": {"coherence": params.topics.coherence}}
    with stage_run(params.tracking, "index", args.dataset, run_params,
                   tags={"variant": params.siamese.final}, corpus=args.corpus, raw=params.dataset(args.dataset).raw), \
            tempfile.TemporaryDirectory() as scratch:
        bundle = final_bundle(Path(scratch) / "bundle", params, args.model, args.word2vec, args.char_blstm, args.docnade)
        scorer, corpus = Scorer.load(bundle), Corpus.read(args.corpus)
        started = time.perf_counter()
        index = build_index(scorer, model_hash(bundle), corpus.tickets, cached=[ChannelVectors.load(args.sentence)],
                            coherence=params.topics.coherence)
        built = {"tickets": len(index), "dim": index.vectors.d, "bytes_per_ticket": 4 * index.vectors.d,
                 "seconds": round(time.perf_counter() - started, 1)}
        index.save(args.out)
        enduser = enduser_evaluation(Searcher(scorer, index, bundle), corpus, params.evaluation.depth)
        shares_plot(enduser, Path(args.plots) / "enduser.png", f"{args.dataset}: end-user queries (the paper's Figure 4)")
        metrics = {"index": built, "enduser": enduser}
        write_metrics(metrics, args.metrics)
        log_metrics(metrics)
        log_artifacts(args.metrics, args.plots)
        print(f"index@{args.dataset}: {len(index)} tickets x {index.vectors.d} dims in {built['seconds']} s; "
              f"end-user shares {enduser.get('search', 'none')}")


if __name__ == "__main__":
    main()
