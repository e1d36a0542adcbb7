"""Record validation: each error names the file, record index and field; `--skip_invalid` counts skips."""

import json
import logging
import re

import numpy as np
import pytest

from fiberbench.cli import main
from fiberbench.data import SAMPLE_DIR
from fiberbench.data.build import Sources, build_dataset
from fiberbench.records import (
    InvalidRecordError,
    feature_file_name,
    load_video_features,
    read_category_rows,
    validate_category_row,
    validate_record,
)

RECORD = {
    "video_id": "a-B_c1234XY",
    "video_start_time": 12,
    "video_end_time": 22,
    "caption": "A man plays a guitar.",
    "masked_caption": "A man plays _____.",
    "label": "a guitar",
    "additional_answers": [["a guitar", "an instrument"], ["a banjo"]],
}


@pytest.mark.parametrize(
    ("changes", "field", "problem"),
    [
        ({"masked_caption": "A man plays a guitar."}, "masked_caption", "exactly one blank '_____', found none"),
        ({"masked_caption": "_____ plays _____."}, "masked_caption", "exactly one blank"),
        ({"masked_caption": "A man plays ______."}, "masked_caption", "found ['______']"),
        ({"masked_caption": 7}, "masked_caption", "expected str, got int"),
        ({"caption": "A man plays a banjo."}, "caption", "does not give the caption"),
        ({"caption": None, "label": ""}, "label", "empty"),
        ({"video_start_time": 1.5}, "video_start_time", "must be a whole number of seconds from 0 to 2,147,483,647, got 1.5"),
        ({"video_end_time": "22"}, "video_end_time", "must be a whole number of seconds from 0 to 2,147,483,647, got '22'"),
        ({"video_start_time": True}, "video_start_time", "must be a whole number of seconds from 0 to 2,147,483,647, got True"),
        ({"video_start_time": -1}, "video_start_time", "must be a whole number of seconds from 0 to 2,147,483,647, got -1"),
        ({"video_end_time": 12}, "video_end_time", "must be greater than video_start_time (12 <= 12)"),
        ({"video_end_time": 2**31}, "video_end_time", "must be a whole number of seconds from 0 to 2,147,483,647, got 2147483648"),
        ({"video_start_time": 2**31, "video_end_time": 2**31 + 10}, "video_start_time", "from 0 to 2,147,483,647"),
        ({"video_start_time": 10**4000}, "video_start_time", "got 100000000000000000...0000000000000000000"),
        ({"video_id": "../../etc/x"}, "video_id", "is not a plain video id"),
        ({"video_id": "abc\\def"}, "video_id", "is not a plain video id"),
        ({"video_id": "abc..def"}, "video_id", "is not a plain video id"),
        ({"video_id": "abc def"}, "video_id", "is not a plain video id"),
        ({"video_id": ""}, "video_id", "is not a plain video id"),
        ({"video_id": 12345}, "video_id", "expected str, got int"),
        ({"additional_answers": "a guitar"}, "additional_answers", "expected list, got str"),
        ({"additional_answers": [[]]}, "additional_answers", "annotator 0: expected a non-empty list"),
        ({"additional_answers": [["a guitar"], "a banjo"]}, "additional_answers", "annotator 1: expected"),
        ({"additional_answers": [["a guitar", " "]]}, "additional_answers", "annotator 0, answer 1"),
    ],
)
def test_record_errors_name_file_index_and_field(changes, field, problem):
    with pytest.raises(InvalidRecordError) as raised:
        validate_record({**RECORD, **changes}, file="val.json", index=41)
    assert str(raised.value).startswith(f"val.json: record 41: field '{field}': ")
    assert problem in str(raised.value)
    assert (raised.value.file, raised.value.index, raised.value.field) == ("val.json", 41, field)


@pytest.mark.parametrize("field", ["video_id", "video_start_time", "video_end_time", "masked_caption", "label"])
def test_missing_fields(field):
    record = {key: value for key, value in RECORD.items() if key != field}
    with pytest.raises(InvalidRecordError, match=f"^train.json: record 0: field '{field}': missing$"):
        validate_record(record, file="train.json", index=0)


def test_not_an_object():
    with pytest.raises(InvalidRecordError, match=r"^test.json: record 3: field '\(record\)': expected a JSON object"):
        validate_record(["a", "list"], file="test.json", index=3)


