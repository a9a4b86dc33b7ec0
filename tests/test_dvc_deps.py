"""dvc.yaml's code deps are complete: every ticketsim module a stage's script imports, directly or through other modules,
is a dep of that stage (the file or a folder above it), so a change to it reruns the stage. The plumbing that shapes
no output (reading params, MLflow runs, the stage helper and how its process ends, error types) is not followed."""
import ast
import shlex
from pathlib import Path

import pytest
from dvc.repo import Repo

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
PLUMBING = ("ticketsim/config/", "ticketsim/lifecycle/tracking.py", "ticketsim/stage.py", "ticketsim/workflows/stage_process.py",
            "ticketsim/errors.py")


def module_files(name: str) -> list[Path]:
    """The files Python runs to import `name` (ticketsim.a.b): each package's __init__.py on the way, then the module."""
    parts, found = name.split("."), []
    for end in range(1, len(parts) + 1):
        base = SRC.joinpath(*parts[:end])
        if (base / "__init__.py").is_file():
            found.append(base / "__init__.py")
        elif base.with_suffix(".py").is_file():
            found.append(base.with_suffix(".py"))
    return found


def imported(path: Path) -> set[str]:
    """ticketsim modules `path` imports anywhere (also inside functions): `from ticketsim.a import b` may be module a.b."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.startswith("ticketsim")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ticketsim"):
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return names


def code_of(script: Path) -> set[str]:
    """Every ticketsim module file `script` runs, relative to src/, without the plumbing and what only it imports."""
    seen, todo = set(), [script]
    while todo:
        for name in imported(todo.pop()):
            for path in module_files(name):
                key = path.relative_to(SRC).as_posix()
                if key not in seen and not key.startswith(PLUMBING):
                    seen.add(key)
                    todo.append(path)
    return seen


def stages() -> list[tuple[str, Path, list[str]]]:
    """(stage name, its script, its deps relative to the repo) of every stage dvc.yaml defines, foreach and matrix resolved."""
    with Repo(str(REPO)) as repo:
        found = []
        for stage in repo.index.stages:
            script = next(word for word in shlex.split(stage.cmd) if word.endswith(".py"))
            found.append((stage.addressing, REPO / script, [Path(dep.fs_path).relative_to(REPO).as_posix() for dep in stage.deps]))
        return found


def covered(module: str, deps: list[str]) -> bool:
    path = f"src/{module}"
    return any(path == dep or path.startswith(dep.rstrip("/") + "/") for dep in deps)


def docstring_only(module: str) -> bool:
    """A package's __init__.py that only says what the package is: nothing in it can change an output."""
    body = ast.parse((SRC / module).read_text()).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) for node in body)


@pytest.mark.parametrize(("name", "script", "deps"), stages(), ids=lambda value: value if isinstance(value, str) else "")
def test_code_deps_cover_what_the_script_imports(name, script, deps):
    assert f"{script.relative_to(REPO).as_posix()}" in deps, f"{name}: its script {script.name} is not a dep"
    missing = sorted(module for module in code_of(script) if not covered(module, deps) and not docstring_only(module))
    assert not missing, (f"dvc.yaml: stage {name} runs {', '.join(missing)} but does not depend on it: add "
                         f"{', '.join('src/' + module for module in missing)} (or its folder) to its deps")


def test_the_check_sees_a_module_reached_only_through_another(tmp_path):
    """siamese's script imports experiment, which imports channels.lexical (channel L): only the walk finds it."""
    siamese = code_of(REPO / "stages" / "siamese.py")
    assert "ticketsim/channels/lexical.py" in siamese
    assert "lexical" not in (REPO / "stages" / "siamese.py").read_text()
    assert not covered("ticketsim/channels/lexical.py", ["stages/siamese.py", "src/ticketsim/channels/cache.py"])
    assert covered("ticketsim/channels/lexical.py", ["src/ticketsim/channels"])
