"""Stage index: the bundle's exact search index over the dataset's tickets, and the paper's end-user evaluation."""
import time
from pathlib import Path

import numpy as np

from ticketsim.bundle.loader import Scorer
from ticketsim.channels.registry import load_caches
from ticketsim.data.tables import Corpus
from ticketsim.search.enduser import enduser_evaluation, shares_plot
from ticketsim.search.index import build_index, model_hash
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.stage import Stage
from ticketsim.workflows.stage_process import script

STAGE = Stage("index", __doc__, reads=("bundle", "corpus", "channels"), writes=("metrics", "plots"),
              options={"out": "the index folder"})


def main() -> None:
    stage = STAGE.start()
    params, args = stage.params, stage.args
    final = params.siamese.final_of(stage.dataset_config)
    with stage.run({"variant": final, "topics": {"coherence": params.topics.coherence}}, tags={"variant": final}):
        scorer, corpus = Scorer.load(args.bundle), Corpus.read(args.corpus)
        started = time.perf_counter()
        index = build_index(scorer, model_hash(args.bundle), corpus.tickets, args.out, cached=load_caches(args.channels, reused=True),
                            coherence=params.topics.coherence, precision=params.index.precision, force=True,
                            graph=params.index.graph)
        built = {"tickets": len(index), "dim": index.vectors.d, "precision": index.vectors.precision,
                 "bytes_per_ticket": np.dtype(index.vectors.precision).itemsize * index.vectors.d,
                 "seconds": round(time.perf_counter() - started, 1)}
        enduser = enduser_evaluation(Searcher(query_encoder(args.bundle, scorer), index, args.bundle), corpus, params.evaluation.depth)
        shares_plot(enduser, Path(args.plots) / "enduser.png", f"{stage.dataset}: end-user queries (the paper's Figure 4)")
        stage.metrics({"index": built, "enduser": enduser})
        print(f"index@{stage.dataset}: {len(index)} tickets x {index.vectors.d} dims in {built['seconds']} s; "
              f"end-user shares {enduser.get('search', 'none')}")


if __name__ == "__main__":
    script(main)
