"""docs/params.md is what `ticketsim params --markdown` writes from the schema and the params files (every key: its
type, default, help text and file), so a changed default or help text cannot leave the page behind; `ticketsim
params` prints the params in force."""
import json
import subprocess
import sys
from pathlib import Path

from test_docs_commands import COMMANDS

from ticketsim.config import load_params

REPO = Path(__file__).resolve().parents[1]
COMMAND = "ticketsim params --markdown > docs/params.md"


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "params", *args], cwd=REPO, capture_output=True,
                          text=True, check=True)
    return done.stdout


def test_docs_params_md_is_what_the_command_writes():
    assert COMMANDS[COMMAND].startswith("run by tests/test_params_doc.py")
    assert run("--markdown") == (REPO / "docs/params.md").read_text(), f"docs/params.md is stale: run `{COMMAND}`"


def test_the_page_names_every_key_and_the_file_that_sets_it():
    page = (REPO / "docs/params.md").read_text()
    for key in ("`trainable`", "`<name>.source`", "`review.top_k`", "`variants.<name>.loss`", "`models`", "`port`"):
        assert f"| {key} |" in page, key
    sections = dict(part.split("\n\n", 2)[:2] for part in page.split("\n## ")[1:])
    assert sections["`siamese`"].endswith("set in params-research.yaml, but `final`, `unlabelled`, `registered_model` in "
                                          "params.yaml.")
    assert sections["`tune`"].endswith("set in params-research.yaml.") and sections["`seed`"].endswith("set in params.yaml.")
    assert sections["`serve`"].endswith("set in params.yaml (no key set: every one at its default).")


def test_params_prints_the_values_in_force():
    shown = json.loads(run())
    params = load_params(REPO / "params.yaml")
    assert shown["siamese"]["final"] == params.siamese.final and shown["serve"]["port"] == params.serve.port == 8000
    assert shown["topics"]["n_topics"] == params.topics.n_topics     # from params-research.yaml
