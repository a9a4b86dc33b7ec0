"""The commands the README and docs/*.md show in ```bash blocks: every one is run here, or listed in COMMANDS with the
test that runs it or the reason it is not run, and a doc that gains or changes a command fails until the list follows.

The SemEval switch runs as written, with the organizers' XML layout in a tiny fixture placed where the command points
(../shared/data/semeval2016-task3 beside a throwaway clone), up to `prepare@semeval`."""
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
from conftest import REPO, clone

from ticketsim.cli import main
from ticketsim.config import load_params
from ticketsim.data.tables import Corpus

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SEMEVAL_SWITCH = ("dvc exp run -S '+datasets.semeval={source: semeval2016, raw: ../shared/data/semeval2016-task3, "
                  "final: Fc+S+L-relpos}'")
RUN_HERE = "run by tests/test_docs_commands.py"
SEARCH_SCALE = "tests/test_benchmarks.py checks what it computes (a tiled index, a cold search, the page's figures) on a tiny bundle"
TICKETS_ONLY = "run by tests/test_tickets_only.py (slow tier, on a 1-ticket ServiceNow export in a clone)"
COMMANDS = {   # command as shown (continuation lines joined, trailing comment dropped) -> who runs it, or why nothing does
    "pip install torch==2.13.0 && pip install -e . && dvc repro register@default":
        "installs, then the fast path: .ci/run runs it so in a fresh virtual environment on a bare clone",
    "dvc repro": "the whole pipeline: tests/conftest.py (repro_workspace) runs it on a bare clone after register@default",
    'ticketsim search --subject "pump getting hot" -k 3':
        RUN_HERE + " (on a small bundle and index where the tutorial's dvc repro leaves them)",
    SEMEVAL_SWITCH: RUN_HERE + " (up to prepare@semeval, on a tiny XML fixture)",
    "dvc exp run -S '+datasets.semeval={source: semeval2016, raw: ../shared/data/semeval2016-task3}' register@semeval":
        "minutes on the SemEval files, which the suite has not: the switch with `final` runs here up to prepare@semeval "
        "(slow tier); a dataset without `final` registers siamese.final (tests/test_dataset_final.py)",
    SEMEVAL_SWITCH + " register@semeval": "52 minutes of fine-tuning on the SemEval files: the same switch runs here up to "
                                          "prepare@semeval (slow tier); tests/test_dataset_final.py trains a dataset's own final",
    "python -m pytest": "the suite itself: .ci/run runs it",
    "pip install torch==2.13.0 && pip install -e .": "an install: .ci/run installs so (the quick start, less its dvc repro)",
    'ticketsim search --subject "pump getting hot" --description "feed pump at 95 C since monday, bearing noise" -k 3':
        RUN_HERE + " (on a small bundle and index where the tutorial's dvc repro leaves them)",
    'ticketsim search --subject "pump getting hot" -k 3 --json':
        RUN_HERE + " (on a small bundle and index where the tutorial's dvc repro leaves them)",
    "ticketsim params --markdown params.yaml > docs/params.md": "run by tests/test_params_doc.py (the page is what it writes)",
    "ticketsim params --markdown params-research.yaml > docs/params-research.md":
        "run by tests/test_params_doc.py (the page is what it writes)",
    "ticketsim commands --markdown > docs/cli.md": "run by tests/test_cli_doc.py (the page is what it writes)",
    "python -m benchmarks.pipeline_time suite":
        "the suite with its CPU recorded: tests/test_benchmarks.py runs its suite_cpu on a pytest session of its own",
    'python -m pytest -m "not slow"': "the suite's fast tier: not run from inside the suite",
    "python -m pytest -m slow": "the suite's slow tier: not run from inside the suite",
    'pip install -e ".[test]"': "an install: .ci/run installs the test extras so",
    'pip install -e ".[cluster]"': "an install: the cluster extra's ray is in the test extra too, which .ci/run installs; "
                                   "tests/test_ray_encode.py runs a local two-worker cluster with it",
    "RAY_ADDRESS=10.0.0.5:6379 ticketsim index build --tickets tickets.csv --index my-index":
        "needs a Ray cluster and a trained bundle: tests/test_ray_encode.py encodes on a local two-worker cluster (the "
        "vectors of the local path), tests/test_search_cli.py runs `index build` and its refusal without ray",
    "uv pip install --compile-bytecode -e .": "an install: .ci/run installs so",
    "dvc metrics show": RUN_HERE + " (slow tier, on the bare-clone pipeline's outputs)",
    "cat reports/default/table5/dev.md": RUN_HERE + " (slow tier, on the bare-clone pipeline's outputs)",
    "mlflow ui --backend-store-uri sqlite:///mlflow.db":
        "a server that runs until stopped: tests/test_mlflow_ui.py opens the same UI (`mlflow server`) in chromium",
    "ticketsim validate --csv path/to/folder": RUN_HERE + " (on a folder `ticketsim export` writes)",
    "ticketsim validate default": RUN_HERE,
    "ticketsim validate --csv tests/fixtures/exports/jira --columns jira": RUN_HERE,
    "ticketsim index build --tickets tests/fixtures/exports/servicenow.csv --columns servicenow --index servicenow-index":
        "needs a trained bundle: tests/test_exports.py builds and grows an index from the same export on a small one",
    "ticketsim export --out data/labeled --set-params": RUN_HERE + " (its output as docs/retraining.md shows it)",
    "dvc add data/labeled": "tests/retrain_workspace.py (make_workspace)",
    'git add data/labeled.dvc data/.gitignore params.yaml && git commit -m "labelled data under DVC"':
        "tests/retrain_workspace.py (make_workspace)",
    "dvc push": "needs a DVC remote: tests/test_retrain.py pushes to a folder remote",
    **{f"pip install dvc-{cloud}{pad}&& dvc remote add -d storage {url}": "needs cloud credentials"
       for cloud, pad, url in (("s3", "    ", "s3://my-bucket/ticketsim"), ("gs", "    ", "gs://my-bucket/ticketsim"),
                               ("azure", " ", "azure://my-container/ticketsim"), ("ssh", "   ", "ssh://user@host/srv/ticketsim"))},
    "ticketsim pairs add new_pairs.csv [--tickets new_tickets.csv] [--queries new_queries.csv] [--dataset default]":
        "a synopsis ([options]): tests/test_intake_pairs.py runs `pairs add` with each option",
    "ticketsim retrain [--full] [--summary gate.md] [--outputs outputs.txt]":
        "a synopsis: tests/test_retrain.py, tests/test_mlflow_server.py; the road each takes: tests/test_query_tower.py",
    "ticketsim index build --model models/default/bundle --tickets tickets.csv --index my-index":
        "needs a trained bundle: tests/test_search_cli.py runs `index build` on a small one",
    "ticketsim index add new-tickets.csv [--model models/default/bundle] [--index models/default/index]":
        "a synopsis: tests/test_search_cli.py",
    "ticketsim index add --upsert changed-tickets.csv [--model models/default/bundle] [--index models/default/index]":
        "a synopsis: tests/test_index_edit.py runs `index add --upsert` on a small index",
    "ticketsim index delete --id T00517 [--id T00518 ...] [--index models/default/index]":
        "a synopsis: tests/test_index_edit.py runs `index delete --id` and greps the folder for the deleted text",
    "ticketsim index delete ids.txt [--index models/default/index]":
        "a synopsis: tests/test_index_edit.py runs `index delete` with a file of ids",
    "ticketsim index sync export.csv --dry-run [--model models/default/bundle] [--index models/default/index]":
        "a synopsis: tests/test_index_edit.py runs `index sync --dry-run` on a small index",
    "ticketsim index sync export.csv [--columns jira] [--model models/default/bundle] [--index models/default/index]":
        "a synopsis: tests/test_index_edit.py runs `index sync` twice (the second writes nothing) on a small index",
    "ticketsim index compact [--index models/default/index]":
        "a synopsis: tests/test_index_graph.py runs `index compact` (two segments joined, then one left as it is)",
    "ticketsim index rollback [--index models/default/index]":
        "a synopsis: tests/test_index_store.py runs it on each kind of damaged index",
    'ticketsim search --subject "pump getting hot" --description "feed pump at 95 C since monday, bearing noise" [-k 10] [--json]':
        "a synopsis: tests/test_search_cli.py",
    'ticketsim search --subject "pump getting hot" --where product=pump [--where site=north] [-k 10] [--json]':
        "a synopsis: tests/test_index_edit.py runs `search --where` (one and two filters) on a small index",
    "ticketsim search --queries queries.csv": "needs a trained bundle: tests/test_search_cli.py runs it on a small one",
    "MLFLOW_TRACKING_URI=sqlite:///mlflow.db mlflow models serve -m models:/ticketsim-siamese-default@champion "
    "--env-manager local -p 5001": "tests/test_search_serving.py serves the bare-clone pipeline's champion so",
    "curl -s localhost:5001/invocations -H 'Content-Type: application/json' -d '{\"dataframe_records\": [{\"subject\": "
    "\"pump getting hot\", \"description\": \"95 C since monday\"}], \"params\": {\"k\": 3}}'":
        "tests/test_search_serving.py posts the same request",
    "ticketsim serve [--host 127.0.0.1] [--port 8000] [--workers 2] [--feedback feedback/judgments.jsonl]":
        "a synopsis: tests/test_search_serving.py drives the page in chromium, tests/test_feedback_server.py on gunicorn",
    "ticketsim feedback export [--journal feedback/judgments.jsonl] [--dataset default]":
        "a synopsis: tests/test_feedback.py and test_feedback_browser.py run `feedback export`",
    "ticketsim feedback review [--journal feedback/judgments.jsonl]":
        "a synopsis: tests/test_feedback_review.py lists the batches its poisoned and shuffled judges left held",
    "ticketsim feedback review --accept 3 [--dataset default]": "tests/test_feedback_review.py accepts the shuffled batch",
    "ticketsim feedback review --reject 2": "tests/test_feedback_review.py rejects the poisoned batch",
    "TICKETSIM_FEEDBACK=feedback/judgments.jsonl TICKETSIM_FEEDBACK_TOKEN=s3cret MLFLOW_TRACKING_URI=sqlite:///mlflow.db "
    "mlflow models serve -m models:/ticketsim-siamese-default@champion --env-manager local -p 5001":
        "needs a registered champion: tests/test_feedback.py calls the served model's predict with a journal and a token",
    "curl -s localhost:5001/invocations -H 'Content-Type: application/json' -d '{\"dataframe_records\": [{\"subject\": "
    "\"pump getting hot\", \"description\": \"95 C since monday\", \"ticket_id\": \"T00517\", \"label\": \"YES\"}], "
    "\"params\": {\"token\": \"s3cret\"}}'": "tests/test_feedback.py sends the served model the same judgment",
    "curl -s localhost:8000/api/feedback -H 'Content-Type: application/json' -d '{\"subject\": \"pump getting hot\", "
    "\"description\": \"95 C since monday\", \"ticket_id\": \"T00517\", \"label\": \"YES\"}'":
        "needs a running page: tests/test_feedback.py and test_feedback_server.py post judgments to /api/feedback",
    "curl -s 'localhost:8000/api/search?subject=pump+getting+hot&description=95+C+since+monday&k=3'":
        "needs a running page: tests/test_feedback.py asks /api/search",
    "ticketsim select --dataset default --variants Ac+L-relpos-merged Ac+L-relpos Ac+L-relpos-merged2 --baselines --out a.json":
        "three minutes of cross-validated training: tests/test_pipeline.py runs `ticketsim select` on the bare-clone "
        "pipeline's files (retrieval decides), tests/test_retrieval_choice.py the rule by retrieval",
    "ticketsim select --dataset default --variants Ac+L-relpos-neg --out b.json":
        "a minute of training: tests/test_pipeline.py runs `ticketsim select`, tests/test_retrieval_choice.py the rule",
    "ticketsim select --merge a.json b.json --out reports/select/default-retrieve.json":
        "needs the two reports above: tests/test_select_merge.py merges reports of other configurations on the same seeds",
    "python -m benchmarks.retrieval_cost --variant Ac+L-relpos --trials 20":
        "a benchmark on the pipeline's files: tests/test_benchmarks.py runs its measure and table on a tiny problem",
    "python -m benchmarks.approximate --index my-index --sizes 1000000":
        "a benchmark (the index tiled to a million tickets, its graph linked), not a test; tests/test_benchmarks.py runs it "
        "on a tiny bundle",
    "python -m benchmarks.lexical_engines --tickets 100000 --queries 50 --add 1000":
        "a benchmark (minutes: bm25s indexes 100,000 tickets twice), not a test; tests/test_benchmarks.py runs it on 300",
    "python -m benchmarks.shards --model models/default/bundle --index models/default/index --shards 2 --ray":
        "a benchmark (a local Ray cluster started), not a test; tests/test_benchmarks.py runs it without Ray on three shards "
        "and tests/test_shards.py the shards on two Ray actors",
    "python -m benchmarks.search_scale --sizes 100000 1000000 --repeat 1 --requests 400 --add 0":
        "a benchmark (the registered index tiled to a million, its graph built), not a test; " + SEARCH_SCALE,
    "python -m benchmarks.index_writes --sizes 1000 100000 1000000":
        "a benchmark (the registered index tiled to a million tickets), not a test; tests/test_benchmarks.py runs it on 100 "
        "and 400",
    "python -m benchmarks.ingest --tickets 100000 --add 1000":
        "a benchmark (about 45 minutes at the goal's size), not a test; tests/test_benchmarks.py runs it on a tiny bundle",
    "ticketsim select --dataset default --variants 22 22+S+L best --baselines --out selection.json":
        "minutes of cross-validated training: tests/test_pipeline.py runs `ticketsim select` on the bare-clone pipeline's "
        "files with 3 folds, 1 seed and 1 epoch",
    "ticketsim curve --dataset default --variants Ac+L-relpos-merged Szs+L --folds 8 --seeds 13 14 15 --extra lay "
    "--out reports/curve/default.json --plot docs/img/learning_curve_default.png":
        "minutes of training: tests/test_pipeline.py runs `ticketsim curve` on the bare-clone pipeline's files with 3 folds, "
        "1 seed and 1 epoch",
    "ticketsim curve --workspace ../semws --dataset semeval --variants Ac+L-relpos Szs+L --out reports/curve/semeval.json "
    "--plot docs/img/learning_curve_semeval.png":
        "a SemEval workspace: tests/test_pipeline.py runs `ticketsim curve` on the default dataset",
    'ticketsim search --index servicenow-index --subject "vpn keeps disconnecting"':
        "needs a trained bundle: tests/test_exports.py searches an index built from this export with a small one",
    "dvc exp run -S '+datasets.mydesk={source: csv, raw: exports/mydesk, columns: servicenow, labels: false}' register@mydesk":
        TICKETS_ONLY,
    'ticketsim search --model models/mydesk/bundle --index models/mydesk/index --subject "vpn keeps disconnecting"':
        TICKETS_ONLY,
    "ticketsim validate --csv exports/mydesk --columns servicenow --tickets-only": TICKETS_ONLY,
    "dvc repro register@default": "tests/conftest.py (repro_workspace) runs it on the bare clone before the whole pipeline",
    "dvc exp run -S 'finetune.datasets=[default]'":
        "fine-tunes the encoder for minutes per epoch: tests/test_finetune.py trains the same code on a tiny encoder",
    "python -m benchmarks.pipeline_time repro --baseline main":
        "a benchmark of two whole pipelines (about an hour), not a test; tests/test_benchmarks.py checks its small clean clone",
    "python -m benchmarks.encoding half minilm-fp16":
        "run by tests/test_gpu_check.py (slow tier), then gpu_check on the copy",
    "python -m benchmarks.gpu_check minilm-fp16 --pairs 3000 --passages 100000 --cpu-passages 2000":
        "run by tests/test_gpu_check.py (smaller, with polars, MLflow and DVC unimportable; on MiniLM in the slow tier)",
    "python -m benchmarks.encoding speed --passages 2000 --long 0 --setups torch:2 onnx:2 int8:2":
        "a benchmark (minutes of encoding per backend), not a test; tests/test_benchmarks.py runs it on a tiny encoder",
    "python -m benchmarks.encoding ranking --tickets 200 --threads 1":
        "a benchmark (the corpus encoded three times), not a test; tests/test_benchmarks.py runs it on a tiny encoder",
    "python -m benchmarks.search_scale --tiny SL --sizes 100000 --measure 60 --add 60 --queries 30 --requests 100":
        "a benchmark (an index of 100,000 tickets, the page, index add), not a test; " + SEARCH_SCALE,
    "python -m benchmarks.search_scale --model models/default/bundle --index models/default/index --sizes 1000 100000":
        "a benchmark (the registered index tiled to 100,000 tickets, cold searches, the page, index add), not a test; " + SEARCH_SCALE,
}


