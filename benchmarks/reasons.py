"""What a search's reasons tell a person, over a knowledge base's end-user queries (every query when it has none):

- per hit of the top k: the share that names a shared topic when any topic may be named (NPMI >= -1, as before the
  threshold) and at the index's threshold (topics.coherence), and the mean NPMI of the topics named either way;
- the share of hits with a matched pair of parts, and their mean number of shared phrases and of multi-word phrases;
- the share of queries whose top 3 calibrated scores tie as printed (two decimals), and of those, how many the raw g,
  as printed beside them, puts in a visible order.

    python benchmarks/reasons.py [--model models/default/bundle] [--index models/default/index]
                                 [--corpus data/default/prepared] [-k 10]
"""
import argparse
import json
from dataclasses import replace

import numpy as np
import polars as pl

from ticketsim.data.tables import Corpus
from ticketsim.search.enduser import SPLIT
from ticketsim.search.index import TicketIndex
from ticketsim.search.queries import query_encoder
from ticketsim.search.searcher import Answer, Searcher


def topic_shares(answers: list[Answer]) -> dict:
    hits = [h for a in answers for h in a.hits]
    named = [t["coherence"] for h in hits for t in h.reasons["topics"]]
    return {"hits_naming_a_topic": round(float(np.mean([bool(h.reasons["topics"]) for h in hits])), 3),
            "mean_npmi_of_named_topics": round(float(np.mean(named)), 3) if named else None}


def part_shares(answers: list[Answer]) -> dict:
    parts = [h.reasons["parts"] for a in answers for h in a.hits]
    phrases = [[p for part in hit for p in part["phrases"]] for hit in parts]
    return {"hits_with_a_matched_part": round(float(np.mean([bool(p) for p in parts])), 3),
            "mean_phrases_per_hit": round(float(np.mean([len(p) for p in phrases])), 2),
            "mean_multiword_phrases_per_hit": round(float(np.mean([sum(" " in p for p in hit) for hit in phrases])), 2)}


def tie_shares(answers: list[Answer]) -> dict:
    top3 = [a for a in answers if len(a.hits) >= 3 and a.calibrated]   # a model without a calibration prints g alone
    tied = [a for a in top3 if len({f"{h.calibrated:.2f}" for h in a.hits[:3]}) < 3]
    ordered = [a for a in tied if len(set(a.similarities()[:3])) == 3]
    return {"queries": len(top3), "top3_calibrated_tie": len(tied), "of_those_ordered_by_printed_g": len(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="models/default/bundle")
    parser.add_argument("--index", default="models/default/index")
    parser.add_argument("--corpus", default="data/default/prepared", help="the prepare stage's folder (its queries are searched)")
    parser.add_argument("-k", type=int, default=10)
    args = parser.parse_args()
    index, corpus = TicketIndex.load(args.index), Corpus.read(args.corpus)
    enduser = corpus.split(SPLIT)["query_id"].unique()
    queries = corpus.queries.filter(pl.col("query_id").is_in(enduser.implode())) if len(enduser) else corpus.queries
    searcher = Searcher(query_encoder(args.model), index, args.model, args.index)
    answers = searcher.search(queries, args.k)
    every_topic = Searcher(searcher.queries, replace(index, coherence=-1.0), args.model, args.index).search(queries, args.k)
    labels = searcher.topic_labels
    result = {"queries": queries.height, "k": args.k, "threshold": index.coherence,
              "coherent_topics": sum(map(labels.coherent, range(len(labels.words)))), "topics": len(labels.words),
              "topics_named": {"every_topic": topic_shares(every_topic), "coherent_only": topic_shares(answers)},
              "parts": part_shares(answers), "ties": tie_shares(answers)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
