"""The predictions file: part files of killed runs, settings that must match, rows merged in dataset order."""

import json

import pytest

from fiberbench.errors import UsageError
from fiberbench.predict.outputs import SKIPPED, PredictionsFile, differences

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


def test_rows_of_several_processes_are_merged_in_dataset_order(tmp_path):
    predictions = PredictionsFile(tmp_path / "out.jsonl", SETTINGS)
    predictions.append(1, [row(KEYS[2], "z")])
    predictions.append(0, [row(KEYS[1], "y"), row(KEYS[0], "x")])
    assert predictions.done() == set(KEYS)
    output = predictions.merge(KEYS, num_beams=2)
    lines = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [line["prediction"] for line in lines] == ["x", "y", "z"]
    assert lines[0] == row(KEYS[0], "x")
    assert output == {"rows": 3, "skipped_missing_videos": []}
    assert json.loads((tmp_path / "out.metadata.json").read_text()) == {"settings": SETTINGS, "output": output}
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.jsonl", "out.metadata.json"]


def test_one_beam_writes_no_candidates_and_skipped_clips_are_listed(tmp_path):
    predictions = PredictionsFile(tmp_path / "out.jsonl", SETTINGS)
    predictions.append(0, [row(KEYS[0], "x"), row(KEYS[1], "", **{SKIPPED: True}), row(KEYS[2], "z")])
    assert predictions.done() == {KEYS[0], KEYS[2]}
    assert predictions.merge(KEYS, num_beams=1)["skipped_missing_videos"] == [list(KEYS[1])]
    assert set(json.loads((tmp_path / "out.jsonl").read_text().splitlines()[1])) == {
        "video_id",
        "video_start_time",
        "video_end_time",
        "prediction",
    }


def test_a_part_file_cut_before_its_first_line_is_dropped(tmp_path):
    predictions = PredictionsFile(tmp_path / "out.jsonl", SETTINGS)
    predictions.part_path(0).write_text('{"settings": {"mod')
    predictions.check()
    assert predictions.done() == set()
    predictions.start_appending(0)
    predictions.append(0, [row(KEYS[0], "x")])
    assert predictions.done() == {KEYS[0]}


def test_rows_of_other_settings_are_refused_unless_overwritten(tmp_path):
    PredictionsFile(tmp_path / "out.jsonl", SETTINGS).append(0, [row(KEYS[0], "x")])
    other = {**SETTINGS, "decoding": {"num_beams": 4}}
    with pytest.raises(
        UsageError,
        match=r"\.out\.jsonl\.part-0\.jsonl holds predictions made with other settings "
        r"\(decoding\.num_beams: 4 here, 2 there\)",
    ):
        PredictionsFile(tmp_path / "out.jsonl", other).check()
    overwriting = PredictionsFile(tmp_path / "out.jsonl", other, overwrite=True)
    overwriting.check()
    overwriting.drop_other_runs()
    assert overwriting.done() == set()
    # A replacing run that is killed resumes: its own part file stays.
    overwriting.append(1, [row(KEYS[1], "y")])
    overwriting.drop_other_runs()
    assert overwriting.done() == {KEYS[1]}


def test_differences_name_the_settings():
    assert differences({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}, "d": None}) == ["a.c: 2 here, 3 there"]
