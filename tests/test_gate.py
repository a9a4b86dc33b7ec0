"""The quality gate: per-metric verdicts and their Markdown, the registry's champion/previous aliases, the first
registration made the champion, a candidate compared with a champion only, and champion and candidate scored on the
same pairs (a harder dev set must not fail an unchanged model)."""
import json
import runpy
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import mlflow
import numpy as np
import polars as pl
import pytest
import yaml
from benchmarks.common import make_bundle
from retrain_workspace import fake_version

from ticketsim import cli
from ticketsim.app.pyfunc import log_bundle
from ticketsim.bundle.evaluation import evaluate_bundle
from ticketsim.bundle.loader import Scorer
from ticketsim.config import DatasetConfig, GateRule, TrackingConfig, load_params
from ticketsim.data.csvsource import write_corpus
from ticketsim.data.tables import Corpus
from ticketsim.errors import StepError
from ticketsim.evaluate.protocols import rerank_by_query
from ticketsim.lifecycle.gate import compare
from ticketsim.lifecycle.gate_pairs import gate_pairs
from ticketsim.lifecycle.promotion import FIRST, GATE_TAG, crown_first, gate_rules, run_gate
from ticketsim.lifecycle.registry import CHAMPION, PREVIOUS, aliases, latest_version, promote, rollback, tag_version
from ticketsim.lifecycle.tracking import URI_VARIABLE, log_metrics, metric_values, stage_run
from ticketsim.lifecycle.trusted import TAG
from ticketsim.search.index import build_index, model_hash

REPO = Path(__file__).resolve().parents[1]
RULES = {"map": GateRule("max", 0.01), "mse": GateRule("min", 0.05)}


def test_verdicts_follow_direction_and_tolerance():
    result = compare({"map": 0.80, "mse": 1.00}, {"map": 0.795, "mse": 0.90}, RULES)
    assert result.passed and [r.verdict for r in result.rows] == ["worse, within tolerance 0.01", "better"]
    worse = compare({"map": 0.80, "mse": 1.00}, {"map": 0.78, "mse": 1.06}, RULES)
    assert not worse.passed and [r.passed for r in worse.rows] == [False, False]
    assert compare({"map": 0.80, "mse": 1.00}, {"map": 0.81, "mse": 1.05}, RULES).passed   # exactly the tolerance


def test_first_model_passes_and_a_missing_candidate_metric_fails():
    first = compare(None, {"map": 0.1, "mse": 3.0}, RULES)
    assert first.passed and first.first_model
    assert not compare({"map": 0.8, "mse": 1.0}, {"map": 0.9}, RULES).passed


def test_markdown_is_a_table_of_metric_champion_candidate_delta_verdict():
    text = compare({"map": 0.80, "mse": 1.00}, {"map": 0.70, "mse": 1.00}, RULES).markdown("m v2 (run b)", "m v1 (run a)")
    lines = text.splitlines()
    assert lines[0] == "### Quality gate FAILED" and "m v2 (run b) vs champion m v1 (run a)" in text
    assert "| metric | champion | candidate | delta | verdict |" in lines
    assert "| `map` | 0.8000 | 0.7000 | -0.1000 | **worse** by more than 0.01 |" in lines
    assert "| `mse` | 1.0000 | 1.0000 | +0.0000 | same |" in lines


def test_gate_params_name_the_final_variants_metrics_as_mlflow_logs_them():
    params = load_params(REPO / "params.yaml")
    assert set(gate_rules(params)) == {"dev.retrieve.mrr_at_10", "dev.retrieve.map_at_10", "dev.retrieve.ndcg_at_10",
                                       "dev.similarity.mse", "dev.similarity.pearson"}
    assert params.siamese.registered_name(params.retrain.dataset) == f"{params.siamese.registered_model}-default"


