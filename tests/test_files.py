"""fiberbench.files: atomic files and folders with the usual permissions, and outputs kept apart from inputs."""

import json
import os
import stat
import subprocess
import sys

import pytest

from fiberbench.errors import UsageError
from fiberbench.files import (
    atomic_folder,
    atomic_path,
    check_outputs_apart,
    remove_stale_staging,
    write_json,
    write_jsonl,
    write_text,
)


@pytest.fixture
def umask_022():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_written_files_get_the_usual_mode_not_tempfiles_0600(tmp_path, umask_022):
    write_text(tmp_path / "a.md", "text")
    write_json(tmp_path / "results.json", {"f1": 1.0})
    write_jsonl(tmp_path / "predictions.jsonl", [{"prediction": "a dog"}])
    with atomic_path(tmp_path / "chart.png") as temporary:
        temporary.write_bytes(b"png")
    for name in ("a.md", "results.json", "predictions.jsonl", "chart.png"):
        assert mode(tmp_path / name) == 0o644, name


def test_a_folder_and_its_files_get_the_usual_modes(tmp_path, umask_022):
    with atomic_folder(tmp_path / "model") as staging:
        (staging / "sub").mkdir(mode=0o700)
        (staging / "sub" / "weights.safetensors").write_bytes(b"x")
        os.chmod(staging / "sub" / "weights.safetensors", 0o600)
    assert mode(tmp_path / "model") == 0o755
    assert mode(tmp_path / "model" / "sub") == 0o755
    assert mode(tmp_path / "model" / "sub" / "weights.safetensors") == 0o644


def test_writers_replace_files_whole_and_leave_no_temporary_file(tmp_path):
    path = tmp_path / "out" / "results.json"
    write_json(path, {"f1": 1.0})
    write_json(path, {"f1": 2.0})
    assert json.loads(path.read_text(encoding="utf-8")) == {"f1": 2.0}
    write_jsonl(tmp_path / "out" / "predictions.jsonl", [{"prediction": "a dog"}, {"prediction": "ü"}])
    lines = (tmp_path / "out" / "predictions.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [{"prediction": "a dog"}, {"prediction": "ü"}]
    assert sorted(item.name for item in path.parent.iterdir()) == ["predictions.jsonl", "results.json"]


def test_a_failed_write_keeps_the_old_file(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"f1": 1.0})
    with pytest.raises(TypeError):
        write_json(path, {"f1": object()})
    assert json.loads(path.read_text(encoding="utf-8")) == {"f1": 1.0}
    assert [item.name for item in tmp_path.iterdir()] == ["results.json"]


def test_nan_and_infinity_are_never_written_as_json(tmp_path):
    with pytest.raises(ValueError, match="JSON compliant"):
        write_json(tmp_path / "results.json", {"f1": float("nan")})
    with pytest.raises(ValueError, match="JSON compliant"):
        write_jsonl(tmp_path / "predictions.jsonl", [{"loss": float("inf")}])
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_file_keeps_the_suffix(tmp_path):
    with atomic_path(tmp_path / "chart.png") as temporary:
        assert temporary.suffix == ".png" and temporary.parent == tmp_path and temporary.name.startswith(".")


def test_a_failed_folder_leaves_nothing_and_keeps_the_previous_one(tmp_path):
    target = tmp_path / "fiber"
    with atomic_folder(target) as staging:
        (staging / "README.md").write_text("first")
    with pytest.raises(RuntimeError), atomic_folder(target, replace=True) as staging:
        (staging / "README.md").write_text("second")
        raise RuntimeError("killed")
    assert (target / "README.md").read_text() == "first"
    assert [path.name for path in tmp_path.iterdir()] == ["fiber"]


def test_a_folder_is_not_published_over_another_without_replace(tmp_path):
    target = tmp_path / "fiber"
    with atomic_folder(target) as staging:
        (staging / "README.md").write_text("first")
    with pytest.raises(FileExistsError), atomic_folder(target) as staging:
        (staging / "README.md").write_text("second")
    assert (target / "README.md").read_text() == "first"
    with atomic_folder(target, replace=True) as staging:
        (staging / "README.md").write_text("second")
    assert (target / "README.md").read_text() == "second"
    assert [path.name for path in tmp_path.iterdir()] == ["fiber"]


