"""Which artifact may import which, read from every module's import statements (functions' own included).

Each top-level folder is one Hub artifact, installed as a package of `fiberbench`; `fiberbench/` itself is the
small core they share (errors, the CLI dispatch, outputs, the Hub helpers, the record schema, video decoding).
The arrows run one way: the metric module ships alone and imports nothing of the project, the files a model ships
import only each other, the core imports no artifact but the metric module, and no module imports itself back.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Top-level folder -> its installed package.
PACKAGES = {
    "fiberbench": "fiberbench",
    "dataset_script": "fiberbench.data",
    "metric": "fiberbench.metric",
    "modeling": "fiberbench.modeling",
    "training": "fiberbench.training",
    "predict": "fiberbench.predict",
    "leaderboard": "fiberbench.leaderboard",
    "lmms_eval_tasks": "fiberbench.lmms_eval_tasks",
}
FIBER_METRIC = "fiberbench.metric.fiber_metric"
# Artifact -> the artifacts it may import (the core, `fiberbench`, is every artifact's but the two that ship alone).
ALLOWED = {
    FIBER_METRIC: set(),
    "fiberbench.modeling": set(),
    "fiberbench": {FIBER_METRIC},
    "fiberbench.data": {"fiberbench", FIBER_METRIC, "fiberbench.modeling"},
    "fiberbench.metric": {"fiberbench", FIBER_METRIC, "fiberbench.data"},
    "fiberbench.predict": {"fiberbench", FIBER_METRIC, "fiberbench.data", "fiberbench.modeling"},
    "fiberbench.training": {"fiberbench", FIBER_METRIC, "fiberbench.data", "fiberbench.modeling", "fiberbench.metric"},
    "fiberbench.lmms_eval_tasks": {"fiberbench", FIBER_METRIC, "fiberbench.data", "fiberbench.predict"},
    "fiberbench.leaderboard": {"fiberbench", FIBER_METRIC, "fiberbench.data", "fiberbench.metric"},
}


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """The installed name of the module at `path`, e.g. dataset_script/fiber/card.py -> fiberbench.data.fiber.card."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([PACKAGES[parts[0]], *parts[1:]])


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def artifact_of(name: str) -> str | None:
    """The artifact a module belongs to: the longest package of `PACKAGES` (or the metric module) holding it; the
    metric package's `__init__`, which hands on the metric module's functions, counts as the metric module."""
    if name == "fiberbench.metric":
        return FIBER_METRIC
    found = [p for p in (*PACKAGES.values(), FIBER_METRIC) if within(name, p)]
    return max(found, key=len) if found else None


def imports(path: Path, root: Path = REPO_ROOT) -> Iterator[tuple[str, str | None]]:
    """Every import statement of `path` (functions' own included) as (module, name imported from it or None)."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            yield from ((node.module if node.level == 0 else base, alias.name) for alias in node.names)


def module_graph(root: Path = REPO_ROOT) -> dict[str, set[str]]:
    """Every project module and the project modules it imports (a `from package import module` counts the module)."""
    paths = {module_name(path, root): path for folder in PACKAGES for path in sorted((root / folder).rglob("*.py"))}
    graph = {}
    for name, path in paths.items():
        found = {f"{module}.{imported}" if f"{module}.{imported}" in paths else module for module, imported in imports(path, root)}
        graph[name] = (found & set(paths)) - {name}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_each_artifact_imports_only_what_it_may():
    wrong = sorted(
        (module, target)
        for module, targets in module_graph().items()
        for target in targets
        if artifact_of(target) != artifact_of(module)
        and artifact_of(target) not in ALLOWED[artifact_of(module)]
    )
    assert wrong == []


def test_the_files_a_model_ships_import_only_each_other():
    shipped = [path for path in sorted((REPO_ROOT / "modeling").glob("*.py")) if path.name != "__init__.py"]
    assert shipped
    for path in shipped:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        absolute = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0 and n.module}
        assert not {name for name in absolute if name.startswith("fiberbench")}, path  # relative only: a flat Hub folder


def test_no_module_imports_itself_back():
    graph = module_graph()
    assert len(graph) > 30
    assert import_cycles(graph) == []


def test_nothing_imports_the_benchmarks():
    def names(path: Path) -> set[str]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        return found | {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module and not n.level}

    folders = [*PACKAGES, "tests"]
    importers = [path for f in folders for path in (REPO_ROOT / f).rglob("*.py") if any(n.split(".")[0] == "bench" for n in names(path))]
    assert importers == []


def test_the_checks_see_imports_inside_functions_and_a_cycle_through_a_package(tmp_path):
    (tmp_path / "fiberbench" / "tools").mkdir(parents=True)
    (tmp_path / "fiberbench" / "tools" / "__init__.py").write_text("from .a import run\n", encoding="utf-8")
    (tmp_path / "fiberbench" / "tools" / "a.py").write_text("def run():\n    from . import b\n", encoding="utf-8")
    (tmp_path / "fiberbench" / "tools" / "b.py").write_text("from fiberbench.tools import run\n", encoding="utf-8")
    (tmp_path / "metric").mkdir()
    (tmp_path / "metric" / "lazy.py").write_text("def f():\n    from ..training import train\n", encoding="utf-8")
    graph = module_graph(tmp_path)
    assert import_cycles(graph) == [["fiberbench.tools", "fiberbench.tools.a", "fiberbench.tools.b"]]
    assert module_name(tmp_path / "metric" / "lazy.py", tmp_path) == "fiberbench.metric.lazy"
    assert {m for m, _ in imports(tmp_path / "metric" / "lazy.py", tmp_path)} == {"fiberbench.training"}
