"""Bad inputs to `fiberbench evaluate`: one line naming the file, the line and the field (or the flag), exit status 2
(usage) or 1 (data), and no output written."""

import json
import re
from pathlib import Path

import pytest

from fiberbench.cli import main
from fiberbench.data import load_sample
from fiberbench.records import KEY_FIELDS


@pytest.fixture(scope="module")
def rows():
    """A valid row per blank of the sample's test split."""
    return [{field: blank[field] for field in KEY_FIELDS} | {"prediction": "a man"} for blank in load_sample()["test"]]


def jsonl(rows) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def first_as(**fields):
    """The rows with the first one's `fields` changed (`...`: removed)."""
    return lambda rows: jsonl([{k: v for k, v in {**rows[0], **fields}.items() if v is not ...}, *rows[1:]])


def csv_first(cells: str, header="video_id,video_start_time,video_end_time,prediction"):
    """A CSV file of the first blank, its cells after the video id given."""
    return lambda rows: f"{header}\n{rows[0]['video_id']},{cells.format(**rows[0])}\n".encode()


def with_long_time(rows, array=False) -> bytes:
    text = json.dumps(rows[:1]) if array else jsonl(rows[:1]).decode()
    return text.replace('"video_start_time": ', '"video_start_time": ' + "7" * 5000 + ', "x": ').encode()


