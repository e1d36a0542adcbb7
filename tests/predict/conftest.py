"""Tiny random models of every kind `fiberbench predict` runs (`fiberbench.testing.tiny_models`), synthetic videos,
and the predictions format `fiberbench evaluate` reads.
"""

import json
import shutil
import struct
from pathlib import Path

import pytest
from fiberbench.records import clip_key

from fiberbench.testing.tiny_models import SAVERS
from fiberbench.testing.tiny_videos import sample_test_records, write_sample_videos, write_video

from ..built_once import built_once


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """Kind -> the folder of a tiny random model of that kind (fixed seed), saved once per test run."""

    def save_all(root):
        for kind, save in SAVERS.items():
            save(root / kind)

    root = built_once(tmp_path_factory, "tiny_models", save_all)
    return {kind: root / kind for kind in SAVERS}


# Finished `fiberbench predict` runs of the tiny causal LM on the sample's first 2 test clips, by name: the flags beside
# its --model_name_or_path and --output_file NAME.jsonl.
FINISHED_RUNS = {
    "predictions": ["--max_predict_samples", "2"],  # the reader's noun-phrase step on, as by default
    "causal": ["--max_predict_samples", "2", "--no_read_noun_phrases"],
}


@pytest.fixture(scope="session")
def finished_runs(tiny_models, tmp_path_factory):
    """The folder of the `FINISHED_RUNS`, each NAME.jsonl with its NAME.metadata.json, made once per test run: the
    tests that read or damage a finished output copy one (`copy_finished_run`) instead of predicting again."""
    from fiberbench.cli import main

    def predict_all(folder):
        for name, flags in FINISHED_RUNS.items():
            model = ["--model_name_or_path", str(tiny_models["causal"])]
            assert main(["predict", *model, "--output_file", str(folder / f"{name}.jsonl"), *flags]) == 0

    return built_once(tmp_path_factory, "finished_predict_runs", predict_all)


def copy_finished_run(finished_runs: Path, name: str, folder: Path) -> Path:
    """The finished run `name` (of `FINISHED_RUNS`) copied into `folder`, its output and metadata under their names:
    the copy's output file, as if predict had written it there."""
    for file in (f"{name}.jsonl", f"{name}.metadata.json"):
        shutil.copyfile(finished_runs / file, folder / file)
    return folder / f"{name}.jsonl"


def write_zero_duration_video(path):
    """A one-frame video whose headers say it lasts 0 s, as some cut clips do."""
    write_video(path, seconds=0.5, fps=2)
    data = bytearray(path.read_bytes())
    # The duration fields of the movie (mvhd), track (tkhd) and media (mdhd) headers: version 0 boxes.
    for box, offset in ((b"mvhd", 20), (b"tkhd", 24), (b"mdhd", 20)):
        at = data.index(box) + offset
        data[at : at + 4] = bytes(4)
    path.write_bytes(data)


def write_video_claiming(path, seconds: float, fps: int, claimed_seconds: float):
    """A Matroska video (`path` ends in .mkv) of `seconds` whose header claims `claimed_seconds`: its Segment's
    Duration, the one length a Matroska file states (FFmpeg reads an MP4's from its index of packets)."""
    write_video(path, seconds=seconds, fps=fps)
    data = bytearray(path.read_bytes())
    info = data.index(b"\x15\x49\xa9\x66")  # the Segment's Info element
    at = data.index(b"\x44\x89\x88", info) + 3  # its Duration: an 8-byte float, in milliseconds (the muxer's scale)
    data[at : at + 8] = struct.pack(">d", claimed_seconds * 1000)
    path.write_bytes(data)


@pytest.fixture(scope="session")
def video_dir(tmp_path_factory):
    """Videos for every test clip of the bundled sample, written once per test run: even clips as clip files, odd
    ones as whole videos."""
    return built_once(tmp_path_factory, "videos", lambda folder: write_sample_videos(folder / "videos")) / "videos"


def videos_but_one(video_dir, tmp_path, index: int = 1):
    """A copy of `video_dir` in `tmp_path/videos` (links to its videos) without the video of the sample's test clip
    `index` (by default the second, a whole video; the first is a clip file)."""
    folder = tmp_path / "videos"
    folder.mkdir()
    for video in video_dir.iterdir():
        (folder / video.name).symlink_to(video)
    record = sample_test_records()[index]
    for video in folder.glob(f"{record['video_id']}*"):
        video.unlink()
    return folder


def refused(cli_error, tmp_path, flags, output_name: str) -> tuple[int, str]:
    """`fiberbench predict FLAGS` (into `tmp_path/output_name` unless they name an --output_file), checked to be
    refused in one line with nothing written: its exit status and that line."""
    flags = [str(flag) for flag in flags]
    if "--output_file" not in flags:
        flags += ["--output_file", str(tmp_path / output_name)]
    before = sorted((path.name, path.stat().st_size) for path in tmp_path.rglob("*"))
    exit_status, line = cli_error("predict", *flags)
    assert line.startswith("fiberbench predict: error: "), line
    assert sorted((path.name, path.stat().st_size) for path in tmp_path.rglob("*")) == before, "something was written"
    return exit_status, line


EVALUATE_FIELDS = {"video_id": str, "video_start_time": int, "video_end_time": int, "prediction": str}


def read_evaluate_format(path, num_beams: int, replies: bool = False) -> list[dict]:
    """The rows of a predictions file, checked against the format `fiberbench evaluate` reads.

    JSON Lines; each row exactly `video_id`, `video_start_time`, `video_end_time`, `prediction`
    (a string), with several beams `candidates` (a list of strings holding the prediction, distinct
    after the metric's normalization) and, with `replies` (models that reply in words), `raw` (the
    replies, one per beam; none for a clip skipped for a missing video).
    """
    from fiberbench.metric import normalize_answer

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        optional = {"candidates"} if num_beams > 1 else set()
        assert set(row) == set(EVALUATE_FIELDS) | optional | ({"raw"} if replies else set()), row
        for field, kind in EVALUATE_FIELDS.items():
            assert type(row[field]) is kind, (field, row)
        if num_beams > 1:
            assert (
                all(type(candidate) is str for candidate in row["candidates"]) and len(row["candidates"]) <= num_beams
            )
            assert row["prediction"] in row["candidates"] or row["candidates"] == []
            assert len({normalize_answer(candidate) for candidate in row["candidates"]}) == len(row["candidates"])
        if replies:
            assert all(type(reply) is str for reply in row["raw"]) and len(row["raw"]) in (0, num_beams), row
    return rows


def clip_keys(records) -> list[tuple]:
    return [clip_key(record) for record in records]


def scored_by_evaluate(predictions_file, output_dir, num_beams: int) -> dict:
    """`fiberbench evaluate` on a predictions file (exit 0); its system's scores in results.json."""
    from fiberbench.cli import main

    assert main(["evaluate", str(predictions_file), "--output_dir", str(output_dir), "--num_bootstrap", "100"]) == 0
    results = json.loads((output_dir / "results.json").read_text(encoding="utf-8"))
    assert list(results["systems"]) == [predictions_file.stem]
    system = results["systems"][predictions_file.stem]
    assert results["dataset"]["num_blanks"] == 60 and 0 <= system["f1"] <= 100
    assert ("correct_at_k" in system and system["correct_at_k"] is not None) == (num_beams > 1)
    return system
