"""Feedback cannot talk the gate into a worse model. On the retraining tests' stand-in pipeline (tests/retrain_standin.py:
a model as good as its train labels are true, which searches its pool), a champion trained on partly false labels (the
first registration: the champion at once) gets one journal of three judges, 60 new queries each, judged on its own
search: honest (the generator's true labels of its top hit and of a hit from ranks 6-10, and one judgment on a ticket
the index has and the dataset lacks), poisoned (that top hit NO, that lower hit YES) and shuffled (honest labels
permuted). `feedback export` passes the honest batch, sets its one judgment aside, and holds the other two for review;
the model trained on the honest one passes the gate on the trusted pairs, and models trained on either held batch, as if
a person had accepted it, fail there. Then `feedback review` lists, rejects and accepts. A batch that only says YES to
tickets the champion ranks low, and one too small to check, are held too. Run with -s to see the figures."""
import io
import random
import shutil
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from feedback_batches import JUDGED_AT, LABEL_NAMES, judge_batch
from retrain_standin import register_trained

from ticketsim import cli
from ticketsim.config import DatasetConfig, GateRule, SyntheticConfig, TrackingConfig, load_params
from ticketsim.data.csvsource import read_corpus, write_corpus
from ticketsim.data.feedback import Journal, Judgment, export
from ticketsim.data.intake import text_query_id
from ticketsim.data.review import review_log
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import LABELS, Corpus
from ticketsim.data.validate import DataError, IntakeReport
from ticketsim.lifecycle.feedback_check import checked_export
from ticketsim.lifecycle.promotion import FIRST, GATE_TAG, run_gate
from ticketsim.lifecycle.registry import CHAMPION, aliases, latest_version
from ticketsim.lifecycle.tracking import URI_VARIABLE
from ticketsim.lifecycle.trusted import TAG, marked_pairs

REPO = Path(__file__).resolve().parents[1]
QUERIES, MARKED = 60, 4      # new queries per judge; queries whose pairs a maintainer marks trusted
FALSE = 0.1                  # the chance that a train label of the champion's data is false
DATASET = "helpdesk"


def world(root: Path):
    """The labelled folder (train labels partly false), the truth the stand-in learns from (the generator's labels; the
    end-user queries' over the whole pool, named by their text as the journal names them) and params on a fresh store."""
    corpus = generate(SyntheticConfig(n_tickets=120, n_labeled_queries=60, n_enduser_queries=3 * QUERIES + MARKED,
                                      n_lay_queries=0), seed=13)
    labelled = corpus.pairs.filter(pl.col("split") != "test")
    flip, rng = {5: 1, 3: 1, 1: 5}, random.Random(5)
    noisy = [flip[label] if split == "train" and rng.random() < FALSE else label
             for label, split in labelled.select("label", "split").iter_rows()]
    folder = root / "labeled"
    write_corpus(Corpus(corpus.tickets, corpus.queries.filter(pl.col("query_id").is_in(labelled["query_id"].implode())),
                        labelled.with_columns(label=pl.Series(noisy, dtype=labelled["label"].dtype))), folder)
    truth = {f"{q} {t}": float(label) for q, t, label in labelled.select("query_id", "ticket_id", "label").iter_rows()}
    gold = {(q, t): label for q, t, label in corpus.split("test").select("query_id", "ticket_id", "label").iter_rows()}
    enduser = corpus.queries.filter(pl.col("query_id").is_in(corpus.split("test")["query_id"].implode()))
    for query, subject, description in enduser.iter_rows():
        truth |= {f"{text_query_id(subject, description)} {t}": float(gold.get((query, t), LABELS["NO"]))
                  for t in corpus.tickets["ticket_id"]}
    base = load_params(REPO / "params.yaml")
    params = replace(base, tracking=TrackingConfig(f"sqlite:///{root / 'mlflow.db'}", "feedback", str(root / "artifacts")),
                     datasets={DATASET: DatasetConfig(DATASET, "csv", raw=str(folder))},
                     retrain=replace(base.retrain, dataset=DATASET), siamese=replace(base.siamese, registered_model="poison"),
                     gate=replace(base.gate, metrics={"dev.rerank.map": GateRule("max", 0.01),
                                                      "dev.similarity.mse": GateRule("min", 0.05),
                                                      "dev.similarity.pearson": GateRule("max", 0.05)}))
    return corpus, enduser, gold, truth, params


