"""A dataset's Siamese rows trained side by side: the same figures and weights as one after the other, a finished row
resumed (only evaluated again) unless its inputs changed, the results file naming its block, and a row over seeds as
the mean and spread of its seeds' figures."""
import json
import operator
from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import random_channel, tiny_corpus

from ticketsim.config import (
    DatasetConfig,
    EvaluationConfig,
    FinetuneConfig,
    Params,
    SiameseParams,
    TrainConfig,
    VariantConfig,
)
from ticketsim.evaluate.report import BLOCK, SD, SEEDS, markdown_table, table5
from ticketsim.side_by_side import side_by_side, whole_groups
from ticketsim.training.siamese_rows import Row, over_row_seeds, rows_of, train_row
from ticketsim.training.variant import TrainingInputs, training_inputs

ROWS = {"15": VariantConfig(channels={"h": 1.0}, levels={"sub-sub": 1.0}),
        "E+L": VariantConfig(channels={"h": 0.7, "E": 0.3, "L": 0.5}, levels={"sub-sub": 0.5, "desc-desc": 0.5}, learn=True)}


@pytest.fixture(scope="module")
def dataset() -> TrainingInputs:
    corpus, tokens = tiny_corpus()
    e = random_channel("E", corpus, 2)
    params = Params(seed=0, datasets={"tiny": DatasetConfig("tiny", "synthetic", "unused")}, evaluation=EvaluationConfig(seeds=(0, 1)),
                    siamese=SiameseParams(hidden=8, max_tokens=20, variants=ROWS, train=TrainConfig(epochs=3, batch_size=16)))
    table = lambda words: np.random.default_rng(1).normal(size=(len(words), 12))  # noqa: E731
    return training_inputs(params, tokens, [e], table, 4, list(ROWS.values()), corpus)


def rows_in(folder) -> list[Row]:
    return [Row(name, variant, "tiny", folder / "models" / name, folder / "plots" / name, 0) for name, variant in ROWS.items()]


def without_seconds(results: dict) -> dict:
    return {k: without_seconds(v) for k, v in results.items() if k != "seconds"} if isinstance(results, dict) else results


@pytest.mark.slow
def test_rows_trained_side_by_side_equal_rows_trained_one_after_the_other(dataset, tmp_path):
    alone = {row.name: done for row, done in side_by_side(train_row, dataset, rows_in(tmp_path / "alone"), workers=1)}
    both = {row.name: done for row, done in side_by_side(train_row, dataset, rows_in(tmp_path / "both"), workers=2)}
    assert list(alone) == list(ROWS) and sorted(both) == sorted(ROWS)
    for one, two in zip(rows_in(tmp_path / "alone"), rows_in(tmp_path / "both")):
        assert without_seconds(alone[one.name].results) == without_seconds(both[two.name].results)
        weights = [torch.load(row.out / "weights.pt", weights_only=True)["state_dict"] for row in (one, two)]
        assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert alone["15"].results["#15"]["dev"]["rerank"]["map"] > 0


def test_a_finished_row_is_only_evaluated_again_unless_its_inputs_changed(dataset, tmp_path):
    row = rows_in(tmp_path)[0]
    first = train_row(dataset, row)
    checkpoint = row.out / "checkpoint.pt"
    saved = checkpoint.stat().st_mtime_ns
    again = train_row(dataset, row)
    assert checkpoint.stat().st_mtime_ns == saved     # resumed after its last epoch: no epoch trained, nothing saved
    assert without_seconds(again.results) == without_seconds(first.results)
    other = replace(dataset, word_table=dataset.word_table * 2, digest="other word vectors")
    train_row(other, row)
    assert checkpoint.stat().st_mtime_ns != saved     # other inputs: trained again from the start


def test_each_row_names_its_results_block_and_table5_orders_by_it(dataset, tmp_path):
    row = rows_in(tmp_path)[0]
    paper = train_row(dataset, row).results
    beyond = train_row(dataset, rows_in(tmp_path)[1]).results
    assert (paper[BLOCK], beyond[BLOCK]) == ("the paper", "beyond the paper")     # L is not the paper's
    bm25 = {"bm25": paper["#15"], BLOCK: "baselines"}
    table = table5([json.loads(json.dumps(part)) for part in (beyond, bm25, paper)])
    assert list(table.results) == ["#15", "bm25", "#E+L"]
    assert table.blocks == {"#15": "the paper", "bm25": "baselines", "#E+L": "beyond the paper"}
    with pytest.raises(ValueError, match="names no 'block'"):
        table5([{"#15": paper["#15"]}])


