"""The package's layout, measured from its imports: folders by job, stacked in the order the data flows; no import runs
from a lower floor to a higher one, none loops; a search never enters training or tuning; what strings steps together
is workflows/, called by the command lines alone (the CLI, the stage helper), and the retrain path runs down from it;
only they and the workflows talk to the process; argparse only where a command line is parsed; few modules at the root;
and docs/pipeline.md's map of the code is the tree."""
import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "ticketsim"

# Lowest first. A module may import from its own floor and those below it. The root's plumbing is the ground floor,
# workflows/ the top floor below the roof, stage.py and cli.py.
FLOORS = [
    {"errors", "config", "threads", "device", "side_by_side"},
    {"data"}, {"text"}, {"channels"}, {"scoring"}, {"model"}, {"evaluate"}, {"bundle"}, {"search"}, {"lifecycle"}, {"training"},
    {"tuning"}, {"app"},
    {"workflows"},
    {"stage", "cli"},
]
# A command line is parsed by the CLI and by the stage scripts' helper.
PARSERS = {"ticketsim.cli", "ticketsim.stage"}
# Talking to the process: printing, ending it, reading its command line. The library computes (it returns results and
# raises ticketsim's errors); cli.py and the workflows talk (the stage helper through workflows/stage_process.py).
TALKING = re.compile(r"print\(|sys\.exit|SystemExit|sys\.argv")
ROOT_MODULES_AT_MOST = 8


def modules() -> dict[str, Path]:
    """ticketsim.a.b -> its file, every module and package of the tree."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """The ticketsim modules `path` imports, at the top or inside a function (`from a import b` is module a.b when
    that is a module, else a)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names if alias.name in known}
        elif isinstance(node, ast.ImportFrom) and node.module in known:
            out |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names}
    return out


GRAPH = {name: imports(path, set(modules())) - {name} for name, path in modules().items()}


def floor(module: str) -> int:
    top = module.split(".")[1] if module != "ticketsim" else "errors"
    return next(i for i, names in enumerate(FLOORS) if top in names)


def test_every_folder_and_root_module_has_its_floor():
    tops = {name.split(".")[1] for name in GRAPH if name != "ticketsim"}
    assert tops <= set().union(*FLOORS), f"no floor in tests/test_layout.py for {sorted(tops - set().union(*FLOORS))}"


def test_no_import_runs_from_a_lower_floor_to_a_higher_one():
    upward = sorted(f"{a} imports {b}" for a, deps in GRAPH.items() if a != "ticketsim" for b in deps if floor(b) > floor(a))
    assert not upward, "imports running up the floors:\n" + "\n".join(upward)


def test_no_import_loop():
    """Tarjan's strongly connected components of the import graph: each must be one module."""
    index, low, stack, on_stack, loops = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert not loops, f"import loops: {loops}"


def reach(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in GRAPH[todo.pop()] - seen:
            seen.add(w)
            todo.append(w)
    return seen


@pytest.mark.parametrize("entry", ["ticketsim.app.worker", "ticketsim.app.pyfunc", "ticketsim.search.searcher"])
def test_a_search_never_enters_training_or_tuning(entry):
    """Every module a served search can import, lazily too: the page's worker, the MLflow model, the searcher."""
    entered = sorted(m for m in reach(entry) if m.split(".")[1] in ("training", "tuning"))
    assert not entered, f"{entry} reaches {entered}"


def test_only_the_command_lines_call_a_workflow():
    callers = sorted(a for a, deps in GRAPH.items() for b in deps
                     if b.startswith("ticketsim.workflows") and not a.startswith("ticketsim.workflows") and a not in PARSERS)
    assert not callers, f"only ticketsim.cli and ticketsim.stage import ticketsim.workflows: {callers}"


def test_the_retrain_path_runs_down_the_floors():
    """`ticketsim retrain` takes each step from the floor that owns it: the gate and promotion (lifecycle), the query
    tower's training (training), its registration as an MLflow model (app). No step reaches another's floor above its
    own, so none needs the workflow's next step handed down to it."""
    steps = {"ticketsim.lifecycle.promotion", "ticketsim.training.query_tower", "ticketsim.app.pyfunc"}
    assert steps <= GRAPH["ticketsim.workflows.retrain"]
    assert "ticketsim.workflows.retrain" in cli_workflows()
    for step in steps:
        above = sorted(m for m in reach(step) | {step} for d in GRAPH[m] if floor(d) > floor(m))
        assert not above, f"{step}: {above} import up the floors"
        assert not reach(step) & (steps - {step}), f"{step} reaches another step of the retrain path"


def cli_workflows() -> dict[str, set[str]]:
    """The workflow modules ticketsim.cli names, each with the functions it calls there (imported when a command runs)."""
    named: dict[str, set[str]] = {}
    for module, function in re.findall(r'"(\w+):(\w+_command)"', (PACKAGE / "cli.py").read_text()):
        named.setdefault(f"ticketsim.workflows.{module}", set()).add(function)
    return named


def test_every_command_calls_a_workflow_function_that_exists():
    for module, functions in cli_workflows().items():
        assert module in GRAPH, f"ticketsim.cli names {module}, which is not a module"
        defined = {node.name for node in ast.parse(modules()[module].read_text()).body if isinstance(node, ast.FunctionDef)}
        assert functions <= defined, f"ticketsim.cli calls {sorted(functions - defined)} of {module}, which it lacks"


def test_argparse_only_where_a_command_line_is_parsed():
    parsing = sorted(name for name, path in modules().items() if name not in PARSERS and re.search(
        r"^\s*import argparse|^\s*from argparse import", path.read_text(), re.M))
    assert not parsing, f"argparse outside the CLI and the stage helper: {parsing}"


def test_only_the_cli_and_the_workflows_print_exit_or_read_argv():
    """`grep -rn "print(\\|sys.exit\\|SystemExit\\|sys.argv" src/ticketsim` finds them only in cli.py and workflows/."""
    talking = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for name, path in sorted(modules().items())
               if name != "ticketsim.cli" and not name.startswith("ticketsim.workflows")
               for number, line in enumerate(path.read_text().splitlines(), 1) if TALKING.search(line)]
    assert not talking, ("the library talks (return the line, or raise ticketsim's error, and let the workflow or the "
                         "stage script print it):\n" + "\n".join(talking))


def test_the_root_holds_few_modules():
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= ROOT_MODULES_AT_MOST, root


def mapped() -> set[str]:
    """Module files docs/pipeline.md's map names: entry lines (two spaces, an optional folder, file names; a line of
    file names alone goes on the entry above) in the code block under 'Where the code lives', between `src/ticketsim/`
    and the next unindented line."""
    text = (REPO / "docs" / "pipeline.md").read_text()
    block = text.split("## Where the code lives", 1)[1].split("```", 2)[1]
    lines = block.split("src/ticketsim/", 1)[1].splitlines()[1:]
    names, folder = set(), ""
    for line in lines:
        if line and not line.startswith(" "):
            break
        words = line.split()
        if re.match(r"^  \S", line):
            folder = words[0] if words[0].endswith("/") else ""
        elif not words or not all(w.endswith(".py") for w in words):
            continue
        names |= {folder + w for w in words if w.endswith(".py")}
    return names


def test_the_docs_map_of_the_code_is_the_tree():
    tree = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__init__.py"}
    assert mapped() == tree, (f"docs/pipeline.md's map lacks {sorted(tree - mapped())} and names what is not there: "
                              f"{sorted(mapped() - tree)}")
