"""Bad inputs to `fiberbench build-dataset`, one row per case: one line naming the file, the record and the field,
nothing written or lost. A bad record (category row, feature file) is skipped and counted with --skip_invalid; a bad
file stops the build even so. Odd but valid inputs (a byte order mark, CRLF, a 1 MB caption, a link inside) build."""

import json
import logging
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from fiberbench.cli import main
from fiberbench.records import KEY_FIELDS, clip_key, feature_file_name

from .conftest import cases, snapshot

BAD = 3  # the broken record of val.json


def records(folder: Path) -> list:
    return json.loads((folder / "val.json").read_text())


def replace_record(folder: Path, raw: bytes) -> None:
    parts = [json.dumps(record).encode() for record in records(folder)]
    parts[BAD] = raw
    (folder / "val.json").write_bytes(b"[" + b",\n".join(parts) + b"]")


def edit_record(folder: Path, **changes) -> None:
    edited = records(folder)
    edited[BAD].update(changes)
    (folder / "val.json").write_text(json.dumps(edited))


def replace_features(folder: Path, write) -> None:
    path = folder / "i3d" / feature_file_name(*clip_key(records(folder)[BAD]))
    path.unlink()
    write(path)


def link_outside(path: Path) -> None:
    np.save(path.parents[2] / "elsewhere.npy", np.ones((1, 4, 1024), np.float32))
    path.symlink_to(path.parents[2] / "elsewhere.npy")


def save_npz(path: Path) -> None:
    with open(path, "wb") as file:
        np.savez(file, features=np.ones((1, 4, 1024), np.float32))


FEATURES = r"val.json: record 3: field 'video_features': .*"
# (case, how it breaks the release folder, what the line says, the config a skip removes a row from)
RECORD_FAULTS = [
    ("json not utf8", lambda d: replace_record(d, b'{"video_id": "caf\xe9"}'),
     r"val.json: record 3: field '\(record\)': holds bytes that are not UTF-8 text \(byte 0xe9\)", "text"),
    ("record not an object", lambda d: replace_record(d, b'["a", "list"]'),
     r"val.json: record 3: field '\(record\)': expected a JSON object, got list", "text"),
    ("clip twice in a split", lambda d: edit_record(d, **dict(zip(KEY_FIELDS, clip_key(records(d)[1])))),
     r"val.json: record 3: field 'video_id': the clip \('.*', \d+, \d+\) is record 1 too: a split holds each clip", "text"),
    ("path-like video id", lambda d: edit_record(d, video_id="../../../../etc/passwd"),
     r"val.json: record 3: field 'video_id': '../../../../etc/passwd' is not a plain video id", "i3d"),
    ("category row not utf8",
     lambda d: (d / "categories_val.tsv").write_bytes((d / "categories_val.tsv").read_bytes() + b"abcdefghijk\tPers\xf6n\n"),
     r"categories_val.tsv: record 60: field 'category': holds bytes that are not UTF-8 text", "text"),
    ("category row with a path-like id",
     lambda d: (d / "categories_val.tsv").write_text((d / "categories_val.tsv").read_text() + "bad/id\tPerson\n"),
     r"categories_val.tsv: record 60: field 'video_id': 'bad/id' is not a plain video id", "text"),
    ("npz under a npy name", lambda d: replace_features(d, save_npz),
     FEATURES + r"not a readable .npy array \(it is a .npz \(zip\) archive\)", "i3d"),
    ("feature file a folder", lambda d: replace_features(d, lambda path: path.mkdir()),
     FEATURES + r"\.npy is a folder, not a .npy file", "i3d"),
    ("feature file linked outside its folder", lambda d: replace_features(d, link_outside),
     FEATURES + r"is a symbolic link to .*elsewhere.npy, outside the features folder", "i3d"),
    ("feature file missing", lambda d: replace_features(d, lambda path: None),
     FEATURES + r"feature file not found", "i3d"),
]


@pytest.mark.parametrize(("breaks", "message", "config"), cases(RECORD_FAULTS))
def test_a_bad_record_is_one_line_and_skipped_and_counted_with_skip_invalid(release_dir, tmp_path, refused, caplog,
                                                                             breaks, message, config):
    breaks(release_dir)
    before = snapshot(release_dir)
    arguments = ["--data_dir", release_dir, "--output_dir", tmp_path / "out"]
    arguments += ["--features_dir", release_dir / "i3d"] if config == "i3d" else []
    line = refused(tmp_path, 1, message, "build-dataset", *arguments)
    assert line.endswith("(pass --skip_invalid to skip invalid records)"), line
    with caplog.at_level(logging.INFO):
        assert main(["build-dataset", *map(str, arguments), "--skip_invalid"]) == 0
    assert f"{config}: skipped 1 invalid record(s)" in caplog.text and snapshot(release_dir) == before
    kept = sum(pq.read_metadata(path).num_rows for path in (tmp_path / "out" / config).glob("validation-*"))
    assert kept == (10 if message.startswith("categories") else 9)  # a category row skipped leaves its clip
    assert f"- `{config}`: 1 record(s)" in (tmp_path / "out" / "README.md").read_text()


