"""Bad inputs to `fiberbench evaluate`: one line naming what to fix, exit status 2 (usage) or 1 (data), nothing written.

The strict join's errors (a blank missing, given twice or not in the split; no or a non-string
prediction) are in test_evaluate_command.py.
"""

import json
import re

import pytest

from fiberbench.cli import main
from fiberbench.data import load_sample
from fiberbench.predictions import KEY_FIELDS


@pytest.fixture(scope="module")
def rows():
    """A valid row per blank of the sample's test split."""
    return [{field: blank[field] for field in KEY_FIELDS} | {"prediction": "a man"} for blank in load_sample()["test"]]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def csv_bytes(header: str, rows, cells) -> bytes:
    return (header + "\n" + "".join(cells(row) + "\n" for row in rows)).encode()


def key_cells(row) -> str:
    return f"{row['video_id']},{row['video_start_time']},{row['video_end_time']}"


# name -> (file name, its bytes given the valid rows, extra flags, exit status, the message's pattern)
CASES = {
    # Flags (exit status 2), refused before anything is read.
    "confidence level 1.5": (
        "a.jsonl",
        jsonl,
        ["--confidence_level", "1.5"],
        2,
        r"--confidence_level must be between 0 and 1",
    ),
    "confidence level 0": (
        "a.jsonl",
        jsonl,
        ["--confidence_level", "0"],
        2,
        r"--confidence_level must be between 0 and 1",
    ),
    "no resamples": ("a.jsonl", jsonl, ["--num_bootstrap", "0"], 2, r"--num_bootstrap: must be at least 1"),
    "negative seed": ("a.jsonl", jsonl, ["--seed", "-1"], 2, r"--seed: must be 0 or more, got -1"),
    "names for another number of files": ("a.jsonl", jsonl, ["--names", "x", "y"], 2, r"--names gives 2 names for 1"),
    "a split that does not exist": (
        "a.jsonl",
        jsonl,
        ["--split", "dev"],
        2,
        r"--split dev: the bundled sample has no such split \(it has: train, validation, test\)",
    ),
    "a split without answers": (
        "a.jsonl",
        jsonl,
        ["--split", "train"],
        2,
        r"--split train: the train split of the bundled sample has no annotators' answers",
    ),
    "an unknown config": (
        "a.jsonl",
        jsonl,
        ["--dataset_config_name", "video"],
        2,
        r"--dataset_config_name video: the bundled sample has no such config \(it has: i3d, text\)",
    ),
    "a dataset folder that does not exist": (
        "a.jsonl",
        jsonl,
        ["--dataset_name", "./no_such_fiber"],
        1,
        r"--dataset_name ./no_such_fiber: no such folder \(and not a Hub dataset id\)",
    ),
    "overwrite without an output folder": (
        "a.jsonl",
        jsonl,
        ["--overwrite_output_dir", "--no_output"],
        2,
        r"--overwrite_output_dir needs --output_dir",
    ),
    # Files (exit status 1).
    "a file that is not there": ("missing.jsonl", None, [], 1, r"missing.jsonl: No such file or directory"),
    "a folder instead of a file": ("folder.jsonl", "folder", [], 1, r"folder.jsonl: Is a directory"),
    "an unknown format": (
        "a.txt",
        jsonl,
        [],
        1,
        r"a.txt: cannot tell its format from '.txt': use .jsonl, .json or .csv",
    ),
    "no suffix": ("predictions", jsonl, [], 1, r"predictions: cannot tell its format from 'no suffix'"),
    "non-UTF-8 bytes": (
        "a.jsonl",
        lambda rows: jsonl(rows)[:40] + b"\xff\xfe" + jsonl(rows)[40:],
        [],
        1,
        r"a.jsonl: not UTF-8 text \(invalid start byte at byte 40\)",
    ),
    "non-UTF-8 bytes in CSV": (
        "a.csv",
        lambda rows: b"video_id,video_start_time,video_end_time,prediction\n\xe9",
        [],
        1,
        r"a.csv: not UTF-8 text",
    ),
    "a line that is not JSON": (
        "a.jsonl",
        lambda rows: jsonl(rows[:3]) + b"{not json}\n",
        [],
        1,
        r"a.jsonl: line 4: invalid JSON \(Expecting property name",
    ),
    "a JSON file cut short": (
        "a.json",
        lambda rows: json.dumps(rows).encode()[:-30],
        [],
        1,
        r"a.json: line 1: invalid JSON",
    ),
    "a JSON object instead of an array": (
        "a.json",
        lambda rows: json.dumps(rows[0]).encode(),
        [],
        1,
        r"a.json: expected a JSON array of objects, got dict",
    ),
    "a row that is a list": (
        "a.jsonl",
        lambda rows: jsonl(rows[:1]) + b"[1, 2]\n",
        [],
        1,
        r"a.jsonl: line 2: expected an object, got list",
    ),
    "an empty file": ("a.jsonl", lambda rows: b"", [], 1, r"a.jsonl: no prediction for 60 of the 60 blanks"),
    "a field given twice in a row": (
        "a.jsonl",
        lambda rows: b'{"video_id": "a", "video_id": "b"}\n',
        [],
        1,
        r"a.jsonl: line 1: an object gives field 'video_id' twice",
    ),
    "a field given twice in a JSON array": (
        "a.json",
        lambda rows: b'[{"prediction": "x", "prediction": "y"}]',
        [],
        1,
        r"a.json: an object gives field 'prediction' twice",
    ),
    "a CSV header naming a column twice": (
        "a.csv",
        lambda rows: b"video_id,video_start_time,video_end_time,prediction,prediction\na,0,10,x,y\n",
        [],
        1,
        r"a.csv: the header names column 'prediction' twice",
    ),
    "JSON nested 100,000 deep": (
        "a.json",
        lambda rows: b"[" * 100_000 + b"]" * 100_000,
        [],
        1,
        r"a.json: JSON nested too deeply to read",
    ),
    "no video_id": (
        "a.jsonl",
        lambda rows: jsonl([{k: v for k, v in rows[0].items() if k != "video_id"}]),
        [],
        1,
        r"a.jsonl: line 1: field 'video_id' is missing",
    ),
    "a time that is not whole seconds": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_start_time": 1.5}]),
        [],
        1,
        r"line 1: field 'video_start_time' must be a whole number of seconds from 0 to 2,147,483,647, got 1.5",
    ),
    "a time that is true": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_end_time": True}]),
        [],
        1,
        r"line 1: field 'video_end_time' must be a whole number of seconds .*, got True",
    ),
    "a number as video id": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_id": 7}]),
        [],
        1,
        r"line 1: field 'video_id' must be a string, got int",
    ),
    "candidates that are not a list": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "candidates": "a man"}] + rows[1:]),
        [],
        1,
        r"line 1: field 'candidates' must be a list of strings, got 'a man'",
    ),
    "candidates in some rows only": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "candidates": ["a man"]}] + rows[1:]),
        [],
        1,
        r"a.jsonl: 1 of 60 rows have 'candidates': give them in every row or in none",
    ),
    "CSV without a prediction column": (
        "a.csv",
        lambda rows: csv_bytes("video_id,video_start_time,video_end_time", rows, key_cells),
        [],
        1,
        r"a.csv: line 2: field 'prediction' is missing",
    ),
    "CSV candidates that are not JSON": (
        "a.csv",
        lambda rows: csv_bytes(
            "video_id,video_start_time,video_end_time,prediction,candidates",
            rows,
            lambda row: key_cells(row) + ",a man,[a man",
        ),
        [],
        1,
        r"a.csv: line 2: field 'candidates' must be a JSON list of strings",
    ),
    "a superscript digit as a time": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_start_time": "\u00b2"}]),
        [],
        1,
        r"line 1: field 'video_start_time' must be a whole number of seconds from 0 to 2,147,483,647, got '\u00b2'",
    ),
    "superscript digits as a CSV time": (
        "a.csv",
        lambda rows: csv_bytes(
            "video_id,video_start_time,video_end_time,prediction",
            rows[:1],
            lambda row: f"{row['video_id']},\u00b9\u00b2\u00b3,20,a man",
        ),
        [],
        1,
        r"a.csv: line 2: field 'video_start_time' must be a whole number of seconds .*, got '\u00b9\u00b2\u00b3'",
    ),
    "fullwidth digits as a time": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_start_time": "\uff11\uff12\uff13"}]),
        [],
        1,
        r"line 1: field 'video_start_time' must be a whole number of seconds .*, got '\uff11\uff12\uff13'",
    ),
    "a 5,000-digit time": (
        "a.jsonl",
        lambda rows: jsonl(rows[:1]).replace(b'"video_start_time": ', b'"video_start_time": ' + b"7" * 5000 + b", \"x\": "),
        [],
        1,
        r"a.jsonl: line 1: an integer too long to read \(more than 4,300 digits\)",
    ),
    "a 5,000-digit time in a JSON array": (
        "a.json",
        lambda rows: json.dumps(rows[:1]).encode().replace(b'"video_start_time": ', b'"video_start_time": ' + b"7" * 5000 + b', "x": '),
        [],
        1,
        r"a.json: an integer too long to read \(more than 4,300 digits\)",
    ),
    "a 5,000-digit time in CSV": (
        "a.csv",
        lambda rows: csv_bytes(
            "video_id,video_start_time,video_end_time,prediction",
            rows[:1],
            lambda row: f"{row['video_id']},{'7' * 5000},20,a man",
        ),
        [],
        1,
        r"a.csv: line 2: field 'video_start_time' must be a whole number of seconds .*, got '7{20,}\.\.\.7{20,}'$",
    ),
    "a negative time": (
        "a.jsonl",
        lambda rows: jsonl([{**rows[0], "video_start_time": -5}]),
        [],
        1,
        r"line 1: field 'video_start_time' must be a whole number of seconds from 0 to 2,147,483,647, got -5",
    ),
    "CSV time that is not a number": (
        "a.csv",
        lambda rows: csv_bytes(
            "video_id,video_start_time,video_end_time,prediction",
            rows[:1],
            lambda row: f"{row['video_id']},ten,20,a man",
        ),
        [],
        1,
        r"a.csv: line 2: field 'video_start_time' must be a whole number of seconds .*, got 'ten'",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_input_is_one_line_and_writes_nothing(case, rows, tmp_path, cli_error):
    name, content, flags, status, message = CASES[case]
    path = tmp_path / name
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content(rows))
    output_dir = tmp_path / "out"
    output_flags = [] if "--no_output" in flags else ["--output_dir", output_dir]
    flags = [flag for flag in flags if flag != "--no_output"]
    exit_status, line = cli_error("evaluate", path, *output_flags, "--num_bootstrap", "10", *flags)
    assert exit_status == status and re.search(message, line), line
    assert line.startswith("fiberbench evaluate: error: ")
    assert not output_dir.exists()
    assert sorted(item.name for item in tmp_path.iterdir()) == ([name] if content is not None else [])