def test_valid_record_defaults():
    assert validate_record(RECORD, file="f", index=0) == RECORD
    without_optional = {key: value for key, value in RECORD.items() if key not in ("caption", "additional_answers")}
    assert validate_record(without_optional, file="f", index=0) == {**without_optional, "caption": None,
                                                                      "additional_answers": []}


@pytest.mark.parametrize(
    ("array", "problem"),
    [
        (np.zeros((5, 1024), np.float32), "expected shape (1, T, 1024), got (5, 1024)"),
        (np.zeros((1, 5, 512), np.float32), "expected shape (1, T, 1024), got (1, 5, 512)"),
        (np.zeros((1, 0, 1024), np.float32), "got (1, 0, 1024)"),
        (np.zeros((1, 5, 1024), np.int64), "expected floats, got int64"),
        (np.full((1, 5, 1024), np.nan, np.float32), "contains NaN or infinite values"),
        (np.full((1, 5, 1024), np.inf, np.float64), "contains NaN or infinite values"),
        (np.full((1, 5, 1024), 1e39, np.float64), "beyond float32's range"),
    ],
)
def test_feature_errors(tmp_path, array, problem):
    path = tmp_path / "clip.npy"
    np.save(path, array)
    with pytest.raises(InvalidRecordError, match=r"^val.json: record 2: field 'video_features': ") as raised:
        load_video_features(path, file="val.json", index=2)
    assert problem in str(raised.value)


def test_missing_and_unreadable_feature_files(tmp_path):
    with pytest.raises(InvalidRecordError, match="feature file not found: .*missing.npy"):
        load_video_features(tmp_path / "missing.npy", file="val.json", index=0)
    (tmp_path / "broken.npy").write_bytes(b"not a numpy file")
    with pytest.raises(InvalidRecordError, match="broken.npy: not a readable .npy array"):
        load_video_features(tmp_path / "broken.npy", file="val.json", index=0)


def test_features_are_float32_frames():
    name = feature_file_name("MKt-M-5k5Wj", 120, 130)
    assert name == "MKt-M-5k5Wj_000120_000130.npy"
    features = load_video_features(SAMPLE_DIR / "i3d" / name, file="val.json", index=0)
    assert features.dtype == np.float32 and features.ndim == 2 and features.shape[1] == 1024


def test_category_file_errors(tmp_path):
    path = tmp_path / "categories.tsv"
    path.write_text("id\tcategory\nabc\tPerson\n")
    with pytest.raises(InvalidRecordError, match=r"^categories.tsv: no video_id column in the header row$"):
        read_category_rows(path, file="categories.tsv")
    with pytest.raises(InvalidRecordError, match=r"^c.tsv: record 4: field 'video_id': 'a/b' is not a plain"):
        validate_category_row({"video_id": "a/b", "category": "Person"}, file="c.tsv", index=4)
    with pytest.raises(InvalidRecordError, match=r"^c.tsv: record 5: field 'category': empty"):
        validate_category_row({"video_id": "abc", "category": " "}, file="c.tsv", index=5)


def edit_record(folder, name, index, **changes):
    records = json.loads((folder / name).read_text())
    records[index].update(changes)
    (folder / name).write_text(json.dumps(records))
    return records[index]


def feature_path(folder, record):
    return folder / "i3d" / feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('[{"video_id": "x"}, {', "record 1: invalid JSON"),
        ('[{"video_id": "x"}', "the JSON array is not closed"),
    ],
)
def test_a_file_that_is_not_a_list_of_records(release_dir, tmp_path, content, problem):
    """The file cannot be read on, so even --skip_invalid stops; the message names the file."""
    (release_dir / "val.json").write_text(content)
    with pytest.raises(InvalidRecordError, match=f"^{release_dir / 'val.json'}: .*{re.escape(problem)}"):
        build_dataset(Sources.from_location(release_dir), tmp_path / "fiber", skip_invalid=True)
    assert list(tmp_path.iterdir()) == [release_dir]


def test_unreachable_urls_are_reported(tmp_path, cli_error):
    status, line = cli_error("build-dataset", "--data_dir", "http://127.0.0.1:9/fiber", "--output_dir", tmp_path / "f")
    assert status == 1 and "Could not get the data files" in line
    assert not (tmp_path / "f").exists()


