"""Channel Fq, the query tower (model/branches.py): only the query side trains, the ticket side is channel S as cached,
so the index's ticket vectors hold; its model folder keeps the query tower."""
import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
import torch
import yaml
from benchmarks.common import SENTENCE, make_bundle, train_parts
from feedback_batches import JUDGED_AT, LABEL_NAMES, judge_batch
from test_finetune import F_ONLY, SIAMESE, encoder_folder, fault_corpus  # noqa: F401 - encoder_folder: the module's fixture

import ticketsim.workflows.retrain as retrain_module
from ticketsim.app.pyfunc import log_bundle
from ticketsim.bundle.loader import Scorer
from ticketsim.bundle.manifest import BUNDLE_MANIFEST
from ticketsim.channels.sentence import load_encoder, sentence_channel, sentence_vectors
from ticketsim.config import (
    ConfigError,
    DatasetConfig,
    EncoderConfig,
    Params,
    SentenceConfig,
    SiameseParams,
    SyntheticConfig,
    TextConfig,
    TrackingConfig,
    VariantConfig,
    Workspace,
    load_params,
)
from ticketsim.data.csvsource import write_corpus
from ticketsim.data.feedback import Journal
from ticketsim.data.intake import text_query_id
from ticketsim.data.review import accept
from ticketsim.data.synthetic import generate
from ticketsim.data.tables import LABELS, QUERY_FIELDS, Corpus
from ticketsim.lifecycle.feedback_check import checked_export
from ticketsim.lifecycle.promotion import label as version_label
from ticketsim.lifecycle.promotion import run_gate
from ticketsim.lifecycle.registry import CHAMPION, ModelVersion, aliases, load_version, promote, version_by_alias
from ticketsim.lifecycle.tracking import URI_VARIABLE, stage_run
from ticketsim.lifecycle.trusted import freeze
from ticketsim.model.branches import BranchStart, query_tower_refusal
from ticketsim.model.inputs import build_inputs
from ticketsim.model.saved import ENCODER, build_model, load_model, save_model
from ticketsim.model.scores import side_channels
from ticketsim.scoring.weights import metric_of
from ticketsim.search.index import IndexMismatch, TicketIndex, build_index, model_hash, reuse_index
from ticketsim.search.queries import ExportedQueries, query_encoder
from ticketsim.search.searcher import Searcher
from ticketsim.search.segments import TICKETS, VECTORS
from ticketsim.text.tokenize import make_tokenizer, tokenize_corpus
from ticketsim.training.query_tower import retrain_query_tower
from ticketsim.training.variant import branch_start, fit_variant
from ticketsim.workflows.retrain import retrain

FQ = replace(F_ONLY, channels={"Fq": 1.0}, train={**F_ONLY.train, "epochs": 1})
NEEDS_Q, NEEDS_T = {"Fq": ("sub+desc",)}, {"Fq": ("sub+desc+sol",)}
REPO = Path(__file__).resolve().parents[1]
PARTS = SyntheticConfig(n_tickets=80, n_labeled_queries=10, pairs_per_query=3, n_enduser_queries=10)   # train_parts' corpus


def test_the_query_tower_trains_the_query_side_and_its_ticket_side_is_s_as_cached(encoder_folder, tmp_path):  # noqa: F811
    corpus = fault_corpus()
    tokens = tokenize_corpus(corpus, make_tokenizer(TextConfig(), corpus), progress=False)
    encoder = load_encoder(str(encoder_folder))
    s, _ = sentence_vectors(corpus, encoder, overlap=4, progress=False)
    inputs = build_inputs(tokens, [s], metric_of(FQ), 8, corpus=corpus)
    torch.manual_seed(0)
    model = build_model(SIAMESE, np.zeros((len(inputs.words), 6), np.float32), 2, FQ,
                        BranchStart(encoder.model, EncoderConfig(max_tokens=16, frozen_layers=0), 1.0, 16))
    queries = side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"]
    fit_variant(model, inputs, corpus.pairs, FQ, SIAMESE, seed=0)
    tickets = side_channels(model, inputs.tickets, NEEDS_T, tickets=True)["Fq"]["sub+desc+sol"]
    assert torch.equal(tickets, torch.from_numpy(s.tickets["sub+desc+sol"]).double())    # S's vectors, as the index holds
    assert not torch.allclose(side_channels(model, inputs.queries, NEEDS_Q)["Fq"]["sub+desc"], queries, atol=1e-4)

    save_model(model, FQ, tmp_path)
    loaded = load_model(tmp_path, FQ, EncoderConfig(max_tokens=16, frozen_layers=0), {"S": 1.0})
    texts = list(corpus.queries["subject"])
    assert not np.allclose(load_encoder(str(tmp_path / ENCODER)).model.encode(texts), encoder.model.encode(texts), atol=1e-4)
    for needs, side in ((NEEDS_T, inputs.tickets), (NEEDS_Q, inputs.queries)):
        is_tickets = side is inputs.tickets
        assert torch.allclose(side_channels(loaded, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]],
                              side_channels(model, side, needs, tickets=is_tickets)["Fq"][needs["Fq"][0]], atol=1e-6)


