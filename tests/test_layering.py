"""Which module may import which: read from every module's import statements (functions' own included).

The package has three layers. The core, the top-level modules of `fiberbench/` (errors, files,
hub, cli, the predictions file, videos, prompts, the answer reader...) and the core's packages
(`fiberbench/ownership/`), holds what every command shares. The artifacts (`fiberbench.data`,
`fiberbench.metric`, `fiberbench.modeling`) are the Hub's dataset, metric and model. The commands
(`fiberbench evaluate`, `predict`, `extract-features`, `leaderboard`, training, the lmms-eval task)
are packages of their own, each importing the core and the artifacts, never another command. The Hub artifacts stay independent of
each other where they ship alone: the metric imports no other artifact, the files a model ships
import only each other, the data tools never import a command, nothing imports the benchmarks, and
no module imports itself back through others.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
# The installed package of each top-level folder that is not `fiberbench/` itself.
ARTIFACTS = {
    "fiberbench.data": "dataset_script",
    "fiberbench.metric": "metric",
    "fiberbench.modeling": "modeling",
    "fiberbench.training": "training",
    "fiberbench.lmms_eval_tasks": "lmms_eval_tasks",
}
# The command packages: each imports the core and the artifacts, never another command.
COMMANDS = {
    "fiberbench.evaluate": "fiberbench/evaluate",
    "fiberbench.predict": "fiberbench/predict",
    "fiberbench.features": "fiberbench/features",
    "fiberbench.leaderboard": "fiberbench/leaderboard",
    "fiberbench.training": "training",
    "fiberbench.lmms_eval_tasks": "lmms_eval_tasks",
}
CORE = ("fiberbench.errors", "fiberbench.files", "fiberbench.ownership", "fiberbench.hub", "fiberbench.cli")
# The core's packages, beside the top-level modules of `fiberbench/`.
CORE_PACKAGES = ("fiberbench/ownership",)
FOLDERS = ("fiberbench", "dataset_script", "metric", "modeling", "training", "lmms_eval_tasks")


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """The installed name of the module at `path`, e.g. dataset_script/fiber/card.py -> fiberbench.data.fiber.card."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    package = {folder: package for package, folder in ARTIFACTS.items()}.get(parts[0], parts[0])
    return ".".join([package, *parts[1:]])


def imports(path: Path, root: Path = REPO_ROOT) -> Iterator[tuple[str, str | None]]:
    """Every import statement of `path` (functions' own included) as (module, name imported from it or None).

    Relative imports are resolved against the module's own package, as Python does.
    """
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            yield from ((node.module if node.level == 0 else base, alias.name) for alias in node.names)


def project_imports(path: Path, root: Path = REPO_ROOT) -> set[str]:
    """The absolute names of the project modules (fiberbench.*, bench.*) that `path` imports anywhere, with the
    names it imports from them (`from fiberbench.data import load_fiber` gives both `fiberbench.data` and
    `fiberbench.data.load_fiber`)."""
    names = set()
    for module, name in imports(path, root):
        names.update([module] if name is None else [module, f"{module}.{name}"])
    return {name for name in names if name.split(".")[0] in ("fiberbench", "bench")}


def imported_modules(path: Path, known: set[str], root: Path = REPO_ROOT) -> set[str]:
    """The modules among `known` that `path` imports anywhere, each by the most specific name.

    `from package import module` imports `package.module`, `from package import name` the package
    (its `__init__`); a package's own `__init__` is not counted for a module imported from inside
    it, as Python finds it half-initialized there without running it again.
    """
    found = {f"{module}.{name}" if f"{module}.{name}" in known else module for module, name in imports(path, root)}
    return found & known


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def module_graph(root: Path = REPO_ROOT) -> dict[str, set[str]]:
    """Every project module and the project modules it imports (functions' own imports included)."""
    paths = {module_name(path, root): path for folder in FOLDERS for path in sorted((root / folder).rglob("*.py"))}
    known = set(paths)
    return {name: imported_modules(path, known, root) - {name} for name, path in paths.items()}


