"""The paper's end-user evaluation (its Figure 4): the share of queries with at least 1, 2 and 3 correct tickets in the top
10, correct meaning YES, or YES or REL. It needs queries whose every relevant ticket is judged: the synthetic corpus's
end-user split ('test'); a dataset without one gets no figure."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from ticketsim.data.tables import LABELS, Corpus
from ticketsim.evaluate.protocols import ScoreMatrix
from ticketsim.search.searcher import Searcher

SPLIT = "test"
AT_LEAST = (1, 2, 3)
CORRECT = {"yes": (LABELS["YES"],), "yes_or_rel": (LABELS["YES"], LABELS["REL"])}


def shares(ranked: Mapping[str, Sequence[str]], gold: pl.DataFrame) -> dict[str, dict[str, float]]:
    """{'yes': {'at_least_1': share, ...}, 'yes_or_rel': {...}} over the queries of `ranked` (query -> ticket ids, best
    first, already cut to the depth); gold: query_id, ticket_id, label."""
    labels = {(q, t): label for q, t, label in gold.select("query_id", "ticket_id", "label").iter_rows()}
    result = {}
    for name, correct in CORRECT.items():
        counts = [sum(labels.get((q, t)) in correct for t in tickets) for q, tickets in ranked.items()]
        result[name] = {f"at_least_{n}": sum(c >= n for c in counts) / max(len(counts), 1) for n in AT_LEAST}
    return result


def enduser_evaluation(searcher: Searcher, corpus: Corpus, depth: int = 10) -> dict:
    """Figure 4's shares for the search and, beside it, for BM25 alone over the same index; {} without end-user queries."""
    gold = corpus.split(SPLIT)
    queries = corpus.queries.filter(pl.col("query_id").is_in(gold["query_id"].unique().implode()))
    if queries.is_empty():
        return {}
    found = {a.query_id: [h.ticket_id for h in a.hits] for a in searcher.search(queries, depth)}
    bm25 = np.stack([searcher.index.postings.bm25(words) for words in searcher.query_words(queries)])
    top = ScoreMatrix(tuple(found), tuple(searcher.index.table["ticket_id"].to_pylist()), bm25.astype(float)).top_k(depth)
    by_bm25 = {q: top.filter(pl.col("query_id") == q)["ticket_id"].to_list() for q in found}
    return {"queries": len(found), "depth": depth, "search": shares(found, gold), "bm25": shares(by_bm25, gold)}


def shares_plot(results: dict, path: str | Path, title: str) -> None:
    """Grouped bars: at least n correct in the top `depth`, per method and meaning of correct (the paper's Figure 4)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.subplots()
    if results:
        series = [(method, name) for method in ("search", "bm25") for name in CORRECT]
        width = 0.8 / len(series)
        for i, (method, name) in enumerate(series):
            values = [100 * results[method][name][f"at_least_{n}"] for n in AT_LEAST]
            ax.bar([x + i * width for x in range(len(AT_LEAST))], values, width, label=f"{method}: {name.replace('_', ' ').upper()}")
        ax.set_xticks([x + width * (len(series) - 1) / 2 for x in range(len(AT_LEAST))],
                      [f">= {n} correct in top {results['depth']}" for n in AT_LEAST])
        ax.set(ylim=(0, 130), yticks=range(0, 101, 20), ylabel=f"% of {results['queries']} end-user queries")
        ax.legend(fontsize="small", ncol=2, loc="upper center")   # above the bars, which often reach 100%
    else:
        ax.text(0.5, 0.5, f"no end-user queries (split '{SPLIT}') in this dataset", ha="center", va="center")
        ax.set_axis_off()
    ax.set_title(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
