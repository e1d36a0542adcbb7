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
}
CORE = ("fiberbench.errors", "fiberbench.files", "fiberbench.hub", "fiberbench.cli")


def project_imports(path: Path) -> set[str]:
    """The absolute names of the project modules (fiberbench.*, bench.*) that `path` imports anywhere."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    return {name for name in names if name.split(".")[0] in ("fiberbench", "bench")}


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
    assert shipped and {str(path.relative_to(REPO_ROOT)): project_imports(path) for path in shipped} == {
        str(path.relative_to(REPO_ROOT)): set() for path in shipped
    }


def test_the_data_tools_never_import_training_or_prediction():
    forbidden = ("fiberbench.training", "fiberbench.predict")
    assert offending("dataset_script", lambda name: not name.startswith(forbidden)) == {}


@pytest.mark.parametrize("folder", ["fiberbench", *ARTIFACTS.values(), "tests"])
def test_nothing_imports_the_benchmarks(folder):
    assert offending(folder, lambda name: not name.startswith("bench")) == {}


def test_the_checks_see_imports_inside_functions(tmp_path):
    module = tmp_path / "lazy.py"
    module.write_text("def f():\n    from fiberbench.training import train\n    import bench.cli\n", encoding="utf-8")
    assert project_imports(module) == {"fiberbench.training", "fiberbench.training.train", "bench.cli"}
