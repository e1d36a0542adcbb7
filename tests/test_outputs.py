"""The output guarantees (`fiberbench.outputs`, docs/reliability.md): what is refused, what is replaced, what a
killed run leaves, and that a second run into an output being written is refused naming the first."""

import contextlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.errors import UsageError
from fiberbench.outputs import (
    atomic_folder,
    check_output,
    finish_output,
    output_lock,
    read_record,
    start_output,
    write_json,
)

COMMAND = "fiberbench evaluate"


def earlier_run(folder: Path, command: str = COMMAND, files=("results.json", "plots/a.png")) -> None:
    """A complete output of `command` in `folder`, written as a command writes it."""
    record = start_output(folder, command, None, folder=True)
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)
    finish_output(folder, record)


def edit(folder: Path, how: str) -> None:
    """The cases' setups: what stands at `folder` before a run."""
    folder.mkdir(exist_ok=True)
    if how == "a user's file":
        (folder / "notes.txt").write_text("mine")
    elif how.startswith("an earlier run"):
        earlier_run(folder, command="fiberbench stats" if "other command" in how else COMMAND)
        if "a user's file" in how:
            (folder / "plots" / "notes.txt").write_text("mine")
    elif how.startswith("a user's hidden") or how.startswith("a user's empty"):
        earlier_run(folder)
        (folder / ".env").write_text("SECRET=1") if "hidden" in how else (folder / "mine").mkdir()
    elif how == "a link":
        folder.rmdir()
        folder.with_name("elsewhere").mkdir()
        folder.symlink_to(folder.with_name("elsewhere"))


# (what stands at the output, overwrite flag, the refusal; None: accepted)
CASES = [
    ("nothing", False, None),
    ("an empty folder", False, None),
    ("a user's file", False, r"out exists and has no record fiberbench_output.json, not fiberbench evaluate's"),
    ("a user's file", True, r"nothing is replaced, even with --overwrite_output_dir"),
    ("an earlier run", False, r"holds the output of an earlier run of fiberbench evaluate \(complete\); pass "
     r"--overwrite_output_dir"),
    ("an earlier run", True, None),
    ("an earlier run of another command", True, r"was written by fiberbench stats, not fiberbench evaluate's"),
    ("an earlier run with a user's file in it", True, r"holds plots/notes.txt, which fiberbench evaluate did not write"),
    ("a link", True, r"is a symbolic link"),
    ("a user's hidden file", True, r"holds \.env, which fiberbench evaluate did not write"),
    ("a user's empty folder", True, r"holds mine/, which fiberbench evaluate did not write"),
]


@pytest.mark.parametrize(("there", "overwrite", "refusal"), CASES, ids=[f"{c[0]}{', overwrite' * c[1]}" for c in CASES])
def test_what_stands_at_an_output_folder(tmp_path, there, overwrite, refusal):
    folder = tmp_path / "out"
    if there != "nothing":
        edit(folder, there)
    if refusal is None:
        check_output(folder, command=COMMAND, flag="--output_dir", overwrite=overwrite, folder=True)
    else:
        with pytest.raises(UsageError, match=refusal):
            check_output(folder, command=COMMAND, flag="--output_dir", overwrite=overwrite, folder=True)


@pytest.mark.parametrize(
    ("output", "refusal"),
    [
        (".", "is the current directory or a folder above it"),
        ("..", "is the current directory or a folder above it"),
        ("~", "is the home directory or a folder above it"),
        ("/", "is the root folder"),
        ("data/val.json", "is an input of this command"),
        ("data/hard_link.json", "is an input of this command"),
        ("data/new.json", "lies inside the input folder"),
        ("data", "holds the input"),
    ],
)
def test_never_an_input_or_a_folder_above_the_user(tmp_path, monkeypatch, output, refusal):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "val.json").write_text("[]")
    os.link(tmp_path / "data" / "val.json", tmp_path / "data" / "hard_link.json")
    inputs = ["data/val.json"] if output.endswith(".json") and "new" not in output else ["data"]
    if output == "data":
        inputs = ["data/val.json"]
    with pytest.raises(UsageError, match=refusal):
        check_output(output, command=COMMAND, flag="--output_dir", folder=True, inputs=inputs)


