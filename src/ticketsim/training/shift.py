"""Shift-aware evaluation and selection: a configuration's figures on queries and candidates that come the way a later
user's do, beside its cross-validation inside one dataset, and the rule that picks siamese.final from both.

Cross-validation inside one dataset rewards what does not travel: the source's candidate order (channel R, the
organisers' order: strong one year, weak the next), the comment threads the merged ticket level reads (a later year's
candidates lack them), the query templates a generator reuses. Each shift scores queries no model trained on:

- lay (synthetic): the lay split (data.synthetic's LAY_* word lists), scored by the model trained on train and
  early-stopped on dev;
- later-year (SemEval): the cross-validation folds, each scored by its own model, with the candidates' comment threads
  removed and the source order withheld (R constant, as in a search): `later_year`;
- cross-part (SemEval): trained on one train file's queries (early-stopped on dev), scored on another's: `cross_part`;
- cross-dataset (either, given another dataset): the model trained on train and early-stopped on dev scores every
  train + dev query of another dataset (synthetic-trained on SemEval's pool and back), its cached channels at that
  dataset's scales: `ticketsim select --cross WORKSPACE DATASET`.

The reference is siamese.unlabelled (the zero-shot encoder with BM25, Szs+L, by default): what a help desk has without
a label. `verdict`, `choose` and `cheapest` hold the rule: a configuration is registered only if it beats the reference
by CV (a paired test over queries, p < alpha) and is significantly below it under no shift; of those, the best by CV
MAP, or a cheaper one to index (fewer encoder passes per ticket) that is significantly below that best neither by CV
nor under any shift.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from ticketsim.channels.cache import ChannelVectors
from ticketsim.config import ConfigError, VariantConfig
from ticketsim.data.tables import LAY
from ticketsim.evaluate.protocols import rerank
from ticketsim.evaluate.suite import EVALUATION_SPLITS
from ticketsim.text.tokenize import Tokens
from ticketsim.training.selection import OWN, split_run
from ticketsim.training.variant import CHOICE_SPLITS, TrainedVariant, TrainingInputs, train_variant

LATER_YEAR, CROSS_PART, CROSS_DATASET = "later-year", "cross-part", "cross-dataset"
# Sources whose ticket solution is a comment thread a later year's candidates lack, and whose pairs carry the
# organisers' candidate order.
THREADED = ("semeval2016",)


def later_year(data: TrainingInputs) -> TrainingInputs:
    """`data` as a later year's candidates come: no comment thread (each ticket's solution empty in its texts, tokens
    and cached channels) and no source order (R constant: what a search has). Same pairs, same scales."""
    tickets = data.tokens.tickets
    threadless = set(tickets.filter(pl.col("solution").list.len() == 0)["ticket_id"])
    corpus = None if data.corpus is None else replace(data.corpus, tickets=data.corpus.tickets.with_columns(solution=pl.lit("")))
    return replace(data, pairs=data.pairs.with_columns(source_rank=pl.lit(None, dtype=pl.Int32)), corpus=corpus,
                   tokens=Tokens(tickets.with_columns(pl.col("solution").list.head(0)), data.tokens.queries),
                   channels=tuple(without_threads(v, threadless) for v in data.channels))


def without_threads(vectors: ChannelVectors, threadless: Collection[str]) -> ChannelVectors:
    """A cached channel's tickets without their solution: SUB+DESC+SOL is then the text SUB+DESC is (one vector under
    topics.space m1 or m2; paper's M2 of SUB+DESC+SOL becomes M1 of SUB+DESC, near enough), and SOL the channel's
    vector of an empty text: a `threadless` ticket's, else zeros (what channels E and S give it)."""
    sol = vectors.tickets["sol"]
    row = next((i for i, t in enumerate(vectors.ticket_ids) if t in threadless), None)
    empty = np.zeros_like(sol[:1]) if row is None else sol[row:row + 1]
    return ChannelVectors(vectors.channel, vectors.query_ids, vectors.ticket_ids, vectors.queries,
                          {**vectors.tickets, "sol": np.repeat(empty, len(sol), axis=0), "sub+desc+sol": vectors.tickets["sub+desc"]})


def cross_part(data: TrainingInputs, variant: VariantConfig, parts: Mapping[str, Collection[str]], seed: int,
               hidden: int | None = None, epochs: int | None = None) -> pl.DataFrame:
    """per_query of each part's train queries (parts: name -> query ids, e.g. data.semeval.train_parts), scored by the
    model trained on the other parts' train queries and early-stopped on dev; a column part."""
    choice, runs = data.choice_pairs, []
    for name, ids in parts.items():
        scored = pl.col("query_id").is_in(list(ids)) & (pl.col("split") == "train")
        pairs = choice.with_columns(split=pl.when(scored).then(pl.lit("test")).otherwise(pl.col("split")))
        counts = dict(pairs.group_by("split").len().iter_rows())
        if not counts.get("test") or not counts.get("train"):
            raise ConfigError(f"cross-part: part {name} has {counts.get('test', 0)} train pairs and the other parts "
                              f"{counts.get('train', 0)}: each needs some")
        part = replace(data, pairs=pairs)
        scores = train_variant(part, variant, seed, hidden, epochs).pair_scores()
        runs.append(split_run(part, scores, "test").with_columns(part=pl.lit(name)))
    return pl.concat(runs)