@pytest.mark.parametrize(
    ("where", "flags", "problem"),
    [
        ("the predictions file", ["--overwrite_output_dir"], "is an input of this command"),
        ("the predictions file's folder", ["--overwrite_output_dir"], "holds the input"),
        ("a folder that is not empty", ["--overwrite_output_dir"], "was not written by fiberbench evaluate"),
        ("a file", ["--overwrite_output_dir"], "is a file, not a folder"),
    ],
)
def test_an_output_that_would_overwrite_something_is_refused(where, flags, problem, rows, tmp_path, cli_error):
    predictions = tmp_path / "runs" / "system.jsonl"
    predictions.parent.mkdir()
    predictions.write_bytes(jsonl(rows))
    other = tmp_path / "other"
    other.mkdir()
    (other / "results.json").write_text("{}")
    output_dir = {
        "the predictions file": predictions,
        "the predictions file's folder": predictions.parent,
        "a folder that is not empty": other,
        "a file": other / "results.json",
    }[where]
    status, line = cli_error("evaluate", predictions, "--output_dir", output_dir, *flags)
    assert status == 2 and problem in line, line
    assert predictions.read_bytes() == jsonl(rows) and (other / "results.json").read_text() == "{}"
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["other", "results.json", "runs", "system.jsonl"]