def test_poisoned_and_shuffled_feedback_is_held_and_fails_the_gate_on_the_trusted_pairs_while_honest_feedback_trains(
        tmp_path, monkeypatch):
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    corpus, enduser, gold, truth, params = world(tmp_path)
    folder, fractions, model = Path(params.dataset(DATASET).raw), params.dataset(DATASET).split, "poison-helpdesk"
    marked = tmp_path / "trusted.csv"     # a maintainer's pairs: 4 queries given by their text, the generator's labels
    enduser.tail(MARKED).join(corpus.split("test"), on="query_id").select(
        "subject", "description", "ticket_id", pl.col("label").replace_strict(LABEL_NAMES, return_dtype=pl.String)).write_csv(marked)
    marked_pairs_count = pl.read_csv(marked).height
    params = replace(params, gate=replace(params.gate, trusted_pairs=str(marked)))

    v1, champion, _ = register_trained(params, DATASET, truth)     # a fresh registration: the champion, nothing to judge
    assert aliases(params.tracking, model) == {CHAMPION: v1}
    assert latest_version(params.tracking, model).tags[GATE_TAG] == FIRST and latest_version(params.tracking, model).tags[TAG]
    assert "is the champion since its registration" in run_gate(params).markdown
    print(f"\nthe champion v1: {champion.false_share:.0%} of its train labels false")

    journal = Journal(tmp_path / "feedback" / "judgments.jsonl")
    for part, (kind, via) in enumerate((("honest", "page"), ("poisoned", "api"), ("shuffled", "model"))):
        judge_batch(journal, corpus, champion, enduser.slice(part * QUERIES, QUERIES), gold, kind, via)
    index_only = {"ticket_id": "T-INDEX", "subject": "Pump seal", "description": "Seal leaks", "solution": "New seal"}
    asked = enduser.row(0, named=True)     # an honest query of the page, judged on a ticket added with `index add` alone
    assert journal.record(Judgment(asked["subject"], asked["description"], "T-INDEX", "NO", "page"), index_only,
                          JUDGED_AT).status == "recorded"
    pairs_before = read_corpus(folder, fractions, IntakeReport()).pairs.height
    checked = checked_export(params, journal.path, folder, fractions, JUDGED_AT)
    print(checked.render())
    by_judge = {batch.judge: batch for batch in checked.batches}
    honest, poisoned, shuffled = by_judge["page"], by_judge["api"], by_judge["model"]
    review = params.gate.review
    assert honest.status == "passed" and not honest.reasons
    assert honest.figures["concordance"] >= review.min_concordance and honest.figures["top_no"] <= review.max_top_no
    assert poisoned.status == "held" and poisoned.figures["top_no"] == 1.0 and poisoned.figures["concordance"] == 0.0
    assert [reason.split(":")[0] for reason in poisoned.reasons] == ["top_no", "low_yes", "concordance"]
    assert shuffled.status == "held" and shuffled.reasons
    assert checked.export.intake.added.get("queries") == QUERIES and checked.export.held_back == 4 * QUERIES
    assert [line.split(": ", 1)[1] for line in checked.export.set_aside] == [
        f"pair ({text_query_id(asked['subject'], asked['description'])}, T-INDEX): ticket 'T-INDEX' is not in the dataset"]
    assert read_corpus(folder, fractions, IntakeReport()).pairs.height == pairs_before + 2 * QUERIES

    v2, candidate, _ = register_trained(params, DATASET, truth)
    honest_gate = run_gate(params)
    print(f"trained on the honest batch ({candidate.false_share:.0%} false):\n{honest_gate.markdown}")
    assert honest_gate.promoted and aliases(params.tracking, model)[CHAMPION] == v2
    assert f"from the dev pairs frozen with {model} v1 at its promotion and {marked_pairs_count} marked trusted in {marked}" \
        in honest_gate.markdown
    assert "#### New dev pairs: shown, not deciding" in honest_gate.markdown

    for batch in (poisoned, shuffled):    # as if a person had accepted it: trained on, gated (a dry run)
        copy = tmp_path / f"accepted-{batch.judge}"
        shutil.copytree(folder, copy)
        accepted = replace(params, datasets={DATASET: replace(params.dataset(DATASET), raw=str(copy))})
        assert export(journal.path, copy, fractions, JUDGED_AT, batch.pairs.__contains__).intake.added
        version, trained, _ = register_trained(accepted, DATASET, truth)
        outcome = run_gate(accepted, record=False)
        print(f"trained on the {batch.judge} batch ({trained.false_share:.0%} false), gated on the trusted pairs:\n"
              f"{outcome.markdown}")
        assert not outcome.passed and "Decided on the trusted pairs" in outcome.markdown
        assert aliases(params.tracking, model)[CHAMPION] == v2 and GATE_TAG not in latest_version(params.tracking, model).tags

    monkeypatch.setattr("ticketsim.workflows.intake.load_params", lambda path: params)
    code, listed, _ = ticketsim("feedback", "review", "--journal", str(journal.path))
    assert code == 0 and f"batch {poisoned.number}: 120 judgment(s) by api, held" in listed
    assert "top_no: 100% of the 60 judged tickets" in listed
    assert f"batch {shuffled.number}: 120 judgment(s) by model, held" in listed and "by page" not in listed
    assert ticketsim("feedback", "review", "--journal", str(journal.path), "--reject", str(poisoned.number))[0] == 0
    code, out, _ = ticketsim("feedback", "review", "--journal", str(journal.path), "--accept", str(shuffled.number), "--dataset", DATASET)
    assert code == 0 and f"added from {journal.path}: queries {QUERIES}" in out
    code, _, err = ticketsim("feedback", "review", "--journal", str(journal.path), "--accept", str(poisoned.number), "--dataset", DATASET)
    assert code == cli.BAD_INPUT and f"batch {poisoned.number} is rejected; only a held batch is accepted or rejected" in err
    with review_log(journal.path) as log:
        assert {b.judge: b.status for b in log.batches().values()} == {"page": "passed", "api": "rejected", "model": "accepted"}
    code, again, _ = ticketsim("feedback", "export", "--journal", str(journal.path), "--dataset", DATASET)   # nothing new to check
    assert code == 0 and "checked against" not in again and "held back 120 judgment(s)" in again
    assert "already in the folder: 240" in again and "set aside 1 judgment(s)" in again     # kept for later
    assert read_corpus(folder, fractions, IntakeReport()).pairs.height == pairs_before + 4 * QUERIES


