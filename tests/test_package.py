"""The distribution: one `fiberbench` namespace in the wheel, installable as a wheel and editable."""

import json
import shutil
import site
import tomllib
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from .readme_walks import REPOSITORY, not_copied

# One worker copies the checkout and builds the wheel (pyproject.toml's --dist loadgroup).
pytestmark = pytest.mark.xdist_group("package_build")

SUBPACKAGES = [
    "fiberbench",
    "fiberbench.cli",
    "fiberbench.data",
    "fiberbench.data.annotation",
    "fiberbench.data.fiber",
    "fiberbench.lmms_eval_tasks",
    "fiberbench.lmms_eval_tasks.fiber.utils",
    "fiberbench.metric",
    "fiberbench.metric.fiber_metric",
    "fiberbench.modeling",
    "fiberbench.predict",
    "fiberbench.testing",
    "fiberbench.training",
]
# Files that the package must carry for offline use: the sample, the annotation page, the metric
# card, the shipped tokenizer, the training configs and the lmms-eval task.
PACKAGE_DATA = [
    "fiberbench/data/annotation/annotation.html",
    "fiberbench/data/fiber/sample/train.json",
    "fiberbench/data/fiber/sample/val.json",
    "fiberbench/data/fiber/sample/test.json",
    "fiberbench/metric/fiber_metric/fiber_metric.py",
    "fiberbench/metric/fiber_metric/scores.py",
    "fiberbench/metric/fiber_metric/statistics.py",
    "fiberbench/metric/fiber_metric/agreement.py",
    "fiberbench/metric/fiber_metric/inputs.py",
    "fiberbench/metric/fiber_metric/citation.py",
    "fiberbench/metric/fiber_metric/README.md",
    "fiberbench/modeling/tokenizer/tokenizer.json",
    "fiberbench/training/configs/sample_demo.yaml",
    "fiberbench/lmms_eval_tasks/fiber/_default_template_yaml",
    "fiberbench/lmms_eval_tasks/fiber/fiber_test.yaml",
    "fiberbench/lmms_eval_tasks/fiber/fiber_val.yaml",
    "fiberbench/lmms_eval_tasks/fiber/utils.py",
]


def test_the_group_runs_on_one_worker(request):
    """Under `pytest -n`, --dist loadgroup marks a grouped test's id with its group, and so runs the group on one
    worker, which builds the wheel (or starts a Space) once; pytest 9.2 with xdist 3.8 stops it (pyproject.toml)."""
    if getattr(request.config.option, "loadgroup", False):
        assert request.node.nodeid.endswith("@package_build"), request.node.nodeid


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the checkout's files to build and install: pip builds in the source tree (its build/ and
    *.egg-info), where an install of the project may be writing at the same moment (.ci/run installs its other
    environments while the suite runs), and where a test should leave nothing."""
    copy = tmp_path_factory.mktemp("source") / "repository"
    shutil.copytree(REPOSITORY, copy, ignore=not_copied, symlinks=True)
    return copy


@pytest.fixture(scope="module")
def wheel_path(source, tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", out_dir, source],
        check=True,
    )
    (wheel,) = out_dir.glob("fiber_benchmark-*.whl")
    return wheel


def make_venv_reusing_dependencies(path: Path) -> Path:
    """A bare virtual environment that sees this interpreter's installed dependencies.

    The `.pth` line appends this environment's site-packages AFTER the new one, and `.pth` files
    inside it are not executed, so an editable install of the project here cannot shadow the one
    under test there.
    """
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    target_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    Path(target_site, "_reuse_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def import_everything(python: Path) -> dict[str, str]:
    """Imports every subpackage in `python`'s environment; returns module name -> file."""
    code = (
        "import importlib, json\n"
        f"names = {SUBPACKAGES!r}\n"
        "print(json.dumps({n: importlib.import_module(n).__file__ for n in names}))\n"
    )
    result = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, cwd="/")
    return json.loads(result.stdout)


def test_wheel_holds_only_the_fiberbench_namespace(wheel_path):
    names = zipfile.ZipFile(wheel_path).namelist()
    top_level = {name.split("/")[0] for name in names}
    assert top_level == {"fiberbench", wheel_path.name.split("-")[0] + "-0.1.0.dist-info"}
    for data_file in PACKAGE_DATA:
        assert data_file in names, f"{data_file} is missing from the wheel"
    assert any(name.startswith("fiberbench/data/fiber/sample/i3d/") and name.endswith(".npy") for name in names)


def test_wheel_install_imports_every_subpackage(wheel_path, tmp_path):
    python = make_venv_reusing_dependencies(tmp_path / "venv")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "-q", wheel_path], check=True
    )
    files = import_everything(python)
    for name, file in files.items():
        assert file.startswith(str(tmp_path / "venv")), f"{name} was imported from {file}"
    help_text = subprocess.run(
        [tmp_path / "venv" / "bin" / "fiberbench", "--help"], check=True, capture_output=True, text=True
    ).stdout
    assert "build-dataset" in help_text


def test_editable_install_maps_namespace_onto_artifact_folders(source, tmp_path):
    python = make_venv_reusing_dependencies(tmp_path / "venv")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-build-isolation", "-q",
         "-e", source],
        check=True,
    )
    files = import_everything(python)
    folders = {name: Path(file).parent.relative_to(source).as_posix() for name, file in files.items()}
    assert folders["fiberbench.data"] == "dataset_script"
    assert folders["fiberbench.data.fiber"] == "dataset_script/fiber"
    assert folders["fiberbench.metric"] == "metric"
    assert folders["fiberbench.metric.fiber_metric"] == "metric/fiber_metric"
    assert folders["fiberbench.lmms_eval_tasks"] == "lmms_eval_tasks"
    assert folders["fiberbench.modeling"] == "modeling"
    assert folders["fiberbench.training"] == "training"



def test_the_wheel_lists_every_package_of_the_tree():
    """A package folder left out of pyproject.toml's `packages` would be missing from the wheel, silently."""
    setuptools = tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (REPOSITORY / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(REPOSITORY / folder).parts
            found.add(".".join([package, *parts]))
    assert len(found) > 10
    assert sorted(found - set(setuptools["packages"])) == []  # (data folders without code are listed too)