def shown_commands() -> dict[str, str]:
    """Every command of every ```bash block: command -> 'file:line'. A command goes on over a line ending in a backslash
    or inside an open quote (as the shell reads it), with its continuation's indent collapsed to one space."""
    found = {}
    for doc in DOCS:
        text = doc.read_text()
        for block in re.finditer(r"^```bash\n(.*?)^```", text, re.M | re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            command, start = "", first
            for number, line in enumerate(block[1].splitlines(), start=first):
                command, start = (f"{command} {line.strip()}", start) if command else (line.strip(), number)
                if command.endswith("\\"):
                    command = command[:-1].rstrip()
                    continue
                try:
                    shlex.split(command, comments=True)
                except ValueError:      # an open quote: the command goes on
                    continue
                command = re.sub(r"(^|\s+)#\s.*$", "", command).strip()
                if command:
                    found.setdefault(command, f"{doc.relative_to(REPO)}:{start}")
                command = ""
    return found


def test_every_command_the_docs_show_is_run_by_a_test_or_listed_with_the_reason_it_is_not():
    shown = shown_commands()
    unlisted = [f"{where}: {command}" for command, where in shown.items() if command not in COMMANDS]
    assert not unlisted, "commands in the docs that no test runs: run them or list them in COMMANDS\n" + "\n".join(unlisted)
    gone = [command for command in COMMANDS if command not in shown]
    assert not gone, f"COMMANDS lists commands no doc shows any more (remove them): {gone}"


def shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(command, shell=True, cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})