def absolute_imports(path: Path) -> set[str]:
    """The project modules `path` imports by their absolute names (a flat folder of remote code cannot)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    return {name for name in names if name and name.split(".")[0] in ("fiberbench", "bench")}


def modules(folder: str) -> list[Path]:
    return sorted((REPO_ROOT / folder).rglob("*.py"))


def imports_of(folder: str) -> dict[str, set[str]]:
    return {str(path.relative_to(REPO_ROOT)): project_imports(path) for path in modules(folder)}


def offending(folder: str, allowed) -> dict[str, list[str]]:
    found = {file: sorted(name for name in names if not allowed(name)) for file, names in imports_of(folder).items()}
    return {file: names for file, names in found.items() if names}


def test_the_metric_imports_no_other_artifact():
    assert offending("metric", lambda name: name.startswith(("fiberbench.metric", *CORE))) == {}


def test_the_files_a_model_ships_import_only_each_other():
    shipped = [path for path in modules("modeling") if path.name != "__init__.py"]
    names = {f"fiberbench.modeling.{path.stem}" for path in shipped}
    assert shipped
    for path in shipped:
        assert absolute_imports(path) == set(), path  # relative only: the files work as a flat Hub folder
        imported = {name for name in project_imports(path) if name.count(".") == 2}
        assert imported <= names, (path, imported - names)


def is_within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_command_never_imports_another(command):
    others = [other for other in COMMANDS if other != command]
    assert offending(COMMANDS[command], lambda name: not any(is_within(name, other) for other in others)) == {}


@pytest.mark.parametrize("folder", ["dataset_script", "metric", "modeling"])
def test_the_artifacts_import_no_command(folder):
    assert offending(folder, lambda name: not any(is_within(name, command) for command in COMMANDS)) == {}


def test_the_core_imports_no_command():
    core = [path for path in modules("fiberbench") if path.parent == REPO_ROOT / "fiberbench"]
    core += [path for package in CORE_PACKAGES for path in modules(package)]
    assert len(core) > 10 and all((REPO_ROOT / package / "__init__.py").is_file() for package in CORE_PACKAGES)
    found = {str(path.relative_to(REPO_ROOT)): project_imports(path) for path in core}
    assert {
        file: sorted(name for name in names if any(is_within(name, command) for command in COMMANDS))
        for file, names in found.items()
        if any(is_within(name, command) for name in names for command in COMMANDS)
    } == {}


def test_no_module_imports_itself_back():
    graph = module_graph()
    assert len(graph) > 60
    assert import_cycles(graph) == []


@pytest.mark.parametrize("folder", ["fiberbench", *ARTIFACTS.values(), "tests"])
def test_nothing_imports_the_benchmarks(folder):
    assert offending(folder, lambda name: not name.startswith("bench")) == {}


def test_the_checks_see_imports_inside_functions_and_relative_ones(tmp_path):
    module = tmp_path / "metric" / "lazy.py"
    module.parent.mkdir()
    module.write_text(
        "from ..data import load_fiber\n\ndef f():\n    from fiberbench.training import train\n    import bench.cli\n",
        encoding="utf-8",
    )
    assert module_name(module, tmp_path) == "fiberbench.metric.lazy"
    assert project_imports(module, tmp_path) == {
        "fiberbench.data",
        "fiberbench.data.load_fiber",
        "fiberbench.training",
        "fiberbench.training.train",
        "bench.cli",
    }


def test_the_cycle_check_sees_a_cycle_through_a_function_and_a_package(tmp_path):
    (tmp_path / "fiberbench" / "tools").mkdir(parents=True)
    (tmp_path / "fiberbench" / "tools" / "__init__.py").write_text("from .a import run\n", encoding="utf-8")
    (tmp_path / "fiberbench" / "tools" / "a.py").write_text("def run():\n    from . import b\n", encoding="utf-8")
    (tmp_path / "fiberbench" / "tools" / "b.py").write_text("from fiberbench.tools import run\n", encoding="utf-8")
    (tmp_path / "fiberbench" / "c.py").write_text("from fiberbench.tools import a\n", encoding="utf-8")
    graph = module_graph(tmp_path)
    assert graph["fiberbench.c"] == {"fiberbench.tools.a"}
    assert import_cycles(graph) == [["fiberbench.tools", "fiberbench.tools.a", "fiberbench.tools.b"]]
