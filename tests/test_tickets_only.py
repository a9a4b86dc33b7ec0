"""Day one: a dataset of tickets and no labelled pair (`labels: false`) runs `dvc repro` to a registered, indexed,
searchable model of siamese.unlabelled; the stages that need labels skip it, each saying so.

The quick start of docs/helpdesk-data.md runs here as written, on a ServiceNow-shaped export of synthetic tickets
placed where the command points, in a throwaway clone; and on a knowledge base of one ticket and of five, with the
default params a help desk runs it with."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import clone, small_params
from export_shapes import write_export
from test_docs_commands import COMMANDS, RUN_HERE, shell, shown_commands

from ticketsim.config import ConfigError, DatasetConfig, SiameseParams, SyntheticConfig, VariantConfig, load_params
from ticketsim.data.manifest import MissingSource, manifest
from ticketsim.data.sources import read_dataset
from ticketsim.data.synthetic import generate
from ticketsim.data.validate import IntakeReport
from ticketsim.lifecycle.retrain import RetrainError, run_gate
from ticketsim.stage import Stage

QUICK_START = (
    "dvc exp run -S '+datasets.mydesk={source: csv, raw: exports/mydesk, columns: servicenow, labels: false}' register@mydesk",
    'ticketsim search --model models/mydesk/bundle --index models/mydesk/index --subject "vpn keeps disconnecting"',
)
VALIDATE = "ticketsim validate --csv exports/mydesk --columns servicenow --tickets-only"    # before them, on day one


def servicenow_export(folder: Path, n_tickets: int, seed: int = 13) -> Path:
    """Synthetic tickets as a ServiceNow incident list exports them (tickets.csv only: no labelled pair)."""
    tickets = generate(SyntheticConfig(n_tickets=n_tickets, n_labeled_queries=1, n_enduser_queries=0, n_lay_queries=0), seed).tickets
    folder.mkdir(parents=True, exist_ok=True)
    tickets.select(number="ticket_id", short_description="subject", description="description", close_notes="solution",
                   work_notes=pl.lit("")).write_csv(folder / "tickets.csv")
    return folder


def desk(raw: Path, **values) -> DatasetConfig:
    return DatasetConfig(name="mydesk", source="csv", raw=str(raw), columns="servicenow", **values)


# ------------------------------------------------------------------------------------------------ the dataset
def test_a_tickets_only_folder_reads_its_tickets_and_no_query_or_pair(tmp_path):
    raw = servicenow_export(tmp_path / "desk", 12)
    assert [p.name for p in map(Path, manifest(desk(raw, labels=False))["files"])] == ["tickets.csv"]
    corpus = read_dataset(desk(raw, labels=False), IntakeReport())
    assert (corpus.tickets.height, corpus.queries.height, corpus.pairs.height) == (12, 0, 0)


def test_labels_false_with_labelled_files_beside_the_tickets_is_refused_naming_them(tmp_path):
    raw = servicenow_export(tmp_path / "desk", 3)
    (raw / "pairs.csv").write_text("query_id,ticket_id,label\n")
    with pytest.raises(MissingSource, match=re.escape("datasets.mydesk.labels is false (tickets only), but "
                                                      f"{raw} holds pairs.csv: remove `labels: false`")):
        manifest(desk(raw, labels=False))


def test_a_folder_of_tickets_alone_without_labels_false_says_how_to_read_it(tmp_path):
    raw = servicenow_export(tmp_path / "desk", 3)
    with pytest.raises(MissingSource, match=re.escape(f"{raw} lacks queries.csv|.jsonl, pairs.csv|.jsonl") +
                       ".*set datasets.mydesk.labels: false$"):
        manifest(desk(raw))


def test_labels_false_is_for_csv_datasets_and_the_unlabelled_final_must_learn_from_no_label(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"seed": 1, "datasets": {"d": {"source": "synthetic", "labels": False}}}))
    with pytest.raises(ConfigError, match=r"datasets\.d\.labels: false is for `source: csv`"):
        load_params(tmp_path / "params.yaml")
    variants = {"A+L": VariantConfig({"A": 1.0}, {"sub-sub": 1.0}), "Szs+L": VariantConfig({"S": 1.0}, {"sub-sub": 1.0}, labels=False)}
    assert SiameseParams(variants=variants).final_of(desk(tmp_path, labels=False)) == "Szs+L"
    assert SiameseParams(variants=variants).final_of(desk(tmp_path)) == "A+L"
    with pytest.raises(ConfigError, match="siamese.unlabelled: variant 'A\\+L' learns from labelled pairs"):
        SiameseParams(variants=variants, unlabelled="A+L").final_of(desk(tmp_path, labels=False))


def test_the_gate_of_a_tickets_only_dataset_stops_saying_it_has_nothing_to_judge(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"seed": 1, "retrain": {"dataset": "mydesk"},
                                                          "datasets": {"mydesk": {"source": "csv", "raw": "r", "labels": False}}}))
    with pytest.raises(RetrainError, match="'mydesk' has no labelled pairs .* no quality figure for the gate to judge"):
        run_gate(load_params(tmp_path / "params.yaml"))


# ------------------------------------------------------------------------------------------------ the stage helper
def test_a_stage_that_needs_labels_writes_its_outputs_empty_and_says_it_skipped(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(
        {"seed": 1, "datasets": {"mydesk": {"source": "csv", "raw": "raw", "labels": False}, "labelled": {"source": "synthetic"}}}))
    stage = Stage("demo", "Stage demo.", writes=("metrics", "reports", "plots"), options={"out": "a folder"}, needs_labels=True)
    argv = ["--metrics", "m/demo.json", "--reports", "r", "--plots", "p", "--out", "o"]
    with pytest.raises(SystemExit) as stopped:
        stage.start(["mydesk", *argv])
    assert stopped.value.code == 0
    assert capsys.readouterr().out == "demo@mydesk: skipped, datasets.mydesk has no labelled pairs (labels: false)\n"
    assert json.loads((tmp_path / "m/demo.json").read_text()) == {"skipped": "datasets.mydesk has no labelled pairs (labels: false)"}
    assert all((tmp_path / name).is_dir() for name in "rpo")
    assert stage.start(["labelled", *argv]).dataset == "labelled"      # a labelled dataset runs the stage


# ------------------------------------------------------------------------------------------------ the quick start
def start_quick_start(root: Path) -> tuple[Path, subprocess.Popen]:
    """The quick start's first command, started in a clone under `root`: about two minutes of stage processes on one
    core, so conftest starts it when the session's tests are collected and the rest of the suite uses the other."""
    repo = clone(root / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    unlabelled = {params["siamese"]["unlabelled"]: params["siamese"]["variants"][params["siamese"]["unlabelled"]]}
    params = small_params(params)
    params["siamese"]["variants"] |= unlabelled      # small_params keeps the final variant and two of the paper's
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    servicenow_export(repo / "exports/mydesk", 60)
    for git in ("config user.email docs@test", "config user.name docs-test", "add -A", "commit -qm clone"):
        subprocess.run(["git", *git.split()], cwd=repo, check=True, capture_output=True)
    return repo, subprocess.Popen(QUICK_START[0], shell=True, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})