def test_staging_folders_of_killed_runs_are_removed_by_the_next_run(tmp_path):
    target = tmp_path / "fiber"
    # A process that starts a folder and is killed (SIGKILL) before it finishes.
    script = (
        "import os, sys\n"
        "from fiberbench.files import atomic_folder\n"
        "with atomic_folder(sys.argv[1]) as staging:\n"
        "    (staging / 'part.bin').write_bytes(b'x')\n"
        "    os.kill(os.getpid(), 9)\n"
    )
    result = subprocess.run([sys.executable, "-c", script, str(target)], check=False)
    assert result.returncode == -9
    leftovers = [path for path in tmp_path.iterdir() if path.name.startswith(".fiber.incomplete-")]
    assert len(leftovers) == 1 and not target.exists()
    assert remove_stale_staging(target) == leftovers
    assert list(tmp_path.iterdir()) == []


def test_the_temporary_file_of_a_killed_write_is_removed_by_the_next_write(tmp_path):
    target = tmp_path / "predictions.jsonl"
    write_text(target, "previous\n")
    script = (
        "import os, sys\n"
        "from fiberbench.files import atomic_path\n"
        "with atomic_path(sys.argv[1]) as temporary:\n"
        "    temporary.write_text('half')\n"
        "    os.kill(os.getpid(), 9)\n"
    )
    assert subprocess.run([sys.executable, "-c", script, str(target)], check=False).returncode == -9
    assert len(list(tmp_path.iterdir())) == 2 and target.read_text() == "previous\n"
    write_text(target, "new\n")
    assert [path.name for path in tmp_path.iterdir()] == ["predictions.jsonl"] and target.read_text() == "new\n"


def test_staging_folders_of_live_processes_are_kept(tmp_path):
    with atomic_folder(tmp_path / "fiber") as staging:
        assert remove_stale_staging(tmp_path / "fiber") == []
        assert staging.is_dir()


@pytest.mark.parametrize(
    ("flag", "output", "problem"),
    [
        ("--output_file", "in.json", "is an input"),
        ("--output_dir", ".", "holds the input"),
        ("--output_file", "data/sub/out.json", "lies inside the input folder"),
    ],
)
def test_an_output_that_would_destroy_an_input_is_refused(tmp_path, flag, output, problem):
    (tmp_path / "data").mkdir()
    with pytest.raises(UsageError, match=problem):
        check_outputs_apart({flag: tmp_path / output}, [tmp_path / "in.json", tmp_path / "data", None])


def test_an_input_reached_through_a_symlink_is_still_an_input(tmp_path):
    (tmp_path / "in.json").write_text("[]")
    (tmp_path / "link.json").symlink_to(tmp_path / "in.json")
    with pytest.raises(UsageError, match="is an input"):
        check_outputs_apart({"--output_file": tmp_path / "link.json"}, [tmp_path / "in.json"])


def test_outputs_beside_the_inputs_are_fine(tmp_path):
    check_outputs_apart({"--output_file": tmp_path / "out.json"}, [tmp_path / "in.json", tmp_path / "data"])


def test_an_output_of_the_wrong_kind_is_refused(tmp_path):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError, match="is a folder; give a file name"):
        check_outputs_apart({"--output_file": tmp_path / "folder"}, [])
    with pytest.raises(UsageError, match="file is a file, not a folder"):
        check_outputs_apart({"--output_dir": tmp_path / "file" / "stats.json"}, [])
    check_outputs_apart({"--output_dir": tmp_path / "folder"}, [])
    check_outputs_apart({"--output_dir": tmp_path / "file"}, [])  # a file in a folder flag: rewritten, e.g. stats.json


def test_write_errors_name_the_destination_not_the_temporary_file(tmp_path):
    (tmp_path / "results.json").mkdir()  # a folder where the file should go
    with pytest.raises(IsADirectoryError) as error:
        write_json(tmp_path / "results.json", {"f1": 1.0})
    assert error.value.filename == str(tmp_path / "results.json")
    assert [path.name for path in tmp_path.iterdir()] == ["results.json"]
