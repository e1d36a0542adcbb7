"""Bad inputs to `fiberbench build-dataset`: one line, the right exit status, nothing written, nothing lost.

Each case breaks a small copy of the sample in the release layout (`release_dir`). A fault of one
record (or category row, or feature file) names the file and the record, hints at --skip_invalid,
and is skipped and counted with it; a fault of a whole file stops the build even with --skip_invalid,
without the hint. Inputs that look odd but are fine (a UTF-8 byte order mark, Windows line ends, a
1 MB caption, a symbolic link inside the features folder) build.
"""

import hashlib
import json
import logging
import os
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from fiberbench.cli import main
from fiberbench.records import feature_file_name

BAD_INDEX = 3  # the broken record of val.json, where one record is broken


def read_records(folder: Path, name: str = "val.json") -> list:
    return json.loads((folder / name).read_text())


def replace_record(folder: Path, raw: bytes, name: str = "val.json") -> None:
    """Write `name` back with record BAD_INDEX replaced by the raw bytes `raw`."""
    parts = [json.dumps(record).encode() for record in read_records(folder, name)]
    parts[BAD_INDEX] = raw
    (folder / name).write_bytes(b"[" + b",\n".join(parts) + b"]")


def edit_record(folder: Path, **changes) -> None:
    records = read_records(folder)
    records[BAD_INDEX].update(changes)
    (folder / "val.json").write_text(json.dumps(records))


def repeat_a_clip(folder: Path) -> None:
    """Record BAD_INDEX of val.json becomes another take of record 1's clip (its id and times)."""
    first = read_records(folder)[1]
    edit_record(folder, **{field: first[field] for field in ("video_id", "video_start_time", "video_end_time")})


def feature_file(folder: Path) -> Path:
    record = read_records(folder)[BAD_INDEX]
    return folder / "i3d" / feature_file_name(record["video_id"], record["video_start_time"], record["video_end_time"])


def replace_features(folder: Path, write) -> None:
    path = feature_file(folder)
    path.unlink()
    write(path)


def save_npz(path: Path) -> None:
    with open(path, "wb") as file:
        np.savez(file, features=np.ones((1, 4, 1024), np.float32))


def save_truncated(path: Path) -> None:
    np.save(path, np.ones((1, 4, 1024), np.float32))
    path.write_bytes(path.read_bytes()[:1000])


def link_outside(path: Path) -> None:
    outside = path.parent.parent.parent / "elsewhere.npy"
    np.save(outside, np.ones((1, 4, 1024), np.float32))
    path.symlink_to(outside)