@pytest.mark.slow
@pytest.mark.starts_early.with_args(start_quick_start)   # with_args: a lone callable would be marked itself
def test_the_tickets_only_quick_start_runs_as_written_to_a_registered_searchable_model(started, tmp_path):
    shown = shown_commands()
    assert all(command in shown and shown[command].startswith("docs/helpdesk-data.md") for command in QUICK_START)
    assert all(COMMANDS[command].startswith(RUN_HERE.replace("test_docs_commands", "test_tickets_only")) for command in QUICK_START)
    repo, running = started or start_quick_start(tmp_path)
    said = running.communicate(timeout=1800)[0]
    assert running.returncode == 0, said[-6000:]
    assert "Running stage 'siamese@mydesk'" not in said      # the fast path trains no Siamese row, labels or not
    assert "tune@mydesk: datasets.mydesk has no labelled pairs: tuned/mydesk.yaml holds #Szs+L's weights" in said
    assert re.search(r"register@mydesk: ticketsim-siamese-mydesk version 1 .*no quality figures", said)
    assert json.loads((repo / "models/mydesk/bundle/manifest.json").read_text())["variant"]["labels"] is False
    assert json.loads((repo / "metrics/mydesk/final.json").read_text())["unevaluated"].startswith("datasets.mydesk")

    found = shell(QUICK_START[1].replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), repo)
    assert found.returncode == 0, found.stdout + found.stderr
    assert re.search(r"\bT\d{5}\b", found.stdout), found.stdout       # ranked tickets of the export