@pytest.mark.slow
def test_without_a_champion_the_candidate_is_the_first_model_whatever_the_metrics_committed_on_main(tmp_path, monkeypatch,
                                                                                                    registry):
    """A registry without a champion (registered before the first version was made one): the gate compares a candidate
    with a champion only, so it passes as the first model, not judged against `main`'s better metrics file."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=tmp_path, check=True)
    metrics = tmp_path / "metrics" / "default" / "final.json"  # the final (tuned) stage's, as registered
    metrics.parent.mkdir(parents=True)
    final = load_params(REPO / "params.yaml").siamese.final
    metrics.write_text(json.dumps({f"#{final}-tuned": {"dev": {"rerank": {"map": 0.9}}}, "training": {"epochs": 3}}))
    (tmp_path / "dvc.yaml").write_text("metrics:\n  - metrics/default/final.json\n")
    subprocess.run([*git, "add", "-A"], cwd=tmp_path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "champion metrics"], cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)
    params = registry("fallback")
    params = replace(params, gate=replace(params.gate, metrics={"dev.rerank.map": GateRule("max", 0.01)}))
    fake_version(params, 0.80)
    outcome = run_gate(params)
    assert outcome.passed and outcome.promoted and "no champion yet, so this is the first model" in outcome.markdown
    assert "| `dev.rerank.map` | – | 0.8000 | – | new (nothing to compare) |" in outcome.markdown
    assert aliases(params.tracking, params.siamese.registered_name(params.retrain.dataset)) == {CHAMPION: "1"}


# ---------------------------------------------------------------- the registry (a temporary SQLite store)

@pytest.fixture(scope="module")
def store(tmp_path_factory) -> TrackingConfig:
    root = tmp_path_factory.mktemp("registry")
    return TrackingConfig(uri=f"sqlite:///{root / 'mlflow.db'}", experiment="gate", artifact_location=str(root / "art"))


@pytest.fixture
def registry(store, monkeypatch):
    """Params on the test store, one registered model name per test."""
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    base = load_params(REPO / "params.yaml")
    return lambda model: replace(base, tracking=store, siamese=replace(base.siamese, registered_model=model))


def test_promote_and_rollback_move_the_champion_and_previous_aliases(registry):
    params = registry("aliases")
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    assert latest_version(cfg, model) is None and aliases(cfg, model) == {}
    with pytest.raises(LookupError):
        rollback(cfg, model)
    v1, v2 = fake_version(params, 0.5), fake_version(params, 0.6)
    assert latest_version(cfg, model).version == v2 and latest_version(cfg, model).metrics["dev.rerank.map"] == 0.6
    assert promote(cfg, model, v1) is None and aliases(cfg, model) == {CHAMPION: v1}
    assert promote(cfg, model, v2) == v1 and aliases(cfg, model) == {CHAMPION: v2, PREVIOUS: v1}
    assert rollback(cfg, model) == (v1, v2) and aliases(cfg, model) == {CHAMPION: v1, PREVIOUS: v2}


def test_the_first_registration_is_the_champion_and_the_next_is_judged_against_it(registry):
    params = registry("first")
    cfg, model, dataset = params.tracking, params.siamese.registered_name(params.retrain.dataset), params.retrain.dataset
    v1 = fake_version(params, 0.70)
    said = crown_first(params, dataset, v1)
    assert said.startswith(f"{model} v1 is the champion: the first version registered, nothing to compare it with (tag "
                           f"gate: first). Frozen with {model} v1 as its trusted pairs: ")
    assert aliases(cfg, model) == {CHAMPION: v1}
    assert latest_version(cfg, model).tags[GATE_TAG] == FIRST and latest_version(cfg, model).tags[TAG]
    nothing = run_gate(params)
    assert nothing.passed and nothing.result is None and "is the champion since its registration" in nothing.markdown
    v2 = fake_version(params, 0.60)
    assert crown_first(params, dataset, v2) is None and aliases(cfg, model) == {CHAMPION: v1}
    worse = run_gate(params)
    assert not worse.passed and f"vs champion {model} v1" in worse.markdown and "Decided on the trusted pairs" in worse.markdown
    assert aliases(cfg, model) == {CHAMPION: v1}


def test_the_register_stage_makes_the_first_version_the_champion_and_says_so(search_parts, store, tmp_path, capsys,
                                                                             monkeypatch):
    """stages/register.py on a tiny bundle and its index: the first version is the champion at once, said in the stage's
    output and its tags; the second is registered only, for the gate to judge."""
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    corpus = search_parts.corpus
    build_index(Scorer.load(bundle), model_hash(bundle), corpus.tickets, out=tmp_path / "index")
    folder = tmp_path / "labeled"
    write_corpus(Corpus(corpus.tickets, corpus.queries,
                        corpus.pairs.filter(pl.col("split") != "test").with_columns(split=pl.lit("dev"))), folder)
    (tmp_path / "final.json").write_text(json.dumps({"#22-tuned": {"dev": {"rerank": {"map": 0.7}}}}))
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({
        "seed": 0, "datasets": {"helpdesk": {"source": "csv", "raw": str(folder)}}, "siamese": {"registered_model": "stage"},
        "tracking": {"uri": store.uri, "experiment": store.experiment, "artifact_location": store.artifact_location}}))
    shutil.copy2(REPO / "params-research.yaml", tmp_path)     # the variants siamese.final names
    argv = ["stages/register.py", "helpdesk", "--bundle", str(bundle), "--index", str(tmp_path / "index"),
            "--results", str(tmp_path / "final.json"), "--params", str(tmp_path / "params.yaml")]
    said = []
    for _ in range(2):
        monkeypatch.setattr(sys, "argv", argv)
        runpy.run_path(str(REPO / "stages" / "register.py"), run_name="__main__")
        said.append(capsys.readouterr().out)
    dev = corpus.pairs.filter(pl.col("split") != "test")
    assert ("register@helpdesk: stage-helpdesk v1 is the champion: the first version registered, nothing to compare it "
            f"with (tag gate: first). Frozen with stage-helpdesk v1 as its trusted pairs: {dev.height} dev pairs") in said[0]
    assert "register@helpdesk: stage-helpdesk version 2 (run " in said[1] and "champion" not in said[1]
    assert aliases(store, "stage-helpdesk") == {CHAMPION: "1"}
    first = mlflow.MlflowClient(store.uri, store.uri).get_model_version("stage-helpdesk", "1").tags
    assert first[GATE_TAG] == FIRST and first[TAG]


def test_gate_promotes_a_better_version_keeps_the_champion_against_a_worse_one_and_judges_once(registry, capsys):
    params = registry("gate")
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    v1 = fake_version(params, 0.70)
    first = run_gate(params)
    assert first.passed and first.promoted and "first model" in first.markdown and aliases(cfg, model) == {CHAMPION: v1}
    v2 = fake_version(params, 0.75)
    assert run_gate(params).promoted and aliases(cfg, model) == {CHAMPION: v2, PREVIOUS: v1}
    v3 = fake_version(params, 0.60)
    worse = run_gate(params)
    assert not worse.passed and not worse.promoted and aliases(cfg, model)[CHAMPION] == v2
    assert latest_version(cfg, model).tags == {"gate": "failed"} and latest_version(cfg, model).version == v3
    again = run_gate(params)
    assert not again.passed and again.result is None and "judged before (gate: failed)" in again.markdown
    assert run_gate(params, version=v3, record=False).passed is False   # judged again on request


def test_cli_gate_prints_the_table_and_writes_the_summary_and_outputs(registry, tmp_path, capsys, monkeypatch):
    params = registry("cli")
    monkeypatch.setattr("ticketsim.workflows.gate.load_params", lambda path: params)
    fake_version(params, 0.7)
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs.txt"
    assert cli.main(["gate", "--summary", str(summary), "--outputs", str(outputs)]) == 0
    printed = capsys.readouterr().out
    assert "| metric | champion | candidate | delta | verdict |" in printed and "promoted cli-default v1 to champion" in printed
    assert summary.read_text().startswith("### Quality gate passed")
    assert "model_version=1\n" in outputs.read_text() and "gate=passed\n" in outputs.read_text()
    fake_version(params, 0.1)
    assert cli.main(["gate"]) == cli.FAILED
    assert cli.main(["rollback"]) == cli.ERROR   # nothing before the first champion


def test_a_dry_run_writes_nothing_to_the_registry_so_the_next_gate_judges_and_promotes(registry, capsys, monkeypatch):
    params = registry("dry-run")
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    monkeypatch.setattr("ticketsim.workflows.gate.load_params", lambda path: params)
    for figure in (0.7, 0.8):     # the first model, then a better one against that champion
        version = fake_version(params, figure)
        before = aliases(cfg, model)
        assert cli.main(["gate", "--dry-run"]) == 0
        assert "Dry run: nothing was written to the registry" in capsys.readouterr().out
        assert aliases(cfg, model) == before and latest_version(cfg, model).tags == {}
        assert cli.main(["gate"]) == 0 and f"promoted {model} v{version} to champion" in capsys.readouterr().out
        assert aliases(cfg, model)[CHAMPION] == version and latest_version(cfg, model).tags[GATE_TAG] == "passed"


def test_a_promotion_freezes_the_dev_pairs_with_the_champion_and_the_gate_refuses_them_altered(registry):
    params = registry("frozen")
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    fake_version(params, 0.7)
    first, dev = run_gate(params), gate_pairs(params)
    assert first.promoted and f"Frozen with {model} v1 as its trusted pairs: {dev.describe()}" in first.markdown
    fake_version(params, 0.8)
    frozen = f"{dev.corpus.pairs.height} dev pairs of {dev.corpus.queries.height} queries from the dev pairs frozen with {model} v1"
    assert frozen in run_gate(params, record=False).markdown
    tag_version(cfg, model, "1", {TAG: "0" * 64})     # the file is no longer what was frozen
    with pytest.raises(StepError, match=f"{model} v1: its trusted pairs .* are not the ones frozen at its promotion"):
        run_gate(params)


def test_champion_and_candidate_are_scored_on_the_candidates_dev_pairs_where_their_stored_figures_would_mislead(
        registry, search_parts, tmp_path):
    """A retrain that changed nothing in the model, while new hard queries joined the dev set: the champion's stored
    figures (its easy dev set) are above the candidate's (easy + hard), so comparing them fails an unchanged model.
    Scored in the gate's run on the candidate's dev pairs, the two are the same model and the gate passes."""
    bundle = make_bundle(tmp_path / "bundle", search_parts, "22")
    tickets, queries = search_parts.corpus.tickets, search_parts.corpus.queries
    labelled = search_parts.corpus.pairs.filter(pl.col("split") != "test").with_columns(split=pl.lit("dev"))
    evaluation = load_params(REPO / "params.yaml").evaluation
    _, scored = evaluate_bundle(bundle, Corpus(tickets, queries, labelled), evaluation)
    by_query = rerank_by_query(scored, evaluation.depth)
    easy = by_query.filter(pl.col("ap") == 1.0)["query_id"].to_list()
    assert 0 < len(easy) < by_query.height, "the premise: some dev queries this model ranks perfectly, some it does not"

    def stored(pairs: pl.DataFrame) -> dict:   # what the register stage logs: the model on its own run's dev set
        return evaluate_bundle(bundle, Corpus(tickets, queries, pairs), evaluation)[0]

    old_dev, new_dev = stored(labelled.filter(pl.col("query_id").is_in(easy))), stored(labelled)
    folder = tmp_path / "labeled"
    write_corpus(Corpus(tickets, queries, labelled), folder)   # the candidate's dataset: the old dev set and the new
    params = registry("same-pairs")
    params = replace(params, datasets={"helpdesk": DatasetConfig("helpdesk", "csv", raw=str(folder))},
                     retrain=replace(params.retrain, dataset="helpdesk"))
    rules, model = gate_rules(params), params.siamese.registered_name(params.retrain.dataset)
    assert not compare(metric_values(old_dev), metric_values(new_dev), rules).passed   # the stored figures mislead

    versions = []
    for figures in (old_dev, new_dev):
        with stage_run(params.tracking, "register", "helpdesk"):
            log_metrics(figures)
            versions.append(log_bundle(str(bundle), model))
    promote(params.tracking, model, versions[0])
    said = []
    outcome = run_gate(params, say=said.append)
    assert outcome.passed and outcome.promoted and aliases(params.tracking, model)[CHAMPION] == versions[1]
    rescored = metric_values(new_dev)   # both, in the gate's run: the candidate's dev pairs
    for row in outcome.result.rows:
        assert row.champion == pytest.approx(rescored[row.metric]) and row.candidate == pytest.approx(rescored[row.metric])
        assert row.verdict == "same", row
    which = (f"Both scored in this run on the same pairs: {labelled.height} dev pairs of {by_query.height} queries from "
             f"{folder / 'pairs.csv'}, {tickets.height} tickets in the pool.")
    [scoring] = said    # the step said before its minutes, by the workflow's `say`
    assert which in outcome.markdown and scoring.startswith("==> scoring ") and scoring.endswith(
        f" on {which.split(':')[1].strip().rstrip('.')}")


def test_a_champion_whose_model_cannot_be_loaded_stops_the_gate_with_its_name(registry):
    """Scoring on the same pairs needs both models: a version registered without one is named, not judged by figures."""
    params = registry("no-model")
    cfg, model = params.tracking, params.siamese.registered_name(params.retrain.dataset)
    with stage_run(cfg, "register", params.retrain.dataset) as run:
        log_metrics({"dev": {"rerank": {"map": 0.9}}})
    store = mlflow.MlflowClient(cfg.uri, cfg.uri)
    store.create_registered_model(model)
    store.create_model_version(model, source=f"{run.info.artifact_uri}/model", run_id=run.info.run_id)   # no model there
    promote(cfg, model, "1")
    fake_version(params, 0.8)
    with pytest.raises(StepError, match=f"{model} v1: its model could not be loaded from the registry"):
        run_gate(params)
    assert latest_version(cfg, model).tags == {}     # not judged


def test_channel_s_comes_from_the_stages_cache_only_when_it_holds_the_texts_and_the_model_has_its_sentence_params(
        search_parts, tmp_path, monkeypatch):
    """The gate's shortcut: the sentence_encoder stage's S instead of encoding every ticket once per model. Taken, it
    gives the figures the model computes itself; with other `sentence` params, or texts it lacks, it is not taken."""
    from ticketsim.app.pyfunc import TicketSimModel
    from ticketsim.channels.cache import ChannelVectors
    from ticketsim.channels.sentence import sentence_channel
    from ticketsim.lifecycle.gate_pairs import cached_sentences

    model = TicketSimModel()
    model.bundle = str(make_bundle(tmp_path / "bundle", search_parts, "AL"))   # A over S: reads channel S
    corpus = search_parts.corpus
    gate = Corpus(corpus.tickets, corpus.queries, corpus.pairs.filter(pl.col("split") != "test").with_columns(split=pl.lit("dev")))
    evaluation, sentence = load_params(REPO / "params.yaml").evaluation, model.scorer.sentence
    encoded = model.evaluate(gate, evaluation)
    s, _ = sentence_channel(corpus, sentence, False, model.scorer.sentence_encoder)
    assert metric_values(model.evaluate(gate, evaluation, (s,), sentence)) == pytest.approx(metric_values(encoded))
    noise = np.random.default_rng(0)
    wrong = ChannelVectors("S", s.query_ids, s.ticket_ids, {c: noise.normal(size=a.shape) for c, a in s.queries.items()},
                           {c: noise.normal(size=a.shape) for c, a in s.tickets.items()})
    assert metric_values(model.evaluate(gate, evaluation, (wrong,), sentence)) != metric_values(encoded)   # taken
    other = replace(sentence, max_tokens=sentence.max_tokens + 1)
    assert metric_values(model.evaluate(gate, evaluation, (wrong,), other)) == pytest.approx(metric_values(encoded))

    monkeypatch.chdir(tmp_path)
    assert cached_sentences(gate, "helpdesk") == ()          # no stage output yet
    s.save(tmp_path / "data/helpdesk/channels/S.npz")
    assert cached_sentences(gate, "helpdesk")[0].ticket_ids == s.ticket_ids
    extra = Corpus(gate.tickets, pl.concat([gate.queries, gate.queries.head(1).with_columns(query_id=pl.lit("q-new"))]), gate.pairs)
    assert cached_sentences(extra, "helpdesk") == ()          # a query the cache lacks: the models encode