SECONDS = "must be a whole number of seconds from 0 to 2,147,483,647"
# case -> (file name, its bytes from the valid rows (None: no file, "folder": a folder), flags, status, the line)
CASES = {
    "confidence level 1.5": ("a.jsonl", jsonl, ["--confidence_level", "1.5"], 2, r"--confidence_level must be between 0 and 1"),
    "confidence level 0": ("a.jsonl", jsonl, ["--confidence_level", "0"], 2, r"--confidence_level must be between 0 and 1"),
    "no resamples": ("a.jsonl", jsonl, ["--num_bootstrap", "0"], 2, r"--num_bootstrap: must be at least 1"),
    "negative seed": ("a.jsonl", jsonl, ["--seed", "-1"], 2, r"--seed: must be 0 or more, got -1"),
    "names for another number of files": ("a.jsonl", jsonl, ["--names", "x", "y"], 2, r"--names gives 2 names for 1"),
    "a split that does not exist": ("a.jsonl", jsonl, ["--split", "dev"], 2,
                                    r"--split dev: the bundled sample has no such split \(it has: train, validation, test\)"),
    "a split without answers": ("a.jsonl", jsonl, ["--split", "train"], 2,
                                r"--split train: the train split of the bundled sample has no annotators' answers"),
    "an unknown config": ("a.jsonl", jsonl, ["--dataset_config_name", "video"], 2,
                          r"--dataset_config_name video: the bundled sample has no such config \(it has: i3d, text\)"),
    "a dataset folder that does not exist": ("a.jsonl", jsonl, ["--dataset_name", "./no_such_fiber"], 1,
                                             r"--dataset_name ./no_such_fiber: no such folder \(and not a Hub dataset id\)"),
    "overwrite without an output folder": ("a.jsonl", jsonl, ["--overwrite_output_dir", "--no_output"], 2,
                                           r"--overwrite_output_dir needs --output_dir"),
    "a file that is not there": ("missing.jsonl", None, [], 1, r"missing.jsonl: No such file or directory"),
    "a folder instead of a file": ("folder.jsonl", "folder", [], 1, r"folder.jsonl: Is a directory"),
    "an unknown format": ("a.txt", jsonl, [], 1, r"a.txt: cannot tell its format from '.txt': use .jsonl, .json or .csv"),
    "no suffix": ("predictions", jsonl, [], 1, r"predictions: cannot tell its format from 'no suffix'"),
    "non-UTF-8 bytes": ("a.jsonl", lambda rows: jsonl(rows)[:40] + b"\xff\xfe" + jsonl(rows)[40:], [], 1,
                        r"a.jsonl: not UTF-8 text \(invalid start byte at byte 40\)"),
    "non-UTF-8 bytes in CSV": ("a.csv", lambda rows: b"video_id,prediction\n\xe9", [], 1, r"a.csv: not UTF-8 text"),
    "a line that is not JSON": ("a.jsonl", lambda rows: jsonl(rows[:3]) + b"{not json}\n", [], 1,
                                r"a.jsonl: line 4: invalid JSON \(Expecting property name"),
    "a JSON file cut short": ("a.json", lambda rows: json.dumps(rows).encode()[:-30], [], 1, r"a.json: line 1: invalid JSON"),
    "a JSON object instead of an array": ("a.json", lambda rows: json.dumps(rows[0]).encode(), [], 1,
                                          r"a.json: expected a JSON array of objects, got dict"),
    "a row that is a list": ("a.jsonl", lambda rows: jsonl(rows[:1]) + b"[1, 2]\n", [], 1,
                             r"a.jsonl: line 2: expected an object, got list"),
    "an empty file": ("a.jsonl", lambda rows: b"", [], 1, r"a.jsonl: no prediction for 60 of the 60 blanks"),
    "a field given twice in a row": ("a.jsonl", lambda rows: b'{"video_id": "a", "video_id": "b"}\n', [], 1,
                                     r"a.jsonl: line 1: an object gives field 'video_id' twice"),
    "a field given twice in a JSON array": ("a.json", lambda rows: b'[{"prediction": "x", "prediction": "y"}]', [], 1,
                                            r"a.json: an object gives field 'prediction' twice"),
    "a CSV header naming a column twice": ("a.csv", csv_first("0,10,x,y", "video_id,video_start_time,video_end_time,"
                                                              "prediction,prediction"), [], 1,
                                           r"a.csv: the header names column 'prediction' twice"),
    "JSON nested 100,000 deep": ("a.json", lambda rows: b"[" * 100_000 + b"]" * 100_000, [], 1,
                                 r"a.json: JSON nested more than 64 levels deep$"),
    "a JSON Lines line nested 30,000 deep": ("a.jsonl", lambda rows: jsonl(rows[:2]) + b'{"a": ' * 30_000 + b"1"
                                             + b"}" * 30_000 + b"\n", [], 1,
                                             r"a.jsonl: line 3: JSON nested more than 64 levels deep$"),
    "CSV candidates nested deep": ("a.csv", csv_first("{video_start_time},{video_end_time},a man,\"" + "[" * 5000 + "]" * 5000
                                                      + "\"", "video_id,video_start_time,video_end_time,prediction,candidates"), [], 1,
                                   r"a.csv: line 2: field 'candidates' is JSON nested more than 64 levels deep$"),
    "a line over the bound": ("a.jsonl", lambda rows: jsonl(rows[:1]) + b'{"prediction": "' + b"x" * 2**20 + b'"}\n', [], 1,
                              r"a.jsonl: line 2 is longer than 1,048,576 characters, the most a line of a predictions file"),
    "a file over the bound": ("a.jsonl", lambda rows: b"\n" * (64 * 2**20 + 1), [], 1,
                              r"a.jsonl: 67,108,865 bytes, more than a predictions file may hold \(67,108,864\)"),
    "a CSV header of 100,000 columns": ("a.csv", lambda rows: ",".join(f"c{i}" for i in range(100_000)).encode() + b"\n", [],
                                        1, r"a.csv: the header has 100,000 columns, more than 100"),
    "a CSV header of 0.5 MB naming a column twice": ("a.csv", lambda rows: (
        "video_id,prediction," + "x" * 500_000 + ",prediction\n").encode(), [], 1, r"a.csv: not a readable CSV file \(field larger"),
    "missing that is not a boolean": ("a.jsonl", first_as(missing="yes"), [], 1,
                                      r"a.jsonl: line 1: field 'missing' must be true or false, got 'yes'"),
    "a missing row without its clip": ("a.jsonl", first_as(missing=True, video_end_time=...), [], 1,
                                       r"a.jsonl: line 1: field 'video_end_time' is missing"),
    "a baseline's name": ("a.jsonl", jsonl, ["--names", "Human Agreement (baseline)"], 2,
                          r"'Human Agreement \(baseline\)' names a baseline \(most frequent answer, human agreement\)"),
    "a baseline's name in another form": ("a.jsonl", jsonl, ["--names", "most  frequent ANSWER"], 2, r"names a baseline"),
    "a control of no system": ("a.jsonl", jsonl, ["--control", "b=a.jsonl"], 2,
                               r"--control 'b=a.jsonl': give NAME=FILE, NAME one of the systems: 'a'$"),
    "a control file that is not there": ("a.jsonl", jsonl, ["--control", "a=nothing.jsonl"], 1, r"nothing.jsonl: No such file"),
    "a model card that is not Markdown": ("a.jsonl", jsonl, ["--model_index", "card.json"], 2,
                                          r"--model_index card.json: a model card is a Markdown file \(README.md\)"),
    "no video_id": ("a.jsonl", first_as(video_id=...), [], 1, r"a.jsonl: line 1: field 'video_id' is missing"),
    "a time that is not whole seconds": ("a.jsonl", first_as(video_start_time=1.5), [], 1,
                                         rf"line 1: field 'video_start_time' {SECONDS}, got 1.5"),
    "a time that is true": ("a.jsonl", first_as(video_end_time=True), [], 1, r"line 1: field 'video_end_time' must be .*True"),
    "a negative time": ("a.jsonl", first_as(video_start_time=-5), [], 1, rf"line 1: field 'video_start_time' {SECONDS}, got -5"),
    "a superscript digit as a time": ("a.jsonl", first_as(video_start_time="\u00b2"), [], 1,
                                      rf"line 1: field 'video_start_time' {SECONDS}, got '\u00b2'"),
    "fullwidth digits as a time": ("a.jsonl", first_as(video_start_time="\uff11\uff12"), [], 1,
                                   r"line 1: field 'video_start_time' must be .*, got '\uff11\uff12'"),
    "a 5,000-digit time": ("a.jsonl", with_long_time, [], 1, r"a.jsonl: line 1: an integer too long to read \(more than 4,300"),
    "a 5,000-digit time in a JSON array": ("a.json", lambda rows: with_long_time(rows, array=True), [], 1,
                                           r"a.json: an integer too long to read \(more than 4,300 digits\)"),
    "a 5,000-digit time in CSV": ("a.csv", csv_first(f"{'7' * 5000},20,a man"), [], 1,
                                  r"a.csv: line 2: field 'video_start_time' must be .*, got '7{20,}\.\.\.7{20,}'$"),
    "superscript digits as a CSV time": ("a.csv", csv_first("\u00b9\u00b2\u00b3,20,a man"), [], 1,
                                         r"a.csv: line 2: field 'video_start_time' must be .*, got '\u00b9\u00b2\u00b3'"),
    "a CSV time that is not a number": ("a.csv", csv_first("ten,20,a man"), [], 1,
                                        r"a.csv: line 2: field 'video_start_time' must be .*, got 'ten'"),
    "CSV without a prediction column": ("a.csv", csv_first("0,10", "video_id,video_start_time,video_end_time"), [], 1,
                                        r"a.csv: line 2: field 'prediction' is missing"),
    "CSV candidates that are not JSON": ("a.csv", csv_first("{video_start_time},{video_end_time},a man,[a man", "video_id,video_start_time,"
                                                            "video_end_time,prediction,candidates"), [], 1,
                                         r"a.csv: line 2: field 'candidates' must be a JSON list of strings"),
    "a number as video id": ("a.jsonl", first_as(video_id=7), [], 1, r"line 1: field 'video_id' must be a string, got int"),
    "a prediction that is not a string": ("a.jsonl", first_as(prediction=3), [], 1,
                                          r"line 1: field 'prediction' must be a string, got int"),
    "no prediction field": ("a.jsonl", first_as(prediction=...), [], 1, r"line 1: field 'prediction' is missing"),
    "candidates that are not a list": ("a.jsonl", first_as(candidates="a man"), [], 1,
                                       r"line 1: field 'candidates' must be a list of strings, got 'a man'"),
    "candidates in some rows only": ("a.jsonl", first_as(candidates=["a man"]), [], 1,
                                     r"a.jsonl: 1 of 60 answered rows have 'candidates': give them in every row or in "
                                     r"none"),
    "blanks without a prediction": ("a.jsonl", lambda rows: jsonl(rows[3:]), [], 1,
                                    r"a.jsonl: no prediction for 3 of the 60 blanks of the test split of the bundled sample: \('"),
    "a blank given twice": ("a.jsonl", lambda rows: jsonl([*rows, rows[5]]), [], 1,
                            r"a.jsonl: line 61: blank \(.*\) is predicted twice \(first on line 6\)"),
    "a blank not in the split": ("a.jsonl", lambda rows: jsonl([*rows, {**rows[0], "video_id": "notInSplit0"}]), [], 1,
                                 r"a.jsonl: line 61: blank \('notInSplit0', .*\) is not in the test split of the bundled "
                                 r"sample$"),
    "a file of another split": ("a.jsonl", lambda rows: jsonl([{"prediction": "x", **row} for row in load_sample()["validation"].to_list()]), [], 1,
                                r"a.jsonl: line 1: blank \(.*\) is not in the test split of the bundled sample, but in its "
                                r"validation split: is the file for --split validation\?"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_input_is_one_line_and_writes_nothing(case, rows, tmp_path, cli_error):
    name, content, flags, status, message = CASES[case]
    path = tmp_path / name
    if content == "folder":
        path.mkdir()
    elif content is not None:
        path.write_bytes(content(rows))
    output_flags = [] if "--no_output" in flags else ["--output_dir", tmp_path / "out"]
    exit_status, line = cli_error("evaluate", path, *output_flags, "--num_bootstrap", "10",
                                  *(flag for flag in flags if flag != "--no_output"))
    assert exit_status == status and re.search(message, line) and line.startswith("fiberbench evaluate: error: "), line
    assert [item.name for item in tmp_path.iterdir() if not item.name.startswith(".")] == ([name] if content else [])


@pytest.mark.parametrize(("where", "problem"), [
    ("the predictions file", "is an input of this command"),
    ("the predictions file's folder", "holds the input"),
    ("a folder that is not empty", "not fiberbench evaluate's; nothing is replaced"),
    ("a file", "is a file, not a folder"),
])
def test_an_output_that_would_overwrite_something_is_refused(where, problem, rows, tmp_path, cli_error):
    predictions, other = tmp_path / "runs" / "system.jsonl", tmp_path / "other"
    predictions.parent.mkdir()
    predictions.write_bytes(jsonl(rows))
    other.mkdir()
    (other / "results.json").write_text("{}")
    output_dir = {"the predictions file": predictions, "the predictions file's folder": predictions.parent,
                  "a folder that is not empty": other, "a file": other / "results.json"}[where]
    status, line = cli_error("evaluate", predictions, "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 2 and problem in line, line
    assert predictions.read_bytes() == jsonl(rows) and (other / "results.json").read_text() == "{}"


def test_overwrite_output_dir_replaces_only_what_an_earlier_evaluation_wrote(rows, tmp_path, cli_error):
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


@pytest.mark.parametrize("second", ["a.jsonl", "./a.jsonl", "link.jsonl", "outputs/../a.jsonl"])
def test_a_file_given_twice_is_refused_naming_both(second, rows, tmp_path, monkeypatch, cli_error):
    # Scored twice it would be a system compared with itself.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").mkdir()
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "a.jsonl")
    status, line = cli_error("evaluate", "a.jsonl", "b.jsonl", second, "--output_dir", "out")
    assert status == 2 and line.endswith(f"a.jsonl is given twice (as file 1 and, as {Path(second)}, file 3): give each "
                                         "predictions file once"), line


@pytest.mark.parametrize("where", ["file name", "--names"])
def test_a_name_that_is_not_utf8_is_refused_before_any_work(where, rows, tmp_path, cli_error):
    # On the command line, bytes that are not UTF-8 reach Python as lone surrogates (surrogateescape).
    name = "syst\udcffem.jsonl" if where == "file name" else "system.jsonl"
    (tmp_path / name).write_bytes(jsonl(rows))
    names = ["--names", "B\udce9"] if where == "--names" else []
    status, line = cli_error("evaluate", tmp_path / name, *names, "--output_dir", tmp_path / "out")
    expected = "syst\\xffem.jsonl" if where == "file name" else "--names: 'B\\xe9'"
    assert status == 2 and expected in line and "is not UTF-8 text" in line, line


def test_a_dataset_holding_a_clip_twice_is_refused_naming_both_rows(rows, tmp_path, cli_error):
    # build-dataset refuses to write one; a folder made otherwise, or from the Hub, may still hold one.
    splits = load_sample("text")
    test = splits["test"].to_list()
    test[7] = {**test[7], **{field: test[2][field] for field in KEY_FIELDS}}
    (tmp_path / "fiber" / "data").mkdir(parents=True)
    for name, split in splits.items():
        records = test if name == "test" else split.to_list()
        type(split).from_list(records, features=split.features).to_parquet(tmp_path / "fiber" / "data" / f"{name}.parquet")
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    status, line = cli_error("evaluate", tmp_path / "a.jsonl", "--dataset_name", tmp_path / "fiber",
                             "--dataset_config_name", "default", "--num_bootstrap", "10")
    assert status == 1 and "the test split of" in line and "holds the clip" in line and "in rows 2 and 7" in line, line


def test_a_full_disk_names_the_file_and_the_output_says_it_is_unfinished(rows, make_small_disk, tmp_path, cli_error):
    disk = make_small_disk("24k")  # room for results.json and results.md, not for the chart
    (tmp_path / "a.jsonl").write_bytes(jsonl(rows))
    status, line = cli_error("evaluate", tmp_path / "a.jsonl", "--output_dir", disk / "out", "--num_bootstrap", "10")
    assert status == 1 and line.endswith(f"error: {disk / 'out'}/by_category.png: No space left on device"), line
    assert json.loads((disk / "out" / "fiberbench_output.json").read_text())["state"] == "running"
    assert not (disk / "out" / "by_category.png").exists()