def test_category_files_named_as_the_release_downloads(release_dir, tmp_path):
    """The release's val_label_categories.tsv has more columns; only video_id and category are used."""
    rows = [line.split("\t") for line in (release_dir / "categories_val.tsv").read_text().splitlines()[1:]]
    (release_dir / "categories_val.tsv").unlink()
    lines = ["video_id\tmasked_caption\tlabel\tcategory"]
    lines += [f"{video_id}\tx _____\ty\t{category}" for video_id, category in rows]
    (release_dir / "val_label_categories.tsv").write_text("\n".join(lines) + "\n")
    build_dataset(Sources.from_location(release_dir), tmp_path / "fiber")
    card = (tmp_path / "fiber" / "README.md").read_text()
    assert "## Categories of the blanks" in card and "| category | validation |" in card


def test_an_invalid_record_late_in_a_file_fails_the_build_and_leaves_nothing(release_dir, tmp_path):
    edit_record(release_dir, "test.json", 9, masked_caption="No blank here.")
    output_dir = tmp_path / "out" / "fiber"
    with pytest.raises(InvalidRecordError) as raised:
        build_dataset(Sources.from_location(release_dir, release_dir / "i3d"), output_dir)
    assert str(raised.value).startswith(f"{release_dir / 'test.json'}: record 9: field 'masked_caption': ")
    assert not (tmp_path / "out").exists()  # the folders made for the output go with the failed build


def test_a_path_like_video_id_is_rejected_before_any_file_is_opened(release_dir, tmp_path):
    edit_record(release_dir, "val.json", 4, video_id="../../../../etc/passwd")
    with pytest.raises(InvalidRecordError, match=r"val.json: record 4: field 'video_id'"):
        build_dataset(Sources.from_location(release_dir, release_dir / "i3d"), tmp_path / "fiber")


def test_a_missing_feature_file_names_the_record(release_dir, tmp_path, cli_error):
    record = json.loads((release_dir / "val.json").read_text())[7]
    feature_path(release_dir, record).unlink()
    status, line = cli_error(
        "build-dataset", "--data_dir", release_dir, "--features_dir", release_dir / "i3d", "--output_dir", tmp_path / "fiber"
    )
    assert status == 1
    assert "val.json: record 7: field 'video_features': feature file not found" in line and "--skip_invalid" in line
    assert not (tmp_path / "fiber").exists()


def test_skip_invalid_counts_and_reports_skips(release_dir, tmp_path, caplog):
    edit_record(release_dir, "val.json", 2, caption="Something else.")
    feature_path(release_dir, edit_record(release_dir, "val.json", 5)).unlink()
    nan_features = np.full((1, 3, 1024), np.nan, np.float32)
    np.save(feature_path(release_dir, edit_record(release_dir, "test.json", 0)), nan_features)
    (release_dir / "categories_val.tsv").write_text(
        (release_dir / "categories_val.tsv").read_text() + "bad/id\tPerson\n"
    )

    result = build_dataset(
        Sources.from_location(release_dir, release_dir / "i3d"), tmp_path / "fiber", skip_invalid=True
    )
    assert result.num_examples == {
        "text": {"train": 20, "validation": 9, "test": 10},
        "i3d": {"train": 20, "validation": 8, "test": 9},
    }
    skipped = {
        config: [(error.index, error.field) for error in errors] for config, errors in result.invalid_records.items()
    }
    assert skipped["text"] == [(60, "video_id"), (2, "caption")]
    assert skipped["i3d"] == [(60, "video_id"), (2, "caption"), (5, "video_features"), (0, "video_features")]
    card = (tmp_path / "fiber" / "README.md").read_text()
    assert "- `text`: 2 record(s)" in card and "- `i3d`: 4 record(s)" in card

    with caplog.at_level(logging.INFO):
        assert main(["build-dataset", "--data_dir", str(release_dir), "--features_dir", str(release_dir / "i3d"),
                     "--output_dir", str(tmp_path / "fiber2"), "--skip_invalid"]) == 0
    assert "i3d: skipped 4 invalid record(s)" in caplog.text
    assert "validation 8" in caplog.text