def test_a_failing_job_raises_its_error_after_the_others():
    with pytest.raises(TypeError):     # what the jobs return on two workers: the test above
        list(side_by_side(operator.add, 10, [1, "two", 3], workers=2))


def test_the_stage_trains_the_finetuned_rows_on_the_datasets_of_finetune_datasets_only_costliest_first(tmp_path):
    finetuned = {"F": VariantConfig(channels={"F": 1.0}, levels={"sub+desc-sub+desc+sol": 1.0})}
    params = Params(seed=0, datasets={name: DatasetConfig(name, "synthetic", "unused") for name in ("tiny", "other")},
                    siamese=SiameseParams(variants={"A": VariantConfig(channels={"A": 1.0}, levels={"sub-sub": 1.0}), **ROWS},
                                          finetuned=finetuned), finetune=FinetuneConfig(datasets=("tiny",)),
                    evaluation=EvaluationConfig(seeds=(0,)))
    assert [row.name for row in rows_of(params, "tiny", tmp_path, tmp_path)] == ["F", "E+L", "15", "A"]
    assert [row.name for row in rows_of(params, "other", tmp_path, tmp_path)] == ["E+L", "15", "A"]
    assert rows_of(params, "tiny", tmp_path / "m", tmp_path / "p")[0].out == tmp_path / "m" / "F"


def test_a_row_over_two_seeds_is_the_mean_and_sd_of_its_seeds_figures_and_the_table_shows_them(dataset, tmp_path):
    rows = [row for row in rows_of(dataset.params, "tiny", tmp_path / "m", tmp_path / "p") if row.name == "15"]
    assert [(row.seed, row.out, row.plots) for row in rows] == [(0, tmp_path / "m" / "15", tmp_path / "p" / "15"),
                                                               (1, tmp_path / "m" / "15" / "seed-1", None)]
    runs, = whole_groups(side_by_side(train_row, dataset, rows, workers=1), lambda row: row.name, 2)
    row, trained = over_row_seeds(runs, (0, 1))
    results = json.loads(json.dumps(trained.results))    # as the metrics file holds it
    each = {run["seed"]: run["#15"]["dev"] for run in results[SEEDS]}
    assert row.seed == 0 and sorted(each) == [0, 1] and each[0] != each[1]     # the seeds train different models
    for protocol, measure in (("rerank", "map"), ("similarity", "mse"), ("retrieve", "acc@10")):
        values = [each[seed][protocol][measure] for seed in (0, 1)]
        assert results["#15"]["dev"][protocol][measure] == pytest.approx(np.mean(values))
        assert results[SD]["#15"]["dev"][protocol][measure] == pytest.approx(np.std(values, ddof=1))
    assert all(run["query_ap"]["dev"] for run in results[SEEDS])    # what the paired test of the claims reads
    table = table5([results])
    assert table.sd == results[SD] and [run["seed"] for run in table.seeds["#15"]] == [0, 1]
    mean, sd = results["#15"]["dev"]["similarity"]["mse"], results[SD]["#15"]["dev"]["similarity"]["mse"]
    assert f"| {mean:.3f} ± {sd:.3f} |" in markdown_table(table.results, "dev", table.blocks, table.sd)


def test_the_tables_mark_the_registered_row_and_say_what_chose_it(tmp_path):
    from ticketsim.evaluate.report import registered_note as decided
    from ticketsim.evaluate.report import write_results

    results = {"#A": {"test": {"retrieve": {"mrr@10": 0.7}}}, "#B": {"test": {"retrieve": {"mrr@10": 0.8}}}}
    note = decided("#B", "retrieve")
    write_results(results, tmp_path / "m.json", tmp_path / "reports", tmp_path / "plots", "t", "beyond the paper",
                  marked="#B", note=note)
    table = (tmp_path / "reports" / "test.md").read_text()
    assert "| **#B** (registered) | 80.00 |" in table and "| #A | 70.00 |" in table
    assert table.rstrip().endswith(note) and "CV retrieve MRR@10" in note and "`#B`" in note
    assert "CV rerank MAP" in decided("#B", "rerank")