def test_a_batch_that_says_yes_only_where_the_champion_ranks_low_and_one_too_small_to_check_are_held(tmp_path, monkeypatch):
    """Against a champion fresh from its registration: one judge says YES to one ticket of ranks 6-10 for each of 60
    queries (no top hit judged, no two tickets of a query: neither top_no nor concordance can see it), another judges 4
    queries honestly (8 judgments: no figure rests on min_judged); the honest batch beside them passes."""
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    corpus, enduser, gold, truth, params = world(tmp_path)
    folder, fractions = Path(params.dataset(DATASET).raw), params.dataset(DATASET).split
    _, champion, _ = register_trained(params, DATASET, truth)
    journal = Journal(tmp_path / "feedback" / "judgments.jsonl")
    for queries, kind, via in ((enduser.head(QUERIES), "yes-low", "api"), (enduser.slice(QUERIES, QUERIES), "honest", "page"),
                               (enduser.slice(2 * QUERIES, 4), "honest", "model")):
        judge_batch(journal, corpus, champion, queries, gold, kind, via)
    checked = checked_export(params, journal.path, folder, fractions, JUDGED_AT)
    print(f"\n{checked.render()}")
    by_judge = {batch.judge: batch for batch in checked.batches}
    pushing, honest, small = by_judge["api"], by_judge["page"], by_judge["model"]
    review = params.gate.review
    assert pushing.status == "held" and [reason.split(":")[0] for reason in pushing.reasons] == ["low_yes"]
    assert (pushing.figures["top_hits"], pushing.figures["low_hits"], pushing.figures["low_yes"]) == (0, QUERIES, 1.0)
    assert f"low_yes: 100% of the {QUERIES} judged tickets the champion ranks below its top {review.top_k} hits" in pushing.reasons[0]
    assert small.status == "held" and [reason.split(":")[0] for reason in small.reasons] == ["unchecked"]
    assert "its 8 judgment(s) are too few to check against the champion" in small.reasons[0]
    assert honest.status == "passed" and honest.figures["low_yes"] <= review.max_low_yes
    assert checked.export.intake.added.get("queries") == QUERIES and checked.export.held_back == QUERIES + 8


def ticketsim(*args: str) -> tuple[int, str, str]:
    """A command's exit status, stdout and stderr (the test's own prints stay on the terminal with -s)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()

def test_pairs_a_maintainer_marks_trusted_must_name_queries_and_tickets_of_the_dataset(tmp_path):
    corpus, _, _, _, params = world(tmp_path)
    marked = tmp_path / "trusted.csv"
    query = corpus.queries["query_id"][0]
    marked.write_text(f"query_id,subject,description,ticket_id,label\n{query},,,T00001,YES\nnope,,,T00001,NO\n"
                      f",pump wet,water,T99999,REL\n{query},,,T00002,MAYBE\n")
    params = replace(params, gate=replace(params.gate, trusted_pairs=str(marked)))
    with pytest.raises(DataError) as refused:
        marked_pairs(params, read_corpus(Path(params.dataset(DATASET).raw), params.dataset(DATASET).split, IntakeReport()))
    assert refused.value.problems == [f"{marked}:3: query 'nope' is not in datasets.{DATASET} (give its subject and description)",
                                      f"{marked}:4: ticket 'T99999' is not in datasets.{DATASET}",
                                      f"{marked}:5: unknown label 'MAYBE' (YES, REL, NO)"]
