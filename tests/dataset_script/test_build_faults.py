"""Faults during `fiberbench build-dataset`: a full disk, a killed build, two builds into one folder at once.

Whatever happens, the output folder is either absent, the previous build, or one whole new build,
and the hidden staging folders of failed or killed builds do not pile up.
"""

import hashlib
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fiberbench.cli import main


def state(folder: Path) -> dict:
    return {
        str(path.relative_to(folder)): path.is_dir() or hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
    }


def rows(output_dir: Path) -> dict[str, int]:
    return {
        str(path.relative_to(output_dir)).split("-")[0]: pq.read_metadata(path).num_rows
        for path in output_dir.glob("*/*.parquet")
    }


def build_command(output_dir: Path) -> list[str]:
    """The bundled sample, both configs (about 400 KB of Parquet), into `output_dir`, in a new process."""
    return [sys.executable, "-m", "fiberbench.cli", "build-dataset", "--output_dir", str(output_dir)]


@pytest.fixture
def small_disk(make_small_disk):
    """A 320 KB disk: the sample's text config fits in it, the i3d config does not."""
    return make_small_disk("320k")


def test_a_full_disk_is_one_line_and_keeps_the_previous_build(small_disk, release_dir, cli_error):
    output_dir = small_disk / "fiber"
    assert main(["build-dataset", "--data_dir", str(release_dir), "--output_dir", str(output_dir)]) == 0
    previous = state(small_disk)

    status, line = cli_error("build-dataset", "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 1 and line.endswith(f"error: {output_dir}: No space left on device"), line
    assert state(small_disk) == previous  # the previous build, whole; no staging folder left
    assert rows(output_dir) == {"text/train": 20, "text/validation": 10, "text/test": 10}


def test_a_full_disk_leaves_no_output_at_all(small_disk, cli_error):
    status, line = cli_error("build-dataset", "--output_dir", small_disk / "fiber")
    assert status == 1 and line.endswith(f"error: {small_disk / 'fiber'}: No space left on device"), line
    assert list(small_disk.iterdir()) == []


@pytest.mark.slow
def test_a_killed_build_leaves_a_hidden_folder_that_the_next_build_removes(tmp_path, kill_when):
    output_dir = tmp_path / "fiber"

    def building() -> bool:  # killed mid-build: once the builder writes inside the staging folder
        return bool(list(tmp_path.glob(".fiber.incomplete-*/.build/prepared")))

    assert kill_when(build_command(output_dir), building) == -signal.SIGKILL
    leftovers = list(tmp_path.glob(".fiber.incomplete-*"))
    assert len(leftovers) == 1 and not output_dir.exists()

    assert main(["build-dataset", "--output_dir", str(output_dir)]) == 0
    assert [path.name for path in tmp_path.iterdir()] == ["fiber"]
    assert rows(output_dir)["i3d/train"] == 400


@pytest.mark.slow
def test_two_builds_into_one_folder_at_once_the_second_is_refused_naming_the_first(tmp_path):
    output_dir = tmp_path / "fiber"
    first = subprocess.Popen(build_command(output_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # Once its staging folder is there, the first build holds the output's lock; it is held still there while the
    # second runs: a build of the sample takes about a second, and the second would otherwise meet a finished one.
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob(".fiber.incomplete-*")) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    first.send_signal(signal.SIGSTOP)
    try:
        second = subprocess.run(build_command(output_dir), capture_output=True, text=True, timeout=300)
    finally:
        first.send_signal(signal.SIGCONT)
    first_stderr = first.communicate(timeout=300)[1]
    assert first.returncode == 0, first_stderr
    assert second.returncode == 2, second.stderr
    error_lines = [line for line in second.stderr.splitlines() if line.startswith("fiberbench build-dataset: error:")]
    assert len(error_lines) == 1 and "Traceback" not in second.stderr, second.stderr
    assert f"is being written by another run (fiberbench build-dataset, PID {first.pid} on" in error_lines[0]
    assert [path.name for path in tmp_path.iterdir()] == ["fiber"]
    assert rows(output_dir) == {
        f"{config}/{split}": count
        for config in ("text", "i3d")
        for split, count in (("train", 400), ("validation", 60), ("test", 60))
    }