def test_replacing_an_earlier_run_deletes_only_what_it_wrote(tmp_path):
    folder = tmp_path / "out"
    earlier_run(folder)
    (tmp_path / "neighbour.txt").write_text("beside the folder")
    previous = check_output(folder, command=COMMAND, flag="--output_dir", overwrite=True, folder=True)
    record = start_output(folder, COMMAND, previous, folder=True)
    assert sorted(p.name for p in folder.iterdir()) == ["fiberbench_output.json"]
    assert read_record(folder, folder=True)["state"] == "running"
    write_json(folder / "results.json", {"f1": 1.0})
    finish_output(folder, record, arguments={"seed": 0})
    record = read_record(folder, folder=True)
    assert (record["state"], record["files"], record["arguments"]) == ("complete", ["results.json"], {"seed": 0})
    assert (tmp_path / "neighbour.txt").exists()


def test_two_outputs_of_one_stem_never_share_a_record(tmp_path):
    record = start_output(tmp_path / "hits.csv", "fiberbench hit-inputs", None, folder=False)
    finish_output(tmp_path / "hits.csv", record)
    (tmp_path / "hits.html").write_text("a user's page")
    for name in ("hits.html", "hits.json"):
        with pytest.raises(UsageError, match=f"{name}: its record's name, hits.metadata.json, is taken by the record of "
                                             "hits.csv"):
            check_output(tmp_path / name, command="fiberbench hit-inputs", flag="--output_file", overwrite=True)


def test_a_file_output_has_its_record_beside_it(tmp_path):
    output = tmp_path / "val.json"
    record = start_output(output, "fiberbench blank", None, folder=False, arguments={"seed": 2})
    output.write_text("[]")
    finish_output(output, record)
    assert read_record(output, folder=False)["arguments"] == {"seed": 2}
    with pytest.raises(UsageError, match="pass --overwrite_output_file"):
        check_output(output, command="fiberbench blank", flag="--output_file")
    assert check_output(output, command="fiberbench blank", flag="--output_file", overwrite=True)["state"] == "complete"
    with pytest.raises(UsageError, match="not fiberbench answers's"):
        check_output(output, command="fiberbench answers", flag="--output_file", overwrite=True)


HOLD = textwrap.dedent(
    """
    import sys
    from fiberbench.outputs import output_lock, start_output
    with output_lock(sys.argv[1], "--output_dir"):
        start_output(sys.argv[1], "fiberbench other-run", None, folder=True)
        print("held", flush=True)
        sys.stdin.read()
    """
)


@contextlib.contextmanager
def held_by(code: str, output: Path):
    """A process running `code` on `output` until it prints "held"; killed on leaving."""
    holder = subprocess.Popen([sys.executable, "-c", code, str(output)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def test_a_second_run_is_refused_naming_the_first_and_a_killed_runs_lock_is_free(tmp_path):
    with held_by(HOLD, tmp_path / "out") as holder:
        with pytest.raises(UsageError, match=rf"out is being written by another run \(fiberbench other-run, PID {holder.pid} on"):
            with output_lock(tmp_path / "out", "--output_dir"):
                pass
        with pytest.raises(UsageError, match="being written by another run"):  # another spelling of the same output
            with output_lock(tmp_path / "out" / "sub" / ".." / ".." / "out", "--output_dir"):
                pass
    with output_lock(tmp_path / "out", "--output_dir"):  # the kernel released the killed run's lock
        assert read_record(tmp_path / "out", folder=True)["state"] == "running"  # and its output says unfinished


KILLED = textwrap.dedent(
    """
    import os, sys
    from fiberbench.outputs import atomic_folder, atomic_path
    with atomic_path(sys.argv[1]) as temporary:
        temporary.write_text("half")
        with atomic_folder(sys.argv[2]) as staging:
            (staging / "half").write_text("half")
            os.kill(os.getpid(), 9)
    """
)


def test_a_killed_write_leaves_the_previous_output_whole(tmp_path):
    (tmp_path / "results.json").write_text("previous")
    (tmp_path / "built").mkdir()
    (tmp_path / "built" / "data").write_text("previous")
    subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "results.json"), str(tmp_path / "built")])
    assert (tmp_path / "results.json").read_text() == "previous"
    assert [p.name for p in (tmp_path / "built").iterdir()] == ["data"]
    assert len(list(tmp_path.iterdir())) == 4  # the killed run's two hidden leftovers
    start_output(tmp_path / "results.json", "fiberbench x", None, folder=False)  # the next run removes them
    with atomic_folder(tmp_path / "built") as staging:
        (staging / "data").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["built", "results.json", "results.metadata.json"]
    assert (tmp_path / "built" / "data").read_text() == "new"