def part_runs(by_query: pl.DataFrame, parts: Mapping[str, Collection[str]]) -> pl.DataFrame:
    """cross_part's frame for a method that learns from no label: its own per_query rows of each part's queries."""
    return pl.concat([by_query.filter(pl.col("query_id").is_in(list(ids))).with_columns(part=pl.lit(name))
                      for name, ids in parts.items()])


@dataclass(frozen=True, eq=False)
class Shifts:
    """The shifts one dataset is scored under, and what they read."""

    lay: bool                           # it has lay queries
    later: TrainingInputs | None              # its later-year view (a threaded source)
    parts: dict[str, set[str]]          # train part -> its query ids (cross-part: two parts or more)
    other: TrainingInputs | None = None       # another dataset, its train + dev pairs scored (cross-dataset)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, on in ((LAY, self.lay), (LATER_YEAR, self.later is not None),
                                           (CROSS_PART, len(self.parts) > 1), (CROSS_DATASET, self.other is not None)) if on)

    def scored(self, data: TrainingInputs, model: TrainedVariant, scores: np.ndarray) -> dict[str, pl.DataFrame]:
        """The shifts a model trained on data's train (early-stopped on dev; `scores`: its g of data's pairs) is scored
        under as it is: per_query of the lay split and of the other dataset's train + dev queries."""
        runs = {LAY: split_run(data, scores, LAY)} if self.lay else {}
        if self.other is not None:
            runs[CROSS_DATASET] = split_run(self.other, model.scores_on(self.other), *CHOICE_SPLITS)
        return runs

    @property
    def views(self) -> dict[str, TrainingInputs]:
        """cross_validate_under's views."""
        return {LATER_YEAR: self.later} if self.later is not None else {}


def shifts_of(data: TrainingInputs, source: str, parts: Mapping[str, Collection[str]] = {}, other: TrainingInputs | None = None) -> Shifts:
    """The shifts of a dataset from `source` (datasets.<name>.source) with these train parts, and `other`'s queries."""
    threaded = source in THREADED
    return Shifts(bool((data.pairs["split"] == LAY).any()), later_year(data) if threaded else None,
                  {name: set(ids) for name, ids in parts.items()} if threaded else {}, other)


def later_year_results(trained: TrainedVariant, data: TrainingInputs) -> dict:
    """A trained row's figure under the later-year view, beside its own: rerank of each evaluation split, keys
    "<split>-later-year" (no model trained again)."""
    view = later_year(data)
    scored = view.pairs.with_columns(score=pl.Series(trained.scores_on(view)))
    return {f"{split}-{LATER_YEAR}": {"rerank": rerank(part, data.params.evaluation.depth)}
            for split in EVALUATION_SPLITS if not (part := scored.filter(pl.col("split") == split)).is_empty()}


def verdict(tests: Mapping[str, dict], alpha: float = 0.05) -> str | None:
    """Why a configuration may not be registered, None if it may: `tests` are its paired tests against the reference
    (selection.paired_test) by CV (key OWN) and under each shift."""
    cv = tests[OWN]
    if not (cv["mean_difference"] > 0 and cv["p"] < alpha):
        return f"not above the reference by CV ({100 * cv['mean_difference']:+.2f} points, p = {cv['p']:.3f})"
    below = [f"{shift} ({100 * t['mean_difference']:+.2f} points, p = {t['p']:.3f})" for shift, t in tests.items()
             if shift != OWN and t["mean_difference"] < 0 and t["p"] < alpha]
    return f"below the reference under {', '.join(below)}" if below else None


def choose(cv_map: Mapping[str, float], tests: Mapping[str, Mapping[str, dict]], alpha: float = 0.05) -> str | None:
    """The best configuration: of those `verdict` passes (tests: configuration -> its tests), the best by CV MAP; None
    when none passes (register the reference)."""
    return max((name for name, by_shift in tests.items() if verdict(by_shift, alpha) is None), key=cv_map.__getitem__,
               default=None)


def cheapest(best: str, cv_map: Mapping[str, float], against_best: Mapping[str, Mapping[str, dict]],
             cost: Mapping[str, Sequence[int] | None], alpha: float = 0.05) -> str:
    """The configuration to register: of `best` (choose's) and the others that pass (against_best: their paired tests
    against best by CV and under each shift), those not significantly below best anywhere, the one that costs least to
    index a ticket (cost: select_report.prices, the encoder's work, then the index's dimensions; None, as in a report
    that predates it: best's), ties by CV. Quality within the noise is not worth its price in encoder passes."""
    level = [name for name, by_shift in against_best.items()
             if not any(t["mean_difference"] < 0 and t["p"] < alpha for t in by_shift.values())]
    price = lambda name: tuple(cost.get(name) or cost.get(best) or ())  # noqa: E731
    return min([best, *level], key=lambda name: (price(name), -cv_map[name]))
