"""Day one: a dataset of tickets and no labelled pair (`labels: false`) runs `dvc repro` to a registered, indexed,
searchable model of siamese.unlabelled; the stages that need labels skip it, each saying so.

The quick start of docs/day-one.md runs here as written, with the default params a help desk runs it with, on
ServiceNow-shaped exports of one synthetic ticket and of five placed where the command points, each in a throwaway
clone."""
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import Job, clone
from export_shapes import write_export
from test_docs_commands import COMMANDS, RUN_HERE, shell, shown_commands

from ticketsim import cli
from ticketsim.config import ConfigError, DatasetConfig, SiameseParams, SyntheticConfig, VariantConfig, load_params
from ticketsim.data.source_record import MissingSource, source_record
from ticketsim.data.sources import read_dataset
from ticketsim.data.synthetic import generate
from ticketsim.data.validate import IntakeReport
from ticketsim.lifecycle.promotion import RetrainError, run_gate
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
    assert [p.name for p in map(Path, source_record(desk(raw, labels=False))["files"])] == ["tickets.csv"]
    corpus = read_dataset(desk(raw, labels=False), IntakeReport())
    assert (corpus.tickets.height, corpus.queries.height, corpus.pairs.height) == (12, 0, 0)


def test_validate_refuses_a_tickets_file_of_a_header_alone_as_index_build_does(tmp_path, capsys):
    raw = tmp_path / "desk"
    raw.mkdir()
    (raw / "tickets.csv").write_text("number,short_description,description,close_notes,work_notes\n")
    line = f"{raw / 'tickets.csv'}:1: no ticket in the file (a header alone, or nothing)"
    assert cli.main(["validate", "--csv", str(raw), "--columns", "servicenow", "--tickets-only"]) == cli.BAD_INPUT
    assert capsys.readouterr() == ("", f"1 problem(s) in the input; nothing was written:\n  {line}\n")
    assert cli.main(["index", "build", "--tickets", str(raw / "tickets.csv"), "--columns", "servicenow",
                     "--model", str(tmp_path / "no-bundle"), "--index", str(tmp_path / "index")]) == cli.BAD_INPUT
    assert line in capsys.readouterr().err and not (tmp_path / "index").exists()


def test_labels_false_with_labelled_files_beside_the_tickets_is_refused_naming_them(tmp_path):
    raw = servicenow_export(tmp_path / "desk", 3)
    (raw / "pairs.csv").write_text("query_id,ticket_id,label\n")
    with pytest.raises(MissingSource, match=re.escape("datasets.mydesk.labels is false (tickets only), but "
                                                      f"{raw} holds pairs.csv: remove `labels: false`")):
        source_record(desk(raw, labels=False))


def test_a_folder_of_tickets_alone_without_labels_false_says_how_to_read_it(tmp_path):
    raw = servicenow_export(tmp_path / "desk", 3)
    with pytest.raises(MissingSource, match=re.escape(f"{raw} lacks queries.csv|.jsonl, pairs.csv|.jsonl") +
                       ".*set datasets.mydesk.labels: false$"):
        source_record(desk(raw))