# (case, how it breaks the release folder, what the line says)
FILE_FAULTS = [
    ("split file of 0 bytes", lambda d: (d / "val.json").write_bytes(b""), r"val.json: holds no records"),
    ("empty array", lambda d: (d / "val.json").write_text("[]"), r"val.json: holds no records"),
    ("split file missing", lambda d: (d / "val.json").unlink(), r"release: no val.json"),
    ("split file a folder", lambda d: ((d / "val.json").unlink(), (d / "val.json").mkdir()), r"release: no val.json"),
    ("not json", lambda d: (d / "val.json").write_text("video_id,label\nabc,a dog\n"), r"val.json: record 0: invalid JSON"),
    ("category header not utf8", lambda d: (d / "categories_val.tsv").write_bytes(b"vid\xe9o_id\tcategory\nabc\tPerson\n"),
     r"categories_val.tsv: the header row holds bytes that are not UTF-8 text"),
    ("category file without the columns", lambda d: (d / "categories_val.tsv").write_text("id\tkind\nabc\tPerson\n"),
     r"categories_val.tsv: no category or video_id column in the header row"),
]


@pytest.mark.parametrize(("breaks", "message"), cases(FILE_FAULTS))
def test_a_bad_file_stops_the_build_even_with_skip_invalid(release_dir, tmp_path, refused, breaks, message):
    breaks(release_dir)
    arguments = ["--data_dir", release_dir, "--output_dir", tmp_path / "out", "--skip_invalid"]
    assert "pass --skip_invalid" not in refused(tmp_path, 1, message, "build-dataset", *arguments)


@pytest.mark.parametrize(("flags", "status", "message"), [
    (["--max_shard_size", "lots"], 2, r"--max_shard_size 'lots': expected a positive size such as 500MB"),
    (["--max_shard_size", "0MB"], 2, r"--max_shard_size '0MB': expected a positive size"),
    (["--output_dir", "{data}"], 2, r"--output_dir .*release holds the input .*train.json"),
    (["--features_dir", "{tmp}/nowhere"], 1, r"nowhere: no such folder \(the video features folder\)"),
    (["--data_dir", "{tmp}/nowhere"], 1, r"nowhere: no train.json, val.json, test.json"),
])
def test_bad_flags_are_one_line_before_any_work(release_dir, tmp_path, refused, flags, status, message):
    flags = [flag.format(tmp=tmp_path, data=release_dir) for flag in flags]
    refused(tmp_path, status, message, "build-dataset", "--data_dir", release_dir, "--output_dir", tmp_path / "out", *flags)


def test_odd_but_valid_inputs_build(release_dir, tmp_path):
    """A UTF-8 byte order mark (JSON and TSV), Windows line ends, a 1 MB caption and a link inside the features folder."""
    linked = release_dir / "i3d" / feature_file_name(*clip_key(records(release_dir)[BAD]))
    os.replace(linked, release_dir / "i3d" / "stored_elsewhere_in_the_folder.npy")
    linked.symlink_to("stored_elsewhere_in_the_folder.npy")
    edited, label = records(release_dir), "a " + "very " * 200_000 + "long guitar"
    edited[BAD].update(caption=edited[BAD]["masked_caption"].replace("_____", label), label=label)
    (release_dir / "val.json").write_bytes("\ufeff".encode() + json.dumps(edited).encode())
    categories = release_dir / "categories_val.tsv"
    categories.write_bytes("\ufeff".encode() + categories.read_bytes().replace(b"\n", b"\r\n"))
    arguments = ["--data_dir", release_dir, "--features_dir", release_dir / "i3d", "--output_dir", tmp_path / "out"]
    assert main(["build-dataset", *map(str, arguments)]) == 0
    table = pq.read_table(list((tmp_path / "out" / "i3d").glob("validation-*.parquet")))
    assert len(table["caption"][BAD].as_py()) > 1_000_000 and table.num_rows == 10
    assert table["category"].null_count == 0  # every validation clip got its category through the BOM and CRLF