def test_a_query_tower_refuses_another_encoder_than_s():
    """Fq's ticket side is S's cache: a query tower started from another encoder would compare two vector spaces."""
    siamese = SiameseParams(encoder=EncoderConfig(model="other-encoder"))
    with pytest.raises(ConfigError, match="siamese.encoder.model: other-encoder is not sentence.model"):
        branch_start([FQ], siamese, SentenceConfig(), SimpleNamespace(dim=384), 1.0)


ROW = VariantConfig({"Fq": 1.0, "L": 0.5}, {"sub+desc-sub+desc+sol": 1.0}, learn=True, loss="pairwise",
                    train={"optimizer": "adamw", "lr": 3e-3, "epochs": 1, "batch_size": 8})


def road_params(parts_seed: int = 3) -> Params:
    """Params whose default dataset is the search bundles' corpus (benchmarks/common.py: train_parts' synthetic one)."""
    return Params(seed=parts_seed, datasets={"default": DatasetConfig("default", "synthetic")}, synthetic=PARTS,
                  siamese=SiameseParams(finetuned={"Fq+L": ROW}))


@pytest.fixture(scope="module")
def champion(tmp_path_factory):
    """A registered Fq+L model's bundle and index, as the register stage leaves them."""
    root = tmp_path_factory.mktemp("champion")
    parts = train_parts(root / "parts", n_tickets=PARTS.n_tickets, n_enduser=PARTS.n_enduser_queries)
    bundle = make_bundle(root / "bundle", parts, "FqL")
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets, out=root / "index")
    return bundle, root / "index", parts


def rankings(bundle: Path, index: Path, queries) -> list[tuple[str, ...]]:
    answers = Searcher(query_encoder(bundle), TicketIndex.load(index), bundle).search(queries, k=10)
    return [tuple(hit.ticket_id for hit in answer.hits) for answer in answers]


@pytest.mark.slow    # the champion's parts and index: a minute and a half on 2 busy cores, the road itself under one
def test_the_query_tower_road_keeps_the_index_vectors_byte_for_byte_and_changes_the_ranking(champion, tmp_path):
    bundle, index, parts = champion
    trained = retrain_query_tower(road_params(), bundle, index, tmp_path)
    [before], [after] = TicketIndex.load(index).segments, TicketIndex.load(trained.index).segments
    assert (after.folder / VECTORS).read_bytes() == (before.folder / VECTORS).read_bytes()
    assert (after.folder / TICKETS).read_bytes() == (before.folder / TICKETS).read_bytes()
    assert trained.variant.weighed == {"Fq", "L"} and not trained.variant.learn and "dev" in trained.results
    # the new tower's query export, which the rankings below search by: the champion's (none here) is of the old tower
    assert trained.torch_query is None and isinstance(query_encoder(trained.bundle), ExportedQueries)
    queries = parts.corpus.queries.head(8)
    assert rankings(trained.bundle, trained.index, queries) != rankings(bundle, index, queries)
    with pytest.raises(IndexMismatch):      # the champion's index names the champion: the new bundle is refused there
        rankings(trained.bundle, index, queries)


@pytest.mark.slow
def test_an_index_flattened_by_another_ticket_side_is_never_reused(champion, tmp_path):
    bundle, index, parts = champion
    other = make_bundle(tmp_path / "other", parts, "FqL", seed=1)     # another ticket encoder (S)
    with pytest.raises(IndexMismatch, match="otherwise than the model that built it"):
        reuse_index(index, Scorer.load(other), other, tmp_path / "index")
    assert query_tower_refusal({"A", "L"}) == "it weighs no query tower (channel Fq)"
    assert "full road" in query_tower_refusal({"F", "L"})       # F's ticket side trains: its index is encoded again
    assert "A" in query_tower_refusal({"Fq", "A", "L"}) and query_tower_refusal({"Fq", "L", "R"}) is None


