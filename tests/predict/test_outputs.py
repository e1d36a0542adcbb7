"""The predictions file: part files of killed runs, settings that must match, rows merged in dataset order."""

import json

import pytest

from fiberbench.errors import DataError, UsageError
from fiberbench.ownership import differences
from fiberbench.predict.outputs import SETTINGS_ORDER, SKIPPED, PredictionsFile

SETTINGS = {"model": {"name_or_path": "m", "kind": "causal"}, "decoding": {"num_beams": 2}}
KEYS = [("a", 0, 10), ("b", 5, 15), ("c", 1, 11)]


def row(key, prediction, **extra):
    return {
        "video_id": key[0],
        "video_start_time": key[1],
        "video_end_time": key[2],
        "prediction": prediction,
        "candidates": [prediction, "other"],
        **extra,
    }


def started(path, settings=SETTINGS, **options) -> PredictionsFile:
    """A PredictionsFile checked and prepared, as the command does before predicting."""
    predictions = PredictionsFile(path, settings, **options)
    predictions.check()
    predictions.prepare()
    return predictions


def finished_run(tmp_path) -> PredictionsFile:
    """An output of three clips with its metadata, as a finished run leaves it."""
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(0, [row(key, key[0]) for key in KEYS])
    predictions.merge(KEYS, num_beams=2)
    return PredictionsFile(tmp_path / "out.jsonl", SETTINGS)


def test_rows_of_several_processes_are_merged_in_dataset_order(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(1, [row(KEYS[2], "z")])
    predictions.append(0, [row(KEYS[1], "y"), row(KEYS[0], "x")])
    assert predictions.done() == set(KEYS)
    output = predictions.merge(KEYS, num_beams=2)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["prediction"] for line in lines] == ["x", "y", "z"]
    assert lines[0] == row(KEYS[0], "x")
    assert output == {"rows": 3, "skipped_missing_videos": []}
    record = json.loads((tmp_path / "out.metadata.json").read_text())
    assert record["written_by"] == "fiberbench predict" and record["state"] == "complete"
    assert (record["settings"], record["output"]) == (SETTINGS, output)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.jsonl", "out.metadata.json"]