def test_validate_runs_as_shown_on_an_exported_folder_a_help_desk_export_and_the_default_dataset(tmp_path):
    folder = tmp_path / "path/to/folder"
    assert shell(f"{sys.executable} -m ticketsim.cli export --out {folder}", REPO).returncode == 0
    for command in ("ticketsim validate --csv path/to/folder", "ticketsim validate default",
                    "ticketsim validate --csv tests/fixtures/exports/jira --columns jira"):
        assert command in COMMANDS and COMMANDS[command].startswith(RUN_HERE)
        done = shell(command.replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1),
                     tmp_path if "path/to/folder" in command else REPO)
        assert done.returncode == 0, done.stdout + done.stderr
        assert isinstance(json.loads(done.stdout), dict)      # the intake report: counts of what was tolerated


def test_the_tutorials_searches_run_as_shown_where_its_dvc_repro_leaves_the_model(search_parts, tmp_path):
    """The searches of docs/tutorial.md and the README's quick start, as written, in a folder whose models/default holds
    what `dvc repro register@default` writes there (a small bundle of the same layout and its index)."""
    from benchmarks.common import make_bundle

    bundle = make_bundle(tmp_path / "models/default/bundle", search_parts, "22")
    search_parts.corpus.tickets.write_csv(tmp_path / "tickets.csv")
    assert main(["index", "build", "--model", str(bundle), "--index", str(tmp_path / "models/default/index"),
                 "--tickets", str(tmp_path / "tickets.csv")]) == 0
    shown = [c for c in shown_commands() if COMMANDS.get(c, "").endswith("where the tutorial's dvc repro leaves them)")]
    assert len(shown) == 3
    for command in shown:
        assert COMMANDS[command].startswith(RUN_HERE)
        done = shell(command.replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        if "--json" in command:
            answer, = json.loads(done.stdout)
            assert [hit["rank"] for hit in answer["hits"]] == [1, 2, 3] and all(hit["reasons"] for hit in answer["hits"])
        else:
            assert "rank  ticket" in done.stdout and done.stdout.count("why: ") == 3


def output_shown_after(doc: Path, command: str) -> str:
    """The text of the first plain ``` block after the ```bash block that shows `command`: the output the doc promises."""
    text = doc.read_text()
    after = text.index("```\n", text.index(command))        # the end of the command's block
    return re.search(r"^```\n(.*?)^```", text[after + 4:], re.M | re.S)[1]


def test_the_export_prints_the_figures_docs_retraining_shows(tmp_path):
    """The corpus sizes the doc states are what its command writes (they drifted once: 180 queries shown, 350 written)."""
    command = "ticketsim export --out data/labeled --set-params"
    assert COMMANDS[command].startswith(RUN_HERE)
    (tmp_path / "params.yaml").write_text((REPO / "params.yaml").read_text())     # --set-params edits it
    done = shell(command.replace("ticketsim", f"{sys.executable} -m ticketsim.cli", 1), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == output_shown_after(REPO / "docs/retraining.md", command)


# ----------------------------------------------------------------------------------- the SemEval switch, as written
def org_question(number: int, label: str, subject: str, body: str, related: str, comments: list[str]) -> str:
    """One OrgQuestion with one related thread, in the organizers' layout (attributes as in the dev file)."""
    q, r = f"Q{number}", f"Q{number}_R1"
    texts = "".join(f'\n\t\t<RelComment RELC_ID="{r}_C{i}" RELC_DATE="2013-05-03 07:23:20" RELC_USERID="U{i}" '
                    f'RELC_USERNAME="user{i}" RELC_RELEVANCE2ORGQ="Good" RELC_RELEVANCE2RELQ="Good">\n'
                    f"\t\t\t<RelCText>{text}</RelCText>\n\t\t</RelComment>" for i, text in enumerate(comments, start=1))
    return (f'<OrgQuestion ORGQ_ID="{q}">\n\t<OrgQSubject>{subject}</OrgQSubject>\n\t<OrgQBody>{body}</OrgQBody>\n'
            f'\t<Thread THREAD_SEQUENCE="{r}">\n\t\t<RelQuestion RELQ_ID="{r}" RELQ_RANKING_ORDER="1" '
            f'RELQ_CATEGORY="Advice and Help" RELQ_DATE="2013-05-02 19:43:00" RELQ_USERID="U9" RELQ_USERNAME="asker" '
            f'RELQ_RELEVANCE2ORGQ="{label}">\n\t\t\t<RelQSubject>{related}</RelQSubject>\n'
            f"\t\t\t<RelQBody>{related} in Doha?</RelQBody>\n\t\t</RelQuestion>{texts}\n\t</Thread>\n</OrgQuestion>\n")


def write_semeval_fixture(folder: Path) -> None:
    """The files `source: semeval2016` reads by default (config.SEMEVAL_FILES), three questions each; train part 1 as
    rebuilt: no related-question subject, no comment."""
    folder.mkdir(parents=True)
    topics = [("Good bank", "Which is a good bank in Doha", "Best bank", ["Commercial bank", "QNB is fine"]),
              ("Driving license", "How to get a driving license", "License transfer", ["Go to the traffic department"]),
              ("Cheap flights", "Where to buy cheap tickets", "Flights to Manila", ["Try the travel agencies"])]
    labels = ("PerfectMatch", "Relevant", "Irrelevant")
    part1 = [(subject, body, "", []) for subject, body, _, _ in topics]
    for name, first, questions in (("SemEval2016-Task3-CQA-QL-train-part1-nocomments.xml", 20, part1),
                                   ("SemEval2016-Task3-CQA-QL-train-part2.xml", 1, topics),
                                   ("SemEval2016-Task3-CQA-QL-dev.xml", 10, topics)):
        body = "".join(org_question(first + i, labels[i], *topic) for i, topic in enumerate(questions))
        (folder / name).write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<xml version="1.0">\n{body}</xml>\n')


@pytest.mark.slow
def test_the_semeval_switch_of_the_docs_runs_as_written_up_to_prepare(tmp_path):
    shown = shown_commands()
    assert SEMEVAL_SWITCH in shown and shown[SEMEVAL_SWITCH].startswith("docs/datasets.md")
    repo = clone(tmp_path / "repo")
    write_semeval_fixture(tmp_path / "shared/data/semeval2016-task3")   # ../shared beside the clone, as the command says
    for git in ("config user.email docs@test", "config user.name docs-test", "add -A", "commit -qm clone"):
        subprocess.run(["git", *git.split()], cwd=repo, check=True, capture_output=True)
    done = shell(f"{SEMEVAL_SWITCH} prepare@semeval", repo)     # `dvc exp run` needs a commit: it runs in a git workspace
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    params = yaml.safe_load((repo / "params.yaml").read_text())   # the experiment's params, applied to the workspace
    assert params["datasets"]["semeval"] == {"source": "semeval2016", "raw": "../shared/data/semeval2016-task3",
                                             "final": "Fc+S+L-relpos"}
    # what SemEval's stages register: the choice of `ticketsim select` there (docs/model.md), not siamese.final
    semeval = load_params(repo / "params.yaml").for_dataset("semeval").siamese
    assert semeval.final == "Fc+S+L-relpos" != load_params(repo / "params.yaml").siamese.final
    # What docs/datasets.md says of the rewrite: no other value changed, a few lines did, params-research.yaml none.
    committed = yaml.safe_load(subprocess.run(["git", "show", "HEAD:params.yaml"], cwd=repo, capture_output=True,
                                              text=True, check=True).stdout)
    assert {k: v for k, v in params.items() if k != "datasets"} == {k: v for k, v in committed.items() if k != "datasets"}
    assert params["datasets"]["default"] == committed["datasets"]["default"]
    counts = subprocess.run(["git", "diff", "--numstat", "params.yaml"], cwd=repo, capture_output=True, text=True).stdout
    assert 0 < sum(map(int, counts.split()[:2])) < 20, counts
    assert not subprocess.run(["git", "diff", "--numstat", "params-research.yaml"], cwd=repo, capture_output=True, text=True).stdout
    corpus = Corpus.read(repo / "data/semeval/prepared")
    assert sorted(corpus.pairs["split"]) == ["dev"] * 3 + ["train"] * 6 and corpus.tickets.height == 9
    assert sorted(corpus.pairs["label"]) == [1, 1, 1, 3, 3, 3, 5, 5, 5]     # PerfectMatch 5, Relevant 3, Irrelevant 1
    solutions = dict(zip(corpus.tickets["ticket_id"], corpus.tickets["solution"]))
    assert solutions["Q1_R1"] == "Commercial bank\nQNB is fine"      # the thread's comments, in order
    assert solutions["Q20_R1"] == "" and corpus.tickets.filter(pl.col("ticket_id") == "Q20_R1")["subject"].item() == ""


# ------------------------------------------------------------------------------ on the bare-clone pipeline's outputs
@pytest.mark.slow
def test_what_comes_out_runs_as_shown_on_the_pipelines_outputs(repro_workspace):
    for command in ("dvc metrics show", "cat reports/default/table5/dev.md"):
        assert COMMANDS[command].startswith(RUN_HERE)
        done = shell(command, repro_workspace)
        assert done.returncode == 0 and done.stdout.strip(), done.stdout + done.stderr
    assert "metrics/default/" in shell("dvc metrics show", repro_workspace).stdout