def test_overwrite_output_dir_replaces_a_previous_evaluation_whole(rows, tmp_path, cli_error):
    path, output_dir = tmp_path / "a.jsonl", tmp_path / "out"
    path.write_bytes(jsonl(rows))
    arguments = ["evaluate", str(path), "--num_bootstrap", "10", "--output_dir", str(output_dir)]
    assert main(arguments) == 0
    first = (output_dir / "results.json").read_text()
    status, line = cli_error(*arguments)
    assert status == 2 and "pass --overwrite_output_dir to replace it" in line, line
    assert main([*arguments, "--num_bootstrap", "20", "--overwrite_output_dir"]) == 0
    assert (output_dir / "results.json").read_text() != first
    assert sorted(item.name for item in output_dir.iterdir()) == [
        "by_category.png", "fiberbench_output.json", "results.json", "results.md"
    ]
    (output_dir / "notes.txt").write_text("mine")
    status, line = cli_error(*arguments, "--overwrite_output_dir")
    assert status == 2 and "holds notes.txt, which fiberbench evaluate did not write" in line, line
    assert (output_dir / "notes.txt").read_text() == "mine"


def test_flags_argparse_cannot_read_exit_with_status_2(rows, tmp_path, capsys):
    path = tmp_path / "a.jsonl"
    path.write_bytes(jsonl(rows))
    with pytest.raises(SystemExit) as exit_info:
        main(["evaluate", str(path), "--num_bootstrap", "many"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "fiberbench evaluate: error: argument --num_bootstrap: must be an integer, got 'many' (see fiberbench evaluate --help)"
    ]


def test_a_one_megabyte_answer_and_a_bom_are_fine(rows, tmp_path):
    long_answer = [{**rows[0], "prediction": "word " * 200_000}] + rows[1:]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl(long_answer))
    assert main(["evaluate", str(path), "--num_bootstrap", "10", "--output_dir", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["systems"]["a"]["exact_match"] >= 0


@pytest.mark.parametrize(
    "second, places",
    [
        ("a.jsonl", "the 1st and 2nd file"),
        ("./a.jsonl", "the 1st and 2nd file"),
        ("link.jsonl", "the 1st file, and as link.jsonl the 2nd"),
    ],
)
def test_a_file_given_twice_is_refused_naming_both(second, places, rows, tmp_path, monkeypatch, cli_error):
    # Scored twice it would be a system compared with itself (and the files were once keyed by path,
    # so the third file's scores went out under the second name).
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    (tmp_path / "empty.jsonl").write_bytes(b"")
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    status, line = cli_error("evaluate", "a.jsonl", second, "empty.jsonl", "--names", "A", "B", "C", "--output_dir", "out")
    assert status == 2 and line.endswith(f"a.jsonl is given twice (as {places}): give each predictions file once")
    assert not (tmp_path / "out").exists()


def test_a_file_given_twice_among_many_is_named_by_its_places(rows, tmp_path, monkeypatch, cli_error):
    monkeypatch.chdir(tmp_path)
    files = [f"{name}.jsonl" for name in "abcdefghijk"]
    (tmp_path / "outputs").mkdir()
    for name in files:
        (tmp_path / name).write_bytes(jsonl(rows))
    status, line = cli_error("evaluate", *files, "outputs/../c.jsonl", "--output_dir", "out")
    assert status == 2 and "c.jsonl is given twice (as the 3rd file, and as outputs/../c.jsonl the 12th)" in line


@pytest.mark.parametrize("where", ["file name", "--names"])
def test_a_name_that_is_not_utf8_is_refused_before_any_work(where, rows, tmp_path, cli_error):
    # On the command line, bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape);
    # results.json and results.md, UTF-8 text, could not hold them.
    name = "syst\udcffem.jsonl" if where == "file name" else "system.jsonl"
    (tmp_path / name).write_bytes(jsonl(rows))
    names = ["--names", "B\udce9"] if where == "--names" else []
    status, line = cli_error("evaluate", tmp_path / name, *names, "--output_dir", tmp_path / "out")
    expected = "syst\\xffem.jsonl" if where == "file name" else "--names: 'B\\xe9'"
    assert status == 2 and expected in line and "is not UTF-8 text" in line, line
    assert not (tmp_path / "out").exists()


def test_a_dataset_holding_a_clip_twice_is_refused_naming_both_rows(rows, tmp_path, cli_error):
    # build-dataset refuses to write one (tests/dataset_script); a folder made otherwise, or from the Hub,
    # may still hold one.
    splits = load_sample("text")
    test = splits["test"].to_list()
    test[7] = {**test[7], **{field: test[2][field] for field in KEY_FIELDS}}
    folder = tmp_path / "fiber"
    for name, split in splits.items():
        (folder / "data").mkdir(parents=True, exist_ok=True)
        records = test if name == "test" else split.to_list()
        type(split).from_list(records, features=split.features).to_parquet(folder / "data" / f"{name}-00000-of-00001.parquet")
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    flags = ["--dataset_name", folder, "--dataset_config_name", "default", "--num_bootstrap", "10"]
    status, line = cli_error("evaluate", tmp_path / "a.jsonl", *flags)
    assert status == 1 and "the test split of" in line and "holds the clip" in line and "in rows 2 and 7" in line, line


def test_a_full_disk_names_the_output_and_leaves_nothing(rows, make_small_disk, tmp_path, cli_error):
    disk = make_small_disk("24k")  # room for results.json and results.md, not for the plot
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    status, line = cli_error("evaluate", tmp_path / "a.jsonl", "--output_dir", disk / "out", "--num_bootstrap", "10")
    assert status == 1 and line.endswith(f"error: {disk / 'out'}/by_category.png: No space left on device"), line
    assert list(disk.iterdir()) == []