def start_small_bases(root: Path) -> tuple[dict[int, Path], subprocess.Popen]:
    """The quick start's first command as written, on a 1-ticket and a 5-ticket incident list without work notes (the
    shape the servicenow mapping refused), each in its own clone with the default params, one after the other in one
    process (stage processes on one core, as start_quick_start)."""
    repos = {}
    for size in (1, 5):
        repos[size] = repo = clone(root / f"repo-{size}")
        write_export(repo / "exports/mydesk", "servicenow-no-work-notes", size)
        for git in ("config user.email docs@test", "config user.name docs-test", "add -A", "commit -qm clone"):
            subprocess.run(["git", *git.split()], cwd=repo, check=True, capture_output=True)
    script = "; ".join(f"(cd {shlex.quote(str(repo))} && {QUICK_START[0]}); echo \"=== {size} tickets: exit $?\""
                       for size, repo in repos.items())
    return repos, subprocess.Popen(script, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   env={**os.environ, "DVC_NO_ANALYTICS": "1"})


@pytest.mark.slow
@pytest.mark.starts_early.with_args(start_small_bases)
def test_the_quick_start_runs_as_written_on_one_ticket_and_on_five_saying_what_it_shrank(started, tmp_path):
    assert shown_commands()[VALIDATE].startswith("docs/helpdesk-data.md")
    assert COMMANDS[VALIDATE].startswith(RUN_HERE.replace("test_docs_commands", "test_tickets_only"))
    repos, running = started or start_small_bases(tmp_path)
    said = running.communicate(timeout=1800)[0]
    parts = re.split(r"^=== (\d+) tickets: exit (\d+)$", said, flags=re.M)    # each run's output, then its size and exit
    runs = {int(size): (output, int(code)) for output, size, code in zip(parts[::3], parts[1::3], parts[2::3])}
    assert {size: code for size, (_, code) in runs.items()} == {1: 0, 5: 0}, said[-8000:]
    for size, repo in repos.items():
        checked = shell(VALIDATE.replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), repo)
        assert checked.returncode == 0 and f'"tickets": {size}' in checked.stdout, checked.stdout + checked.stderr
        training = size - size // 2        # topics holds out at most half of the tickets for its perplexity table
        assert (f"topics@mydesk: M1 and M2: no word is in topics.vocabulary.min_documents (10) of the {training} "
                "training tickets, so the vocabulary keeps every word") in runs[size][0]
        assert ("topics@mydesk: M1 and M2: no ticket held out of 1, so no held-out perplexity" in runs[size][0]) == (size == 1)
        assert re.search(r"register@mydesk: ticketsim-siamese-mydesk version 1 ", runs[size][0]), runs[size][0][-3000:]
        found = shell(QUICK_START[1].replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), repo)
        assert found.returncode == 0, found.stdout + found.stderr
        assert len(re.findall(r"^ {0,3}\d+  INC\d{7}\b", found.stdout, re.M)) == size, found.stdout
