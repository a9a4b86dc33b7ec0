"""Feedback checked before it trains: `ticketsim feedback export` hands a judge's new judgments to the labelled folder
only when they agree with the champion's ranking and with other labellers at a usual rate; otherwise they are held for
a person (ticketsim.data.review, `ticketsim feedback review`).

A judge is where a judgment came from as the journal records it (`via`: page, api, model). For each judge's new
judgments, with the champion's search of each judged query (its first hits, as the page shows them by default):
- top_no: of the judged tickets among the champion's first `gate.review.top_k` hits, the share marked NO;
- low_yes: of the judged tickets it ranks low, i.e. all the others (beyond its first top_k hits, or not among its hits
  at all), the share marked YES: a judge who only says YES where the champion ranks low is pushing tickets up;
- concordance: of two judged tickets of one query with different labels and ranks, the share the champion ranks in
  the labels' order (a ticket beyond its hits ranks below them all);
- agreement: of its judgments of pairs others labelled too, the share with their label.
The batch is held when top_no is above `max_top_no`, low_yes above `max_low_yes`, concordance below `min_concordance`
or agreement below `min_agreement`, each once it rests on `min_judged` top hits, low-ranked tickets, hit pairs or shared
labels. Checked against a champion, a batch on which none of them rests on `min_judged` is held too, not passed
unchecked: every judgment counts for top_no or low_yes, so that is a batch of under 2 * min_judged - 1 judgments, which
a person accepts or rejects. Without a champion only agreement is checked.
"""
from __future__ import annotations

import math
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from itertools import combinations
from pathlib import Path

import polars as pl

from ticketsim.config import Params, ReviewConfig
from ticketsim.data.feedback import Export, Key, export, pending
from ticketsim.data.review import Batch, review_log
from ticketsim.data.tables import LABELS, QUERY_FIELDS
from ticketsim.errors import StepError


@dataclass(frozen=True)
class Checked:
    """What a checked export did: the export, the batches it checked and logged, and the champion they were checked against."""

    export: Export
    batches: tuple[Batch, ...]
    against: str

    def render(self) -> str:
        lines = [self.export.render()]
        if self.batches:
            lines.append(f"checked against {self.against}:")
        return "\n".join(lines + [batch.render() for batch in self.batches])


def checked_export(params: Params, journal: str | Path, folder: str | Path, fractions: dict[str, float], now: datetime) -> Checked:
    """Check the journal's judgments that no batch holds yet, judge by judge, log each judge's as a batch (held or
    passed), then export those of passed and accepted batches; under the review log's lock, so each is checked once."""
    journal, recorded, against = Path(journal), [], ""
    with review_log(journal) as log:
        logged = {key for batch in log.batches().values() for key in batch.pairs}
        fresh = pending(journal, folder, now)
        fresh = fresh.filter(pl.Series([key not in logged for key in fresh.select("query_id", "ticket_id").iter_rows()],
                                       dtype=pl.Boolean))
        if fresh.height:
            ranks, against = champion_ranks(params, fresh)
            for (judge,), rows in fresh.group_by("judge", maintain_order=True):
                figures = judge_figures(rows, ranks, params.gate.review.top_k)
                keys = set(rows.select("query_id", "ticket_id").iter_rows())
                recorded.append(log.record(judge, keys, figures, reasons(figures, params.gate.review), now))
        return Checked(export(journal, folder, fractions, now, log.cleared().__contains__), tuple(recorded), against)


def champion_ranks(params: Params, rows: pl.DataFrame) -> tuple[dict[Key, int] | None, str]:
    """The rank of each ticket among the champion's hits for each query of `rows` (1 first); None when there is no
    champion. And which champion, for people."""
    # MLflow (and torch, to rank) only when there is something to check: an export with nothing new stays quick
    from mlflow.exceptions import MlflowException

    from ticketsim.lifecycle.promotion import label
    from ticketsim.lifecycle.registry import CHAMPION, load_version, version_by_alias
    from ticketsim.lifecycle.tracking import SQLITE, check_reachable, tracking_uri

    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    uri = tracking_uri(cfg)
    if uri.startswith(SQLITE) and not Path(uri.removeprefix(SQLITE)).is_file():    # no store: none is created to ask
        return None, f"no champion of {model}: there is no registry at {uri} (its ranking is not checked)"
    check_reachable(cfg)
    champion = version_by_alias(cfg, model, CHAMPION)
    if champion is None:
        return None, f"no champion of {model} in the registry (its ranking is not checked)"
    queries = rows.unique("query_id", keep="first", maintain_order=True)
    with tempfile.TemporaryDirectory(prefix="ticketsim-check-") as scratch:
        ranker = load_version(cfg, champion, Path(scratch), "to rank the judged queries")
        try:
            found = ranker.predict(None, queries.select(*QUERY_FIELDS).to_pandas())
        except MlflowException as error:
            raise StepError(f"{label(champion)} cannot rank the judged queries ({error.message}), so the judgments cannot be "
                            "checked against it; register a version with its search index (`ticketsim retrain --full`)") from None
    hits = zip(queries["query_id"], found["ticket_ids"])
    return {(query, ticket): rank for query, tickets in hits for rank, ticket in enumerate(tickets, start=1)}, label(champion)


