"""The paper's claims of its Table 5 (which ablation of the replicated Siamese LSTM beats which), each held or not by the
paired test over queries (selection.paired_test) of the two rows' per-query AP, each query's averaged over the seeds
the row was trained with (selection.mean_ap); and the table5 stage's report of them beside each seed's figures."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from ticketsim.evaluate.report import QUERY_AP, Table, format_value, seeds_table
from ticketsim.training.selection import mean_ap, paired_test

ALPHA = 0.05    # a claim holds when the better row's mean AP is higher at p below this


@dataclass(frozen=True)
class Claim:
    better: str     # the row the paper finds better, as the results table names it ("#22")
    worse: str
    about: str      # what the paper shows by it

    @property
    def key(self) -> str:
        """'22 over 21': the claim's key in the metrics file and MLflow (whose keys take no '#' or '>')."""
        return f"{self.better.lstrip('#')} over {self.worse.lstrip('#')}"


CLAIMS = (
    Claim("#22", "#21", "channels: topics (T) added to h and E"),
    Claim("#21", "#20", "channels: summed word embeddings (E) added to h"),
    Claim("#20", "#19", "cross-level: SUB-DESC, SUB-SOL and DESC-SOL added to the multi-level pairs"),
    Claim("#19", "#17", "multi-level: SUB and DESC compared level by level, not merged into one text"),
    Claim("#21", "#18", "the replicated model with h and E over the best single-level S-LSTM (SUB+DESC+SOL)"),
    Claim("#22", "#18", "the paper's optimum over the best single-level S-LSTM"),
)


def judged(seeds: Mapping[str, Sequence[Mapping]], split: str = "dev", claims: Sequence[Claim] = CLAIMS,
           n: int = 10_000) -> dict[str, dict]:
    """Each claim whose two rows `seeds` holds (method -> each seed's results file, with QUERY_AP) -> the paired test of
    the better row against the worse over the split's queries, and its verdict: held (higher at p < ALPHA), reversed
    (lower at p < ALPHA) or not shown."""
    found = {}
    for claim in (c for c in claims if c.better in seeds and c.worse in seeds):
        ap = [mean_ap(pl.DataFrame(run[QUERY_AP].get(split, []), schema=["query_id", "ap"], orient="row")
                      for run in seeds[method]) for method in (claim.better, claim.worse)]
        test = paired_test(*ap, n=n, seed=0)
        significant = test["p"] < ALPHA
        verdict = ("held" if test["mean_difference"] > 0 else "reversed") if significant else "not shown"
        found[claim.key] = {"better": claim.better, "worse": claim.worse, "about": claim.about, **test,
                            "held": verdict == "held", "verdict": verdict}
    return found


def claims_report(table: Table, verdicts: Mapping[str, Mapping], split: str = "dev") -> str:
    """Markdown: the claims and their verdicts, then each seed's rerank MAP of the rows trained over seeds."""
    lines = [f"# The paper's claims on the {split} queries",
             "",
             f"Each row's AP of a query is averaged over its seeds ({', '.join(map(str, table.seed_numbers))}); the difference is the "
             f"better row's mean AP minus the worse row's (points of MAP) with its 95 % bootstrap interval, p that of a "
             f"paired sign-flip test over the queries. A claim holds at p < {ALPHA}.",
             "",
             "| claim | rows | difference | 95 % interval | p | queries | verdict |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for verdict in verdicts.values():
        low, high = (format_value("map", bound) for bound in verdict["interval"])
        lines.append(f"| {verdict['about']} | {verdict['better']} > {verdict['worse']} | "
                     f"{100 * verdict['mean_difference']:+.2f} | [{low}, {high}] | {verdict['p']:.4f} | "
                     f"{verdict['queries']} | **{verdict['verdict']}** |")
    return "\n".join([*lines, "", f"## Each seed's {split} rerank MAP", "",
                      "The unsupervised rows (BM25, the source's order, channels T, E and S) are deterministic: one run "
                      "each, no spread. A single seed's figure moves by about the spread shown here when nothing but the "
                      "seed changes.", "", seeds_table(table, split)])
