"""Which folder may import which: read from every module's import statements (functions' own included).

The Hub artifacts stay independent of each other where they ship alone: the metric imports no other
artifact (only the shared `fiberbench` core: errors, files, hub), the files a model ships import only
each other, the data tools never import training, and nothing imports the benchmarks.
"""

import ast
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = {
    "fiberbench.data": "dataset_script",
    "fiberbench.metric": "metric",
    "fiberbench.modeling": "modeling",
    "fiberbench.training": "training",
    "fiberbench.predict": "fiberbench/predict",
    "fiberbench.lmms_eval_tasks": "lmms_eval_tasks",
}
CORE = ("fiberbench.errors", "fiberbench.files", "fiberbench.ownership", "fiberbench.hub", "fiberbench.cli")


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    """The installed name of the module at `path`, e.g. dataset_script/fiber/card.py -> fiberbench.data.fiber.card."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    folder = "/".join(parts[:2]) if parts[:2] == ["fiberbench", "predict"] else parts[0]
    package = {folder: package for package, folder in ARTIFACTS.items()}.get(folder, folder)
    return ".".join([package, *parts[len(folder.split("/")) :]])


def project_imports(path: Path, root: Path = REPO_ROOT) -> set[str]:
    """The absolute names of the project modules (fiberbench.*, bench.*) that `path` imports anywhere.

    Relative imports are resolved against the module's own package, as Python does.
    """
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join([*package[: len(package) - node.level + 1], *([node.module] if node.module else [])])
            module = node.module if node.level == 0 else base
            names.update([module, *(f"{module}.{alias.name}" for alias in node.names)])
    return {name for name in names if name.split(".")[0] in ("fiberbench", "bench")}


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


def test_the_data_tools_never_import_training_or_prediction():
    forbidden = ("fiberbench.training", "fiberbench.predict")
    assert offending("dataset_script", lambda name: not name.startswith(forbidden)) == {}


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