def test_retrain_takes_the_query_tower_road_for_a_champion_with_fq_and_the_full_road_otherwise(monkeypatch, tmp_path):
    """The road chosen, with the registry, DVC and the query-tower road stood in for: --full, no champion or one without Fq
    run `dvc repro` of retrain.targets, which rebuilds the index (register's deps hold the index stage's folder);
    a champion with Fq goes to the query-tower road with its bundle and index, and nothing is reproduced or pushed."""
    calls, roads = [], []
    monkeypatch.setattr(retrain_module, "check_reachable", lambda cfg: None)
    monkeypatch.setattr(retrain_module, "dvc_remote", lambda: "local")
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: calls.append(args[0]))
    monkeypatch.setattr(retrain_module, "run_gate", lambda params, **options: SimpleNamespace(promoted=True))
    bundles = {}
    for name, channels in (("Fq+L", {"Fq": 1.0, "L": 0.5}), ("F+L", {"F": 1.0, "L": 0.5}), ("A+L", {"A": 1.0, "L": 0.5})):
        (tmp_path / name).mkdir()
        (tmp_path / name / BUNDLE_MANIFEST).write_text(json.dumps({"variant": {"channels": channels}}))
        bundles[name] = SimpleNamespace(bundle=str(tmp_path / name), index=str(tmp_path / "index"))
    monkeypatch.setattr(retrain_module, "load_version", lambda cfg, version, scratch, why: bundles[version.version])
    monkeypatch.setattr(retrain_module, "register_query_tower", lambda params, bundle, index: roads.append((bundle.name, index.name)))
    params = road_params()
    for champion, full, expected_calls, expected_roads in (
            ("Fq+L", True, ["pull", "repro", "push"], []),        # --full
            (None, False, ["pull", "repro", "push"], []),         # no champion yet
            ("A+L", False, ["pull", "repro", "push"], []),        # no query tower
            ("F+L", False, ["pull", "repro", "push"], []),        # both towers trained: the index is encoded again
            ("Fq+L", False, ["pull"], [("Fq+L", "index")])):
        calls.clear(), roads.clear()
        version = ModelVersion("m", champion, "run", {}, {}) if champion else None
        monkeypatch.setattr(retrain_module, "version_by_alias", lambda cfg, model, alias, v=version: v)
        retrain(params, full)
        assert (calls, roads) == (expected_calls, expected_roads), champion
    register = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["register"]["do"]
    assert "${ws.models}/${key}/${ws.index}" in register["deps"] and params.retrain.targets == ("register@default",)


@pytest.mark.slow    # two models registered, loaded and scored by the gate: minutes on 2 busy cores
def test_ticketsim_retrain_registers_the_query_tower_on_the_champions_index_and_gates_it(champion, tmp_path, monkeypatch,
                                                                                          capsys):
    """The default road end to end against a real MLflow registry (DVC stood in for: nothing of it runs on this road):
    the champion's bundle and index are fetched, its query tower trained, the new version registered with an index
    whose vectors are the champion's bytes, and gated against the champion."""
    bundle, index, _ = champion
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(retrain_module, "dvc_remote", lambda: None)
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: pytest.fail(f"dvc {' '.join(args)} ran on the query-tower road"))
    params = replace(road_params(), tracking=TrackingConfig(f"sqlite:///{tmp_path / 'mlflow.db'}", "t", str(tmp_path / "art")))
    name = params.siamese.registered_name("default")
    with stage_run(params.tracking, "register", "default"):
        promote(params.tracking, name, log_bundle(str(bundle), name, str(index)))
    outcome = retrain(params)
    assert outcome.candidate.version == "2" and outcome.result is not None, outcome.markdown
    assert "==> the query-tower road" in capsys.readouterr().out
    new = load_version(params.tracking, outcome.candidate, tmp_path / "v2", "in the test")
    [kept], [built] = TicketIndex.load(new.index).segments, TicketIndex.load(index).segments
    assert (kept.folder / VECTORS).read_bytes() == (built.folder / VECTORS).read_bytes()
    assert Scorer.load(new.bundle).variant.weighed == {"Fq", "L"}


# ---- Feedback on the real road: checked before it trains, then gated on the trusted pairs (issue 47) -------------------
FEEDBACK_QUERIES, MARKED_QUERIES, LABELLED = 60, 60, 40   # new queries per judge; a maintainer's fully judged ones; the folder's


