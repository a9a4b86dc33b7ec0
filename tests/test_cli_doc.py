"""docs/cli.md is what `ticketsim commands --markdown` writes from the parser (every command's synopsis and help, each
argument with its help and default, the exit codes), so a new command, argument or default cannot leave the page behind;
`ticketsim commands` prints every command's --help in turn."""
import argparse
import subprocess
import sys

from conftest import REPO
from test_docs_commands import COMMANDS

from ticketsim.cli import EXITS, GUIDES, commands_of, parser, reference_markdown

COMMAND = "ticketsim commands --markdown > docs/cli.md"


def commands(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "ticketsim.cli", "commands", *args], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout


def sections(page: str) -> dict[str, str]:
    return dict(part.split("\n", 1) for part in page.split("\n## ")[1:])


def test_the_page_is_what_the_command_writes():
    assert COMMANDS[COMMAND].startswith("run by tests/test_cli_doc.py")
    assert commands("--markdown") == (REPO / "docs/cli.md").read_text(), f"docs/cli.md is stale: run `{COMMAND}`"


def test_every_command_has_its_section_and_every_argument_its_row():
    page = sections((REPO / "docs/cli.md").read_text())
    named = list(commands_of(parser()))
    assert list(page) == [name for name, _, _ in named] + ["Exit codes"]
    assert {"ticketsim pairs add", "ticketsim index build", "ticketsim search", "ticketsim commands"} <= set(page)
    for name, _, command in named:
        spelled = [a.option_strings[-1] if a.option_strings else a.dest for a in command._actions if a.dest != "help"]
        assert all(f"| `{s}" in page[name] or f"| `[{s}]" in page[name] for s in spelled), name
    assert sorted(GUIDES) == sorted(name.partition(" ")[2] for name, _, _ in named)   # each command's page, none stale
    assert "| [`ticketsim index add`](#ticketsim-index-add) | append tickets to an index (no rebuild); exit 65 if refused " \
           "| [search.md](search.md#adding-tickets) |" in (REPO / "docs/cli.md").read_text()
    assert "| `-k K` | tickets per query (default 10) |" in page["ticketsim search"]
    assert "| `--params PARAMS` | the params file, params-research.yaml read beside it (default: params.yaml) |" \
           in page["ticketsim validate"]
    assert [line.split(" | ")[0] for line in page["Exit codes"].splitlines() if line[2:3].isdigit()] == \
           [f"| {code}" for code, _ in EXITS] == ["| 0", "| 1", "| 2", "| 65", "| 70", "| 141"]


def test_a_toy_parser_renders_its_synopsis_defaults_choices_and_escaped_bars():
    top = argparse.ArgumentParser(prog="toy")
    verbs = top.add_subparsers(dest="command")
    nested = verbs.add_parser("box", help="boxes").add_subparsers(dest="action")
    pack = nested.add_parser("pack", help="pack a | b")
    pack.add_argument("item", help="what to pack")
    pack.add_argument("--size", type=int, default=3, help="how many")
    pack.add_argument("--mode", choices=("fast", "slow"), help="default: fast")
    verbs.add_parser("list", help="list boxes")
    page = sections(reference_markdown(top))
    assert list(page) == ["toy box pack", "toy list", "Exit codes"]
    assert "| [`toy box pack`](#toy-box-pack) | pack a \\| b |  |" in reference_markdown(top)   # no GUIDES entry: no link
    assert "```text\ntoy box pack [-h] [--size SIZE] [--mode {fast,slow}] item\n```" in page["toy box pack"]
    assert "| `item` | what to pack |" in page["toy box pack"] and "| `--size SIZE` | how many (default: 3) |" in page["toy box pack"]
    assert "| `--mode {fast,slow}` | default: fast |" in page["toy box pack"]     # a help saying its default: not twice


def test_commands_prints_every_commands_help():
    shown = commands()
    assert all(f"usage: {name} " in shown for name, _, _ in commands_of(parser()))


def test_a_reader_that_closes_the_output_ends_the_command_quietly_as_a_shell_tool():
    """`ticketsim commands | head -1`: the pipe closed before the command writes is exit 141 (128 + SIGPIPE), no
    traceback and no 'bug in ticketsim' line."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)      # closed before the command writes: its first write meets a closed pipe
    try:
        done = subprocess.run([sys.executable, "-m", "ticketsim.cli", "commands"], stdout=write, stderr=subprocess.PIPE,
                              text=True)
    finally:
        os.close(write)
    assert done.returncode == 141 and done.stderr == "", done.stderr