def test_what_is_written_is_readable_by_others(tmp_path):
    umask = os.umask(0o022)
    try:
        write_json(tmp_path / "results.json", {})
        with atomic_folder(tmp_path / "built") as staging:
            (staging / "sub").mkdir(mode=0o700)
    finally:
        os.umask(umask)
    assert oct((tmp_path / "results.json").stat().st_mode & 0o777) == "0o644"
    assert oct((tmp_path / "built" / "sub").stat().st_mode & 0o777) == "0o755"


def test_json_that_is_not_json_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError):
        write_json(tmp_path / "results.json", {"f1": float("nan")})
    assert list(tmp_path.iterdir()) == []


ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "dataset_script" / "fiber" / "sample"
# Every command that writes, run in-process with the output it names: a folder (--output_dir) or a file.
COMMANDS = {
    "build-dataset": ["build-dataset", "--output_dir", "{out}"],
    "blank": ["blank", str(ROOT / "tests/dataset_script/data/vatex_sample.json"), "--output_file", "{out}.json"],
    "hit-inputs": ["hit-inputs", str(SAMPLE / "val.json"), "--output_file", "{out}.csv"],
    "answers": ["answers", "--blanked_files", str(SAMPLE / "val.json"), "--answers_files", "{tmp}/answers.csv",
                "--output_dir", "{out}"],
    "agreement": ["agreement", str(SAMPLE / "val.json"), "--output_file", "{out}.json"],
    "stats": ["stats", str(SAMPLE / "val.json"), "--output_dir", "{out}"],
    "evaluate": ["evaluate", "{tmp}/predictions.jsonl", "--output_dir", "{out}"],
    "leaderboard": ["leaderboard", "--results_dir", "{tmp}/results", "--output_dir", "{out}"],
}


def command_line(name: str, tmp_path: Path) -> tuple[list[str], Path]:
    """The arguments of command `name` writing into `tmp_path`, and the output it names."""
    (tmp_path / "answers.csv").write_text("video_id,video_start_time,video_end_time,annotator_id,answer_1\n")
    rows = [{f: r[f] for f in ("video_id", "video_start_time", "video_end_time")} | {"prediction": r["label"]}
            for r in json.loads((SAMPLE / "test.json").read_text())]
    (tmp_path / "predictions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "results" / "submissions").mkdir(parents=True, exist_ok=True)
    argv = [a.format(out=tmp_path / "out", tmp=tmp_path) for a in COMMANDS[name]]
    flag = next(a for a in argv if a.startswith("--output_"))
    return argv, Path(argv[argv.index(flag) + 1])


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_replaces_what_it_did_not_write_even_when_told(tmp_path, cli_error, name):
    argv, output = command_line(name, tmp_path)
    folder = "--output_dir" in argv
    if folder:
        output.mkdir()
    users = output / "notes.txt" if folder else output
    users.write_text("a user's own file")
    # The leaderboard replaces its own Space folder without being told (adding a system is the usual run).
    overwrite = [] if name == "leaderboard" else ["--overwrite_output_dir" if folder else "--overwrite_output_file"]
    if name == "answers":  # its output files go beside a user's file in the folder, never over one
        assert main([*argv, *overwrite]) == 0 and (output / "val.json").is_file()
    else:
        status, line = cli_error(*argv, *overwrite)
        assert status == 2 and "nothing is replaced" in line, line
    assert users.read_text() == "a user's own file"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_command_writes_into_an_output_another_run_is_writing(tmp_path, cli_error, name):
    argv, output = command_line(name, tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLD.replace("fiberbench other-run", f"fiberbench {name}"),
                               str(output)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        status, line = cli_error(*argv)
        assert status == 2 and f"is being written by another run (fiberbench {name}, PID {holder.pid}" in line, line
    finally:
        holder.kill()
        holder.wait()


def test_a_run_that_has_written_no_record_yet_is_named_by_its_process(tmp_path):
    code = "import sys\nfrom fiberbench.outputs import output_lock\nwith output_lock(sys.argv[1], '--output_dir'):\n" \
           "    print('held', flush=True)\n    sys.stdin.read()\n"
    with held_by(code, tmp_path / "out") as holder:
        with pytest.raises(UsageError, match=rf"being written by another run \(PID {holder.pid}: .*python"):
            with output_lock(tmp_path / "out", "--output_dir"):
                pass
