"""RunFolder: a run writes only where it owns the entry, replaces only its own runs, pushes only its own files."""

import json

import pytest

from fiberbench.errors import UsageError
from fiberbench.ownership import FOLDER_RECORD as RUN_MARKER
from fiberbench.training.outputs import RunFolder, format_results_table


def check(path, overwrite=False, resume=None, inputs=()):
    return RunFolder.check(str(path), overwrite=overwrite, resume_from_checkpoint=resume, inputs=list(inputs))


def finished_run(path):
    """A folder as a run leaves it: results, a checkpoint and the model with its files."""
    run = check(path)
    run.claim()
    run.entry("results.json").write_text("{}", encoding="utf-8")
    with run.atomic_entry("step_2") as staging:
        (staging / "model.safetensors").write_bytes(b"weights")
    with run.atomic_entry("model") as staging:
        (staging / "config.json").write_text("{}", encoding="utf-8")
    return run


def test_a_new_or_empty_folder_is_accepted(tmp_path):
    assert check(tmp_path / "new").entries == {}
    assert check(tmp_path).entries == {}


def test_a_folder_of_someone_else_is_refused_even_with_overwrite(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work", encoding="utf-8")
    for overwrite in (False, True):
        with pytest.raises(UsageError, match="is not empty and was not written by training/train.py"):
            check(tmp_path, overwrite=overwrite)
    assert (tmp_path / "thesis.tex").read_text(encoding="utf-8") == "years of work"


def test_a_previous_run_needs_overwrite_or_resume(tmp_path):
    finished_run(tmp_path)
    with pytest.raises(UsageError) as refusal:
        check(tmp_path)
    assert str(refusal.value) == (
        f"--output_dir {tmp_path} holds the output of an earlier run of training/train.py (running); to run it "
        f"again, pass --overwrite_output_dir to replace it or choose another --output_dir (or --resume_from_checkpoint "
        f"{tmp_path / 'step_2'} to continue it)"
    )
    assert check(tmp_path, resume=str(tmp_path / "step_2")).previous_entries == []
    assert check(tmp_path, overwrite=True).previous_entries == ["model", "results.json", "step_2"]


def test_the_refusal_names_resuming_only_with_a_checkpoint_and_then_the_last_one(tmp_path):
    """The main job saves no checkpoint: a second run is told how to run again, not to resume from a step_N."""
    run = check(tmp_path)
    run.claim()
    run.entry("results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError) as refusal:
        check(tmp_path)
    again = "to run it again, pass --overwrite_output_dir to replace it or choose another --output_dir"
    assert str(refusal.value).endswith(again)
    run = check(tmp_path, overwrite=True)
    run.claim()
    for name in ("step_2", "step_10"):  # step_10 saved last, within the same second or not
        with run.atomic_entry(name) as staging:
            (staging / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(UsageError, match=f"--resume_from_checkpoint {tmp_path / 'step_10'} to continue it"):
        check(tmp_path)


@pytest.mark.parametrize("state", ["running", "complete"])
def test_a_run_that_failed_before_writing_anything_leaves_the_folder_free(tmp_path, state):
    """A resume that fails at its checkpoint has claimed the folder (its record) and written nothing in it."""
    run = check(tmp_path / "out")
    run.claim()
    if state == "complete":
        run.finish()
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [RUN_MARKER]
    again = check(tmp_path / "out")
    assert again.entries == {} and again.previous_entries == []
    again.claim()
    again.entry("results.json").write_text("{}", encoding="utf-8")
    with pytest.raises(UsageError, match="holds the output of an earlier run of training/train.py"):
        check(tmp_path / "out")


def test_overwrite_removes_only_the_previous_runs_entries(tmp_path):
    finished_run(tmp_path)
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    run = check(tmp_path, overwrite=True)
    run.claim()
    assert sorted(path.name for path in tmp_path.iterdir()) == [RUN_MARKER, "notes.txt"]
    assert json.loads((tmp_path / RUN_MARKER).read_text(encoding="utf-8"))["entries"] == {}


def test_a_record_listing_what_train_py_never_writes_deletes_nothing(tmp_path):
    """The reproduction: a hand-edited record listing notes.txt made --overwrite_output_dir delete it."""
    finished_run(tmp_path)
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    record = json.loads((tmp_path / RUN_MARKER).read_text(encoding="utf-8"))
    record["entries"]["notes.txt"] = None
    (tmp_path / RUN_MARKER).write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(UsageError, match="lists notes.txt, which training/train.py never writes"):
        check(tmp_path, overwrite=True)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("entry", ["step_3/thesis.tex", "model/credentials.txt"])
def test_a_users_step_or_model_folder_is_refused(tmp_path, entry):
    finished_run(tmp_path)
    (tmp_path / entry).parent.mkdir(exist_ok=True)
    (tmp_path / entry).write_text("mine", encoding="utf-8")
    for overwrite in (False, True):
        with pytest.raises(UsageError, match="holds (step_3|model/credentials.txt), which training/train.py did not write"):
            check(tmp_path, overwrite=overwrite)
    assert (tmp_path / entry).read_text(encoding="utf-8") == "mine"


def test_an_entry_that_appears_during_the_run_is_left_alone(tmp_path):
    run = check(tmp_path)
    run.claim()
    (tmp_path / "step_5").mkdir()
    with pytest.raises(UsageError, match="appeared during the run"):
        run.entry("step_5")


def test_a_file_dropped_into_the_model_folder_is_neither_replaced_nor_pushed(tmp_path):
    run = finished_run(tmp_path)
    (tmp_path / "model" / "credentials.txt").write_text("secret", encoding="utf-8")
    assert run.files_of("model") == ["config.json"]
    with pytest.raises(UsageError, match="credentials.txt, which training/train.py did not write"):
        with run.atomic_entry("model") as staging:
            (staging / "config.json").write_text("{}", encoding="utf-8")
    assert (tmp_path / "model" / "credentials.txt").read_text(encoding="utf-8") == "secret"


def test_a_failed_save_leaves_the_previous_folder_whole(tmp_path):
    run = finished_run(tmp_path)
    with pytest.raises(OSError, match="disk full"):
        with run.atomic_entry("model") as staging:
            (staging / "config.json").write_text('{"new": true}', encoding="utf-8")
            raise OSError("disk full")
    assert (tmp_path / "model" / "config.json").read_text(encoding="utf-8") == "{}"
    assert sorted(path.name for path in tmp_path.iterdir()) == [RUN_MARKER, "model", "results.json", "step_2"]


def test_the_model_card_joins_the_files_to_push(tmp_path):
    run = finished_run(tmp_path)
    run.add_file("model", "README.md").write_text("card", encoding="utf-8")
    assert run.files_of("model") == ["README.md", "config.json"]
    marker = json.loads((tmp_path / RUN_MARKER).read_text(encoding="utf-8"))
    assert marker["entries"]["model"] == ["README.md", "config.json"]


def test_an_output_folder_holding_or_inside_an_input_is_refused(tmp_path):
    dataset = tmp_path / "fiber"
    dataset.mkdir()
    with pytest.raises(UsageError, match="holds the input"):
        check(tmp_path, inputs=[dataset])
    with pytest.raises(UsageError, match="lies inside the input folder"):
        check(dataset / "run", inputs=[dataset])


def test_a_marker_that_is_not_ours_is_refused(tmp_path):
    (tmp_path / RUN_MARKER).write_text('{"written_by": "someone", "entries": {"..": null}}', encoding="utf-8")
    with pytest.raises(UsageError, match="was written by someone, not training/train.py"):
        check(tmp_path, overwrite=True)


def test_results_table_has_a_row_per_split():
    metrics = {
        "num_examples": 2,
        "exact_match": 50.0,
        "f1": 62.5,
        "correct_at_k": {"1": 50.0},
        "map": 75.0,
        "label_probability": None,
    }
    table = format_results_table("title", {"validation": metrics, "test": metrics})
    lines = table.splitlines()
    assert lines[0] == "title" and len(lines) == 5
    cells = [cell.strip() for cell in lines[3].strip("|").split("|")]
    assert cells == ["validation", "2", "50.0", "62.5", "-", "-", "50.0", "75.0", "-"]  # "-": not given
