"""The lock files: what they pin agrees with pyproject.toml, and `locks/lock.py verify` notices an environment that moved."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "locks" / "lock.py"


def load_lock_module():
    spec = importlib.util.spec_from_file_location("fiber_locks", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


lock = load_lock_module()


def every_fork(path: Path) -> dict[str, list[str]]:
    """{name: [version of each marker fork]} of a lock, for every interpreter and platform it covers."""
    pins = {}
    for line in path.read_text().splitlines():
        match = lock._PIN.match(line.strip())
        if match:
            pins.setdefault(lock.canonical(match.group(1)), []).append(match.group(2))
    return pins


def declared(extras: tuple[str, ...]) -> list[Requirement]:
    project = lock.pyproject()["project"]
    requirements = [Requirement(line) for line in project["dependencies"]]
    for extra in extras:
        requirements += [Requirement(line) for line in project["optional-dependencies"][extra]]
    return requirements


@pytest.mark.parametrize("name", list(lock.ENVIRONMENTS))
def test_every_declared_requirement_is_pinned_within_its_range(name):
    pins = every_fork(lock.lock_path(name))
    for requirement in declared(lock.ENVIRONMENTS[name][0]):
        versions = pins.get(lock.canonical(requirement.name))
        assert versions, f"{name}.txt pins no {requirement.name}: run python locks/lock.py compile {name}"
        for version in versions:
            assert requirement.specifier.contains(Version(version), prereleases=True), (name, requirement, version)


@pytest.mark.parametrize("name", list(lock.ENVIRONMENTS))
def test_the_torch_build_is_the_tested_one(name):
    pins = every_fork(lock.lock_path(name))
    for pin in lock.TORCH[name]:
        package, version = pin.split("==")
        assert pins[package] == [version]


def test_the_lower_bounds_lock_pins_each_declared_lower_bound():
    pins = every_fork(lock.lock_path("lower"))
    for pin in lock.lower_bounds():
        package, version = pin.split("==")
        assert [Version(found) for found in pins[lock.canonical(package)]] == [Version(version)], pin


def test_the_video_lock_holds_filelock_below_4_3_for_lmms_eval():
    versions = every_fork(lock.lock_path("video"))["filelock"]
    assert versions and all(Version(version) < Version("4.3") for version in versions)
    assert every_fork(lock.lock_path("video"))["lmms-eval"] == ["0.7.3"]


def test_differences_ignore_local_labels_and_unlisted_installers():
    pins = {"torch": ("2.13.0", None), "numpy": ("2.4.6", None)}
    assert lock.differences(pins, {"torch": "2.13.0+cpu", "numpy": "2.4.6", "pip": "26.0", "uv": "0.13.9"}) == []
    found = lock.differences(pins, {"torch": "2.14.1", "numpy": "2.4.6", "filelock": "4.3.1"})
    assert found == [
        "filelock 4.3.1 is installed but not in the lock",
        "torch 2.14.1 is installed where the lock has 2.13.0",
    ]


def test_moved_names_each_pin_that_changed(tmp_path):
    old, new = tmp_path / "old.txt", tmp_path / "new.txt"
    old.write_text("filelock==4.2.12\nnumpy==2.2.6 ; python_full_version < '3.11'\nsix==1.17.0\n")
    new.write_text("filelock==4.3.1\nnumpy==2.2.6 ; python_full_version < '3.11'\nzipp==3.23.0\n")
    assert lock.moved(old, new) == ["filelock: 4.2.12 -> 4.3.1", "six: 1.17.0 -> (gone)", "zipp: (new) -> 3.23.0"]


def test_verify_fails_naming_a_package_this_environment_has_in_another_version(tmp_path):
    present = lock.installed()
    pinned = [f"{name}=={version}" for name, version in sorted(present.items()) if name not in lock.NOT_LOCKED]
    exact = tmp_path / "exact.txt"
    exact.write_text("\n".join(pinned) + "\n")
    ran = subprocess.run([sys.executable, str(SCRIPT), "verify", str(exact)], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert "this environment is what exact.txt pins" in ran.stdout

    other = tmp_path / "other.txt"
    other.write_text("\n".join(line for line in pinned if not line.startswith("packaging==")) + "\npackaging==1.0\n")
    ran = subprocess.run([sys.executable, str(SCRIPT), "verify", str(other)], capture_output=True, text=True)
    assert ran.returncode == 1
    assert f"packaging {present['packaging']} is installed where the lock has 1.0 (other.txt)" in ran.stderr