def judge_figures(rows: pl.DataFrame, ranks: dict[Key, int] | None, top_k: int) -> dict[str, float | int | None]:
    """One judge's figures (the module's docstring) on its judgments `rows`."""
    figures: dict[str, float | int | None] = {"judgments": rows.height}
    if ranks is not None:
        ranked = [(query, grade, ranks.get((query, ticket), math.inf))
                  for query, ticket, grade in rows.select("query_id", "ticket_id", "label").iter_rows()]
        top = [grade for _, grade, rank in ranked if rank <= top_k]
        low = [grade for _, grade, rank in ranked if rank > top_k]
        by_query = defaultdict(list)
        for query, grade, rank in ranked:
            by_query[query].append((grade, rank))
        ordered = [(grade_a > grade_b) == (rank_a < rank_b) for judged in by_query.values()
                   for (grade_a, rank_a), (grade_b, rank_b) in combinations(judged, 2) if grade_a != grade_b and rank_a != rank_b]
        figures |= {"top_hits": len(top), "top_no": share(top, LABELS["NO"]), "low_hits": len(low),
                    "low_yes": share(low, LABELS["YES"]), "hit_pairs": len(ordered), "concordance": share(ordered, True)}
    alike = [grade == other for grade, others in rows.select("label", "others").iter_rows() for other in others]
    return figures | {"shared": len(alike), "agreement": share(alike, True)}


def share(values: list, value) -> float | None:
    return sum(v == value for v in values) / len(values) if values else None


def reasons(figures: dict[str, float | int | None], cfg: ReviewConfig) -> list[str]:
    """Why a judge's batch is held (none: it passes)."""
    found = []
    if figures.get("top_hits", 0) >= cfg.min_judged and figures["top_no"] > cfg.max_top_no:
        found.append(f"top_no: {figures['top_no']:.0%} of the {figures['top_hits']} judged tickets among the champion's top "
                     f"{cfg.top_k} hits are marked NO (gate.review.max_top_no: {cfg.max_top_no:.0%})")
    if figures.get("low_hits", 0) >= cfg.min_judged and figures["low_yes"] > cfg.max_low_yes:
        found.append(f"low_yes: {figures['low_yes']:.0%} of the {figures['low_hits']} judged tickets the champion ranks below "
                     f"its top {cfg.top_k} hits are marked YES (gate.review.max_low_yes: {cfg.max_low_yes:.0%})")
    if figures.get("hit_pairs", 0) >= cfg.min_judged and figures["concordance"] < cfg.min_concordance:
        found.append(f"concordance: the champion ranks {figures['concordance']:.0%} of {figures['hit_pairs']} pairs of judged "
                     f"tickets with different labels in the labels' order (gate.review.min_concordance: {cfg.min_concordance:.0%})")
    if figures["shared"] >= cfg.min_judged and figures["agreement"] < cfg.min_agreement:
        found.append(f"agreement: {figures['agreement']:.0%} of {figures['shared']} labels others gave its pairs are its own "
                     f"(gate.review.min_agreement: {cfg.min_agreement:.0%})")
    counts = ("top_hits", "low_hits", "hit_pairs", "shared")
    if "top_hits" in figures and all(figures[count] < cfg.min_judged for count in counts):
        found.append(f"unchecked: its {figures['judgments']} judgment(s) are too few to check against the champion ("
                     + ", ".join(f"{count} {figures[count]}" for count in counts)
                     + f"; a figure counts from gate.review.min_judged: {cfg.min_judged})")
    return found