def test_labels_false_is_for_csv_datasets_and_the_unlabelled_final_must_learn_from_no_label(tmp_path):
    (tmp_path / "params.yaml").write_text(yaml.safe_dump({"seed": 1, "datasets": {"d": {"source": "synthetic", "labels": False}}}))
    with pytest.raises(ConfigError, match=r"datasets\.d\.labels: false is for `source: csv`"):
        load_params(tmp_path / "params.yaml")
    variants = {"A+L": VariantConfig({"A": 1.0}, {"sub-sub": 1.0}), "Szs+L": VariantConfig({"S": 1.0}, {"sub-sub": 1.0}, labels=False)}
    assert SiameseParams(variants=variants, final="A+L").final_of(desk(tmp_path, labels=False)) == "Szs+L"
    assert SiameseParams(variants=variants, final="A+L").final_of(desk(tmp_path)) == "A+L"
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
def start_small_bases(root: Path) -> tuple[dict[int, Path], Job]:
    """The quick start's first command as written, on a 1-ticket incident list without work notes (the shape the
    servicenow mapping refused), in a clone with the default params, in one job: stage processes on one core, so
    conftest starts it when the session's tests are collected and the rest of the suite uses the other. One ticket is
    the harshest base; a base of five through the channels: test_dayone.py, in-process."""
    repos = {}
    for size in (1,):
        repos[size] = repo = clone(root / f"repo-{size}")
        write_export(repo / "exports/mydesk", "servicenow-no-work-notes", size)
        for git in ("config user.email docs@test", "config user.name docs-test", "add -A", "commit -qm clone"):
            subprocess.run(["git", *git.split()], cwd=repo, check=True, capture_output=True)
    script = "; ".join(f"(cd {shlex.quote(str(repo))} && {QUICK_START[0]}); echo \"=== {size} tickets: exit $?\""
                       for size, repo in repos.items())
    return repos, Job.start(root, script)


@pytest.mark.slow
@pytest.mark.starts_early.with_args(start_small_bases)   # with_args: a lone callable would be marked itself
def test_the_quick_start_runs_as_written_on_one_ticket_to_a_registered_searchable_model(started, tmp_path):
    """The day-one commands as the docs show them, with the default params: each run exits 0 through the fast path
    (no Siamese row), tune hands on the unlabelled final's weights, register says it has no quality figures, topics says
    what it shrank, `validate --tickets-only` counts the tickets, and the search lists every ticket of the base."""
    shown = shown_commands()
    for command in (*QUICK_START, VALIDATE):
        assert shown[command].startswith("docs/day-one.md")
        assert COMMANDS[command].startswith(RUN_HERE.replace("test_docs_commands", "test_tickets_only"))
    repos, job = started or start_small_bases(tmp_path)
    job.wait(timeout=1800)
    said = job.log.read_text()
    parts = re.split(r"^=== (\d+) tickets: exit (\d+)$", said, flags=re.M)    # each run's output, then its size and exit
    runs = {int(size): (output, int(code)) for output, size, code in zip(parts[::3], parts[1::3], parts[2::3])}
    assert {size: code for size, (_, code) in runs.items()} == {1: 0}, said[-8000:]
    for size, repo in repos.items():
        output = runs[size][0]
        assert "Running stage 'siamese@mydesk'" not in output      # the fast path trains no Siamese row, labels or not
        assert "tune@mydesk: datasets.mydesk has no labelled pairs: tuned/mydesk.yaml holds #Szs+L's weights" in output
        assert re.search(r"register@mydesk: ticketsim-siamese-mydesk version 1 .*no quality figures", output), output[-3000:]
        assert json.loads((repo / "models/mydesk/bundle/manifest.json").read_text())["variant"]["labels"] is False
        assert json.loads((repo / "metrics/mydesk/final.json").read_text())["unevaluated"].startswith("datasets.mydesk")
        training = size - size // 2        # topics holds out at most half of the tickets for its perplexity table
        assert (f"topics@mydesk: M1 and M2: no word is in topics.vocabulary.min_documents (10) of the {training} "
                "training tickets, so the vocabulary keeps every word") in output
        assert ("topics@mydesk: M1 and M2: no ticket held out of 1, so no held-out perplexity" in output) == (size == 1)
        checked = shell(VALIDATE.replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), repo)
        assert checked.returncode == 0 and f'"tickets": {size}' in checked.stdout, checked.stdout + checked.stderr
        found = shell(QUICK_START[1].replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), repo)
        assert found.returncode == 0, found.stdout + found.stderr
        assert len(re.findall(r"^ {0,3}\d+  INC\d{7}\b", found.stdout, re.M)) == size, found.stdout