def test_one_beam_writes_no_candidates_and_skipped_clips_are_listed(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(0, [row(KEYS[0], "x"), row(KEYS[1], "", **{SKIPPED: True}), row(KEYS[2], "z")])
    assert predictions.done() == {KEYS[0], KEYS[2]}
    assert predictions.merge(KEYS, num_beams=1)["skipped_missing_videos"] == [list(KEYS[1])]
    assert set(json.loads((tmp_path / "out.jsonl").read_text().splitlines()[1])) == {
        "video_id",
        "video_start_time",
        "video_end_time",
        "prediction",
    }


def test_each_batch_is_a_part_file_and_a_resumed_run_adds_its_own(tmp_path):
    first = started(tmp_path / "out.jsonl")
    first.append(0, [row(KEYS[0], "x")])
    first.append(0, [row(KEYS[1], "y")])
    # The run is killed; a new one (a new object) resumes and must not write over the part files.
    resumed = started(tmp_path / "out.jsonl")
    assert resumed.done() == {KEYS[0], KEYS[1]}
    resumed.append(0, [row(KEYS[2], "z")])
    assert [path.name for path in resumed.part_paths()] == [
        "rank-0-000000.jsonl",
        "rank-0-000001.jsonl",
        "rank-0-000002.jsonl",
    ]
    assert resumed.done() == set(KEYS)


def test_a_temporary_file_of_a_killed_write_is_not_read(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    # What a kill in the middle of an atomic write can leave: a hidden temporary file, cut short.
    (predictions.parts / ".rank-0-000000.jsonl.incomplete-host-1-x.tmp.jsonl").write_text('{"video_id": "a", "vid')
    assert predictions.done() == set()
    predictions.append(0, [row(key, "x") for key in KEYS])
    predictions.merge(KEYS, num_beams=2)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.jsonl", "out.metadata.json"]


def test_rows_of_other_settings_are_refused_unless_overwritten(tmp_path):
    started(tmp_path / "out.jsonl").append(0, [row(KEYS[0], "x")])
    other = {**SETTINGS, "decoding": {"num_beams": 4}}
    with pytest.raises(
        UsageError,
        match=r"out\.metadata\.json holds predictions made with other settings "
        r"\(decoding\.num_beams: 4 here, 2 there\)",
    ):
        PredictionsFile(tmp_path / "out.jsonl", other).check()
    overwriting = started(tmp_path / "out.jsonl", other, overwrite=True)
    assert overwriting.done() == set()
    # A replacing run that is killed resumes: its own part files stay.
    overwriting.append(1, [row(KEYS[1], "y")])
    overwriting.prepare()
    assert overwriting.done() == {KEYS[1]}


def test_differences_name_the_settings():
    assert differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": None}) == ["a.c: 2 here, 3 there"]


def test_a_refusal_names_the_model_first_and_counts_the_rest(tmp_path):
    ours = {"dataset": {"split": "test"}, "decoding": {"num_beams": 2, "max_new_tokens": 10}, "model": {"kind": "a"}}
    theirs = {"dataset": {"split": "val"}, "decoding": {"num_beams": 8, "max_new_tokens": 5}, "model": {"kind": "b"}}
    assert differences(ours, theirs, SETTINGS_ORDER)[0] == 'model.kind: "a" here, "b" there'
    PredictionsFile(tmp_path / "out.jsonl", theirs).prepare()
    with pytest.raises(UsageError) as raised:
        PredictionsFile(tmp_path / "out.jsonl", ours).check()
    assert (
        '(model.kind: "a" here, "b" there; decoding.max_new_tokens: 10 here, 5 there; '
        "decoding.num_beams: 2 here, 8 there, and 1 more)"
    ) in str(raised.value)


def rewrite_metadata(predictions, edit):
    metadata = json.loads(predictions.metadata_path.read_text())
    predictions.metadata_path.write_text(json.dumps(edit(metadata)))


def rewrite_line(path, number, edit):
    lines = path.read_text().splitlines()
    lines[number - 1] = json.dumps(edit(json.loads(lines[number - 1])))
    path.write_text("".join(line + "\n" for line in lines))


def without(record, field):
    return {name: value for name, value in record.items() if name != field}


@pytest.mark.parametrize(
    "damage, message",
    [
        (
            lambda p: rewrite_metadata(p, lambda metadata: without(metadata, "output")),
            r"out\.metadata\.json: field 'output' is missing",
        ),
        (
            lambda p: rewrite_metadata(p, lambda m: m | {"output": {"rows": 3, "skipped_missing_videos": [["a", 0]]}}),
            r"out\.metadata\.json: field 'output\.skipped_missing_videos', item 0: expected \[video_id, "
            r"video_start_time, video_end_time\], got \[\"a\", 0\]",
        ),
        (
            lambda p: rewrite_line(p.path, 2, lambda record: without(record, "video_end_time")),
            r"out\.jsonl: line 2: field 'video_end_time' is missing",
        ),
        (
            lambda p: rewrite_line(p.path, 3, lambda record: record | {"video_start_time": "1"}),
            r"out\.jsonl: line 3: field 'video_start_time' must be an integer, got \"1\"",
        ),
        (
            lambda p: rewrite_line(p.path, 1, lambda record: [record]),
            r"out\.jsonl: line 1: expected a JSON object, got list",
        ),
    ],
    ids=[
        "metadata without output",
        "a bad skipped clip",
        "a row without a field",
        "a str time",
        "a row a list",
    ],
)
def test_a_damaged_output_is_a_data_error_naming_the_file_and_line(tmp_path, damage, message):
    predictions = finished_run(tmp_path)
    damage(predictions)
    with pytest.raises(DataError, match=message):
        predictions.check()
        predictions.done()


@pytest.mark.parametrize("overwrite", [False, True])
def test_an_output_whose_record_is_not_one_is_never_replaced(tmp_path, overwrite):
    predictions = finished_run(tmp_path)
    rewrite_metadata(predictions, lambda metadata: [metadata])
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    with pytest.raises(UsageError, match=r"out\.jsonl exists and was not written by fiberbench predict \(its record"):
        PredictionsFile(tmp_path / "out.jsonl", SETTINGS, overwrite=overwrite).check()
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before


def test_damaged_part_files_are_data_errors_naming_the_file_and_line(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(0, [row(KEYS[0], "x"), row(KEYS[1], "y")])
    (part,) = predictions.part_paths()
    rewrite_line(part, 2, lambda record: without(record, "prediction"))
    with pytest.raises(
        DataError, match=r"\.out\.jsonl\.parts/rank-0-000000\.jsonl: line 2: field 'prediction' is missing"
    ):
        predictions.done()
    rewrite_line(part, 2, lambda record: record | {"prediction": "y", "candidates": "y"})
    with pytest.raises(DataError, match=r"line 2: field 'candidates' must be a list of strings, got \"y\""):
        predictions.done()
    predictions.settings_path.write_text("[1, 2]")
    with pytest.raises(DataError, match=r"\.out\.jsonl\.parts/settings\.json: expected a JSON object, got list"):
        predictions.check()


def test_a_row_without_candidates_is_named_when_several_beams_need_them(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(0, [row(KEYS[0], "x"), without(row(KEYS[1], "y"), "candidates"), row(KEYS[2], "z")])
    with pytest.raises(DataError, match=r"rank-0-000000\.jsonl: line 2: field 'candidates' is missing \(the run has 2"):
        predictions.merge(KEYS, num_beams=2)
    assert predictions.merge(KEYS, num_beams=1)["rows"] == 3


def test_the_replies_are_kept_in_every_row_or_in_none(tmp_path):
    predictions = started(tmp_path / "out.jsonl")
    predictions.append(0, [row(KEYS[0], "x", raw=["x."]), row(KEYS[1], "y"), row(KEYS[2], "z", raw=["z"])])
    with pytest.raises(DataError, match=r"rank-0-000000\.jsonl: line 2: field 'raw' is missing \(the other rows keep"):
        predictions.merge(KEYS, num_beams=1)
    predictions.append(0, [row(KEYS[1], "y", raw=["Y", "y"])])
    predictions.merge(KEYS, num_beams=1)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["raw"] for line in lines] == [["x."], ["Y", "y"], ["z"]]