def snapshot(folder: Path) -> dict[str, str]:
    """Every file (its content's hash) and link (its target) under `folder`: to show nothing was lost."""
    entries = {}
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root, name)
            if path.is_symlink():
                entries[str(path)] = f"-> {os.readlink(path)}"
            elif path.is_file():
                entries[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return entries


def built_rows(output_dir: Path, config: str, split: str) -> int:
    return sum(pq.read_metadata(path).num_rows for path in (output_dir / config).glob(f"{split}-*.parquet"))


# (what is broken, status, what the line says, the split and config a skip removes a row from, or
# None when --skip_invalid cannot help). Cases that need the features folder name the i3d config.
RECORD_FAULTS = [
    ("json_not_utf8", lambda d: replace_record(d, b'{"video_id": "caf\xe9"}'),
     r"val.json: record 3: field '\(record\)': holds bytes that are not UTF-8 text \(byte 0xe9\)", "text"),
    ("record_not_an_object", lambda d: replace_record(d, b'["a", "list"]'),
     r"val.json: record 3: field '\(record\)': expected a JSON object, got list", "text"),
    ("json_nested_100k_deep", lambda d: replace_record(d, b"[" * 100_000 + b"]" * 100_000),
     r"val.json: record 3: field '\(record\)': nested too deeply to decode", "text"),
    ("integer_of_5000_digits", lambda d: replace_record(d, b'{"video_start_time": ' + b"7" * 5000 + b"}"),
     r"val.json: record 3: field '\(record\)': an integer too long to read \(more than 4,300 digits\)", "text"),
    ("clip_twice_in_a_split", repeat_a_clip,
     r"val.json: record 3: field 'video_id': the clip \('.*', \d+, \d+\) is record 1 too: a split holds each clip once",
     "text"),
    ("label_that_normalizes_to_nothing",
     lambda d: edit_record(d, label="The", caption=read_records(d)[BAD_INDEX]["masked_caption"].replace("_____", "The")),
     r"val.json: record 3: field 'label': 'The' normalizes to nothing \(only articles, punctuation and spaces\)", "text"),
    ("time_beyond_int32", lambda d: edit_record(d, video_start_time=2**31, video_end_time=2**31 + 10),
     r"val.json: record 3: field 'video_start_time': must be a whole number of seconds from 0 to 2,147,483,647", "text"),
    ("category_tsv_not_utf8",
     lambda d: (d / "categories_val.tsv").write_bytes((d / "categories_val.tsv").read_bytes() + b"abcdefghijk\tPers\xf6n\n"),
     r"categories_val.tsv: record 60: field 'category': holds bytes that are not UTF-8 text", "text"),
    ("feature_file_0_bytes", lambda d: replace_features(d, lambda path: path.write_bytes(b"")),
     r"val.json: record 3: field 'video_features': .*: not a readable .npy array \(EOF", "i3d"),
    ("npz_content_under_a_npy_name", lambda d: replace_features(d, save_npz),
     r"val.json: record 3: field 'video_features': .*not a readable .npy array \(it is a .npz \(zip\) archive\)", "i3d"),
    ("feature_file_truncated", lambda d: replace_features(d, save_truncated),
     r"val.json: record 3: field 'video_features': .*not a readable .npy array \((Failed to read all data|cannot reshape)", "i3d"),  # NumPy 2 | 1
    ("feature_file_pickled_objects",
     lambda d: replace_features(d, lambda path: np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)),
     r"val.json: record 3: field 'video_features': .*Object arrays cannot be loaded", "i3d"),
    ("float64_features_beyond_float32",
     lambda d: replace_features(d, lambda path: np.save(path, np.full((1, 4, 1024), 1e39))),
     r"val.json: record 3: field 'video_features': .*beyond float32's range", "i3d"),
    ("feature_file_is_a_folder", lambda d: replace_features(d, lambda path: path.mkdir()),
     r"val.json: record 3: field 'video_features': .*\.npy is a folder, not a .npy file", "i3d"),
    ("feature_file_links_outside_the_folder", lambda d: replace_features(d, link_outside),
     r"val.json: record 3: field 'video_features': .* is a symbolic link to .*elsewhere.npy, outside the features folder",
     "i3d"),
    ("feature_file_missing", lambda d: feature_file(d).unlink(),
     r"val.json: record 3: field 'video_features': feature file not found", "i3d"),
]
FILE_FAULTS = [
    ("split_file_0_bytes", lambda d: (d / "val.json").write_bytes(b""), 1, r"val.json: holds no records"),
    ("split_file_empty_array", lambda d: (d / "val.json").write_text("[]"), 1, r"val.json: holds no records"),
    ("split_file_missing", lambda d: (d / "val.json").unlink(), 1, r"release: no val.json"),
    ("split_file_cut_short", lambda d: (d / "val.json").write_text((d / "val.json").read_text()[:-300]), 1,
     r"val.json: record \d+: invalid JSON"),
    ("split_file_not_json", lambda d: (d / "val.json").write_text("video_id,label\nabc,a dog\n"), 1,
     r"val.json: record 0: invalid JSON"),
    ("split_file_is_a_folder", lambda d: ((d / "val.json").unlink(), (d / "val.json").mkdir()), 1,
     r"release: no val.json"),
    ("category_header_not_utf8", lambda d: (d / "categories_val.tsv").write_bytes(b"vid\xe9o_id\tcategory\nabc\tPerson\n"),
     1, r"categories_val.tsv: the header row holds bytes that are not UTF-8 text"),
    ("category_file_without_the_columns", lambda d: (d / "categories_val.tsv").write_text("id\tkind\nabc\tPerson\n"), 1,
     r"categories_val.tsv: no category or video_id column in the header row"),
]


@pytest.mark.parametrize(("name", "breaks", "message", "config"), RECORD_FAULTS, ids=[case[0] for case in RECORD_FAULTS])
def test_a_bad_record_is_one_line_and_skippable(release_dir, tmp_path, cli_error, caplog, name, breaks, message, config):
    breaks(release_dir)
    before = snapshot(release_dir)
    output_dir = tmp_path / "out"
    features = ["--features_dir", release_dir / "i3d"] if config == "i3d" else []
    status, line = cli_error("build-dataset", "--data_dir", release_dir, *features, "--output_dir", output_dir)
    assert status == 1 and re.search(message, line), line
    assert line.endswith("(pass --skip_invalid to skip invalid records)")
    assert not output_dir.exists() and not list(tmp_path.glob(".out*"))
    assert snapshot(release_dir) == before

    with caplog.at_level(logging.INFO):
        assert main(["build-dataset", "--data_dir", str(release_dir), *map(str, features), "--output_dir",
                     str(output_dir), "--skip_invalid"]) == 0
    assert f"{config}: skipped 1 invalid record(s)" in caplog.text
    if name.startswith("category"):
        assert built_rows(output_dir, config, "validation") == 10
    else:
        assert built_rows(output_dir, config, "validation") == 9
    assert snapshot(release_dir) == before