def feedback_world(root: Path, parts) -> tuple[Corpus, pl.DataFrame, dict, Path, Path]:
    """The generator's corpus of the champion's tickets with more queries: a labelled folder (its LABELLED train and
    dev queries), the end-user queries with their gold over the whole pool (distinct texts: the journal names a query by
    its text), the truth of every (query, ticket) pair (gold YES/REL, the rest NO) and a maintainer's trusted pairs: the
    last MARKED_QUERIES end-user queries judged against every ticket. (corpus, end-user queries, truth, folder, marked)"""
    corpus = generate(replace(PARTS, n_labeled_queries=LABELLED, n_enduser_queries=3 * FEEDBACK_QUERIES + MARKED_QUERIES + 20,
                              n_lay_queries=0), seed=3)
    assert corpus.tickets.equals(parts.corpus.tickets), "the folder's tickets are those the champion's index holds"
    labelled = corpus.pairs.filter(pl.col("split") != "test")
    folder = root / "labeled"
    write_corpus(Corpus(corpus.tickets, corpus.queries.filter(pl.col("query_id").is_in(labelled["query_id"].implode())),
                        labelled), folder)
    gold = corpus.split("test")
    enduser = (corpus.queries.filter(pl.col("query_id").is_in(gold["query_id"].implode()))
               .unique(["subject", "description"], keep="first", maintain_order=True))
    assert enduser.height >= 3 * FEEDBACK_QUERIES + MARKED_QUERIES
    truth = {(q, t): label for q, t, label in gold.select("query_id", "ticket_id", "label").iter_rows()}
    marked_queries = enduser.slice(3 * FEEDBACK_QUERIES, MARKED_QUERIES)
    grid, marked = marked_queries.join(corpus.tickets.select("ticket_id"), how="cross"), root / "trusted.csv"
    labels = [LABEL_NAMES[truth.get(pair, LABELS["NO"])] for pair in grid.select("query_id", "ticket_id").iter_rows()]
    grid.with_columns(label=pl.Series(labels, dtype=pl.String)).select("subject", "description", "ticket_id", "label").write_csv(marked)
    return corpus, enduser.head(3 * FEEDBACK_QUERIES), truth, folder, marked


def gate_figures(markdown: str) -> str:
    """The gate's verdict, its basis and its tables, for -s."""
    return "\n".join(line for line in markdown.splitlines() if line.startswith(("###", "Decided", "| `", "Both scored")))


