"""The CI retraining workflow: valid against the GitHub Actions workflow schema (check-jsonschema's vendored copy,
offline), triggered by the labelled-data pointers and by hand, and running the same `ticketsim retrain` as people do."""
import subprocess
import sys
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[1] / ".github" / "workflows" / "retrain.yml"


def test_workflow_matches_the_github_actions_schema():
    done = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_workflow_triggers_installs_retrains_and_reports():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    triggers = workflow[True]                      # YAML 1.1 reads the key `on` as true
    assert "workflow_dispatch" in triggers and triggers["push"]["paths"] == ["data/**.dvc"]
    job = workflow["jobs"]["retrain"]
    runs = [step.get("run", "") for step in job["steps"]]
    install = next(i for i, run in enumerate(runs) if "torch==" in run)
    assert runs[install].index("torch==") < runs[install].index("pip install -e .")    # CPU torch first
    retrain = next(step for step in job["steps"] if "ticketsim retrain" in step.get("run", ""))
    assert '--summary "$GITHUB_STEP_SUMMARY"' in retrain["run"] and '--outputs "$GITHUB_OUTPUT"' in retrain["run"]
    assert set(job["outputs"]) >= {"mlflow_run_id", "model_version"}
    assert job["env"]["TICKETSIM_TRACKING_URI"] == "${{ secrets.MLFLOW_TRACKING_URI }}"
    assert "secrets.DVC_REMOTE_URL" in job["env"]["DVC_REMOTE_URL"]
