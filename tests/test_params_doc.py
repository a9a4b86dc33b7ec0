"""docs/params.md and docs/params-research.md are what `ticketsim params --markdown <file>` writes from the schema and
the params files (every key: its type, default, help text and file), so a changed default or help text cannot leave a
page behind; `ticketsim params` prints the params in force."""
import json
import subprocess
import sys
from pathlib import Path

from test_docs_commands import COMMANDS

from ticketsim.config import load_params

REPO = Path(__file__).resolve().parents[1]
PAGES = {"params.yaml": "docs/params.md", "params-research.yaml": "docs/params-research.md"}


def run(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "params", *args], cwd=REPO, capture_output=True,
                          text=True, check=True)
    return done.stdout


def test_each_params_page_is_what_the_command_writes():
    for file, page in PAGES.items():
        command = f"ticketsim params --markdown {file} > {page}"
        assert COMMANDS[command].startswith("run by tests/test_params_doc.py")
        assert run("--markdown", file) == (REPO / page).read_text(), f"{page} is stale: run `{command}`"


def test_the_pages_name_every_key_on_the_page_of_the_file_that_sets_it():
    user, research = (sections((REPO / page).read_text()) for page in PAGES.values())
    assert {"`seed`", "`datasets`", "`serve`", "`siamese`"} <= set(user) and "`tune`" not in user
    assert {"`tune`", "`topics`", "`siamese`"} <= set(research) and "`serve`" not in research
    for key in ("`<name>.source`", "`review.top_k`", "`port`"):
        assert any(f"| {key} |" in text for text in user.values()), key
    assert "| `final` |" in user["`siamese`"] and "| `trainable` |" not in user["`siamese`"]
    assert "| `trainable` |" in research["`siamese`"] and "| `final` |" not in research["`siamese`"]
    assert "| `variants.<name>.loss` |" in research["`siamese`"] and "| `models` |" in research["`comparators`"]
    about = {name: text.split("\n\n")[0] for name, text in {**research, **user}.items()}
    assert about["`siamese`"].endswith("set in params-research.yaml, but `final`, `unlabelled`, `registered_model` in "
                                       "params.yaml.")
    assert about["`tune`"].endswith("set in params-research.yaml.") and about["`seed`"].endswith("set in params.yaml.")
    assert about["`serve`"].endswith("set in params.yaml (no key set: every one at its default).")


def sections(page: str) -> dict[str, str]:
    """Section heading -> its text, of a reference page."""
    return dict(part.split("\n\n", 1) for part in page.split("\n## ")[1:])


def test_params_prints_the_values_in_force():
    shown = json.loads(run())
    params = load_params(REPO / "params.yaml")
    assert shown["siamese"]["final"] == params.siamese.final and shown["serve"]["port"] == params.serve.port == 8000
    assert shown["topics"]["n_topics"] == params.topics.n_topics     # from params-research.yaml