@pytest.mark.slow    # a pretrained champion, two query-tower retrains, each gated: about a minute on 2 idle cores
def test_feedback_on_the_query_tower_road_is_checked_before_it_trains_and_gated_on_the_trusted_pairs(
        champion, tmp_path, monkeypatch):
    """Issue 47 on a real small pipeline: `ticketsim retrain`'s default road (the champion's query tower trained again
    with params.yaml's row, its index kept), the champion's tower the packaged MiniLM as pretrained (with the tiny random
    tower of the fixture's bundle over half of the top hits an honest judge sees are wrong, and the check holds that
    judge). Three judges of 60 new queries each judge the champion's own search: honest, poisoned and shuffled
    (judge_batch). `feedback export` passes the honest batch and holds the other two. The honest and the poisoned batch
    are then trained on (the poisoned one as if a person had accepted it, into a copy of the folder as it was: each
    candidate is the champion's tower trained on the same pairs plus its batch) and gated against the champion on the
    trusted pairs: the dev pairs frozen with the champion at its promotion and a maintainer's 60 queries judged against
    every ticket (gate.trusted_pairs). The frozen dev pairs alone are 14 queries of 3 pairs, where one pair swapped
    moves rerank MAP past its tolerance of 0.01; decided on them alone, the gate passed the poisoned and the shuffled
    candidate of this test and refused the honest one.

    Asserted: the check's verdicts; the poisoned candidate refused; the honest one passed and promoted. The shuffled
    batch is not trained on here: 60 queries of permuted honest labels (most of them the champion's order, as honest
    judges confirm it) and one epoch of the row left its candidate about as good as the honest one, on the trusted
    pairs within a few thousandths of MAP, on either side of the tolerance as the draw of queries went; the check is
    what keeps it from training. Neither candidate ranks better than the champion: the honest batch confirms the
    champion's order, which teaches a tower little. Run with -s to see the figures."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(URI_VARIABLE, raising=False)
    monkeypatch.setattr(retrain_module, "dvc_remote", lambda: None)
    monkeypatch.setattr(retrain_module, "dvc", lambda *args: pytest.fail(f"dvc {' '.join(args)} ran on the query-tower road"))
    _, _, parts = champion
    bundle = make_bundle(tmp_path / "bundle", parts, "FqL", tower=SENTENCE.model)
    build_index(Scorer.load(bundle), model_hash(bundle), parts.corpus.tickets, out=tmp_path / "index")
    corpus, enduser, truth, folder, marked = feedback_world(tmp_path, parts)
    defaults = load_params(REPO / "params.yaml")    # the real row (siamese.finetuned Fq+L), gate rules and review
    # channel S of every text as the sentence_encoder stage caches it, which the gate takes (lifecycle.gate_pairs) instead
    # of encoding the pool again for each version and set of pairs: the queries named as the folder and the journal name them
    asked = corpus.queries.filter(pl.col("query_id").str.starts_with("U"))    # the end-user queries, named by their text
    asked = asked.with_columns(query_id=pl.Series([text_query_id(*text) for text in asked.select(*QUERY_FIELDS).iter_rows()]))
    texts = Corpus(corpus.tickets, pl.concat([corpus.queries, asked]).unique("query_id", keep="first"), corpus.pairs.head(0))
    sentence_channel(texts, SENTENCE, progress=False)[0].save(tmp_path / Workspace("default").channel("S"))
    params = replace(defaults, seed=3, datasets={"default": DatasetConfig("default", "csv", raw=str(folder))}, sentence=SENTENCE,
                     tracking=TrackingConfig(f"sqlite:///{tmp_path / 'mlflow.db'}", "feedback", str(tmp_path / "art")),
                     retrain=replace(defaults.retrain, dataset="default"),
                     gate=replace(defaults.gate, trusted_pairs=str(marked)))
    name, fractions = params.siamese.registered_name("default"), params.dataset("default").split
    with stage_run(params.tracking, "register", "default"):
        promote(params.tracking, name, log_bundle(str(bundle), name, str(tmp_path / "index")))
    # the dev pairs frozen with the champion, as the gate freezes them when it promotes one
    assert "Frozen with" in freeze(params, version_by_alias(params.tracking, name, CHAMPION), None)

    before = tmp_path / "before"    # the folder as it was: each held batch is trained on in a copy of it
    shutil.copytree(folder, before)
    journal = Journal(tmp_path / "feedback" / "judgments.jsonl")
    ranker = load_version(params.tracking, version_by_alias(params.tracking, name, CHAMPION), tmp_path / "v1", "to judge")
    for part, (kind, via) in enumerate((("honest", "page"), ("poisoned", "api"), ("shuffled", "model"))):
        judge_batch(journal, corpus, ranker, enduser.slice(part * FEEDBACK_QUERIES, FEEDBACK_QUERIES), truth, kind, via)
    checked = checked_export(params, journal.path, folder, fractions, JUDGED_AT)
    print(f"\n{checked.render()}")
    by_judge = {batch.judge: batch for batch in checked.batches}
    honest, poisoned, shuffled = by_judge["page"], by_judge["api"], by_judge["model"]
    review = params.gate.review
    assert honest.status == "passed" and not honest.reasons
    assert honest.figures["top_no"] <= review.max_top_no and honest.figures["concordance"] >= review.min_concordance
    assert poisoned.status == "held" and poisoned.figures["top_no"] == 1.0 and poisoned.figures["concordance"] == 0.0
    assert shuffled.status == "held" and shuffled.reasons
    assert checked.export.intake.added.get("queries") == FEEDBACK_QUERIES and checked.export.held_back == 4 * FEEDBACK_QUERIES

    copy = tmp_path / "accepted-poisoned"     # accepted by a person, into a copy of the folder as it was; a dry run
    shutil.copytree(before, copy)
    done, accepted = accept(journal.path, poisoned.number, copy, fractions, JUDGED_AT)
    assert accepted is not None and done.intake.added.get("queries") == FEEDBACK_QUERIES
    trained = replace(params, datasets={"default": replace(params.dataset("default"), raw=str(copy))})
    assert retrain_module.took_query_tower_road(trained)
    verdicts = {"api": run_gate(trained, record=False), "page": retrain(params)}   # retrain: on the honest batch
    for batch, kind in ((poisoned, "poisoned"), (honest, "honest")):
        outcome = verdicts[batch.judge]
        print(f"\n{kind} batch (top_no {batch.figures['top_no']:.2f}, concordance {batch.figures['concordance']:.2f}, "
              f"{batch.status} by the check), {version_label(outcome.candidate)} trained on it:\n{gate_figures(outcome.markdown)}")
        assert "Decided on the trusted pairs" in outcome.markdown and f"{MARKED_QUERIES * corpus.tickets.height} marked trusted" \
            in outcome.markdown
    assert not verdicts["api"].passed, "the poisoned batch's candidate passed the gate"
    assert verdicts["page"].promoted and aliases(params.tracking, name)[CHAMPION] == verdicts["page"].candidate.version
