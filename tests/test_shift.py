"""Shift-aware evaluation and selection (ticketsim.training.shift): the later-year view, cross-part training, the lay
split kept out of the folds, and the rule that picks siamese.final (through `ticketsim select`'s judgement)."""
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from conftest import random_channel, tiny_corpus

from ticketsim.config import VariantConfig
from ticketsim.data.tables import LAY
from ticketsim.threads import torch_threads
from ticketsim.training import select_render, select_report, select_run
from ticketsim.training import shift as shift_module
from ticketsim.training.select_report import SelectReport
from ticketsim.training.selection import OWN, cross_validate_under, query_folds, with_folds
from ticketsim.training.shift import CROSS_DATASET, CROSS_PART, LATER_YEAR, choose, cross_part, later_year, later_year_results, verdict
from ticketsim.training.variant import CHOICE_SPLITS, training_inputs

ORDER_ONLY = VariantConfig(channels={"R": 1.0}, levels={"sub+desc-sub+desc+sol": 1.0}, labels=False)
TINY = VariantConfig(channels={"h": 1.0, "E": 0.5}, levels={"sub+desc-sub+desc+sol": 1.0})


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A tiny synthetic corpus with its lay split, a source order on every candidate and threadless tickets among the rest."""
    from test_tune import make_params

    corpus, tokens = tiny_corpus(n_tickets=60, n_labeled_queries=30, n_enduser_queries=4, n_lay_queries=20)
    pairs = corpus.pairs.with_columns(source_rank=pl.int_range(pl.len()).over("query_id").cast(pl.Int32))
    threadless = tokens.tickets["ticket_id"][:5].to_list()
    tokens = type(tokens)(tokens.tickets.with_columns(
        pl.when(pl.col("ticket_id").is_in(threadless)).then(pl.col("solution").list.head(0)).otherwise(pl.col("solution"))),
        tokens.queries)
    params = make_params(tmp_path_factory.mktemp("shift"))
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(params, tokens, [random_channel("E", corpus, 2)], table, 4, [TINY], corpus, pairs,
                   splits=(*CHOICE_SPLITS, LAY))


def test_the_later_year_view_removes_the_comment_threads_and_withholds_the_source_order(data):
    view = later_year(data)
    assert view.pairs.drop("source_rank").equals(data.pairs.drop("source_rank"))
    assert view.pairs["source_rank"].null_count() == view.pairs.height
    assert (view.tokens.tickets["solution"].list.len() == 0).all() and (view.corpus.tickets["solution"] == "").all()
    assert view.tokens.queries.equals(data.tokens.queries) and view.tokens.tickets["subject"].equals(data.tokens.tickets["subject"])
    (before,), (after,) = data.channels, view.channels
    assert np.array_equal(after.tickets["sub+desc+sol"], before.tickets["sub+desc"])
    # SOL: the channel's vector of an empty text, read from a ticket that had no thread, for every ticket
    empty = before.tickets["sol"][before.ticket_ids.index(data.tokens.tickets["ticket_id"][0])]
    assert np.array_equal(after.tickets["sol"], np.tile(empty, (len(after.ticket_ids), 1)))
    # R withheld: a model of the source order alone ranks every candidate alike, as a search would
    from ticketsim.training.variant import train_variant

    with torch_threads(1):
        model = train_variant(data, ORDER_ONLY, seed=0)
        own, later = model.pair_scores(), model.scores_on(view)
    assert len(np.unique(own)) > 1 and len(np.unique(later)) == 1
    figures = later_year_results(model, data)
    assert set(figures) == {"dev-later-year", "lay-later-year"} and figures["dev-later-year"]["rerank"]["map"] >= 0


@pytest.mark.slow    # trains 3 models (6 for select) on 2 busy cores: 10-30 s
def test_cross_validation_folds_train_and_dev_only_and_scores_each_fold_under_the_view_by_its_own_model(data):
    with torch_threads(1):
        runs = cross_validate_under(data, TINY, {LATER_YEAR: later_year(data)}, k=3, seed=5, epochs=1)
    choice_queries = sorted(data.pairs.filter(pl.col("split").is_in(CHOICE_SPLITS))["query_id"].unique())
    assert sorted(runs[OWN]["query_id"]) == sorted(runs[LATER_YEAR]["query_id"]) == choice_queries   # no lay query dealt into a fold
    folds = query_folds(choice_queries, 3, seed=5)
    for run in runs.values():
        assert dict(run.select("query_id", "fold").iter_rows()) == folds


def test_cross_part_trains_on_one_part_and_scores_only_the_others_queries(data, monkeypatch):
    train = sorted(data.pairs.filter(pl.col("split") == "train")["query_id"].unique())
    parts = {"part1": set(train[::2]), "part2": set(train[1::2])}
    seen = []
    real = shift_module.train_variant

    def recording(problem, *args, **kwargs):
        seen.append(set(problem.pairs.filter(pl.col("split") == "train")["query_id"]))
        return real(problem, *args, **kwargs)

    monkeypatch.setattr(shift_module, "train_variant", recording)
    with torch_threads(1):
        run = cross_part(data, TINY, parts, seed=0, epochs=1)
    assert seen == [parts["part2"], parts["part1"]]
    for name, ids in parts.items():
        assert set(run.filter(pl.col("part") == name)["query_id"]) == ids
    with pytest.raises(ValueError, match="part empty has 0 train pairs"):
        cross_part(data, TINY, {"empty": set()}, seed=0)


def aps(offset: float, seed: int, n: int = 60) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    return {f"Q{i:03d}": float(np.clip(0.5 + offset + 0.1 * rng.standard_normal(), 0, 1)) for i in range(n)}


def by_query(ap: dict[str, float], seed: int = 0) -> pl.DataFrame:
    """A per-query run of these APs with the folds of `seed`."""
    frame = pl.DataFrame({"query_id": list(ap), "ap": list(ap.values()), "rr": list(ap.values()), "acc@1": [1.0] * len(ap)})
    return with_folds(frame, 5, seed)


def test_the_rule_registers_the_best_by_cv_that_beats_the_reference_and_loses_under_no_shift():
    reference = aps(0.0, 1)

    def configuration(cv: float, lay: float, later: float) -> dict:
        shifted = {LAY: [by_query({q: ap + lay for q, ap in reference.items()})],
                   LATER_YEAR: [by_query({q: ap + later for q, ap in reference.items()})]}
        return select_report.summary([by_query(aps(cv, 2))], [by_query(aps(cv, 3))], "trained", 1.0, shifted)

    results = {"Szs+L": configuration(0.0, 0.0, 0.0),
               "fragile": configuration(0.10, -0.05, 0.01),   # best by CV, but below the reference on the lay queries
               "good": configuration(0.06, 0.01, 0.0),        # above by CV, below under no shift
               "weak": configuration(0.0, 0.02, 0.02)}        # no better than the reference by CV
    judgement = select_report.judged(results, list(results), "Szs+L", "fragile", 1000)
    verdicts = judgement["verdicts"]
    assert verdicts["good"] is None and judgement["choice"] == "good"
    assert verdicts["fragile"].startswith("below the reference under lay")
    assert verdicts["weak"].startswith("not above the reference by CV")
    assert set(judgement["against_reference"]) == {"fragile", "good", "weak"}
    assert set(judgement["against_reference"]["good"]) == {OWN, LAY, LATER_YEAR}
    text = "\n".join(select_render.judgement_lines(judgement, [LAY, LATER_YEAR]))
    assert "Choice (above Szs+L by CV" in text and text.rstrip().endswith("the choice is good")
    # none passes: the reference is registered
    assert choose({"weak": 0.6}, {"weak": judgement["against_reference"]["weak"]}) is None


def test_a_cheaper_configuration_as_good_as_the_best_everywhere_is_chosen_and_one_below_it_anywhere_is_not():
    reference = aps(0.0, 1)

    def configuration(cv: float, lay: float, cost: list[int], noise: int = 0) -> dict:
        jitter = np.random.default_rng(noise).normal(0, 0.05, len(reference)) * bool(noise)
        jitter = dict(zip(reference, jitter - jitter.mean()))       # per query, mean 0: a difference within the noise
        shifted = {LAY: [by_query({q: ap + lay + jitter[q] for q, ap in reference.items()})]}
        return select_report.summary([by_query({q: ap + cv + jitter[q] for q, ap in reference.items()})],
                                        [by_query(aps(cv, 3))], "trained", 1.0, shifted) | {"cost": cost}

    results = {"Szs+L": configuration(0.0, 0.0, [4, 5]),
               "five": configuration(0.10, 0.05, [4, 5]),               # the best by CV
               "merged": configuration(0.09, 0.04, [1, 1], noise=4),    # a point below it, within the noise; one pass
               "cheap-fragile": configuration(0.10, 0.0, [1, 1])}       # as cheap, but clearly below the best on the lay queries
    judgement = select_report.judged(results, list(results), "Szs+L", "five", 1000)
    assert judgement["best"] == "five" and judgement["choice"] == "merged"
    assert judgement["against_best"]["cheap-fragile"][LAY]["p"] < 0.05
    assert "(the best by CV: five)" in "\n".join(select_render.judgement_lines(judgement, [LAY]))
    # without costs (a report that predates them) the best by CV is the choice
    bare = {name: {k: v for k, v in figures.items() if k != "cost"} for name, figures in results.items()}
    assert select_report.judged(bare, list(bare), "Szs+L", "five", 1000)["choice"] == "five"
    # one pass of an encoder eight times the size outweighs four of the small one: the passes are priced by the encoder
    small, large = ({"model": m, "weights": w, "width": h} for m, w, h in (("mini", 10_616_832, 384), ("mpnet", 84_934_656, 768)))
    priced = {name: figures | {"encoder": large if name == "merged" else small} for name, figures in results.items()}
    assert select_report.prices(priced, ["five", "merged"]) == {"five": (4 * 10_616_832, 5 * 384), "merged": (84_934_656, 768)}
    assert select_report.judged(priced, list(priced), "Szs+L", "five", 1000)["choice"] == "five"
    # a configuration whose encoder is unknown: all priced by passes and blocks, as when they share one encoder
    priced["cheap-fragile"]["encoder"] = None
    assert select_report.judged(priced, list(priced), "Szs+L", "five", 1000)["choice"] == "merged"


def test_a_tickets_cost_counts_encoder_passes_and_level_blocks():
    from ticketsim.model.branches import cached_components, ticket_cost
    from ticketsim.scoring.weights import metric_of

    five = {"sub-sub": 0.2, "desc-desc": 0.2, "sub+desc-sub+desc": 0.3, "sub+desc-sub+desc+sol": 0.3, "sub-sub+desc+sol": 0.2}
    adapter = metric_of(VariantConfig({"A": 5.0, "L": 0.5}, five))
    assert cached_components(adapter, "S") == (("desc", "sub", "sub+desc"), ("desc", "sub", "sub+desc", "sub+desc+sol"))
    assert ticket_cost(adapter) == (4, 5)       # SOL alone is read by no level: never encoded
    assert ticket_cost(metric_of(VariantConfig({"A": 5.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}))) == (1, 1)
    tower = metric_of(VariantConfig({"F": 1.0, "S": 0.5, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}))
    assert cached_components(tower, "S") == (("sub+desc",), ("sub+desc+sol",)) and ticket_cost(tower) == (2, 2)
    assert cached_components(metric_of(VariantConfig({"F": 1.0}, {"sub-sub": 1.0})), "S") == ((), ())


def test_verdict_reads_significance_and_sign():
    up, flat, down = ({"mean_difference": d, "p": p} for d, p in ((0.03, 0.01), (0.03, 0.2), (-0.02, 0.01)))
    assert verdict({OWN: up, LAY: flat}) is None
    assert verdict({OWN: up, LAY: {"mean_difference": -0.02, "p": 0.2}}) is None     # a loss, not a significant one
    assert verdict({OWN: flat}).startswith("not above")
    assert verdict({OWN: up, CROSS_PART: down}).startswith("below the reference under cross-part")
    assert verdict({OWN: down}).startswith("not above")


@pytest.mark.slow    # trains 3 models (6 for select) on 2 busy cores: 10-30 s
def test_select_scores_each_configuration_under_every_shift_beside_cv(data):
    from dataclasses import replace

    from tqdm import tqdm

    problem = replace(data, params=replace(data.params, siamese=replace(data.params.siamese,
                                                                        variants={"tiny": TINY, "order": ORDER_ONLY})))
    train = sorted(problem.pairs.filter(pl.col("split") == "train")["query_id"].unique())
    shifts = shift_module.Shifts(True, later_year(problem), {"part1": set(train[::2]), "part2": set(train[1::2])})
    assert shifts.names == (LAY, LATER_YEAR, CROSS_PART)
    with torch_threads(1), tqdm(disable=True) as bar:
        results = {name: select_run.trained(problem, name, 3, [0], 1, 1, bar, shifts) for name in ("tiny", "order")}
    lay = set(problem.pairs.filter(pl.col("split") == LAY)["query_id"])
    for figures in results.values():
        assert set(figures["shifts"]) == {LAY, LATER_YEAR, CROSS_PART} and figures["cv_map"]["values"]
        assert set(figures["shifts"][LAY]["query_ap"]) == lay and not lay & set(figures["query_ap"])
        assert set(figures["shifts"][LATER_YEAR]["query_ap"]) == set(figures["query_ap"])
        assert set(figures["shifts"][CROSS_PART]["query_ap"]) == set(train)
    # the source order alone, withheld: every candidate alike
    assert results["order"]["shifts"][LATER_YEAR]["map"]["mean"] != results["order"]["cv_map"]["mean"]
    judgement = select_report.judged(results, ["tiny", "order"], "order", "tiny", 200)
    assert set(judgement["against_reference"]["tiny"]) == {OWN, LAY, LATER_YEAR, CROSS_PART}
    report = SelectReport(command="", queries=0, folds=3, seeds=[0], cv_seeds=[0], epochs=1, compared=2, decides="rerank",
                          configurations=results, tests=[], judgement=judgement, dataset="tiny", workspace=None, seconds=0.0)
    assert "| tiny |" in select_render.markdown(report) and "later-year MAP" in select_render.markdown(report)


def test_the_cross_dataset_shift_scores_another_datasets_train_and_dev_queries_with_each_seeds_model(data):
    """Another corpus (other tickets and queries; the generator's ids repeat), its own channel scales: each seed's model
    of `data` scores every train + dev query there; the reference is scored there alike, so the rule reads it."""
    from dataclasses import replace

    from test_tune import make_params
    from tqdm import tqdm

    corpus, tokens = tiny_corpus(n_tickets=40, n_labeled_queries=20, seed=7)
    table = lambda words: np.random.default_rng(2).normal(size=(len(words), 12))  # noqa: E731
    other = training_inputs(make_params(Path("unused")), tokens, [random_channel("E", corpus, 3)], table, 4, [TINY], corpus)
    problem = replace(data, params=replace(data.params, siamese=replace(data.params.siamese,
                                                                        variants={"tiny": TINY, "order": ORDER_ONLY})))
    shifts = shift_module.Shifts(False, None, {}, other)
    assert shifts.names == (CROSS_DATASET,)
    with torch_threads(1), tqdm(disable=True) as bar:
        results = {name: select_run.trained(problem, name, 3, [0, 1], 1, 1, bar, shifts) for name in ("tiny", "order")}
    scored = set(other.pairs.filter(pl.col("split").is_in(CHOICE_SPLITS))["query_id"])
    for figures in results.values():
        assert set(figures["shifts"][CROSS_DATASET]["query_ap"]) == scored
        assert len(figures["shifts"][CROSS_DATASET]["map"]["values"]) == 2     # one run per seed
    judgement = select_report.judged(results, ["tiny", "order"], "order", "tiny", 200)
    assert CROSS_DATASET in judgement["against_reference"]["tiny"]


def test_a_row_reports_its_lay_and_later_year_figures_beside_dev(data, tmp_path):
    from dataclasses import replace

    from ticketsim.config import DatasetConfig
    from ticketsim.evaluate.report import run_figures
    from ticketsim.training.siamese_rows import Row, train_row

    threaded = replace(data, params=replace(data.params, datasets={"tiny": DatasetConfig("tiny", "semeval2016", "unused")}))
    with torch_threads(1):
        done = train_row(threaded, Row("x", ORDER_ONLY, "tiny", tmp_path / "x", tmp_path / "plots", 0))
    figures = run_figures(done.results, "#x")
    assert set(figures) == {"dev", LAY, "dev-later-year", "lay-later-year", "training"}
    assert figures["dev-later-year"]["rerank"]["map"] != figures["dev"]["rerank"]["map"]   # R withheld