@pytest.mark.parametrize(("name", "breaks", "status", "message"), FILE_FAULTS, ids=[case[0] for case in FILE_FAULTS])
def test_a_bad_file_stops_the_build_even_with_skip_invalid(release_dir, tmp_path, cli_error, name, breaks, status, message):
    breaks(release_dir)
    before = snapshot(release_dir)
    output_dir = tmp_path / "out"
    arguments = ["build-dataset", "--data_dir", release_dir, "--output_dir", output_dir, "--skip_invalid"]
    exit_status, line = cli_error(*arguments)
    assert exit_status == status and re.search(message, line), line
    assert "pass --skip_invalid" not in line
    assert not output_dir.exists() and not list(tmp_path.glob(".out*"))
    assert snapshot(release_dir) == before


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max_shard_size", "lots"], r"--max_shard_size 'lots': expected a positive size such as 500MB"),
        (["--max_shard_size", "0MB"], r"--max_shard_size '0MB': expected a positive size"),
        (["--output_dir", "{data}"], r"--output_dir .*release holds the input .*train.json"),
        (["--output_dir", "{data}/val.json"], r"--output_dir .*val.json is an input of this command"),
        (["--output_dir", "{data}/i3d/x", "--features_dir", "{data}/i3d"], r"lies inside the input folder .*i3d"),
        (["--output_dir", "{existing}"], r"existing is not empty and was not written by fiberbench build-dataset"),
        (["--output_dir", "{file}"], r"notes.txt is a file, not a folder"),
        (["--output_dir", "{file}", "--overwrite_output_dir"], r"notes.txt is a file, not a folder"),
    ],
    ids=["shard_size_not_a_size", "shard_size_0", "output_is_the_data_dir",
         "output_is_a_split_file", "output_inside_the_features_dir", "output_exists", "output_is_a_file",
         "overwrite_a_file"],
)
def test_bad_flags_are_usage_errors_before_any_work(release_dir, tmp_path, cli_error, flags, message):
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing" / "thesis.tex").write_text("mine")
    (tmp_path / "notes.txt").write_text("mine")
    flags = [flag.format(data=release_dir, existing=tmp_path / "existing", file=tmp_path / "notes.txt") for flag in flags]
    before = snapshot(tmp_path)
    status, line = cli_error("build-dataset", "--data_dir", release_dir, "--output_dir", tmp_path / "out", *flags)
    assert status == 2 and re.search(message, line), line
    assert snapshot(tmp_path) == before and not list(tmp_path.glob(".*"))


def test_missing_folders_are_one_line(tmp_path, release_dir, cli_error):
    status, line = cli_error("build-dataset", "--data_dir", tmp_path / "nowhere", "--output_dir", tmp_path / "out")
    assert status == 1 and re.search(r"nowhere: no train.json, val.json, test.json", line)
    status, line = cli_error(
        "build-dataset", "--data_dir", release_dir, "--features_dir", tmp_path / "nowhere", "--output_dir", tmp_path / "out"
    )
    assert status == 1 and re.search(r"nowhere: no such folder \(the video features folder\)", line)
    assert not (tmp_path / "out").exists()


def test_overwrite_refuses_a_build_that_holds_a_users_file(tmp_path, release_dir, cli_error):
    output_dir = tmp_path / "fiber"
    assert main(["build-dataset", "--data_dir", str(release_dir), "--output_dir", str(output_dir)]) == 0
    (output_dir / "text" / "my_notes.txt").write_text("mine")
    before = snapshot(output_dir)
    status, line = cli_error("build-dataset", "--data_dir", release_dir, "--output_dir", output_dir, "--overwrite_output_dir")
    assert status == 2 and "holds text/my_notes.txt, which fiberbench build-dataset did not write" in line
    assert snapshot(output_dir) == before


def test_odd_but_valid_inputs_build(release_dir, tmp_path):
    """A UTF-8 byte order mark (JSON and TSV), Windows line ends, a 1 MB caption and a link inside the features folder."""
    linked = feature_file(release_dir)
    os.replace(linked, release_dir / "i3d" / "stored_elsewhere_in_the_folder.npy")
    linked.symlink_to("stored_elsewhere_in_the_folder.npy")
    records = read_records(release_dir)
    long_label = "a " + "very " * 200_000 + "long guitar"
    masked = records[BAD_INDEX]["masked_caption"]
    records[BAD_INDEX].update(caption=masked.replace("_____", long_label), label=long_label)
    (release_dir / "val.json").write_bytes("\ufeff".encode() + json.dumps(records).encode())
    categories = release_dir / "categories_val.tsv"
    categories.write_bytes("\ufeff".encode() + categories.read_bytes().replace(b"\n", b"\r\n"))

    output_dir = tmp_path / "out"
    arguments = ["--data_dir", release_dir, "--features_dir", release_dir / "i3d", "--output_dir", output_dir]
    assert main(["build-dataset", *map(str, arguments)]) == 0
    table = pq.read_table(list((output_dir / "i3d").glob("validation-*.parquet")))
    assert len(table["caption"][BAD_INDEX].as_py()) > 1_000_000
    assert table["category"].null_count == 0  # every validation clip got its category through the BOM and CRLF
    assert table.num_rows == 10
